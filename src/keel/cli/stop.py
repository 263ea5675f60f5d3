"""``keel stop``, ``keel resume`` and ``keel status``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import (
    JsonOpt,
    WorkspaceOpt,
    examples,
    existing_workspace,
    fail,
    named_workspace,
    print_json,
    utf8_text,
    workspace_root,
)
from keel.core.errors import KeelError, UsageError


def register(app: typer.Typer) -> None:
    app.command(
        "stop",
        epilog=examples(
            'keel stop --reason "review the migration first"',
            "keel stop --all                 # every workspace keel was initialised in",
        ),
    )(stop)
    app.command(
        "resume",
        epilog=examples("keel resume", "keel resume --session 3f2a", "keel resume --all"),
    )(resume)
    app.command("status", epilog=examples("keel status", "keel status --json"))(status)


def stop(
    ctx: typer.Context,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why; shown in every deny.")
    ] = None,
    all_workspaces: Annotated[
        bool,
        typer.Option("--all", help="Stop every workspace keel was initialised in on this machine."),
    ] = False,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set the emergency stop: every decision is deny, in every process, until `keel resume`.

    Outside a workspace (no keel.toml and no git repository here or above) this is an error
    that names the workspaces below; --all stops every workspace `keel init` registered.

    --json prints {"root", "stop", "killed"}; with --all {"workspaces": [{"root", "stopped",
    "detail", "killed"}]}.
    """
    from keel.lifecycle import stop_workspace

    why = utf8_text(reason) if reason else reason
    if all_workspaces:
        _stop_all(ctx, workspace, why, as_json)
        return
    try:
        root = existing_workspace(ctx, workspace, "keel stop")
        status, killed = stop_workspace(root, why)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json({"root": str(root), "stop": status.to_dict(), "killed": killed})
        return
    typer.echo(f"emergency stop SET in {root}: {status.reason}")
    if killed:
        typer.echo(f"killed {killed} contained command{'s' if killed > 1 else ''} (keel exec)")


def _stop_all(
    ctx: typer.Context, workspace: Path | None, reason: str | None, as_json: bool
) -> None:
    from keel.lifecycle import stop_all

    if named_workspace(ctx, workspace):
        fail(
            UsageError("--all stops every registered workspace; leave out --workspace"),
            as_json=as_json,
        )
    results = stop_all(reason)
    if not results:
        fail(
            UsageError(
                "no workspace is registered on this machine (`keel init` registers one)",
                code="usage.no_workspace",
            ),
            as_json=as_json,
        )
    if as_json:
        print_json({"workspaces": [r.to_dict() for r in results]})
    else:
        for result in results:
            if result.stopped:
                killed = f", killed {result.killed} contained" if result.killed else ""
                typer.echo(f"emergency stop SET in {result.root}{killed}")
            else:
                typer.echo(f"NOT stopped: {result.root}: {result.detail}", err=True)
    if not all(r.stopped or r.detail.startswith("skipped") for r in results):
        raise typer.Exit(1)


def resume(
    ctx: typer.Context,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            help="Clear the monitor's stop (and pending replan) of this session (an id or a "
            "unique prefix) instead of the emergency stop.",
        ),
    ] = None,
    all_workspaces: Annotated[
        bool,
        typer.Option("--all", help="Clear the emergency stop of every registered workspace."),
    ] = False,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Clear the emergency stop, or with --session the monitor's stop of one session.

    Both are journaled. `keel status` lists the sessions the monitor stopped.

    --json prints {"root", "cleared", "monitor_stopped"}; with --session {"root", "session"}
    ("session" is what was cleared, null when it was neither stopped nor held); with --all
    {"workspaces": [{"root", "cleared"}]}.
    """
    from keel.lifecycle import emergency_resume, monitor_stops, resume_all, resume_session

    try:
        if all_workspaces:
            if session or named_workspace(ctx, workspace):
                raise UsageError("--all clears every registered workspace's emergency stop only")
            cleared = resume_all()
            if as_json:
                print_json({"workspaces": [{"root": str(r), "cleared": c} for r, c in cleared]})
                return
            for root, was_set in cleared:
                state = "cleared" if was_set else "was not set"
                typer.echo(f"emergency stop {state} in {root}")
            return
        root = workspace_root(ctx, workspace)
        if session is not None:
            held = resume_session(root, utf8_text(session))
            if as_json:
                print_json({"root": str(root), "session": held.to_dict() if held else None})
            elif held is None:
                typer.echo(f"session {session} is not stopped or held by the monitor")
            else:
                typer.echo(
                    f"cleared the monitor's hold on session {held.session_id}: {held.describe()}"
                )
            return
        was_set = emergency_resume(root)
        held_now = monitor_stops(root)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        stopped = [h.to_dict() for h in held_now]
        print_json({"root": str(root), "cleared": was_set, "monitor_stopped": stopped})
        return
    typer.echo("emergency stop cleared" if was_set else "emergency stop was not set")
    for held in held_now:
        typer.echo(
            f"session {held.session_id} is {held.describe()}; "
            f"clear it with `keel resume --session {held.session_id}`"
        )


def status(ctx: typer.Context, workspace: WorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """Show the workspace, its config, the guard, the stops, the journal and the checkpoints.

    The guard line is a quick `keel doctor` (no probe); sessions the monitor stopped or holds
    for a new plan are listed, each with the command that clears it.
    """
    from keel.doctor import diagnose
    from keel.lifecycle import monitor_stops, workspace_status
    from keel.workspace.health import checkpoint_health

    try:
        root = workspace_root(ctx, workspace)
        info = workspace_status(root)
    except KeelError as err:
        fail(err, as_json=as_json)
    guard = diagnose(root, quick=True)
    try:
        held = [h.to_dict() for h in monitor_stops(root)]
        held_error = None
    except KeelError as err:
        held, held_error = [], err.message
    health = checkpoint_health(root)
    if as_json:
        print_json(
            {
                **info,
                "guard": {"ok": guard.ok, "summary": guard.summary(), **guard.to_dict()},
                "monitor_stopped": held,
                "checkpoints": health.to_dict(),
            }
        )
        return
    stop_info = info["stop"]
    typer.echo(f"workspace  {info['root']}")
    typer.echo(f"config     {info['config'] or '(none: embedded developer defaults)'}")
    typer.echo(f"preset     {info['preset']}")
    typer.echo(f"guard      {guard.summary()}")
    stopped = sum(1 for entry in held if entry["stopped"])
    if stop_info["active"]:
        typer.echo(f"STOP       emergency stop set: {stop_info['reason']}")
    elif stopped:
        sessions = f"{stopped} session{'s' if stopped > 1 else ''}"
        typer.echo(f"STOP       {sessions} stopped by the monitor (below); no emergency stop")
    else:
        typer.echo("stop       no emergency stop")
    for entry in held:
        what = f"stopped: {entry['stopped']}" if entry["stopped"] else f"replan: {entry['replan']}"
        typer.echo(
            f"SESSION    {entry['session']} {what} (keel resume --session {entry['session']})"
        )
    if held_error:
        typer.echo(f"SESSIONS   cannot read the sessions' state: {held_error}")
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
