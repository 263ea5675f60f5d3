"""``keel hook EVENT --agent claude|codex|gemini``: the entry point every agent hook calls.

``keel.cli._entry`` dispatches ``keel hook ...`` here before typer or pydantic is imported,
so this module parses its few arguments by hand and imports only the adapter. Usage errors
exit 2 with the message on stderr, which every client treats as "block": a misconfigured
hook fails closed too.

    keel hook EVENT --agent AGENT [--fail-open] [--deadline SECONDS] [--workspace DIR]

``KEEL_HOOK_DEADLINE`` sets the default deadline in seconds.

The call is first offered to the workspace's resident ``keel hookd`` through
``keel.daemon.relay`` (C-level modules only); when no daemon answers, for whatever reason,
it is decided here, in process (``answer``). ``KEEL_HOOKD=0`` turns the daemon off.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing and pathlib cost ~5 ms; the relay path needs neither
if TYPE_CHECKING:
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
        if not 0 < opts["deadline"] < float("inf"):  # also refuses nan
            raise ValueError(f"--deadline must be a positive number of seconds, got {deadline!r}")
    return opts


def main(argv: list[str], guard_factory: Any = None) -> int:
    """Run one hook call: stdin in, the client's dialect out; returns the exit code.

    The resident ``keel hookd`` answers when it can (``keel.daemon.relay``); otherwise, or
    if anything about it fails, the call is decided here. ``guard_factory`` replaces
    ``keel.guard.Guard.open`` (for tests of the client dialects) and skips the daemon.
    """
    data: bytes | None = None
    spent = 0.0
    if guard_factory is None:
        import time

        from keel.daemon.relay import relay

        start = time.monotonic()
        try:
            relayed = relay(argv)
        except Exception:  # a relay bug must not cost the answer; stdin may be lost: fails closed
            relayed = None
        if isinstance(relayed, int):
            return relayed
        data, spent = relayed, time.monotonic() - start
    code, out, err = answer(argv, data, guard_factory=guard_factory, spent=spent)
    try:
        if out:
            sys.stdout.write(out)
            sys.stdout.flush()
        if err:
            sys.stderr.write(err)
            sys.stderr.flush()
    except OSError:
        return 0 if "--fail-open" in argv else 2
    return code


def answer(
    argv: list[str], data: bytes | None = None, *, guard_factory: Any = None, spent: float = 0.0
) -> tuple[int, str, str]:
    """One hook call in process: ``(exit code, stdout, stderr)`` for ``keel hook ARGV``.

    ``data`` is the hook's stdin (default: read from ``sys.stdin`` under the deadline);
    ``spent`` is time already used (by a relay attempt), taken off the deadline.
    """
    try:
        opts = parse_args(argv)
    except ValueError as exc:
        return 2, "", f"keel hook: {exc}; blocked to be safe\n{USAGE}\n"
    if opts["workspace"] and not os.path.isdir(opts["workspace"]):  # a typo must not drop keel.toml
        what = "is not a directory" if os.path.lexists(opts["workspace"]) else "does not exist"
        return 2, "", f"keel hook: --workspace {opts['workspace']!r} {what}; blocked to be safe\n"
    from pathlib import Path

    from keel.adapters.runner import DEFAULT_DEADLINE, HookOptions, open_guard, run_hook

    deadline = opts["deadline"] or DEFAULT_DEADLINE
    options = HookOptions(
        fail_open=opts["fail_open"],
        deadline=max(deadline - spent, 0.001),
        workspace=Path(opts["workspace"]) if opts["workspace"] else None,
    )
    reply = run_hook(
        opts["agent"],
        opts["event"],
        _reader(data),
        options=options,
        guard_factory=guard_factory or open_guard,
    )
    return reply.exit_code, reply.stdout + "\n" if reply.stdout else "", reply.stderr or ""


def _reader(data: bytes | None) -> Any:
    """Stdin for ``run_hook``: read under its deadline, after what a relay already read."""
    from keel.daemon.relay import Unread

    if sys.stdin is None:  # stdin closed: the same as empty input, which is blocked
        return bytes(data) if data is not None else b""
    if data is None:
        return sys.stdin.buffer.read
    if isinstance(data, Unread):
        return lambda: bytes(data) + sys.stdin.buffer.read()
    return data


def register(app: Any) -> None:
    """Add ``keel hook`` to the typer app (the fast path in ``_entry`` normally wins)."""
    import typer

    def hook(ctx: typer.Context) -> None:
        args = list(ctx.args)
        workspace = (ctx.obj or {}).get("workspace")
        if workspace and not any(a.startswith(("--workspace", "-w")) for a in args):
            args += ["--workspace", str(workspace)]
        raise typer.Exit(main(args))

    hook.__annotations__ = {"ctx": typer.Context, "return": None}  # typer resolves these
    hook.__doc__ = (
        "Answer an agent's hook call: `keel hook EVENT --agent claude|codex|gemini` "
        "[--fail-open] [--deadline S] (reads the client's JSON on stdin)."
    )
    app.command(
        "hook",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(hook)
