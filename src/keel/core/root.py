"""Finding the workspace root and its ``.keel/`` state directory.

The root is the nearest ancestor holding ``keel.toml``, else the git work-tree root, else the
current directory; ``--workspace DIR`` overrides all three. Standard library only: this runs
on every hook call.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR = ".keel"


def find_root(start: str | os.PathLike[str] | None = None, override: str | None = None) -> Path:
    """The workspace root for ``start`` (default: the current directory)."""
    if override:
        try:
            return Path(override).expanduser().resolve()
        except (OSError, RuntimeError):  # a symlink loop: callers find it is no directory
            return Path(os.path.abspath(os.path.expanduser(override)))
    here = Path(start or os.getcwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "keel.toml").is_file():
            return candidate
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return here


def state_dir(root: Path) -> Path:
    """``<root>/.keel``, not created."""
    return root / STATE_DIR


def ensure_state_dir(root: Path) -> Path:
    """``<root>/.keel``, created if missing."""
    path = state_dir(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
