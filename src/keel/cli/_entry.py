"""The ``keel`` console script.

Hot commands (``keel policy check``, ``keel hook``) are dispatched before typer and pydantic
are imported, so the common case pays for the decision only; everything else goes through
the typer application.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run keel with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    from keel.cli.main import app

    try:
        app(args=args, prog_name="keel", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
