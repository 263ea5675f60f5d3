"""``keel hookd run|status|stop``: the resident hook server of a workspace.

Hooks start ``keel hookd`` on demand (``python -I -S <keel>/_launch.py hookd ROOT``) and it exits
after ``KEEL_HOOKD_IDLE`` seconds without a call; these commands are for looking at it,
running it in the foreground, and stopping it. ``KEEL_HOOKD=0`` in the agent's environment
keeps every hook in process.
"""

from __future__ import annotations

from typing import Annotated

import typer

from keel.cli._common import (
    HELP_OPTIONS,
    JsonOpt,
    WorkspaceOpt,
    examples,
    fail,
    one_line,
    print_json,
    workspace_root,
)
from keel.core.errors import KeelError, UsageError, WorkspaceError


def register(app: typer.Typer) -> None:
    """Add ``keel hookd`` and its subcommands to the app."""
    sub = typer.Typer(
        help="The resident hook server (`keel hookd`) of a workspace.",
        no_args_is_help=True,
        context_settings=HELP_OPTIONS,
    )
    sub.command("run", epilog=examples("keel hookd run --idle 60"))(run)
    sub.command("status", epilog=examples("keel hookd status", "keel hookd status --json"))(status)
    sub.command("stop", epilog=examples("keel hookd stop", "keel hookd stop --json"))(stop)
    app.add_typer(sub, name="hookd")


def run(
    ctx: typer.Context,
    workspace: WorkspaceOpt = None,
    idle: Annotated[
        float, typer.Option("--idle", help="Seconds without a call before exiting.")
    ] = 600.0,
) -> None:
    """Serve the workspace's hook calls in the foreground until idle."""
    from keel.hook.server import preload, serve

    if not 0 < idle < float("inf"):  # also refuses nan
        fail(UsageError(f"--idle must be a positive number of seconds, not {idle}"))
    try:
        root = workspace_root(ctx, workspace)
    except KeelError as err:
        fail(err)
    try:
        preload()
        code = serve(root, idle=idle)
    except KeelError as err:  # e.g. what is at the socket path cannot be moved aside
        fail(err)
    except OSError as exc:
        fail(WorkspaceError(f"cannot serve {root}: {exc}", code="workspace.hookd"))
    raise typer.Exit(code)


def status(ctx: typer.Context, workspace: WorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """Whether a daemon serves the workspace, and what keeps one from it.

    --json prints {"root", "running", "socket", "enabled", "problem"}: "problem" is null,
    or the error ({"code", "message", "path", "kind", "reason", "fix"}) of something at the
    socket path that is no socket.
    """
    from keel.hook.relay import daemon_enabled as enabled
    from keel.hook.server import daemon_running, socket_path, socket_problem

    try:
        root = workspace_root(ctx, workspace)
    except KeelError as err:
        fail(err, as_json=as_json)
    problem = socket_problem(root)
    info = {
        "root": str(root),
        "running": daemon_running(root),
        "socket": str(socket_path(root)),
        "enabled": enabled(),
        "problem": None if problem is None else problem.to_dict(),
    }
    if as_json:
        print_json(info)
        return
    line = f"hookd {'running' if info['running'] else 'not running'} for {root}"
    if problem is not None:
        line += f": {one_line(problem.message)} [{problem.code}]"
    typer.echo(line)


def stop(ctx: typer.Context, workspace: WorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """Stop the workspace's daemon (hooks decide in process until one starts again).

    --json prints {"root", "stopped"}: whether a running daemon was told to stop.
    """
    from keel.hook.server import stop_daemon

    try:
        root = workspace_root(ctx, workspace)
    except KeelError as err:
        fail(err, as_json=as_json)
    try:
        stopped = stop_daemon(root)
    except OSError as exc:
        error = WorkspaceError(f"cannot stop hookd of {root}: {exc}", code="workspace.hookd")
        fail(error, as_json=as_json)
    if as_json:
        print_json({"root": str(root), "stopped": bool(stopped)})
        return
    typer.echo("hookd stopping" if stopped else "hookd was not running")
