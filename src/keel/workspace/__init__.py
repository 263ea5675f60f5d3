"""The workspace: checkpoints in a shadow git repository, rollback, and atomic patches.

``Checkpoints`` snapshots the user's files into ``.keel/checkpoints`` (never the user's own
git), lists and diffs them, and rolls back; ``apply_patch`` applies a unified diff or a Codex
``*** Begin Patch`` all or nothing. ``checkpoint_health`` tells ``keel status`` whether the
checkpoint store is usable now, and which checkpoints it lost objects of (``Damage``).
"""

from keel.workspace._damage import Damage, MissingObject
from keel.workspace._lock import LockHolder, LockRecovery
from keel.workspace.checkpoints import (
    Checkpoint,
    Checkpoints,
    DiffResult,
    FileChange,
    RollbackResult,
    checkpoint_event,
    checkpoint_payload,
)
from keel.workspace.health import CheckpointHealth, StaleLock, checkpoint_health

__all__ = [
    "Checkpoint",
    "CheckpointHealth",
    "Checkpoints",
    "Damage",
    "DiffResult",
    "FileChange",
    "LockHolder",
    "LockRecovery",
    "MissingObject",
    "RollbackResult",
    "StaleLock",
    "checkpoint_event",
    "checkpoint_health",
    "checkpoint_payload",
]
