"""``keel checkpoint``, ``keel diff``, ``keel rollback`` and ``keel patch``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import (
    JsonOpt,
    WorkspaceOpt,
    fail,
    one_line,
    print_json,
    utf8_text,
    workspace_root,
)
from keel.errors import KeelError, UsageError

checkpoint_app = typer.Typer(help="Snapshots of the workspace that keel can roll back to.")
patch_app = typer.Typer(help="Apply patches atomically (unified diffs and Codex patches).")

SessionOpt = Annotated[str | None, typer.Option("--session", help="An agent session id.")]


def register(app: typer.Typer) -> None:
    app.add_typer(checkpoint_app, name="checkpoint")
    app.command("diff")(diff)
    app.command("rollback")(rollback)
    app.add_typer(patch_app, name="patch")


@checkpoint_app.command("create")
def checkpoint_create(
    ctx: typer.Context,
    label: Annotated[str | None, typer.Option("--label", help="A note to find it by.")] = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Take a checkpoint of the workspace now."""
    from keel.workspace.service import open_checkpoints

    try:
        cps = open_checkpoints(workspace_root(ctx, workspace))
        cp = cps.create(label=utf8_text(label) if label else label)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(cp.to_dict())
        return
    note = " (nothing changed since the last one)" if cp.reused else ""
    typer.echo(f"checkpoint {cp.short} created{note}")
    for path in cp.skipped:
        typer.echo(f"  skipped (over the size cap): {path}")


@checkpoint_app.command("list")
def checkpoint_list(
    ctx: typer.Context,
    session: SessionOpt = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List checkpoints, oldest first."""
    from keel.workspace.service import open_checkpoints

    try:
        cps = open_checkpoints(workspace_root(ctx, workspace), journal=False).history(session)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json([c.to_dict() for c in cps])
        return
    if not cps:
        typer.echo("no checkpoints")
        return
    for c in cps:
        when = datetime.fromtimestamp(c.ts, UTC).strftime("%Y-%m-%d %H:%M:%S")
        who = one_line(c.session_id, 160) if c.session_id else "-"
        call = f" {one_line(c.tool_use_id, 160)}" if c.tool_use_id else ""
        label = f"  {one_line(c.label, 160)}" if c.label else ""
        files = f"  {c.files_total} file(s)" if c.files_total else ""
        typer.echo(f"{c.short}  {when}  {c.kind:<8}  {who}{call}{files}{label}")


def diff(
    ctx: typer.Context,
    checkpoint: Annotated[
        str | None, typer.Argument(help="Checkpoint id (default: the last undo point).")
    ] = None,
    session: SessionOpt = None,
    outside_scope: Annotated[
        bool, typer.Option("--outside-scope", help="List only changed files outside [scope].")
    ] = False,
    stat: Annotated[bool, typer.Option("--stat", help="Only list the changed files.")] = False,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show what changed since a checkpoint, including changes made by shell commands.

    Without CHECKPOINT: since the first checkpoint of --session, else since the last undo
    point (what `keel rollback --last` would undo).
    """
    from keel.workspace.service import open_checkpoints, scope_checker

    try:
        root = workspace_root(ctx, workspace)
        cps = open_checkpoints(root, journal=False)
        target = cps.resolve(checkpoint, session_id=session)
        in_scope = scope_checker(root) if outside_scope else None
        result = cps.diff(target, patch=not (stat or outside_scope), in_scope=in_scope)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(result.to_dict())
        return
    if outside_scope:
        for path in result.outside_scope:
            typer.echo(path)
        return
    typer.echo(f"changes since checkpoint {target.short} ({target.kind}):", err=True)
    if stat or not result.patch:
        for c in result.changes:
            origin = f" (from {c.old_path})" if c.old_path else ""
            typer.echo(f"  {c.status:<12} {c.path}{origin}")
        if not result.changes:
            typer.echo("  (none)")
        return
    sys.stdout.write(result.patch)


def rollback(
    ctx: typer.Context,
    checkpoint: Annotated[str | None, typer.Argument(help="Checkpoint id to go back to.")] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", help="Undo everything this agent session changed."),
    ] = None,
    last: Annotated[bool, typer.Option("--last", help="Undo the last agent call.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Also overwrite files someone else changed since: a full reset to the checkpoint.",
        ),
    ] = False,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Undo the agent's changes since a checkpoint: restore those files, and only those.

    Files only you (or another session) changed are left alone; a file both the agent and
    someone else changed makes the rollback refuse, naming it. The rollback can be undone.
    """
    from keel.workspace.service import open_checkpoints

    chosen = sum(1 for x in (checkpoint, session, last or None) if x)
    if chosen != 1:
        fail(UsageError("give exactly one of CHECKPOINT, --session ID or --last"), as_json=as_json)
    try:
        cps = open_checkpoints(workspace_root(ctx, workspace))
        target = cps.resolve(checkpoint, session_id=session, last=last)
        result = cps.rollback(target, force=force)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(result.to_dict())
        return
    typer.echo(
        f"rolled back to {target.short}: {len(result.restored)} restored, "
        f"{len(result.deleted)} removed"
    )
    for path in result.restored:
        typer.echo(f"  restored  {path}")
    for path in result.deleted:
        typer.echo(f"  removed   {path}")
    for path in result.overwritten:
        typer.echo(f"  overwrote changes by someone else: {path}")
    for path in result.kept:
        typer.echo(f"  kept (changed only by you or another session): {path}")
    typer.echo(f"undo with: keel rollback {result.undo.short}")


@patch_app.command("apply")
def patch_apply(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="Patch file, or - for stdin.")],
    check: Annotated[bool, typer.Option("--check", help="Validate only; write nothing.")] = False,
    session: SessionOpt = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Apply a unified diff or a Codex patch: every hunk applies, or no file changes."""
    from keel.workspace.service import apply_patch_file

    try:
        text = _read_stdin() if file == "-" else _read(Path(file))
        result = apply_patch_file(workspace_root(ctx, workspace), text, check=check,
                                  session_id=session)  # fmt: skip
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(result.to_dict())
        return
    verb = "would apply" if check else "applied"
    typer.echo(f"{verb} {result.format} patch to {len(result.files)} file(s)")
    for f in result.files:
        target = f" -> {f.new_path}" if f.new_path else ""
        moved = [o for o in f.offsets if o]
        offset = f" (offset {', '.join(map(str, moved))})" if moved else ""
        typer.echo(f"  {f.action:<7} {f.path}{target}{offset}")
    if result.checkpoint:
        typer.echo(f"undo with: keel rollback {result.checkpoint}")


def _read_stdin() -> str:
    if sys.stdin is None:
        raise UsageError("cannot read the patch: stdin is closed")
    try:
        return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    except OSError as exc:
        raise UsageError(f"cannot read the patch from stdin: {exc.strerror}") from exc


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError as exc:
        raise UsageError(f"cannot read patch {str(path)!r}: {exc.strerror}") from exc
