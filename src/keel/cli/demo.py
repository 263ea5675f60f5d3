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

    from keel.demo import run_demo

    run_demo(Console(), section, keep)
