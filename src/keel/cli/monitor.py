"""``keel monitor``: the loop, drift and budget detectors over a recorded agent run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, examples, fail, print_json, workspace_root
from keel.core.errors import KeelError

FORMATS = ("auto", "keel", "claude", "codex", "mini-swe-agent", "swe-agent")


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="monitor",
        help="Find loops, repeated failures, drift and unverified finishes in agent runs.",
        epilog=examples("keel monitor scan run.traj.json --fail-on correct"),
        no_args_is_help=True,
    )
    sub.command(
        "scan",
        epilog=examples(
            "keel monitor scan ~/.claude/projects/-src-shop/5b1c.jsonl",
            "keel monitor scan run.traj.json --fail-on correct   # CI: exit 3 if found",
            "keel monitor scan .keel/journal.db --session 3f2a --json",
        ),
    )(scan)
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
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            metavar="LEVEL",
            help="hint | correct | replan | stop: exit 3 when any diagnostic is at LEVEL or above.",
        ),
    ] = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the monitor's detectors over a recorded run; print each diagnostic with its step.

    Reads keel journals, Claude Code transcripts, Codex rollouts, SWE-agent trajectories and
    mini-swe-agent trajectories (the saved {messages, info} object or a bare list of
    messages). Changes are judged against [scope] of the workspace's keel.toml, on workspace
    paths, as the live hook judges them.

    Levels, mildest first, as the live hook acts on them: hint (advice to the agent),
    correct (the call is denied with a correction), replan (only reads until a new plan),
    stop (every later call denied).

    Exit codes: 0 when the scan ran (and, with --fail-on, nothing reached LEVEL); 3 when
    --fail-on LEVEL was given and a diagnostic is at LEVEL or above; 1 when the file cannot
    be read or is in no known format; 2 for usage errors.
    """
    from keel.config import config_for
    from keel.core.errors import UsageError
    from keel.monitor.scan import fail_level, render_text, scan_file

    if format not in FORMATS:
        fail(UsageError(f"unknown format {format!r}; one of {', '.join(FORMATS)}"), as_json=as_json)
    try:
        level = fail_level(fail_on) if fail_on is not None else None
    except UsageError as err:
        fail(err, as_json=as_json)
    try:
        root = workspace_root(ctx, workspace)
        report = scan_file(
            file,
            format=format,
            config=config_for(root),
            session=session,
            workspace=root,
        )
        code = report.exit_code(level)
        reached = report.at_or_above(level) if level is not None else ()
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        data = report.to_dict()
        if level is not None:
            data.update(fail_on=level, reached=len(reached), exit_code=code)
        print_json(data)
    else:
        typer.echo(render_text(report), nl=False)
        if level is not None:
            verdict = "fails" if code else "passes"
            typer.echo(
                f"--fail-on {level}: {len(reached)} diagnostic(s) at {level} or above; "
                f"the scan {verdict} (exit {code})"
            )
    raise typer.Exit(code)
