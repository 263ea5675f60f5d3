"""Submodules in directories the control walk does not enter: checked after every run.

``keel.sandbox.exec._control`` walks the whole workspace except ``PRUNED`` directories
(``node_modules``, ``.venv``, caches: large, rebuilt by tools). A repository planted there is
harmless until it is registered in the workspace's index as a gitlink: then the user's next
plain ``git status`` runs ``git status`` inside it, with its own config (``core.fsmonitor``)
and hooks. So after each contained run, every gitlink of the index that lies below a pruned
directory is looked at, and its ``.git`` is quarantined when anything in it (``objects/``
aside) changed during the run (an inode change time at or after the run's start: it cannot
be set back, unlike a modification time).

The gitlinks are listed by keel's own git (``keel.core.gitsafe``, reading the index through a
private git directory that takes nothing from the repository's config), once per version of
the index: the list is cached in ``.keel/exec/gitlinks`` keyed by the index's identity.
"""

from __future__ import annotations

import os
import stat

from keel.sandbox.exec._control import PRUNED
from keel.sandbox.os._registry import EXEC_DIR

CACHE = f"{EXEC_DIR}/gitlinks"
"""The index's identity on the first line, then one gitlink path a line (no ``json`` here:
``keel exec`` reads it on every run and imports nothing heavy)."""
WALK_CAP = 4096
"""Entries of one planted ``.git`` looked at; past it the ``.git`` counts as changed."""


def changed_gitlinks(root: str, since: float) -> list[str]:
    """``PATH/.git`` of every gitlink below a pruned directory whose ``.git`` changed since."""
    found: list[str] = []
    for rel in pruned_gitlinks(root):
        dot_git = os.path.join(root, rel, ".git")
        try:
            st = os.lstat(dot_git)
        except OSError:
            continue
        if st.st_ctime >= since or (stat.S_ISDIR(st.st_mode) and _changed_below(dot_git, since)):
            found.append(f"{rel}/.git")
    return found


def pruned_gitlinks(root: str) -> list[str]:
    """The index's gitlinks with a ``PRUNED`` directory on their path (cached per index)."""
    index = os.path.join(root, ".git", "index")
    try:
        st = os.stat(index, follow_symlinks=False)
    except OSError:
        return []
    key = f"{st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"
    cache = os.path.join(root, CACHE)
    try:
        with open(cache, encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().split("\n")
        if lines[0] == key:
            return [p for p in lines[1:] if p]
    except OSError:
        pass
    links = [p for p in _gitlinks(root) if PRUNED.intersection(p.split("/")[:-1])]
    try:
        temp = f"{cache}.{os.getpid()}"
        with open(temp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write("\n".join([key, *links]) + "\n")
        os.replace(temp, cache)
    except OSError:
        pass  # no cache: the next run asks git again
    return links


def _gitlinks(root: str) -> list[str]:
    """Every gitlink (mode 160000) of the workspace's index, by keel's own git."""
    import subprocess

    from keel.core.errors import WorkspaceError
    from keel.core.gitsafe import borrowed_git_dir, environment, git_executable

    git = git_executable(root)
    if git is None:
        return []
    try:
        with borrowed_git_dir(os.path.join(root, ".git"), git) as git_dir:
            done = subprocess.run(
                [git, "ls-files", "--stage", "-z"],
                env=environment(git_dir=git_dir, work_tree=root),
                cwd=git_dir,
                capture_output=True,
                timeout=30,
                check=False,
            )
    except (WorkspaceError, OSError, subprocess.TimeoutExpired):
        return []
    links: list[str] = []
    for record in done.stdout.split(b"\0"):
        meta, _, path = record.partition(b"\t")
        if meta.startswith(b"160000 ") and path and b"\n" not in path:
            links.append(os.fsdecode(path))
    return links


def _changed_below(dot_git: str, since: float) -> bool:
    """True if an entry below ``dot_git`` (``objects/`` aside) changed at or after ``since``."""
    budget = WALK_CAP
    stack = [dot_git]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        return True
                    st = entry.stat(follow_symlinks=False)
                    if st.st_ctime >= since:
                        return True
                    if entry.is_dir(follow_symlinks=False) and entry.name != "objects":
                        stack.append(entry.path)
        except OSError:
            return True  # unreadable: count it as changed (quarantine is recoverable)
    return False
