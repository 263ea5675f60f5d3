"""``keel init``."""

from __future__ import annotations

from typing import Annotated

import typer

from keel.cli._common import WorkspaceOpt, fail
from keel.errors import KeelError


def register(app: typer.Typer) -> None:
    app.command("init")(init)


def init(
    ctx: typer.Context,
    preset: Annotated[
        str, typer.Option("--preset", help="strict, developer or readonly.")
    ] = "developer",
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite an existing keel.toml.")
    ] = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Write a commented keel.toml and .keel/, and add .keel/ to .gitignore."""
    from pathlib import Path

    from keel.init import init_workspace

    chosen = workspace or (ctx.obj or {}).get("workspace")
    root = Path(chosen).resolve() if chosen else Path.cwd()
    try:
        result = init_workspace(root, preset, force=force)
    except KeelError as exc:
        fail(exc)
    if result.wrote_config:
        typer.echo(f"wrote {result.config_path} (preset {preset})")
    else:
        typer.echo(f"kept existing {result.config_path} (use --force to overwrite)")
    typer.echo(f"state directory {result.root / '.keel'}")
    if result.updated_gitignore:
        typer.echo("added .keel/ to .gitignore")
