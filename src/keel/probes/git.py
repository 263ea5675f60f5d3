"""Git probes: branch, cleanliness, tracked and changed files.

git runs with hooks, fsmonitor and optional locks off, a clean environment and a timeout, so a
hostile repository configuration cannot make a probe run code or wait forever.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from keel.probes._fs import ProbeContext, contain, relative
from keel.probes._result import Failure

_SAFE = (
    "-c", "safe.directory=*",
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.untrackedCache=false",
    "--no-optional-locks",
)  # fmt: skip


def _git(ctx: ProbeContext, *args: str) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("git")
    if exe is None:
        raise Failure("git.unavailable", "git is not installed")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "HOME": "/nonexistent",
        "LC_ALL": "C",
    }
    try:
        done = subprocess.run(
            [exe, *_SAFE, "-C", str(ctx.workspace), *args],
            capture_output=True,
            env=env,
            timeout=max(1.0, ctx.timeout - 0.5),
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
    done = _git(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all")
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
