"""A watch over the work tree's directories: did any file appear or vanish since a checkpoint?

A checkpoint must see untracked files (an agent's new files), which costs ``git status`` a scan
of the directories. Creating, deleting or renaming an entry changes its directory's mtime, so
keel keeps the stats of every directory that is not ignored, taken *before* git looks at the
tree, next to the checkpoint they belong to. When none of them moved, nothing appeared or
vanished, and ``git diff-files`` (the tracked files only, like ``git stash create``) is the
only git process a no-change checkpoint needs.

A directory touched within ``RACY_NS`` of the survey is not trusted (file times are coarse;
git's "racily clean" entries are the same problem), and anything unexpected (a missing or
corrupt watch file, a stat error) falls back to the full ``git status``: the watch can only
make a checkpoint faster, never miss a change.
"""

from __future__ import annotations

import marshal
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from keel.core.files import write_atomic
from keel.core.root import GIT_MARKER, STATE_DIR

RACY_NS = 100_000_000
SKIP_NAMES = frozenset({GIT_MARKER, STATE_DIR})
StatKey = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Watch:
    """Directory stats surveyed at ``taken_ns``, valid for one checkpoint and index."""

    taken_ns: int
    head: str
    index: str
    dirs: dict[str, StatKey]


def stat_key(st: os.stat_result) -> StatKey:
    """What changes when a directory's entries change (or it is replaced)."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def load(path: Path) -> Watch | None:
    """The saved watch, or ``None`` when there is none or it cannot be read."""
    try:
        data = marshal.loads(path.read_bytes())
        taken, head, index, dirs = data
        if not (isinstance(taken, int) and isinstance(head, str) and isinstance(dirs, dict)):
            return None
        return Watch(taken, head, str(index), dirs)
    except (OSError, ValueError, EOFError, TypeError):
        return None


def save(path: Path, watch: Watch) -> None:
    """Write the watch atomically."""
    data = marshal.dumps((watch.taken_ns, watch.head, watch.index, watch.dirs))
    write_atomic(path, data, prefix=f"keel-watch.{path.name}")


def unchanged(root: Path, watch: Watch) -> bool:
    """True when no watched directory moved and none was touched too close to the survey."""
    limit = watch.taken_ns - RACY_NS
    base = str(root)
    lstat = os.lstat
    for rel, key in watch.dirs.items():
        try:
            st = lstat(f"{base}/{rel}" if rel else base)
        except OSError:
            return False
        if (st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != key or key[0] >= limit:
            return False
    return True


def survey(
    root: Path,
    previous: dict[str, StatKey] | None,
    ignored: Callable[[list[str]], set[str]],
) -> tuple[int, dict[str, StatKey]]:
    """Stats of every directory to watch, taken now; ``ignored`` filters new directories.

    With ``previous``, only directories whose stats moved are searched for new
    subdirectories; without it, the whole tree is walked.
    """
    taken = time.time_ns()
    if previous is None:
        return taken, _filtered(_walk(root, ""), ignored)
    dirs: dict[str, StatKey] = {}
    moved: list[str] = []
    for rel, key in previous.items():
        try:
            now = stat_key(os.lstat(root / rel if rel else root))
        except OSError:
            continue  # gone
        dirs[rel] = now
        if now != key:
            moved.append(rel)
    found: dict[str, StatKey] = {}
    for rel in moved:
        if _nested_repo(root, rel):
            continue
        for child in _subdirs(root, rel):
            if child not in dirs:
                found.update(_walk(root, child))
    dirs.update(_filtered(found, ignored))
    return taken, dirs


def _filtered(
    dirs: dict[str, StatKey], ignored: Callable[[list[str]], set[str]]
) -> dict[str, StatKey]:
    if not dirs:
        return dirs
    skip = ignored([d for d in dirs if d])
    if not skip:
        return dirs
    return {d: k for d, k in dirs.items() if not _under(d, skip)}


def _under(rel: str, prefixes: Iterable[str]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in prefixes)


def _nested_repo(root: Path, rel: str) -> bool:
    return bool(rel) and os.path.lexists(root / rel / ".git")


def _subdirs(root: Path, rel: str) -> list[str]:
    try:
        with os.scandir(root / rel if rel else root) as it:
            return [
                f"{rel}/{e.name}" if rel else e.name
                for e in it
                if e.name not in SKIP_NAMES and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []


def _walk(root: Path, rel: str) -> dict[str, StatKey]:
    """Stats of ``rel`` and every directory under it, not inside .git, .keel or nested repos."""
    out: dict[str, StatKey] = {}
    stack = [rel]
    while stack:
        current = stack.pop()
        path = root / current if current else root
        try:
            out[current] = stat_key(os.lstat(path))
        except OSError:
            continue
        if not _nested_repo(root, current):  # its own stats show it turning into a plain dir
            stack.extend(_subdirs(root, current))
    return out
