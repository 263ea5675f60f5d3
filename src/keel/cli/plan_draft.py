"""``keel plan draft``: a model writes an evidence plan, keel's validator judges each draft.

Exit codes: 0 a draft validated (and was written; with ``--run``, as ``keel plan run``: 0, 1
or 3); 1 no draft validated within ``--max-rounds`` (the last errors are printed), or a model
call failed or was refused by the budget; 2 bad arguments, keel.toml or model spec.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, examples, fail, print_json, workspace_root
from keel.core.errors import KeelError, UsageError


def register(sub: typer.Typer) -> None:
    """Add ``draft`` to ``keel plan``."""
    sub.command(
        "draft",
        epilog=examples(
            'keel plan draft "report the database host in config.yaml" --model local --run',
            'keel plan draft "sum the revenue column" --model script:replay.json --out plan.json',
        ),
    )(draft)


def draft(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="What the plan must find out or do.")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="openai:MODEL, anthropic:MODEL, local, script:FILE (default: spec in keel.toml).",
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="The API's base URL (OpenAI-compatible).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the plan here (default: stdout).")
    ] = None,
    max_rounds: Annotated[
        int, typer.Option("--max-rounds", min=1, max=20, help="Drafts to try, at most.")
    ] = 3,
    as_json: JsonOpt = False,
    run: Annotated[bool, typer.Option("--run", help="Run the plan once it validates.")] = False,
    workspace: WorkspaceOpt = None,
    unsafe_no_sandbox: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-sandbox", help="With --run: run probes without isolation if none works."
        ),
    ] = False,
) -> None:
    """Ask a model for an evidence plan; validator errors go back to it until one validates.

    Example: keel plan draft "report the database host in config.yaml" --model local --run
    """
    from keel.config import config_for
    from keel.models import client_for, open_model

    try:
        root = workspace_root(ctx, workspace)
        config = config_for(root)
    except KeelError as exc:
        fail(UsageError(exc.message, code=exc.code), as_json=as_json)
    try:
        backend = open_model(model, config.model, base_url=base_url, workspace=root)
        journal = _journal(root)
    except KeelError as exc:
        fail(exc, as_json=as_json)
    session = f"draft-{uuid.uuid4().hex[:12]}"
    try:
        client = client_for(backend, config.model, session_id=session, journal=journal)
        result = _draft(task, client, config, root, max_rounds, quiet=as_json)
        code = _report(result, out, as_json, run)
        if run and result.ok:
            code = _run(result, root, config, journal, session, as_json, unsafe_no_sandbox)
    except KeelError as exc:
        _say(f"session {session} (keel show {session})")
        fail(exc, as_json=as_json)
    finally:
        journal.close()
    raise typer.Exit(code)


def _draft(task: str, client: Any, config: Any, root: Path, rounds: int, *, quiet: bool) -> Any:
    from keel.plan.draft import DraftRound, draft_plan

    def progress(done: DraftRound) -> None:
        if quiet:
            return
        verdict = "valid" if not done.issues else f"{len(done.issues)} problem(s)"
        _say(f"draft {done.number} ({done.source}): {verdict}")

    return draft_plan(task, client=client, config=config, workspace=root, max_rounds=rounds,
                      on_round=progress)  # fmt: skip


def _report(result: Any, out: Path | None, as_json: bool, run: bool) -> int:
    from keel.plan.draft import plan_text

    if result.ok and out is not None:
        try:
            out.write_text(plan_text(result.plan), encoding="utf-8")
        except OSError as exc:
            fail(UsageError(f"cannot write {str(out)!r}: {exc.strerror}", code="usage.out"),
                 as_json=as_json)  # fmt: skip
    if as_json:
        if not run or not result.ok:
            print_json(result.to_dict())
        return 0 if result.ok else 1
    if result.ok:
        where = f" to {out}" if out is not None else ""
        _say(f"plan valid after {len(result.rounds)} draft(s){where}; "
             f"session {result.session_id}")  # fmt: skip
        if out is None:
            sys.stdout.write(plan_text(result.plan))
        return 0
    _say(f"no valid plan after {len(result.rounds)} draft(s); the last one's problems:")
    for issue in result.last_issues:
        _say(f"  {issue.describe()}")
    _say(f"session {result.session_id} (keel show {result.session_id})")
    return 1


def _run(
    result: Any, root: Path, config: Any, journal: Any, session: str, as_json: bool, unsafe: bool
) -> int:
    from keel.plan import default_policy, render_text, run_plan

    try:
        policy = default_policy(config, root)
    except Exception:
        policy = None
    prompt = _tty_prompt if sys.stdin.isatty() and not as_json else None
    report = run_plan(
        result.plan, workspace=root, config=config, policy=policy, journal=journal,
        prompt=prompt, unsafe=unsafe, session_id=session,
    )  # fmt: skip
    if as_json:
        print_json({**result.to_dict(), "run": report.to_dict()})
    else:
        typer.echo(render_text(report))
    return report.exit_code


def _journal(root: Path) -> Any:
    from keel.journal import open_journal

    return open_journal(root)


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")


def _tty_prompt(question: str, choices: list[Any] | None) -> Any:
    hint = f" {choices}" if choices else ""
    answer = typer.prompt(f"{question}{hint}", default="", show_default=False)
    return answer or None
