"""``keel judge``: measure the model judge on labelled trajectories before trusting it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, examples, fail, print_json, workspace_root
from keel.core.errors import KeelError, UsageError

if TYPE_CHECKING:
    from keel.core.schema import KeelConfig
    from keel.judge import Judge


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="judge",
        help="The model judge: measure its miss and false-alarm rates on labelled runs.",
        epilog=examples(
            "keel judge eval examples/judge/dataset.jsonl "
            "--model script:examples/judge/judge.script.json"
        ),
        no_args_is_help=True,
    )
    sub.command(
        "eval",
        epilog=examples(
            "keel judge eval examples/judge/dataset.jsonl "
            "--model script:examples/judge/judge.script.json --sweep",
            "keel judge eval my-runs.jsonl --model openai:gpt-4.1-mini --json",
            "keel judge eval my-runs.jsonl --model local --threshold 0.5 --every 2",
            "keel judge eval examples/judge/dataset.jsonl --model local --limit 5 --every 2",
        ),
    )(eval_command)
    app.add_typer(sub, name="judge")


def eval_command(
    ctx: typer.Context,
    dataset: Annotated[
        Path, typer.Argument(help="Labelled trajectories: JSON lines (examples/judge/README.md).")
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="The judge's model: openai:MODEL, anthropic:MODEL, local, script:FILE "
            "(default: \\[judge] model).",
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            metavar="X",
            help="Confidence from which a verdict counts (default: \\[judge] min_confidence).",
        ),
    ] = None,
    show_sweep: Annotated[
        bool, typer.Option("--sweep", help="Also print the threshold sweep (0.0 to 1.0).")
    ] = False,
    every: Annotated[
        int,
        typer.Option("--every", metavar="N", help="Judge after every N steps (and at the end)."),
    ] = 1,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            help="Judge at most N cases, each label in turn (a quick, deterministic subset).",
        ),
    ] = None,
    resamples: Annotated[
        int, typer.Option("--bootstrap", metavar="N", help="Bootstrap resamples (0: no intervals).")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="The bootstrap's random seed.")] = 0,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the judge over labelled trajectories; report miss rate, false alarms and timeliness.

    Each case of DATASET (JSON lines: a trajectory in any format keel monitor scan reads,
    and a label, {"category", "step"} or "benign") is judged after every N steps and at its
    end. Per category: the miss rate, the false-alarm rate and the timeliness (only the
    first detection at or after the labelled step is a hit; an earlier one is a false alarm),
    with 95% bootstrap intervals over cases (seeded: the same run prints the same numbers);
    then cost and latency per call. --sweep shows the trade-off at thresholds 0.0 to 1.0
    from the same verdicts, with no more model calls.

    --limit N judges a subset: the labels (each category, and benign) take turns to give
    their next case in dataset order until N are chosen, so the same N always picks the same
    cases, and every label is in it once N reaches the number of labels. For a slow model
    (local answers in seconds) before a full run.

    A model answer that is not a valid verdict is counted as an error of that checkpoint,
    never a crash. No budget applies: the evaluation makes one call per checkpoint.

    Exit codes: 0 when the evaluation ran; 1 when the dataset, a trajectory or the model
    cannot be read or opened; 2 for usage errors.
    """
    from keel.config import config_for
    from keel.judge.eval import load_dataset, render_text, report, run_cases, subset

    try:
        _check_options(threshold, every, resamples, limit)
        root = workspace_root(ctx, workspace)
        config = config_for(root)
        judge = _judge(model or config.judge.model, config, root)
        try:
            cases = load_dataset(dataset)
            runs = run_cases(
                subset(cases, limit), judge, every=every, window_steps=config.judge.window_steps
            )
        finally:
            judge.client.close()
        chosen = config.judge.min_confidence if threshold is None else threshold
        result = report(
            runs, dataset=str(dataset), judge=judge, threshold=chosen, bootstrap=resamples,
            seed=seed, dataset_cases=len(cases),
        )  # fmt: skip
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(result.to_dict())
    else:
        typer.echo(render_text(result, show_sweep=show_sweep), nl=False)


def _check_options(threshold: float | None, every: int, resamples: int, limit: int | None) -> None:
    if threshold is not None and not 0 <= threshold <= 1:
        raise UsageError(f"--threshold must be between 0 and 1, not {threshold}")
    if every < 1:
        raise UsageError(f"--every must be at least 1, not {every}")
    if resamples < 0:
        raise UsageError(f"--bootstrap must be 0 or more, not {resamples}")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, not {limit}")


def _judge(spec: str | None, config: KeelConfig, root: Path) -> Judge:
    """The judge of ``spec`` with ``[judge]``'s threshold and categories, and no budget."""
    from keel.judge import judge_client, judge_for
    from keel.models import open_model

    if not spec:
        raise UsageError(
            "no judge model: pass --model (openai:MODEL, anthropic:MODEL, local, script:FILE) "
            "or set [judge] model in keel.toml",
            code="usage.model",
        )
    settings = config.judge.replace(max_calls=None, max_cost_usd=None)
    model = open_model(spec, config.model, workspace=root)
    client = judge_client(model, settings, config.model, session_id="judge-eval")
    return judge_for(client, settings)
