"""Git probes: branch, cleanliness, tracked and changed files.

The workspace's repository is the agent's to write, so git reads it the way ``keel.core.gitsafe``
says: through a private ``GIT_DIR`` that links to the repository's refs, objects and index but
holds none of its config (no fsmonitor, filter, textconv, include or hook of theirs can run),
with hooks, fsmonitor and optional locks off, submodules never entered, a clean environment and
a timeout. Only ``<workspace>/.git`` is read, never a repository above the workspace (the
sandbox cannot see one either), and a repository reached through an indirection (a ``.git``
file, ``commondir``, ``objects/info/alternates``, a symlink) is the failure ``git.indirect``.
"""

from __future__ import annotations

import os
import subprocess

from keel.core import gitsafe
from keel.core.errors import WorkspaceError
from keel.probes._fs import ProbeContext, contain, relative
from keel.probes._result import Failure

_CONFIG = (
    ("safe.directory", "*"),  # the sandbox uid does not own the workspace
    ("core.untrackedCache", "false"),
)
_SUBMODULES = "--ignore-submodules=dirty"
"""Moved submodules are reported; a dirty one would need a git started inside it."""


def _git(ctx: ProbeContext, *args: str) -> subprocess.CompletedProcess[bytes]:
    workspace = str(ctx.workspace)
    exe = gitsafe.git_executable(workspace)
    if exe is None:
        raise Failure("git.unavailable", "git is not installed")
    dot_git = os.path.join(workspace, ".git")
    if not os.path.lexists(dot_git):
        raise Failure("git.not_a_repo", "the workspace is not a git repository")
    budget = max(1.0, ctx.timeout - 0.5)
    try:
        with gitsafe.borrowed_git_dir(dot_git, exe, timeout=budget) as git_dir:
            return _run(ctx, exe, git_dir, args, budget)
    except WorkspaceError as exc:
        codes = {gitsafe.CODE_INDIRECT: "git.indirect", gitsafe.CODE_NOT_A_REPO: "git.not_a_repo"}
        raise Failure(codes.get(exc.code, "git.error"), exc.message) from exc


def _run(
    ctx: ProbeContext, exe: str, git_dir: str, args: tuple[str, ...], timeout: float
) -> subprocess.CompletedProcess[bytes]:
    base = {"PATH": os.environ.get("PATH", os.defpath), "HOME": "/nonexistent"}
    env = gitsafe.environment(
        git_dir=git_dir, work_tree=str(ctx.workspace), config=_CONFIG, base=base
    )
    env["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        done = subprocess.run(
            [exe, *args],
            capture_output=True,
            cwd=ctx.workspace,
            env=env,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise Failure("git.timeout", f"git {args[0]} took too long") from exc
    except OSError as exc:
        raise Failure("git.unavailable", f"git cannot run: {exc.strerror}") from exc
    if done.returncode != 0 and b"not a git repository" in done.stderr:
        raise Failure("git.not_a_repo", "the workspace is not a git repository")
    return done


def _text(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode("utf-8", "replace").strip()


def branch(ctx: ProbeContext) -> str | None:
    """The current branch, or null when HEAD is detached or unborn."""
    done = _git(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
    return _text(done) or None if done.returncode == 0 else None


def changed_files(ctx: ProbeContext) -> list[str]:
    """Paths with staged, unstaged or untracked changes."""
    done = _git(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all", _SUBMODULES)
    if done.returncode != 0:
        raise Failure("git.error", done.stderr.decode("utf-8", "replace").strip()[:500])
    entries = done.stdout.decode("utf-8", "replace").split("\0")
    paths: list[str] = []
    skip = False
    for entry in entries:
        if skip:
            skip = False
            continue
        if len(entry) > 3:
            paths.append(entry[3:])
            skip = entry[0] in "RC"
    return sorted(set(paths))


def is_clean(ctx: ProbeContext) -> bool:
    """Whether the work tree has no changes (untracked files count)."""
    return not changed_files(ctx)


def tracked(ctx: ProbeContext, path: str) -> bool:
    """Whether ``path`` is tracked by git."""
    rel = relative(ctx, contain(ctx, path))
    done = _git(ctx, "ls-files", "--error-unmatch", "--", rel)
    return done.returncode == 0
