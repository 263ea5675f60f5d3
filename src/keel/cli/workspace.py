"""``keel checkpoint``, ``keel diff``, ``keel rollback`` and ``keel patch``.

``--json`` prints one object: ``checkpoint create`` the checkpoint, ``checkpoint list``
``{"checkpoints": [...]}``, ``diff`` ``{"checkpoint", "changes", "outside_scope", "patch",
"prompt_files"}`` (the changed prompt files of future agent sessions, ``keel.core.protected``),
``rollback`` ``{"dry_run", "target", "undo", "after", "restored", "deleted", "overwritten",
"kept"}``, ``patch apply`` the applied (or checked) patch.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from keel.cli._common import (
    HELP_OPTIONS,
    JsonOpt,
    WorkspaceOpt,
    color_enabled,
    echo,
    examples,
    existing_workspace,
    fail,
    one_line,
    paint,
    paint_diff,
    print_json,
    progress,
    resolve_session_id,
    utf8_text,
    workspace_root,
)
from keel.core.errors import KeelError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from keel.workspace import Checkpoints

checkpoint_app = typer.Typer(
    help="Snapshots of the workspace that keel can roll back to.",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
)
patch_app = typer.Typer(
    help="Apply patches atomically (unified diffs and Codex patches).",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
)

SessionOpt = Annotated[
    str | None,
    typer.Option("--session", help="An agent session id, or a unique prefix of one."),
]
STATUS_COLORS = {"added": "green", "deleted": "red", "modified": "yellow", "renamed": "cyan"}


def register(app: typer.Typer) -> None:
    """Add ``checkpoint``, ``diff``, ``rollback`` and ``patch`` to ``app``."""
    app.add_typer(checkpoint_app, name="checkpoint")
    app.command(
        "diff",
        epilog=examples(
            "keel diff                      # since the last undo point",
            "keel diff --session 3f2a       # everything session 3f2a… changed",
            "keel diff 1a2b3c4d --stat      # only the files, since that checkpoint",
            "keel diff --outside-scope      # changed files outside [scope]",
        ),
    )(diff)
    app.command(
        "rollback",
        epilog=examples(
            "keel rollback --last --dry-run  # what undoing the last agent call would do",
            "keel rollback --last",
            "keel rollback --session 3f2a    # undo everything session 3f2a… changed",
        ),
    )(rollback)
    app.add_typer(patch_app, name="patch")


def _session(root: Path, cps: Checkpoints, session: str | None) -> str | None:
    """``--session`` resolved as ``keel show`` resolves it (id or unique prefix)."""
    if session is None:
        return None
    also = {c.session_id for c in cps.history() if c.session_id}
    return resolve_session_id(root, session, also=also)


@checkpoint_app.command(
    "create", epilog=examples("keel checkpoint create --label 'before the refactor'")
)
def checkpoint_create(
    ctx: typer.Context,
    label: Annotated[str | None, typer.Option("--label", help="A note to find it by.")] = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Take a checkpoint of the workspace now.

    Outside a workspace (no keel.toml and no git repository here or above) this is an error
    that names the workspaces below, and nothing is written; -w DIR snapshots DIR anyway.
    """
    from keel.workspace.service import open_checkpoints

    try:
        cps = open_checkpoints(existing_workspace(ctx, workspace, "keel checkpoint create"))
        with progress("taking a checkpoint") as shown:
            cps.on_progress = shown.update
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


