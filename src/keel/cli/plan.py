"""``keel plan``: schema, validate, run and functions for evidence-conditioned plans."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from keel.cli._common import (
    JsonOpt,
    Progress,
    WorkspaceOpt,
    examples,
    fail,
    print_json,
    progress,
    workspace_root,
)
from keel.core.errors import KeelError, UsageError

FileArg = Annotated[Path, typer.Argument(help="The plan (JSON).", show_default=False)]


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="plan",
        help="Evidence-conditioned plans: probes in a sandbox, branches, then commitment.",
        epilog=examples(
            "keel plan validate plan.json && keel plan run plan.json",
            "keel plan functions             # what a plan may call",
        ),
        no_args_is_help=True,
    )
    app.add_typer(sub, name="plan")
    sub.command(
        "schema", epilog=examples("keel plan schema > plan.schema.json")
    )(schema)  # fmt: skip
    sub.command(
        "validate",
        epilog=examples(
            "keel plan validate examples/config/plan.json",
            "keel plan validate plan.json --strict --json   # warnings fail too",
        ),
    )(validate)
    sub.command(
        "run",
        epilog=examples(
            "keel plan run plan.json                # in the current workspace",
            "keel plan run plan.json --answers answers.json --json",
            "keel plan run plan.json --answer target=staging --answer replicas=3",
        ),
    )(run)
    sub.command("functions", epilog=examples("keel plan functions", "keel plan functions --json"))(
        functions
    )
    __import__("keel.cli.plan_draft", fromlist=["register"]).register(sub)  # keel plan draft


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
    """Check a plan without running anything: exit 0 valid, 1 invalid, 2 unreadable.

    Runs the same checks as `keel plan run`, the commitment lint included: a plan whose final
    action would be refused for want of evidence (a write with no fs.writable check of its
    path, a command with no cmd.which check of its program) is invalid here (exit 1), as
    `keel plan run` fails it. Other warnings fail only with --strict. Variables are written
    {{name}}; a bare name in a condition is an error.
    """
    from keel.config import config_for
    from keel.plan import check_plan, read_plan_file

    try:
        root = workspace_root(ctx, workspace)
        config = config_for(root)
        data = read_plan_file(file)
    except KeelError as exc:
        fail(UsageError(exc.message, code=exc.code), as_json=as_json)
    result = check_plan(data, config=config, workspace=root)
    code = result.exit_code(strict=strict)
    if as_json:
        print_json(dict(result.to_dict(), valid=code == 0, exit_code=code))
    else:
        for issue in result.issues:
            typer.echo(issue.describe())
        typer.echo(_verdict(result, strict))
    raise typer.Exit(code)


def _verdict(result: Any, strict: bool) -> str:
    if result.errors or result.plan is None:
        return f"invalid: {len(result.errors)} error(s)"
    if result.refusals:
        steps = ", ".join(sorted({i.step_id for i in result.refusals if i.step_id}))
        return (
            f"invalid: the commitment lint flags final action(s) {steps}; "
            "`keel plan run` would refuse them and exit 1"
        )
    if strict and result.warnings:
        return f"invalid: {len(result.warnings)} warning(s) with --strict"
    return "valid"


def run(
    ctx: typer.Context,
    file: FileArg,
    as_json: JsonOpt = False,
    answers: Annotated[
        Path | None, typer.Option("--answers", help="JSON object: variable -> answer.")
    ] = None,
    answer: Annotated[
        list[str] | None,
        typer.Option(
            "--answer",
            metavar="VAR=VALUE",
            help="Answer one question (repeat; wins over --answers). VALUE is read as JSON "
            "when it is JSON (3, true, null, [1,2]), else as text.",
        ),
    ] = None,
    workspace: WorkspaceOpt = None,
    unsafe_no_sandbox: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-sandbox", help="Run probes without isolation if no sandbox works."
        ),
    ] = False,
) -> None:
    """Run a plan: exit 0 when a final action ran, 3 when input is needed, 1 on failure.

    Probes run in the sandbox; conditions over their evidence pick the branches; final
    actions that write or run go through keel's policy. A plan that is invalid, or whose
    final action the commitment lint flags, runs to a failure (exit 1), as `keel plan
    validate` says beforehand. Example plans with sample workspaces: examples/ in keel's
    repository.
    """
    from keel.config import config_for
    from keel.plan import default_policy, read_plan_file, render_text, run_plan

    try:
        root = workspace_root(ctx, workspace)
        config = config_for(root)
        data = read_plan_file(file)
        given = {**_answers(answers), **_answer_words(answer or [])}
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
        label = f"running plan {file.name}"
        with progress(label) as shown:
            report = run_plan(
                data, workspace=root, config=config, policy=policy,
                journal=_Narrated(journal, shown, label) if journal is not None else None,
                answers=given, prompt=_paused(prompt, shown), unsafe=unsafe_no_sandbox,
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


class _Narrated:
    """The journal a plan run writes to, telling the spinner which step the run is at."""

    def __init__(self, journal: Any, shown: Progress, label: str) -> None:
        self._journal = journal
        self._shown = shown
        self._label = label

    def append(self, event: Any) -> Any:
        """Journal ``event``; the spinner names its step (``step s2: probe``)."""
        data = getattr(event.payload, "data", None) or {}
        what = data.get("event") or event.kind
        step = getattr(event.payload, "step_id", None) or data.get("step_id")
        self._shown.update(f"{self._label}: step {step}: {what}" if step else self._label)
        return self._journal.append(event)


def _paused(prompt: Any, shown: Progress) -> Any:
    """``prompt`` with the spinner off the screen while it asks; None stays None."""
    if prompt is None:
        return None

    def ask(question: str, choices: list[Any] | None) -> Any:
        with shown.paused():
            return prompt(question, choices)

    return ask


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


def _answer_words(words: list[str]) -> dict[str, Any]:
    """``--answer VAR=VALUE`` options as answers: VALUE as JSON when it parses, else text."""
    found: dict[str, Any] = {}
    for word in words:
        name, eq, value = word.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"--answer takes VAR=VALUE, not {word!r}", code="usage.answers")
        try:
            found[name.strip()] = json.loads(value)
        except ValueError:
            found[name.strip()] = value
    return found


def _journal(root: Path) -> Any:
    from keel.journal import open_journal

    return open_journal(root)


def _tty_prompt(question: str, choices: list[Any] | None) -> Any:
    hint = f" {choices}" if choices else ""
    answer = typer.prompt(f"{question}{hint}", default="", show_default=False)
    return answer or None
