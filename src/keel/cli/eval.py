"""``keel eval SUITE --model SPEC [--arm NAME=SETTINGS]...``: compare keel settings on a suite.

Also ``keel eval --replay RESULTS [SUITE]``: replay every recorded run on today's code.

Exit codes: 0 every run was carried out (whatever its success) / every replay identical;
1 a run could not be carried out, a replay diverged, or keel could not run the evaluation;
2 usage errors (a bad arm, a missing model).
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from keel.cli._common import JsonOpt, examples, fail, print_json
from keel.core.errors import KeelError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from keel.eval import RunRecord


def register(app: typer.Typer) -> None:
    """Add ``eval`` to the keel app."""
    app.command(
        "eval",
        epilog=examples(
            "keel eval examples/eval --model script:examples/eval/scripts "
            "--arm keel --arm bare=require_plan=false,guidance=off",
            "keel eval examples/eval --model openai:gpt-4.1-mini --arm keel "
            "--arm strict=preset=strict --repeat 3 --ray auto",
            "keel eval examples/eval --model local --task wrong-column --arm keel=max_steps=2",
            "keel eval --replay keel-eval-out/results.jsonl",
            "keel eval --replay keel-eval-out examples/eval   # on the suite as it is now",
        ),
    )(eval_command)


def eval_command(
    suite: Annotated[
        Path | None,
        typer.Argument(help="The suite: a directory of tasks (examples/eval/README.md)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="openai:MODEL, anthropic:MODEL, local, script:FILE, or script:DIR (one "
            "script per task, DIR/TASK.json).",
        ),
    ] = None,
    arms: Annotated[
        list[str] | None,
        typer.Option(
            "--arm",
            metavar="NAME=SETTINGS",
            help="An arm to compare: NAME=KEY=VALUE,... with keys guidance, judge, "
            "require_plan, preset, max_steps, model (repeatable; the first is the baseline).",
        ),
    ] = None,
    repeat: Annotated[
        int, typer.Option("--repeat", metavar="N", help="Runs of each task per arm.")
    ] = 1,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", metavar="N", help="Runs at a time (default: the CPUs)."),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="auto|ADDRESS",
            help="Run on Ray: auto starts a local Ray for the evaluation; ADDRESS joins a "
            "cluster (ray://HOST:10001). Needs keel-guard\\[ray].",
        ),
    ] = None,
    tasks: Annotated[
        list[str] | None,
        typer.Option("--task", "-t", metavar="ID", help="Only these tasks (repeatable)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="The results directory (default: ./keel-eval-SUITE-TIME)."
        ),
    ] = None,
    resamples: Annotated[
        int, typer.Option("--bootstrap", metavar="N", help="Bootstrap resamples (0: none).")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="The bootstrap's random seed.")] = 0,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            metavar="RESULTS",
            help="Replay every run of a results file (or directory) with no model; with "
            "SUITE, on the suite's tasks as they are now.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run keel's agent over a suite of tasks under several settings, and compare them.

    Every (task, arm, repeat) runs keel run in its own 0755 copy of the task's repository,
    contained as keel run always is, with its own journal; the task's check command then
    decides success. Runs go in parallel (--jobs), or as Ray tasks (--ray auto starts a
    local Ray). Each record streams to OUT/results.jsonl as it comes; each run's workspace,
    journal included, is kept under OUT/runs/.

    The report, per arm: success, steps, tokens, cost, wall time, premature writes refused,
    broken assumptions caught before any write (trap tasks), guidance by level, with 95%
    bootstrap intervals over tasks (seeded); then each arm against the first, paired on the
    same tasks. Printed, and written as OUT/report.md and OUT/report.json.

    --replay RESULTS reruns every recorded run with no model (keel replay) on today's code
    and lists the first divergences; with SUITE, on the suite's tasks as they are now.
    """
    if replay is not None:
        _replay(replay, suite, jobs, as_json)
        return
    from keel.eval import (
        build_report,
        evaluate,
        load_suite,
        parse_arms,
        plan,
        render_text,
        write_report,
    )

    try:
        if suite is None:
            raise UsageError(
                "give a suite (keel eval SUITE) or --replay RESULTS", code="eval.usage"
            )
        _check_options(jobs, resamples)
        chosen_arms = parse_arms(arms or [])
        loaded = load_suite(suite, tuple(tasks or ()))
        evaluation = plan(loaded, chosen_arms, model, repeat)
        where = out or _default_out(loaded.name)
        count = len(evaluation.specs)
        shown = _progress(count) if not as_json else None
        workers = jobs or _cpus()
        records = evaluate(evaluation, where, jobs=workers, ray=ray, on_record=shown)
        report = build_report(
            records, suite=str(suite), model=model or "", arms=chosen_arms,
            tasks=[t.id for t in loaded.tasks], traps=[t.id for t in loaded.tasks if t.trap],
            repeat=repeat, bootstrap=resamples, seed=seed,
        )  # fmt: skip
        md, js = write_report(where, report)
    except UsageError as exc:
        fail(exc, as_json=as_json)
    except KeelError as exc:
        fail(exc, as_json=as_json, exit_code=1)
    if as_json:
        data = report.to_dict()
        data.pop("records")
        print_json({**data, "out": str(where), "results": str(where / "results.jsonl")})
    else:
        typer.echo("")
        typer.echo(render_text(report), nl=False)
        typer.echo(f"\nresults: {where / 'results.jsonl'}; report: {md}, {js}")
    raise typer.Exit(1 if any(r.error for r in records) else 0)


def _check_options(jobs: int | None, resamples: int) -> None:
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be 1 or more, not {jobs}", code="eval.usage")
    if resamples < 0:
        raise UsageError(f"--bootstrap must be 0 or more, not {resamples}", code="eval.usage")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _default_out(name: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return Path(f"keel-eval-{safe}-{stamp}")


def _progress(total: int) -> Callable[[RunRecord], None]:
    done = [0]

    def show(record: RunRecord) -> None:
        done[0] += 1
        if record.error:
            what = f"error: {record.error}"
        else:
            verdict = "success" if record.success else f"fail (check exit {record.check_exit})"
            what = f"{verdict}; {record.outcome}, {record.steps} steps, {record.wall_seconds:.1f} s"
        typer.echo(f"[{done[0]}/{total}] {record.run_id}: {what}")
        sys.stdout.flush()

    return show


def _replay(results: Path, suite: Path | None, jobs: int | None, as_json: bool) -> None:
    from keel.eval import replay_results, replay_text

    try:
        _check_options(jobs, 0)
        header, replayed = replay_results(results, suite, jobs=jobs or _cpus())
    except UsageError as exc:
        fail(exc, as_json=as_json)
    except KeelError as exc:
        fail(exc, as_json=as_json, exit_code=1)
    identical = all(r.status in ("identical", "skipped") for r in replayed)
    if as_json:
        print_json({
            "results": str(results),
            "suite": str(suite) if suite is not None else None,
            "recorded_suite": header.get("suite"),
            "identical": identical,
            "runs": [r.to_dict() for r in replayed],
        })  # fmt: skip
    else:
        typer.echo(replay_text(str(results), replayed), nl=False)
    raise typer.Exit(0 if identical else 1)
