"""``keel sandbox check`` and ``keel sandbox run``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import (
    HELP_OPTIONS,
    JsonOpt,
    WorkspaceOpt,
    examples,
    fail,
    print_json,
    workspace_root,
)
from keel.core.errors import KeelError

sandbox_app = typer.Typer(
    name="sandbox",
    help="Inspect and use the sandbox that probes and commands run in.",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
)


def register(app: typer.Typer) -> None:
    app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("check", epilog=examples("keel sandbox check", "keel sandbox check --json"))
def check(ctx: typer.Context, workspace: WorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """Show which sandbox backends work here and why the others do not (exit 1 if none is safe).

    --json prints {"backends", "chosen", "safe", "python", "uid", "exec"}.
    """
    from keel.config import config_for
    from keel.sandbox import detect, exec_backend

    try:
        config = config_for(workspace_root(ctx, workspace)).sandbox
        report = detect(config)
        exec_name, exec_reason = exec_backend(config.backend, refresh=True)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json({**report.to_dict(), "exec": {"backend": exec_name, "reason": exec_reason}})
    else:
        for status in report.backends:
            state = "ok" if status.available else "no"
            version = f" {status.version}" if status.version else ""
            typer.echo(f"{status.name:<12} {state:<3}{version}  {status.reason}")
        typer.echo(f"chosen       {report.chosen or '(none: sandboxed runs are refused)'}")
        python = report.python
        typer.echo(f"python       {python.executable or 'unavailable'}  {python.reason}")
        typer.echo(f"sandbox uid  {report.uid}")
        typer.echo(f"exec         {exec_name or '(none: keel exec refuses)'}  {exec_reason}")
    raise typer.Exit(0 if report.safe else 1)


@sandbox_app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog=examples(
        "keel sandbox run -- cat config.yaml",
        "keel sandbox run --mode exec --timeout 60 -- make test",
    ),
)
def run(
    ctx: typer.Context,
    command: Annotated[list[str], typer.Argument(help="The command and its arguments.")],
    mode: Annotated[
        str, typer.Option("--mode", help="probe (read-only) or exec (scratch copy).")
    ] = "probe",
    timeout: Annotated[float, typer.Option("--timeout", help="Wall-clock seconds.")] = 30.0,
    unsafe: Annotated[
        bool, typer.Option("--unsafe-no-sandbox", help="Run unsandboxed if no sandbox works.")
    ] = False,
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="Force bwrap, landlock or none-unsafe (with the flag)."),
    ] = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Run a command in the sandbox with the workspace at /workspace; exit with its code."""
    from keel.config import config_for
    from keel.core.errors import UsageError
    from keel.sandbox import BACKENDS, get_sandbox

    if mode not in ("probe", "exec"):
        fail(UsageError(f"--mode must be probe or exec, not {mode!r}"))
    if not 0 < timeout < float("inf"):  # also refuses nan
        fail(UsageError(f"--timeout must be a positive number of seconds, not {timeout}"))
    if backend is not None and backend not in BACKENDS:
        fail(UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}"))
    try:
        root = workspace_root(ctx, workspace)
        forced = BACKENDS[BACKENDS.index(backend)] if backend is not None else None
        sandbox = get_sandbox(config_for(root).sandbox, unsafe=unsafe, backend=forced)
        if sandbox.name == "none-unsafe":
            _journal_unsafe(root, command)
        result = sandbox.run(
            command, workspace=root, mode="exec" if mode == "exec" else "probe", timeout=timeout
        )
    except KeelError as err:
        fail(err)
    sys.stdout.buffer.write(result.stdout)
    sys.stderr.buffer.write(result.stderr)
    if result.timed_out:
        sys.stderr.write(f"keel: timed out after {timeout} s (backend {result.backend})\n")
        raise typer.Exit(124)
    code = result.exit_code if result.exit_code is not None else 1
    raise typer.Exit(code if code >= 0 else 128 - code)


def _journal_unsafe(root: Path, command: list[str]) -> None:
    """Record that a command ran with no isolation, and say so on stderr."""
    from keel.core.events import DataPayload, Event
    from keel.journal import open_journal

    sys.stderr.write("keel: WARNING: no sandbox works here; running UNSANDBOXED\n")
    data = {"sandbox": "none-unsafe", "flag": "--unsafe-no-sandbox", "argv": command}
    with open_journal(root) as journal:
        journal.append(Event("config", session_id="keel-sandbox-run", payload=DataPayload(data)))
