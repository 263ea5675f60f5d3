"""``keel init``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import WorkspaceOpt, fail, utf8_text
from keel.errors import KeelError, UsageError
from keel.root import find_root


def register(app: typer.Typer) -> None:
    app.command("init")(init)


def init(
    ctx: typer.Context,
    preset: Annotated[
        str, typer.Option("--preset", help="strict, developer or readonly.")
    ] = "developer",
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Register keel's hooks for claude, codex or gemini."),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope", help="Paths the task may change (globs); repeat or comma-separate."
        ),
    ] = None,
    remove: Annotated[
        bool, typer.Option("--remove", help="With --agent: take out exactly the hooks keel added.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite an existing keel.toml.")
    ] = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Write a commented keel.toml and .keel/, git-ignore .keel/, and optionally register hooks."""
    from keel.init import init_workspace

    chosen = workspace or (ctx.obj or {}).get("workspace")
    root = find_root(override=str(chosen)) if chosen else Path.cwd()
    globs = [g.strip() for item in scope or [] for g in item.split(",") if g.strip()] or None
    try:
        for glob in globs or []:
            if utf8_text(glob) != glob:
                raise UsageError(f"--scope {utf8_text(glob)!r} is not valid UTF-8")
        if agent is not None:
            from keel.adapters.protocol import AGENTS

            if agent not in AGENTS:
                raise UsageError(f"unknown agent {agent!r}; choose one of {', '.join(AGENTS)}")
        if remove:
            if not agent:
                fail(UsageError("--remove needs --agent"))
            from keel.adapters.install import remove_hooks

            for path in remove_hooks(root, agent):
                typer.echo(f"removed keel's {agent} hooks from {path}")
            return
        result = init_workspace(root, preset, force=force, scope=globs)
        if result.wrote_config:
            typer.echo(f"wrote {result.config_path} (preset {preset})")
        else:
            typer.echo(f"kept existing {result.config_path} (use --force to overwrite)")
        typer.echo(f"state directory {result.root / '.keel'}")
        if result.updated_gitignore:
            typer.echo("added .keel/ to .gitignore")
        if agent:
            from keel.adapters.install import default_keel_command, install_hooks

            for path in install_hooks(root, agent, keel_command=default_keel_command()):
                typer.echo(f"registered keel's {agent} hooks in {path}")
    except KeelError as exc:
        fail(exc)
