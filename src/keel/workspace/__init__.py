"""The workspace: checkpoints in a shadow git repository, rollback, and atomic patches.

``Checkpoints`` snapshots the user's files into ``.keel/checkpoints`` (never the user's own
git), lists and diffs them, and rolls back; ``apply_patch`` applies a unified diff or a Codex
``*** Begin Patch`` all or nothing.
"""

from keel.workspace.checkpoints import (
    Checkpoint,
    Checkpoints,
    DiffResult,
    FileChange,
    RollbackResult,
)

__all__ = [
    "Checkpoint",
    "Checkpoints",
    "DiffResult",
    "FileChange",
    "RollbackResult",
]
