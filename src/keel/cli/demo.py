"""``keel demo``."""

from __future__ import annotations

from typing import Annotated

import typer

from keel.cli._common import examples


def register(app: typer.Typer) -> None:
    """Add ``keel demo`` to ``app``."""
    app.command(
        "demo",
        epilog=examples(
            "keel demo", "keel demo --section core --section hooks", "NO_COLOR=1 keel demo"
        ),
    )(demo)


def demo(
    section: Annotated[
        list[str] | None, typer.Option("--section", help="Run only these sections.")
    ] = None,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the generated files.")] = False,
) -> None:
    """Show keel's main jobs on a generated sample repository (offline, no API key)."""
    from keel.cli._common import fail, make_console
    from keel.core.errors import UsageError
    from keel.demo import SECTIONS, run_demo

    names = [name for name, _ in SECTIONS]
    unknown = [s for s in section or [] if s not in names]
    if unknown:
        fail(UsageError(f"unknown section {unknown[0]!r}; choose from {', '.join(names)}"))
    run_demo(make_console(), section, keep)
