"""``keel doctor``."""

from __future__ import annotations

from typing import Annotated

import typer

from keel.cli._common import (
    JsonOpt,
    WorkspaceOpt,
    color_enabled,
    echo,
    examples,
    fail,
    paint,
    print_json,
    workspace_root,
)
from keel.core.errors import KeelError, UsageError

_STYLE = {"ok": "green", "warn": "yellow", "fail": "red"}


def register(app: typer.Typer) -> None:
    app.command(
        "doctor",
        epilog=examples("keel doctor", "keel doctor --agent codex", "keel doctor --json"),
    )(doctor)


def doctor(
    ctx: typer.Context,
    agent: Annotated[
        list[str] | None,
        typer.Option("--agent", help="Check this client only (claude, codex, gemini); repeat."),
    ] = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check that every client with keel's hooks is actually guarded; exit 1 if one is not.

    For each client: its hooks are registered, the registered command resolves (interpreter,
    keel importable, fail-closed fallback), Codex trusts the project, and one end-to-end probe
    through the exact registered command: a known-dangerous call (rm -rf /) must come back
    blocked. For the workspace: keel.toml is valid and the sandbox is available.

    --json prints {"root", "ok", "quick", "workspace": [checks], "clients": [{"agent",
    "guarded", "checks"}]}, each check {"name", "status": ok|warn|fail, "detail", "fix"}.
    """
    from keel.doctor import diagnose
    from keel.hook.protocol import AGENTS

    try:
        root = workspace_root(ctx, workspace)
        for name in agent or []:
            if name not in AGENTS:
                raise UsageError(
                    f"unknown agent {name!r}; choose one of {', '.join(AGENTS)}",
                    code="usage.agent",
                )
        report = diagnose(root, agent or None)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(report.to_dict())
        raise typer.Exit(0 if report.ok else 1)
    color = color_enabled()
    typer.echo(f"workspace  {root}")
    for check in report.workspace:
        _line(check.name, check.status, check.detail, check.fix, color)
    if not report.clients:
        _line(
            "clients",
            "fail",
            "no client has keel's hooks in this workspace",
            "keel init --agent claude|codex|gemini",
            color,
        )
    for client in report.clients:
        state = "guarded" if client.guarded else "NOT guarded"
        style = "green" if client.guarded else "red"
        echo(f"{client.agent}: {paint(state, style, color)}")
        for check in client.checks:
            _line(check.name, check.status, check.detail, check.fix, color)
    verdict = "every client is guarded" if report.ok else "NOT every client is guarded"
    echo(paint(verdict, "green" if report.ok else "red", color))
    raise typer.Exit(0 if report.ok else 1)


def _line(name: str, status: str, detail: str, fix: str | None, color: bool) -> None:
    mark = paint(f"{status:<4}", _STYLE.get(status), color)
    echo(f"  {mark} {name:<9} {detail}")
    if fix and status != "ok":
        typer.echo(f"       {'':<9} fix: {fix}")
