"""Wiring for the CLI: checkpoints with the workspace's journal, patches under its policy.

The CLI commands stay thin by calling these; each opens what the workspace has (the journal
at ``.keel/journal.db``, the policy compiled from ``keel.toml``) and hands it to the library.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from keel.workspace.checkpoints import Checkpoints, EventSink
from keel.workspace.patch import PatchResult, PathPolicy, apply_patch


def open_journal_for(root: Path) -> EventSink:
    """The workspace's journal."""
    from keel.journal import open_journal

    return open_journal(root)


def open_checkpoints(root: Path, *, journal: bool = True) -> Checkpoints:
    """``Checkpoints`` for ``root``, journaling to the workspace's journal when asked."""
    return Checkpoints(root, open_journal_for(root) if journal else None)


def load_policy(root: Path) -> PathPolicy:
    """The compiled policy of ``root`` (``keel.toml`` or the embedded defaults)."""
    from keel.config import config_for
    from keel.policy import Policy

    return Policy.from_config(config_for(root), root)


def scope_checker(root: Path) -> Callable[[str], bool]:
    """A predicate: is a workspace-relative path inside ``[scope]``."""
    from keel.config import config_for
    from keel.policy import Policy

    return Policy.from_config(config_for(root), root).in_scope


def apply_patch_file(
    root: Path, text: str, *, check: bool = False, session_id: str | None = None
) -> PatchResult:
    """Apply a patch the way ``keel patch apply`` does: policy, journal, a checkpoint first."""
    journal = open_journal_for(root)
    checkpoints = None if check else Checkpoints(root, journal)
    return apply_patch(
        root,
        text,
        policy=load_policy(root),
        journal=journal,
        session_id=session_id,
        checkpoints=checkpoints,
        check=check,
    )
