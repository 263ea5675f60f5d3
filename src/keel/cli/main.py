"""The typer application: one module per noun, each with ``register(app)``; no logic here."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Annotated

import typer

from keel import __version__

app = typer.Typer(
    name="keel",
    help="A control layer that makes LLM coding agents predictable, auditable and safe.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module under keel.cli registers its own commands; keep this list in help order.
COMMAND_MODULES = (
    "init",
    "policy",
    "stop",
    "journal",
    "workspace",
    "plan",
    "sandbox",
    "monitor",
    "hook",
    "hookd",
    "wrap",
    "demo",
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"keel {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", "-w", help="Workspace root directory.")
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    ctx.obj = {"workspace": workspace}


for _name in COMMAND_MODULES:
    import_module(f"keel.cli.{_name}").register(app)
