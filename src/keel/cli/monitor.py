"""``keel monitor``: the loop, drift and budget detectors over a recorded agent run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, fail, print_json, workspace_root
from keel.errors import KeelError

FORMATS = ("auto", "keel", "claude", "codex", "mini-swe-agent", "swe-agent")


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="monitor",
        help="Find loops, repeated failures, drift and unverified finishes in agent runs.",
        no_args_is_help=True,
    )
    sub.command("scan")(scan)
    app.add_typer(sub, name="monitor")


def scan(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(help="A recorded run: keel journal, transcript, rollout or trajectory."),
    ],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="auto | keel | claude | codex | mini-swe-agent | swe-agent",
        ),
    ] = "auto",
    session: Annotated[
        str | None, typer.Option("--session", help="Only this session (keel journals).")
    ] = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the monitor's detectors over a recorded run; print each diagnostic with its step."""
    from keel.config import config_for
    from keel.errors import UsageError
    from keel.monitor.scan import render_text, scan_file

    if format not in FORMATS:
        fail(UsageError(f"unknown format {format!r}; one of {', '.join(FORMATS)}"), as_json=as_json)
    try:
        root = workspace_root(ctx, workspace)
        report = scan_file(
            file,
            format=format,  # pyright: ignore[reportArgumentType]
            config=config_for(root),
            session=session,
            workspace=root,
        )
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(report.to_dict())
    else:
        typer.echo(render_text(report), nl=False)
