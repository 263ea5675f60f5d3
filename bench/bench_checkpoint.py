"""Checkpoint cost on a generated 5,000-file repository, next to ``git stash create``.

Method: a git repository of 5,000 files (200 directories x 25 files, 0.2-4 KiB each, one
commit). ``Checkpoints.create`` in process (as the guard calls it; it runs git subprocesses)
and ``git stash create`` as a subprocess on the same repository, interleaved call by call:
(a) nothing changed since the previous checkpoint / a clean work tree; (b) one file changed
before each call (a different content every round). The first checkpoint (the full snapshot
of the repository, streamed into one pack by ``git fast-import``) is timed separately, next to
the user's own ``git add -A && git commit`` of the same tree. Medians and p90 of ``rounds``
pairs. Note that ``git stash create`` ignores untracked files; a checkpoint includes them.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.workspace import Checkpoints

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


STATUS = ["status", "--porcelain=v1", "-z", "-unormal", "--no-renames", "--ignore-submodules=all"]


def make_repo(root: Path, dirs: int = 200, per_dir: int = 25) -> float:
    for d in range(dirs):
        sub = root / f"pkg{d:03d}"
        sub.mkdir(parents=True)
        for f in range(per_dir):
            size = 200 + ((d * per_dir + f) * 37) % 3900
            line = f"# module {d}/{f}\n"
            (sub / f"mod{f:02d}.py").write_text((line * (size // len(line) + 1))[:size])
    subprocess.run(["git", "init", "-q"], cwd=root, env=GIT_ENV, check=True)
    start = time.perf_counter()
    subprocess.run(["git", "add", "-A"], cwd=root, env=GIT_ENV, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "initial"], cwd=root, env=GIT_ENV, check=True)
    took = (time.perf_counter() - start) * 1000
    time.sleep(1.1)  # then refresh: no "racily clean" entries left to slow stash create down
    subprocess.run(["git", "update-index", "-q", "--really-refresh"], cwd=root, env=GIT_ENV)
    return took


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def stash_create(root: Path) -> None:
    subprocess.run(
        ["git", "stash", "create"], cwd=root, env=GIT_ENV, check=True, capture_output=True
    )


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    return f"median {statistics.median(values):6.1f} ms  p90 {p90:6.1f} ms"


def breakdown(cps: Checkpoints, root: Path, rounds: int) -> None:
    """Where a no-change checkpoint's time goes, next to what stash create checks."""
    parts: dict[str, list[float]] = {"status": [], "diff-files": [], "stash": []}
    for _ in range(rounds):
        parts["status"].append(timed(lambda: cps.git.proc(STATUS)))
        parts["diff-files"].append(timed(lambda: cps.git.proc(["diff-files", "--name-only"])))
        parts["stash"].append(timed(lambda: stash_create(root)))
    med = {k: statistics.median(v) for k, v in parts.items()}
    print(
        f"breakdown, nothing changed (medians): the shadow `git status -unormal` "
        f"{med['status']:.1f} ms, `git diff-files` (tracked files only) "
        f"{med['diff-files']:.1f} ms, `git stash create` {med['stash']:.1f} ms"
    )


def main(rounds: int = 50) -> None:
    base = Path(tempfile.mkdtemp(prefix="keel-bench-cp-"))
    root = base / "repo"
    try:
        user_add = make_repo(root)
        cps = Checkpoints(root)
        first = timed(lambda: cps.create(label="first"))
        print(f"5,000-file repository; first (full) checkpoint: {first:.0f} ms")
        print(f"(the user's own `git add -A && git commit` of the same tree: {user_add:.0f} ms)")
        print(f"git stash create, first call (cold): {timed(lambda: stash_create(root)):.0f} ms")
        commands: list[str] = []
        run_git = cps.git.proc

        def counted(args: list[str], **kw: Any) -> Any:
            commands.append(args[0])
            return run_git(args, **kw)

        cps.git.proc = counted  # type: ignore[method-assign]
        for name, change in (("nothing changed", False), ("1 file changed", True)):
            commands.clear()
            keel_ms: list[float] = []
            stash_ms: list[float] = []
            for i in range(rounds):
                if change:
                    (root / "pkg007" / "mod03.py").write_text(f"# round {i}\n")
                keel_ms.append(timed(lambda: cps.create(session_id="bench", tool_use_id="t")))
                stash_ms.append(timed(lambda: stash_create(root)))
            ratio = statistics.median(keel_ms) / statistics.median(stash_ms)
            print(f"{name:16s} keel checkpoint  {summary(keel_ms)}")
            print(f"{name:16s} git stash create {summary(stash_ms)}   ratio {ratio:.2f}x")
            counts = {c: commands.count(c) for c in sorted(set(commands))}
            print(f"{name:16s} git processes over {rounds} checkpoints: {counts}")
            if not change:
                breakdown(cps, root, rounds)
        history = cps.history()
        reused = sum(1 for c in history if c.reused)
        print(f"{len(history)} checkpoints, {reused} reused the previous tree")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
