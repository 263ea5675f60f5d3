"""The ``keel`` console script.

Hot commands (``keel policy check``, ``keel hook``) are dispatched before typer and pydantic
are imported, so the common case pays for the decision only; everything else goes through
the typer application.
"""

from __future__ import annotations

import sys


def _fast_policy_check(args: list[str]) -> int | None:
    """``[--workspace DIR] policy check ...`` without typer; ``None`` to fall back."""
    workspace: str | None = None
    if args and args[0] in ("--workspace", "-w") and len(args) > 1:
        workspace, args = args[1], args[2:]
    elif args and args[0].startswith("--workspace="):
        workspace, args = args[0].partition("=")[2], args[1:]
    if args[:2] != ["policy", "check"]:
        return None
    from keel.policy._fast import check_main

    return check_main(args[2:], workspace)


def main(argv: list[str] | None = None) -> int:
    """Run keel with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        from keel.hookpath import main as hook_main

        hook_main(args[1:])  # exits with 0 or 2 whatever happens (0 too for `keel hook -h`)
    if args[:1] == ["exec"]:
        from keel.cli.exec import main as exec_main

        return exec_main(args[1:])
    if args[:1] == ["wrap"]:
        from keel.cli.wrap import main as wrap_main

        return wrap_main(args[1:])
    try:
        fast = _fast_policy_check(args)
    except Exception as exc:
        return _report(exc)
    if fast is not None:
        return fast
    from keel.cli.main import app

    try:
        app(args=args, prog_name="keel", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # last resort: a one-line error with a code, never a traceback
        return _report(exc)
    return 0


def _report(exc: Exception) -> int:
    """Print an error no command handled as ``keel: error: ... [code]``; the exit code."""
    from keel.cli._common import one_line
    from keel.errors import KeelError, UsageError

    if isinstance(exc, KeelError):
        message, code = exc.message, exc.code
    elif isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        message, code = f"{where}{exc.strerror or exc}", "os.error"
    else:
        message, code = f"internal error: {type(exc).__name__}: {exc}", "internal_error"
    sys.stderr.write(f"keel: error: {one_line(message)} [{code}]\n")
    return 2 if isinstance(exc, UsageError) else 1


if __name__ == "__main__":
    raise SystemExit(main())
