"""Keeping a per-user hook registration out of git: ``.git/info/exclude``, never ``.gitignore``.

A per-user registration names this machine's interpreter by absolute path; committed, it would
reach a teammate whose machine has no such path, and every one of their tool calls would be
blocked. ``keel init`` therefore lists the file it wrote in the repository's own, uncommitted
exclude file (``info/exclude``), one anchored line (``/sub/.gemini/settings.json``), added once,
and ``keel init --remove`` takes out exactly the line it added. ``.gitignore`` is the team's
file and stays as it is.

The repository is found as git finds it: the nearest ``.git`` at or above the workspace, a
directory, or a file naming the git directory (``gitdir:``, a worktree or a submodule), whose
``commondir`` holds the exclude file every worktree shares. Finding it only reads those small
files; whether git tracks a file (``tracked``) runs git the way ``keel.core.gitsafe`` runs it
over the user's repository: through a private git directory that takes nothing from the
repository's config (the agent may have written it).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from keel.core.files import write_atomic
from keel.core.root import GIT_MARKER

GIT_TIMEOUT = 10.0
"""Seconds one git process (``ls-files``) may take before ``tracked`` gives up (None)."""


@dataclass(frozen=True, slots=True)
class Repository:
    """The git repository a workspace lies in."""

    top: Path
    """The work tree's top directory (holding ``.git``)."""
    dot_git: Path
    """``top/.git`` itself (a directory, or a file naming the git directory)."""
    exclude: Path
    """``info/exclude`` of the repository's common git directory."""


def repository(root: Path) -> Repository | None:
    """The repository ``root`` lies in (``root`` or an ancestor holds ``.git``), or None."""
    here = Path(os.path.realpath(root))
    for top in (here, *here.parents):
        dot_git = top / GIT_MARKER
        if dot_git.is_dir():
            return Repository(top, dot_git, dot_git / "info" / "exclude")
        if dot_git.is_file():
            common = _common_dir(dot_git)
            return None if common is None else Repository(top, dot_git, common / "info" / "exclude")
    return None


def _common_dir(dot_git: Path) -> Path | None:
    """The common git directory a ``.git`` file leads to (``gitdir:``, then ``commondir``)."""
    try:
        first = dot_git.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    git_dir = dot_git.parent / first.partition(":")[2].strip()
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return git_dir if git_dir.is_dir() else None
    except (OSError, UnicodeDecodeError):
        return None
    return git_dir / common


def pattern(repo: Repository, path: Path) -> str:
    """The exclude line that matches exactly ``path`` (inside ``repo``): anchored, escaped."""
    rel = Path(os.path.realpath(path)).relative_to(repo.top).as_posix()
    escaped = re.sub(r"([\\*?\[])", r"\\\1", rel)
    if escaped.endswith(" "):  # git drops trailing blanks unless escaped
        escaped = escaped[:-1] + "\\ "
    return "/" + escaped


def listed(exclude: Path, line: str) -> bool:
    """True when ``exclude`` holds ``line`` (as a whole line)."""
    return line.encode() in _lines(exclude)


def add(exclude: Path, line: str) -> bool:
    """Append ``line`` to ``exclude`` unless it is there; True when it was added.

    Raises:
        OSError: the file could not be written (it is left as it was).
    """
    if listed(exclude, line):
        return False
    raw = exclude.read_bytes() if exclude.is_file() else b""
    sep = b"" if not raw or raw.endswith(b"\n") else b"\n"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(exclude, raw + sep + line.encode() + b"\n", mode=_mode(exclude))
    return True


def remove(exclude: Path, line: str) -> bool:
    """Take ``line`` out of ``exclude`` (every copy), the rest byte for byte; True if it was there.

    Raises:
        OSError: the file could not be written (it is left as it was).
    """
    if not listed(exclude, line):
        return False
    raw = exclude.read_bytes()
    kept = [part for part in raw.split(b"\n") if part.rstrip(b"\r") != line.encode()]
    write_atomic(exclude, b"\n".join(kept), mode=_mode(exclude))
    return True


def tracked(repo: Repository, path: Path) -> bool | None:
    """True when git tracks ``path``; None when that cannot be told (no git, a worktree).

    Only a plain ``.git`` directory is read (``keel.core.gitsafe`` follows no indirection).
    """
    from keel.core.errors import WorkspaceError
    from keel.core.gitsafe import borrowed_git_dir, environment, git_executable

    git = git_executable(str(repo.top))
    if git is None or not repo.dot_git.is_dir():
        return None
    rel = Path(os.path.realpath(path)).relative_to(repo.top).as_posix()
    argv = [git, "--literal-pathspecs", "ls-files", "--error-unmatch", "--", rel]
    try:
        with borrowed_git_dir(str(repo.dot_git), git) as overlay:
            env = environment(git_dir=overlay, work_tree=str(repo.top))
            done = subprocess.run(
                argv, cwd=repo.top, env=env, capture_output=True, timeout=GIT_TIMEOUT, check=False
            )
    except (WorkspaceError, OSError, subprocess.TimeoutExpired):
        return None
    return {0: True, 1: False}.get(done.returncode)


def _lines(path: Path) -> set[bytes]:
    try:
        raw = path.read_bytes()
    except OSError:
        return set()
    return {part.rstrip(b"\r") for part in raw.split(b"\n")}


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o644
