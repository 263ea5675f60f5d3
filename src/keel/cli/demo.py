"""``keel demo``."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    section: Annotated[
        list[str] | None, typer.Option("--section", help="Run only these sections.")
    ] = None,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the generated files.")] = False,
) -> None:
    """Show keel's main jobs on a generated sample repository (offline, no API key)."""
    from rich.console import Console

    from keel.cli._common import fail
    from keel.demo import SECTIONS, run_demo
    from keel.errors import UsageError

    names = [name for name, _ in SECTIONS]
    unknown = [s for s in section or [] if s not in names]
    if unknown:
        fail(UsageError(f"unknown section {unknown[0]!r}; choose from {', '.join(names)}"))
    run_demo(Console(), section, keep)
