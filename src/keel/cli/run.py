"""``keel run "TASK"``: keel's own agent, and ``keel run --resume SESSION --answer TEXT``.

Exit codes: 0 finished with the gates passed; 3 needs the user's input while
non-interactive; 1 failed, stopped or over budget; 2 usage error.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from keel.cli._common import (
    JsonOpt,
    WorkspaceOpt,
    examples,
    fail,
    print_json,
    resolve_session_id,
    workspace_root,
)
from keel.core.errors import KeelError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from keel.agent import View


def register(app: typer.Typer) -> None:
    """Add ``run`` to the keel app."""
    app.command(
        "run",
        epilog=examples(
            'keel run "the report must sum the revenue column" --model openai:gpt-4.1-mini',
            'keel run "run the tests"',
            "keel run --resume run-1a2b3c --answer 'use the net column'",
            "keel run --list-tools --json        # the tools and their argument schemas",
        ),
    )(run)


def run(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Argument(help="What to do, in words.")] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="openai:MODEL, anthropic:MODEL, local, script:FILE."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="The API's base URL (OpenAI-compatible).")
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", min=1, help="Model calls, at most (default 50).")
    ] = None,
    non_interactive: Annotated[
        bool, typer.Option("--non-interactive", help="Never ask: exit 3 when input is needed.")
    ] = False,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Continue this session (it asked a question).")
    ] = None,
    answer: Annotated[
        str | None, typer.Option("--answer", help="With --resume: the answer to its question.")
    ] = None,
    list_tools: Annotated[
        bool,
        typer.Option(
            "--list-tools",
            help="Print the tools the model is offered, with their argument "
            "schemas (JSON Schema), and exit.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Run keel's own agent on a task: phases, strict tools, evidence before any change.

    The run goes understand -> plan -> implement -> verify; every tool call goes through
    keel's guard; writing before a plan held is refused. Exit 0 finished (gates passed),
    3 needs your answer (--non-interactive), 1 failed or stopped, 2 usage error.
    """
    from keel.agent import RunOptions, answer_by_rule, resume_run, start_run

    if list_tools:
        _list_tools(as_json)
        return
    try:
        root = workspace_root(ctx, workspace)
        _check(task, resume, answer)
    except KeelError as exc:
        fail(exc, as_json=as_json)
    interactive = not non_interactive and sys.stdin.isatty()
    options = RunOptions(model, base_url, max_steps, _ask if interactive else None,
                         _view(as_json))  # fmt: skip
    try:
        if resume is not None:
            session = _session(root, resume)
            result = resume_run(root, session, answer or "", options)
        else:
            assert task is not None
            result = answer_by_rule(root, task) or start_run(root, task, options)
    except UsageError as exc:
        fail(exc, as_json=as_json)
    except KeelError as exc:
        fail(exc, as_json=as_json, exit_code=1)
    _report(result, as_json)


def _list_tools(as_json: bool) -> None:
    """The tools ``keel run`` offers the model: ``{"tools": [{name, description, parameters}]}``."""
    from keel.agent import TOOLS

    if as_json:
        print_json({"tools": [tool.to_dict() for tool in TOOLS]})
        return
    for tool in TOOLS:
        fields = tool.parameters.get("properties", {})
        required = set(tool.parameters.get("required", ()))
        args = ", ".join(f"{n}{'' if n in required else '?'}" for n in fields)
        typer.echo(f"{tool.name}({args})\n    {tool.description}")


def _check(task: str | None, resume: str | None, answer: str | None) -> None:
    if resume is None and not (task or "").strip():
        raise UsageError('give a task (keel run "TASK") or --resume SESSION', code="usage.run")
    if resume is not None and task:
        raise UsageError("give a task or --resume SESSION, not both", code="usage.run")
    if resume is not None and answer is None:
        raise UsageError("--resume needs --answer TEXT", code="usage.run")
    if resume is None and answer is not None:
        raise UsageError("--answer goes with --resume SESSION", code="usage.run")


def _session(root: Path, given: str) -> str:
    """The session ``--resume`` names; an unknown or ambiguous one is a usage error (exit 2)."""
    try:
        return resolve_session_id(root, given)
    except KeelError as exc:
        if exc.code.startswith("journal.session"):
            raise UsageError(exc.message, code=exc.code) from exc
        raise


def _ask(question: str) -> str | None:
    try:
        return input(f"keel run asks: {question}\n> ")
    except EOFError:
        return None


def _view(as_json: bool) -> View:
    from keel.agent import LineView, LiveView, View

    if as_json:
        return View()
    return LiveView() if sys.stdout.isatty() else LineView()


def _report(result: object, as_json: bool) -> None:
    from keel.agent import RunResult, summary

    assert isinstance(result, RunResult)
    if as_json:
        print_json(result.to_dict())
    else:
        sys.stdout.write(summary(result))
    raise typer.Exit(result.exit_code)
