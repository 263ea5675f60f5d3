"""``keel hook EVENT --agent claude|codex|gemini``: the entry point every agent hook calls.

``keel.cli._entry`` dispatches ``keel hook ...`` to ``keel.hook.main.main`` before typer or
pydantic is imported; the hook launcher ``keel init`` registers calls it directly. This
module keeps the typer registration (for ``keel --workspace DIR hook ...``) and ``main`` with
a ``guard_factory``, the seam the client-dialect tests use to put a scripted guard behind the
real adapter.

    keel hook EVENT --agent AGENT [--fail-open] [--deadline SECONDS] [--workspace DIR]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def print_help() -> int:
    """Print the usage of ``keel hook`` (``keel hook -h``); the exit code, 0."""
    from keel.hook.main import HELP, USAGE

    sys.stdout.write(USAGE + "\n" + HELP)
    sys.stdout.flush()
    return 0


def main(argv: list[str], guard_factory: Any = None) -> int:
    """Run one hook call: stdin in, the client's dialect out; returns the exit code.

    Without ``guard_factory`` this is ``keel.hook.main.main``, which exits the process. With
    one, the call is decided in process by that factory's guard (no daemon).
    """
    from keel.hook import main as hookpath
    from keel.hook.wire import BLOCK

    if guard_factory is None:
        hookpath.main(argv)
    started = time.monotonic()
    try:
        args = hookpath.parse_hook_args(argv)
    except ValueError as exc:
        sys.stderr.write(f"keel hook: {exc}; blocked to be safe\n{hookpath.USAGE}\n")
        return 0 if "--fail-open" in argv else BLOCK
    from keel.hook.runner import answer

    data, _ = hookpath.read_stdin(args.deadline / 4)
    code, out, err = answer(
        args,
        data,
        request_id=os.urandom(8).hex(),
        deadline_at=started + args.deadline,
        guard_factory=guard_factory,
    )
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    sys.stderr.buffer.write(err)
    sys.stderr.flush()
    return code


def register(app: Any) -> None:
    """Add ``keel hook`` to the typer app (the fast path in ``_entry`` normally wins)."""
    import typer

    def hook(ctx: typer.Context) -> None:
        from keel.hook.main import is_help, run

        args = list(ctx.args)
        if is_help(args):  # only alone: a real call with -h blocks
            raise typer.Exit(print_help())
        workspace = (ctx.obj or {}).get("workspace")
        if workspace and not any(a.startswith(("--workspace", "-w")) for a in args):
            args += ["--workspace", str(workspace)]
        code, out, err = run(args, data=sys.stdin.buffer.read())
        sys.stdout.write(out.decode("utf-8", "replace"))
        sys.stderr.write(err.decode("utf-8", "replace"))
        raise typer.Exit(code)

    hook.__annotations__ = {"ctx": typer.Context, "return": None}  # typer resolves these
    hook.__doc__ = (
        "Answer an agent's hook call: `keel hook EVENT --agent claude|codex|gemini` "
        "[--fail-open] [--deadline S] (reads the client's JSON on stdin; `keel hook -h`)."
    )
    # No typer help option: `--help` anywhere in a real hook call must block, not print help
    # and exit 0 (which the client would take as "run the call").
    settings = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
    app.command("hook", context_settings=settings, add_help_option=False)(hook)
