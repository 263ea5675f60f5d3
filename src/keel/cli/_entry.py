"""The ``keel`` console script.

Hot commands (``keel policy check``, ``keel hook``) are dispatched before typer and pydantic
are imported, so the common case pays for the decision only; everything else goes through
the typer application.

The console script is not started isolated (``python -I``), so before anything else ``main``
keeps the workspace out of what it imports later (``_isolate``): a caller's ``PYTHON*``
variable that changes imports (``PYTHONPATH=.`` names the directory keel runs in, the
agent's workspace) makes it start again under ``python -I`` through keel's launcher
(``keel.core.isolated``), and the entry Python put first on ``sys.path`` (the script's directory,
the current one under ``-c`` or ``-m``) is dropped. What the interpreter imported before
``main`` ran (``encodings``, ``keel`` itself) is beyond that: only ``python -I``, as in every
command keel registers or starts itself, keeps ``PYTHONPATH`` from those.
"""

from __future__ import annotations

import sys

HARMLESS_ENV = frozenset(
    {
        "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8",
        "PYTHONHASHSEED", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONFAULTHANDLER",
        "PYTHONCOERCECLOCALE", "PYTHONDEVMODE", "PYTHONOPTIMIZE", "PYTHONVERBOSE",
        "PYTHONDEBUG", "PYTHONPROFILEIMPORTTIME", "PYTHONTRACEMALLOC", "PYTHONMALLOC",
        "PYTHONMALLOCSTATS", "PYTHONASYNCIODEBUG", "PYTHONWARNDEFAULTENCODING",
        "PYTHONINTMAXSTRDIGITS", "PYTHONNODEBUGRANGES",
    }
)  # fmt: skip
"""``PYTHON*`` variables that change nothing about what Python imports or runs at start.

Any other one (``PYTHONPATH``, ``PYTHONHOME``, ``PYTHONSTARTUP``, ``PYTHONUSERBASE``,
``PYTHONPYCACHEPREFIX``, ``PYTHONWARNINGS``, ``PYTHONBREAKPOINT``, ...) makes the console
script start again isolated.
"""


def _isolate() -> None:
    """Keep the directory keel runs in out of this process's later imports (see the module)."""
    import os

    if _environment_changes_imports() and sys.executable:
        _restart_isolated()
    if not sys.flags.safe_path and sys.path:
        del sys.path[0]  # the script's directory, or the current one (under -c or -m)
    sys.path[:] = [p for p in sys.path if os.path.isabs(p)]


def _environment_changes_imports() -> bool:
    """True if a ``PYTHON*`` variable outside ``HARMLESS_ENV`` is set and this Python reads them."""
    import os

    if sys.flags.ignore_environment:  # -E or -I
        return False
    return any(  # names first: decoding every value costs ~20 µs per start
        name.startswith("PYTHON") and name not in HARMLESS_ENV and os.environ[name]
        for name in os.environ
    )


def _restart_isolated() -> None:
    """Become ``python [-X OPT]... -I <keel>/_launch.py ARGS...``; exit 2 if that fails.

    The caller's ``-X`` options (``-X importtime``, ``-X dev``) are its own choice on the
    command line, not the environment's: they are kept.
    """
    import os

    from keel.core.isolated import launcher_argv

    argv = launcher_argv(*sys.argv[1:])
    for name, value in reversed(sys._xoptions.items()):
        argv[1:1] = ["-X", name if value is True else f"{name}={value}"]
    try:
        os.execv(argv[0], argv)
    except OSError as exc:  # never go on unisolated; 2 also blocks a hook call
        sys.stderr.write(f"keel: error: cannot restart isolated: {exc} [os.error]\n")
    os._exit(2)


def _fast_policy_check(args: list[str]) -> int | None:
    """``[--workspace DIR] policy check ...`` without typer; ``None`` to fall back."""
    workspace: str | None = None
    if args and args[0] in ("--workspace", "-w") and len(args) > 1:
        workspace, args = args[1], args[2:]
    elif args and args[0].startswith("--workspace="):
        workspace, args = args[0].partition("=")[2], args[1:]
    if args[:2] != ["policy", "check"]:
        return None
    # A one-shot process: the cyclic collector would only walk what the imports create.
    import gc

    gc.disable()
    from keel.cli.policy_fast import check_main

    return check_main(args[2:], workspace)


def main(argv: list[str] | None = None) -> int:
    """Run keel with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    Without ``argv`` (the process's own command line) the process is isolated first
    (``_isolate``: it may start again under ``python -I``).
    """
    if argv is None:
        _isolate()
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        from keel.hook.main import main as hook_main

        hook_main(args[1:])  # exits with 0 or 2 whatever happens (0 too for `keel hook -h`)
    if args[:1] == ["exec"]:
        if argv is None:  # the process is this one command's (keel.core.isolated)
            from keel.core.isolated import start_one_shot

            start_one_shot("exec")
        from keel.cli.exec import main as exec_main

        code = exec_main(args[1:])
        if argv is None:
            from keel.core.isolated import exit_now

            exit_now(code)
        return code
    if args[:1] == ["wrap"]:
        from keel.cli.wrap import main as wrap_main

        return wrap_main(args[1:])
    try:
        fast = _fast_policy_check(args)
    except Exception as exc:
        return _report(exc)
    if fast is not None:
        if argv is None:
            from keel.core.isolated import exit_now

            exit_now(fast)
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
    from keel.core.errors import KeelError, UsageError

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
