"""``keel stop``, ``keel resume`` and ``keel status``."""

from __future__ import annotations

from typing import Annotated

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, fail, print_json, utf8_text, workspace_root
from keel.errors import KeelError


def register(app: typer.Typer) -> None:
    app.command("stop")(stop)
    app.command("resume")(resume)
    app.command("status")(status)


def stop(
    ctx: typer.Context,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why; shown in every deny.")
    ] = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Set the emergency stop: every decision is deny, in every process, until `keel resume`."""
    from keel.lifecycle import emergency_stop

    try:
        root = workspace_root(ctx, workspace)
        status = emergency_stop(root, utf8_text(reason) if reason else reason)
    except KeelError as err:
        fail(err)
    typer.echo(f"emergency stop SET in {root}: {status.reason}")


def resume(ctx: typer.Context, workspace: WorkspaceOpt = None) -> None:
    """Clear the emergency stop."""
    from keel.lifecycle import emergency_resume

    try:
        was_set = emergency_resume(workspace_root(ctx, workspace))
    except KeelError as err:
        fail(err)
    typer.echo("emergency stop cleared" if was_set else "emergency stop was not set")


def status(ctx: typer.Context, workspace: WorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """Show the workspace, its config, the stop flag and the journal."""
    from keel.lifecycle import workspace_status

    try:
        info = workspace_status(workspace_root(ctx, workspace))
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(info)
        return
    stop_info = info["stop"]
    typer.echo(f"workspace  {info['root']}")
    typer.echo(f"config     {info['config'] or '(none: embedded developer defaults)'}")
    typer.echo(f"preset     {info['preset']}")
    if stop_info["active"]:
        typer.echo(f"STOP       set: {stop_info['reason']}")
    else:
        typer.echo("stop       not set")
    typer.echo(
        f"journal    {info['journal']['events']} events in {info['journal']['sessions']} sessions"
    )
