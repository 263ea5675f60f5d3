"""``keel replay SESSION [--on DIR] [--json]``: run a recorded ``keel run`` again, no model.

Exit codes: 0 identical; 1 diverged (the first divergence is named); 2 usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

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


def register(app: typer.Typer) -> None:
    """Add ``replay`` to the keel app."""
    app.command(
        "replay",
        epilog=examples("keel replay run-1a2b3c", "keel replay run-1a2b3c --on . --json"),
    )(replay)


def replay(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="The session of a keel run (id or prefix).")],
    on: Annotated[
        Path | None,
        typer.Option(
            "--on", help="Run the tools on a copy of DIR instead of the first checkpoint."
        ),
    ] = None,
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Replay a recorded keel run with zero model calls; name the first divergence.

    The tools run again in a scratch copy (of the session's first checkpoint, or of --on DIR)
    with the network off; the user's tree is never touched. Exit 0 identical, 1 diverged.
    """
    from keel.agent import replay as run_replay
    from keel.agent import replay_text

    try:
        root = workspace_root(ctx, workspace)
        chosen = resolve_session_id(root, session)
        result = run_replay(root, chosen, on=on.resolve() if on is not None else None)
    except UsageError as exc:
        fail(exc, as_json=as_json)
    except KeelError as exc:
        fail(UsageError(exc.message, code=exc.code) if exc.code.startswith("journal.session")
             else exc, as_json=as_json, exit_code=None if exc.code.startswith("journal.session")
             else 1)  # fmt: skip
    if as_json:
        print_json(result.to_dict())
    else:
        sys.stdout.write(replay_text(result))
    raise typer.Exit(result.exit_code)