@checkpoint_app.command(
    "list", epilog=examples("keel checkpoint list", "keel checkpoint list --session 3f2a --json")
)
def checkpoint_list(
    ctx: typer.Context,
    session: SessionOpt = None,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List checkpoints, oldest first.

    --json prints {"checkpoints": [...]}.
    """
    from keel.workspace.service import open_checkpoints

    try:
        root = workspace_root(ctx, workspace)
        store = open_checkpoints(root, journal=False)
        cps = store.history(_session(root, store, session))
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json({"checkpoints": [c.to_dict() for c in cps]})
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
        bool,
        typer.Option("--outside-scope", help="List only changed files outside \\[scope]."),
    ] = False,
    stat: Annotated[bool, typer.Option("--stat", help="Only list the changed files.")] = False,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show what changed since a checkpoint, including changes made by shell commands.

    Without CHECKPOINT: since the first checkpoint of --session, else since the last undo
    point (what `keel rollback --last` would undo). Changed files outside [scope] are named
    first (on stderr; "outside_scope" in --json).
    """
    from keel.workspace.service import open_checkpoints, scope_checker

    try:
        root = workspace_root(ctx, workspace)
        cps = open_checkpoints(root, journal=False)
        target = cps.resolve(checkpoint, session_id=_session(root, cps, session))
        in_scope = scope_checker(root) if outside_scope else _scope_if_readable(root)
        with progress(f"comparing with checkpoint {target.short}") as shown:
            cps.on_progress = shown.update
            result = cps.diff(target, patch=not (stat or outside_scope), in_scope=in_scope)
    except KeelError as err:
        fail(err, as_json=as_json)
    from keel.core.protected import prompt_paths

    prompts = prompt_paths([c.path for c in result.changes])
    if as_json:
        print_json({**result.to_dict(), "prompt_files": prompts})
        return
    if outside_scope:
        for path in result.outside_scope:
            typer.echo(path)
        return
    if prompts:
        typer.echo(
            "review first: these files are instructions the next agent session reads "
            f"(prompt files): {', '.join(prompts)}",
            err=True,
        )
    if result.outside_scope:
        typer.echo(f"outside [scope]: {', '.join(result.outside_scope)}", err=True)
    typer.echo(f"changes since checkpoint {target.short} ({target.kind}):", err=True)
    color = color_enabled(sys.stdout)
    if stat or not result.patch:
        for c in result.changes:
            origin = f" (from {c.old_path})" if c.old_path else ""
            status = paint(f"{c.status:<12}", STATUS_COLORS.get(c.status), color)
            echo(f"  {status} {c.path}{origin}")
        if not result.changes:
            typer.echo("  (none)")
        return
    sys.stdout.write(paint_diff(result.patch, color))


def _scope_if_readable(root: Path) -> Callable[[str], bool] | None:
    """``[scope]`` of ``root``, or None when keel.toml cannot be read (the diff still shows)."""
    from keel.workspace.service import scope_checker

    try:
        return scope_checker(root)
    except KeelError:
        return None


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
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Say what would be restored, removed and kept; write nothing (no file, no "
            "checkpoint, no journal entry).",
        ),
    ] = False,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Undo the agent's changes since a checkpoint: restore those files, and only those.

    Files only you (or another session) changed are left alone; a file both the agent and
    someone else changed makes the rollback refuse, naming it (a dry run refuses the same
    way), and so does a rollback with nothing of the agent's to undo while you changed files
    (--force resets them). Nothing changed since the checkpoint: nothing is done (no
    checkpoint). The rollback can be undone.

    --json prints {"dry_run", "target", "undo", "after", "restored", "deleted",
    "overwritten", "kept"}; "undo" and "after" are null in a dry run.
    """
    from keel.workspace.service import open_checkpoints

    chosen = sum(1 for x in (checkpoint, session, last or None) if x)
    if chosen != 1:
        fail(UsageError("give exactly one of CHECKPOINT, --session ID or --last"), as_json=as_json)
    try:
        root = workspace_root(ctx, workspace)
        cps = open_checkpoints(root, journal=not dry_run)
        target = cps.resolve(checkpoint, session_id=_session(root, cps, session), last=last)
        with progress(f"rolling back to {target.short}") as shown:
            cps.on_progress = shown.update
            result = cps.rollback(target, force=force, dry_run=dry_run)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        print_json(result.to_dict())
        return
    if result.noop:
        typer.echo(f"nothing changed since checkpoint {target.short}: nothing to roll back")
        return
    restored, deleted = len(result.restored), len(result.deleted)
    if dry_run:
        typer.echo(
            f"dry run: rolling back to {target.short} would restore {restored} and remove "
            f"{deleted} file(s); nothing was written"
        )
        labels = ("would restore  ", "would remove   ", "would overwrite")
    else:
        typer.echo(f"rolled back to {target.short}: {restored} restored, {deleted} removed")
        labels = ("restored  ", "removed   ", "overwrote")
    for path in result.restored:
        typer.echo(f"  {labels[0]}{path}")
    for path in result.deleted:
        typer.echo(f"  {labels[1]}{path}")
    for path in result.overwritten:
        typer.echo(f"  {labels[2]} changes by someone else: {path}")
    for path in result.kept:
        typer.echo(f"  kept (changed only by you or another session): {path}")
    if result.undo is not None:
        typer.echo(f"undo with: keel rollback {result.undo.short}")


@patch_app.command(
    "apply",
    epilog=examples(
        "keel patch apply fix.diff --check   # would every hunk apply? writes nothing",
        "git diff | keel patch apply -",
    ),
)
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
