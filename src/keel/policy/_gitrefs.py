"""Which git branches are shared: read from the repository's files, standard library only.

A branch is **shared** when others may have it: ``main`` or ``master``, the branch a remote's
``HEAD`` names (the default branch), or any branch with a remote-tracking counterpart
(``refs/remotes/<remote>/<branch>``, loose or packed). Rewriting a shared branch's history
(``git rebase``) is asked about even inside the sandbox; a force push is always denied. Anything
unreadable counts as shared.
"""

from __future__ import annotations

import glob
import os

_CAP = 1 << 20
_DEFAULT = frozenset({"main", "master"})


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(_CAP).decode("utf-8", "replace")
    except OSError:
        return None


def git_dir(root: str) -> str | None:
    """The git directory of the work tree at ``root`` (a ``.git`` file is followed)."""
    path = os.path.join(root, ".git")
    if os.path.isdir(path):
        return path
    text = _read(path)
    if text is None or not text.startswith("gitdir:"):
        return None
    return os.path.normpath(os.path.join(root, text[len("gitdir:") :].strip()))


def _common_dir(gitdir: str) -> str:
    common = _read(os.path.join(gitdir, "commondir"))
    return os.path.normpath(os.path.join(gitdir, common.strip())) if common else gitdir


def current_branch(root: str) -> str | None:
    """The checked-out branch; ``""`` for a detached HEAD; ``None`` when it cannot be read."""
    gitdir = git_dir(root)
    head = _read(os.path.join(gitdir, "HEAD")) if gitdir else None
    if head is None:
        return None
    head = head.strip()
    if head.startswith("ref: refs/heads/"):
        return head[len("ref: refs/heads/") :]
    return "" if len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head) else None


def is_shared(root: str, branch: str) -> bool:
    """True if ``branch`` is the default branch or exists on a remote (see the module doc)."""
    name = branch.removeprefix("refs/heads/")
    if name in _DEFAULT:
        return True
    gitdir = git_dir(root)
    if gitdir is None:
        return True
    common = _common_dir(gitdir)
    remotes = os.path.join(common, "refs", "remotes")
    for head in glob.glob(os.path.join(glob.escape(remotes), "*", "HEAD")):
        text = (_read(head) or "").strip()
        if text.endswith(f"/{name}"):
            return True
    if glob.glob(os.path.join(glob.escape(remotes), "*", glob.escape(name))):
        return True
    packed = _read(os.path.join(common, "packed-refs")) or ""
    return any(
        line.split(" ", 1)[-1].startswith("refs/remotes/")
        and line.split(" ", 1)[-1].split("/", 3)[-1] == name
        for line in packed.splitlines()
        if not line.startswith(("#", "^"))
    )
