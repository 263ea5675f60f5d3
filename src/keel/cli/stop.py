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
    from keel.sandbox import kill_contained

    try:
        root = workspace_root(ctx, workspace)
        status = emergency_stop(root, utf8_text(reason) if reason else reason)
    except KeelError as err:
        fail(err)
    typer.echo(f"emergency stop SET in {root}: {status.reason}")
    killed = kill_contained(root)
    if killed:
        typer.echo(f"killed {killed} contained command{'s' if killed > 1 else ''} (keel exec)")


def resume(ctx: typer.Context, workspace: WorkspaceOpt = None) -> None:
    """Clear the emergency stop."""
    from keel.lifecycle import emergency_resume

    try:
        was_set = emergency_resume(workspace_root(ctx, workspace))
    except KeelError as err:
        fail(err)
    typer.echo("emergency stop cleared" if was_set else "emergency stop was not set")


def status(ctx: typer.Context, workspace: WorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """Show the workspace, its config, the stop flag, the journal and the checkpoint store."""
    from keel.lifecycle import workspace_status
    from keel.workspace.health import checkpoint_health

    try:
        root = workspace_root(ctx, workspace)
        info = workspace_status(root)
    except KeelError as err:
        fail(err, as_json=as_json)
    health = checkpoint_health(root)
    if as_json:
        print_json({**info, "checkpoints": health.to_dict()})
        return
    stop_info = info["stop"]
    typer.echo(f"workspace  {info['root']}")
    typer.echo(f"config     {info['config'] or '(none: embedded developer defaults)'}")
    typer.echo(f"preset     {info['preset']}")
    if stop_info["active"]:
        typer.echo(f"STOP       set: {stop_info['reason']}")
    else:
        typer.echo("stop       not set")
    journal = info["journal"]
    if journal["events"] is None:
        typer.echo("journal    unreadable (the next hook or command moves it aside)")
    else:
        typer.echo(f"journal    {journal['events']} events in {journal['sessions']} sessions")
    if journal.get("problem"):
        typer.echo(f"JOURNAL    {journal['problem']} (run `keel verify`)")
    for broken in journal.get("breaks", []):
        typer.echo(f"JOURNAL    {broken}")
    typer.echo(f"checkpoint {health.summary()}")
