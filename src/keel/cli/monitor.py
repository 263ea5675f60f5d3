"""``keel monitor``: the loop, drift and budget detectors over a recorded agent run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, examples, fail, print_json, workspace_root
from keel.core.errors import KeelError

if TYPE_CHECKING:
    from keel.core.decision import GuidanceLevel
    from keel.core.schema import KeelConfig
    from keel.judge import Judge
    from keel.judge.scan import StepJudgement
    from keel.monitor.scan import ScanReport

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
            "keel monitor scan run.traj.json --judge   # also ask [judge] model",
            "keel monitor scan run.traj.json --judge-model script:judge.json --fail-on correct",
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
            help="hint | correct | replan | stop: exit 3 when any diagnostic (or, with --judge, "
            "any deliverable judgement) is at LEVEL or above.",
        ),
    ] = None,
    judge: Annotated[
        bool,
        typer.Option(
            "--judge",
            help="Also ask the model judge (\\[judge] model) at the steps "
            "\\[judge.when] schedules.",
        ),
    ] = False,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            metavar="SPEC",
            help="The judge's model instead of \\[judge] model (openai:MODEL, anthropic:MODEL, "
            "local, script:FILE); implies --judge.",
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

    With --judge, each run is also shown to the model judge (as keel judge eval shows it) at
    the steps [judge.when] schedules: a step whose rule diagnostics reach on_finding, every
    every_n_steps-th step, and the last step (on_finish). Each judgement is printed after
    the diagnostics with its step, category, confidence, verdict, suggestion and status
    (deliverable, clear, below_threshold, category_off); an invalid answer is reported for
    its step with its error code. No budget applies. For --fail-on a deliverable judgement
    counts at a level: drift is hint; gaming, hijack and false_success are correct.

    Exit codes: 0 when the scan ran (and, with --fail-on, nothing reached LEVEL); 3 when
    --fail-on LEVEL was given and a diagnostic (or deliverable judgement) is at LEVEL or
    above; 1 when the file cannot be read or is in no known format; 2 for usage errors
    (also --judge with no --judge-model and no [judge] model).
    """
    from keel.config import config_for
    from keel.core.errors import UsageError
    from keel.monitor.scan import FAIL_EXIT, fail_level, render_text, scan_file

    if format not in FORMATS:
        fail(UsageError(f"unknown format {format!r}; one of {', '.join(FORMATS)}"), as_json=as_json)
    try:
        level = fail_level(fail_on) if fail_on is not None else None
    except UsageError as err:
        fail(err, as_json=as_json)
    judgements: tuple[tuple[StepJudgement, ...], ...] = ()
    judged: tuple[StepJudgement, ...] = ()
    model = ""
    judging = judge or judge_model is not None
    try:
        root = workspace_root(ctx, workspace)
        config = config_for(root)
        report = scan_file(
            file,
            format=format,
            config=config,
            session=session,
            workspace=root,
        )
        code = report.exit_code(level)
        reached = report.at_or_above(level) if level is not None else ()
        if judging:
            judgements, model = _judge_runs(report, judge_model or "", config, root)
            if level is not None:
                judged = _judged_at_or_above(judgements, level)
                code = FAIL_EXIT if judged else code
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        data = report.to_dict()
        if judging:
            data["judge"] = {"model": model, "judgements": sum(len(j) for j in judgements)}
            for run, found in zip(data["runs"], judgements, strict=True):
                run["judgements"] = [s.to_dict() for s in found]
        if level is not None:
            data.update(fail_on=level, reached=len(reached), exit_code=code)
            if judging:
                data["reached_judgements"] = len(judged)
        print_json(data)
    else:
        typer.echo(render_text(report), nl=False)
        if judging:
            from keel.judge.scan import render_judgements

            typer.echo(render_judgements(report, judgements, model), nl=False)
        if level is not None:
            verdict = "fails" if code else "passes"
            also = f" and {len(judged)} judgement(s)" if judging else ""
            typer.echo(
                f"--fail-on {level}: {len(reached)} diagnostic(s){also} at {level} or above; "
                f"the scan {verdict} (exit {code})"
            )
    raise typer.Exit(code)


def _judge_runs(
    report: ScanReport, spec: str, config: KeelConfig, root: Path
) -> tuple[tuple[tuple[StepJudgement, ...], ...], str]:
    """Every run's judgements at the steps [judge.when] schedules, and the judge's model."""
    from keel.judge.scan import judge_report

    judge = _judge(spec or config.judge.model, config, root)
    try:
        constraints = [c.text for c in config.constraints]
        found = judge_report(
            report,
            judge,
            config.judge.when,
            window_steps=config.judge.window_steps,
            constraints=constraints,
        )
    finally:
        judge.client.close()
    return found, judge.model


def _judged_at_or_above(
    judgements: tuple[tuple[StepJudgement, ...], ...], level: GuidanceLevel
) -> tuple[StepJudgement, ...]:
    from keel.judge.scan import at_or_above

    return at_or_above(judgements, level)


def _judge(spec: str | None, config: KeelConfig, root: Path) -> Judge:
    """The judge of ``spec`` with ``[judge]``'s threshold and categories, and no budget."""
    from keel.core.errors import UsageError
    from keel.judge import judge_client, judge_for
    from keel.models import open_model

    if not spec:
        raise UsageError(
            "no judge model: pass --judge-model SPEC (openai:MODEL, anthropic:MODEL, local, "
            "script:FILE) or set [judge] model in keel.toml",
            code="usage.model",
        )
    settings = config.judge.replace(max_calls=None, max_cost_usd=None)
    model = open_model(spec, config.model, workspace=root)
    client = judge_client(model, settings, config.model, session_id="monitor-scan")
    return judge_for(client, settings)
