"""``keel hook EVENT --agent claude|codex|gemini``: the entry point every agent hook calls.

``keel.cli._entry`` dispatches ``keel hook ...`` here before typer or pydantic is imported,
so this module parses its few arguments by hand and imports only the adapter. Usage errors
exit 2 with the message on stderr, which every client treats as "block": a misconfigured
hook fails closed too.

    keel hook EVENT --agent AGENT [--fail-open] [--deadline SECONDS] [--workspace DIR]

``KEEL_HOOK_DEADLINE`` sets the default deadline in seconds.
"""

import os
import sys
from pathlib import Path
from typing import Any

USAGE = (
    "usage: keel hook EVENT --agent claude|codex|gemini "
    "[--fail-open] [--deadline S] [--workspace DIR]"
)


def parse_args(argv: list[str]) -> dict[str, Any]:
    """The options of ``keel hook``; raises ``ValueError`` with a message on bad usage."""
    opts: dict[str, Any] = {
        "event": None,
        "agent": None,
        "fail_open": False,
        "deadline": None,
        "workspace": None,
    }
    values = {
        "--agent": "agent",
        "--deadline": "deadline",
        "--workspace": "workspace",
        "-w": "workspace",
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg == "--fail-open":
            opts["fail_open"] = True
        elif name in values:
            if not eq:
                i += 1
                if i >= len(argv):
                    raise ValueError(f"{name} needs a value")
                inline = argv[i]
            opts[values[name]] = inline
        elif arg.startswith("-"):
            raise ValueError(f"unknown option {arg}")
        elif opts["event"] is None:
            opts["event"] = arg
        else:
            raise ValueError(f"unexpected argument {arg!r}")
        i += 1
    if not opts["event"]:
        raise ValueError("missing EVENT")
    if not opts["agent"]:
        raise ValueError("missing --agent")
    deadline = opts["deadline"] or os.environ.get("KEEL_HOOK_DEADLINE")
    if deadline is not None:
        try:
            opts["deadline"] = float(deadline)
        except ValueError:
            raise ValueError(f"--deadline must be a number of seconds, got {deadline!r}") from None
        if not opts["deadline"] > 0:
            raise ValueError("--deadline must be positive")
    return opts


def main(argv: list[str], guard_factory: Any = None) -> int:
    """Run one hook call: stdin in, the client's dialect out; returns the exit code.

    ``guard_factory`` replaces ``keel.guard.Guard.open`` (for tests of the client dialects).
    """
    try:
        opts = parse_args(argv)
    except ValueError as exc:
        sys.stderr.write(f"keel hook: {exc}; blocked to be safe\n{USAGE}\n")
        return 2
    from keel.adapters.runner import DEFAULT_DEADLINE, HookOptions, open_guard, run_hook

    options = HookOptions(
        fail_open=opts["fail_open"],
        deadline=opts["deadline"] or DEFAULT_DEADLINE,
        workspace=Path(opts["workspace"]) if opts["workspace"] else None,
    )
    reply = run_hook(
        opts["agent"],
        opts["event"],
        sys.stdin.buffer.read,
        options=options,
        guard_factory=guard_factory or open_guard,
    )
    try:
        if reply.stdout:
            sys.stdout.write(reply.stdout + "\n")
            sys.stdout.flush()
        if reply.stderr:
            sys.stderr.write(reply.stderr)
            sys.stderr.flush()
    except OSError:
        return 0 if options.fail_open else 2
    return reply.exit_code


def register(app: Any) -> None:
    """Add ``keel hook`` to the typer app (the fast path in ``_entry`` normally wins)."""
    import typer

    def hook(ctx: typer.Context) -> None:
        args = list(ctx.args)
        workspace = (ctx.obj or {}).get("workspace")
        if workspace and not any(a.startswith(("--workspace", "-w")) for a in args):
            args += ["--workspace", str(workspace)]
        raise typer.Exit(main(args))

    hook.__doc__ = (
        "Answer an agent's hook call: `keel hook EVENT --agent claude|codex|gemini` "
        "[--fail-open] [--deadline S] (reads the client's JSON on stdin)."
    )
    app.command(
        "hook",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(hook)
