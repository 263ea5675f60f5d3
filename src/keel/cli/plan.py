"""``keel plan``: schema, validate, run and functions for evidence-conditioned plans."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, fail, print_json, workspace_root
from keel.errors import KeelError, UsageError

FileArg = Annotated[Path, typer.Argument(help="The plan (JSON).", show_default=False)]


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="plan",
        help="Evidence-conditioned plans: probes in a sandbox, branches, then commitment.",
        no_args_is_help=True,
    )
    app.add_typer(sub, name="plan")
    sub.command("schema")(schema)
    sub.command("validate")(validate)
    sub.command("run")(run)
    sub.command("functions")(functions)


def schema() -> None:
    """Print the JSON Schema of a plan."""
    from keel.plan import plan_schema

    print_json(plan_schema())


def functions(as_json: JsonOpt = False) -> None:
    """List the probes and final actions a plan may call."""
    from keel.plan import ACTIONS
    from keel.probes import PROBES

    data = {"probes": [p.to_dict() for p in PROBES], "actions": [a.to_dict() for a in ACTIONS]}
    if as_json:
        print_json(data)
        return
    for spec in PROBES:
        params = ", ".join(p.name + ("" if p.required else "?") for p in spec.params)
        aliases = f"  (also {', '.join(spec.aliases)})" if spec.aliases else ""
        typer.echo(f"{spec.name}({params}) -> {spec.returns}: {spec.summary}{aliases}")
    for action in ACTIONS:
        params = ", ".join(p.name for p in action.params)
        typer.echo(f"{action.name}({params}) [final, {action.effect}]: {action.summary}")


def validate(
    ctx: typer.Context,
    file: FileArg,
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
) -> None:
    """Check a plan without running anything: exit 0 valid, 1 invalid, 2 unreadable."""
    from keel.config import config_for
    from keel.plan import check_plan, read_plan_file

    try:
        root = workspace_root(ctx, workspace)
        config = config_for(root)
        data = read_plan_file(file)
    except KeelError as exc:
        fail(UsageError(exc.message, code=exc.code), as_json=as_json)
    result = check_plan(data, config=config, workspace=root)
    valid = result.ok and not (strict and result.warnings)
    if as_json:
        print_json(dict(result.to_dict(), valid=valid))
    else:
        for issue in result.issues:
            typer.echo(issue.describe())
        typer.echo("valid" if valid else f"invalid: {len(result.errors)} error(s)")
    raise typer.Exit(0 if valid else 1)


def run(
    ctx: typer.Context,
    file: FileArg,
    as_json: JsonOpt = False,
    answers: Annotated[
        Path | None, typer.Option("--answers", help="JSON object: variable -> answer.")
    ] = None,
    workspace: WorkspaceOpt = None,
    unsafe_no_sandbox: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-sandbox", help="Run probes without isolation if no sandbox works."
        ),
    ] = False,
) -> None:
    """Run a plan: exit 0 when a final action ran, 3 when input is needed, 1 on failure."""
    from keel.config import config_for
    from keel.plan import default_policy, read_plan_file, render_text, run_plan

    try:
        root = workspace_root(ctx, workspace)
        config = config_for(root)
        data = read_plan_file(file)
        given = _answers(answers)
    except KeelError as exc:
        fail(UsageError(exc.message, code=exc.code), as_json=as_json)
    try:
        policy = default_policy(config, root)
    except Exception:
        policy = None
    prompt = _tty_prompt if sys.stdin.isatty() and not as_json else None
    try:
        journal = _journal(root)
    except KeelError as exc:
        fail(exc, as_json=as_json)
    try:
        report = run_plan(
            data, workspace=root, config=config, policy=policy, journal=journal,
            answers=given, prompt=prompt, unsafe=unsafe_no_sandbox,
        )  # fmt: skip
    except KeelError as exc:
        fail(exc, as_json=as_json)
    finally:
        if journal is not None:
            journal.close()
    if as_json:
        print_json(report.to_dict())
    else:
        typer.echo(render_text(report))
    raise typer.Exit(report.exit_code)


def _answers(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise UsageError(f"cannot read answers {str(path)!r}: {exc}", code="usage.answers") from exc
    if not isinstance(data, dict):
        raise UsageError("answers must be a JSON object: variable -> value", code="usage.answers")
    return data


def _journal(root: Path) -> Any:
    from keel.journal import open_journal

    return open_journal(root)


def _tty_prompt(question: str, choices: list[Any] | None) -> Any:
    hint = f" {choices}" if choices else ""
    answer = typer.prompt(f"{question}{hint}", default="", show_default=False)
    return answer or None
