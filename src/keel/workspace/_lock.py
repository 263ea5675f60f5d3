"""The checkpoint store's lock: one keel process at a time, a bounded wait, stale git locks.

Every keel operation on the shadow repository holds an exclusive ``flock`` on
``.keel/checkpoints/keel.lock`` and hands that descriptor to the git processes it starts
(``ShadowGit.lock_fd``), so the flock stays held while any of them runs, even when keel
itself is killed. Whoever holds the flock therefore knows that no keel git process is alive:
a git lock file it finds (``keel-index.lock``, ``HEAD.lock``, ``refs/keel/head.lock``, ...)
was left by a process that died, and ``recover`` removes it and records that
(``LockRecovery``, kept in ``keel-recovered.json`` for ``keel status``).

The holder writes who it is (pid, ``/proc`` start time, command) into ``keel.lock``, so a
waiter that gives up at its deadline can name it: "held by pid 1234 (keel hookd, stopped)".

Standard library only: this runs on the hook path.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from keel.core.daemon import process_stat
from keel.core.errors import WorkspaceError
from keel.core.files import write_atomic

LOCK_NAME = "keel.lock"
RECOVERY_FILE = "keel-recovered.json"
_TEMP_LEFTOVER = re.compile(r"keel-.*\.\d+\.[0-9a-f]{6}")
"""keel's own temporary files in the repository (``keel-ref.<pid>.<hex>``, ...)."""
_FIRST_PAUSE = 0.002
_MAX_PAUSE = 0.05
_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "waiting on I/O",
    "T": "stopped",
    "t": "stopped by a debugger",
    "Z": "exited",
    "X": "exited",
    "I": "idle",
}


@dataclass(frozen=True, slots=True)
class LockHolder:
    """The process that holds the checkpoint store, as it described itself."""

    pid: int
    command: str | None = None
    """What it is, e.g. ``keel hookd``."""
    state: str | None = None
    """From ``/proc/<pid>/stat``: ``running``, ``sleeping``, ``stopped``...; None if unknown."""
    alive: bool = True
    """False when the pid is gone (a git process it started may still hold the lock)."""
    since: float | None = None
    """When it took the lock (epoch seconds)."""

    @property
    def stopped(self) -> bool:
        """True when the holder is stopped (SIGSTOP, ctrl-Z, a debugger)."""
        return self.alive and self.state is not None and self.state.startswith("stopped")

    def describe(self) -> str:
        """``pid 1234 (keel hookd, stopped)``, or what is known."""
        if not self.alive:
            return f"a git process started by pid {self.pid}, which has exited"
        detail = ", ".join(x for x in (self.command, self.state) if x)
        return f"pid {self.pid} ({detail})" if detail else f"pid {self.pid}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LockRecovery:
    """A stale git lock file keel removed from the shadow repository."""

    lock: str
    """Its path in the shadow repository, e.g. ``keel-index.lock``."""
    age_seconds: float
    """How old it was when removed (from its mtime)."""
    mtime: float
    recovered_at: float
    pid: int
    """The keel process that removed it."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockRecovery:
        """Rebuild one from ``to_dict`` output; bad input raises ``ValueError``."""
        try:
            return cls(
                lock=str(data["lock"]),
                age_seconds=float(data["age_seconds"]),
                mtime=float(data["mtime"]),
                recovered_at=float(data["recovered_at"]),
                pid=int(data["pid"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a lock recovery: {exc}") from exc


# -- the flock --------------------------------------------------------------------------------


def acquire(path: Path, deadline: float | None = None) -> int:
    """Take the flock on ``path`` and write who holds it; return the descriptor.

    Without ``deadline`` this waits as long as it takes. With one (a ``time.monotonic()``
    instant) it polls until then and raises ``WorkspaceError`` ``workspace.locked`` naming
    the holder. ``OSError`` passes through.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if deadline is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            _poll(fd, path, deadline)
        _write_holder(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int) -> None:
    """Forget the holder and drop the flock."""
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass  # the flock goes with the descriptor either way
    finally:
        os.close(fd)


def _poll(fd: int, path: Path, deadline: float) -> None:
    pause = _FIRST_PAUSE
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise locked_error(path)
        time.sleep(min(pause, left))
        pause = min(pause * 2, _MAX_PAUSE)


@contextmanager
def idle(path: Path) -> Iterator[bool]:
    """Whether nobody holds the flock on ``path``; if so, keep it so (shared) for the block.

    A probe for readers: it never waits, and a keel process that wants the lock meanwhile
    waits only until the block ends.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def locked_error(path: Path) -> WorkspaceError:
    """The ``workspace.locked`` error for a wait on ``path`` that ran out, naming the holder."""
    holder = read_holder(path)
    who = holder.describe() if holder else "another keel process"
    message = f"the checkpoint store is held by {who}; gave up waiting for it"
    if holder is not None and holder.stopped:
        message += f" (resume it with `kill -CONT {holder.pid}`, or end it)"
    return WorkspaceError(
        message,
        code="workspace.locked",
        lock=str(path),
        holder=holder.to_dict() if holder else None,
    )


def read_holder(path: Path) -> LockHolder | None:
    """Who wrote ``path`` last, checked against ``/proc``; None if it says nothing usable."""
    try:
        info = json.loads(path.read_bytes())
        pid = int(info["pid"])
        start = info.get("start")
        command = info.get("command")
        since = info.get("since")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    alive, state = _process(pid, start if isinstance(start, int) else None)
    return LockHolder(
        pid=pid,
        command=str(command) if command else None,
        state=state,
        alive=alive,
        since=float(since) if isinstance(since, int | float) else None,
    )


def _write_holder(fd: int) -> None:
    pid = os.getpid()
    info = {"pid": pid, "start": _proc_stat(pid)[1], "command": _command(), "since": time.time()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)


def _command() -> str:
    """A short name for this process: ``keel hookd``, ``pytest``, ``python``."""
    argv = sys.argv
    if not argv or argv[0] in ("", "-c"):
        return "python"
    name = os.path.basename(argv[0])
    if name == "__main__.py":
        name = os.path.basename(os.path.dirname(argv[0]))
    if len(argv) > 1 and not argv[1].startswith("-"):
        name = f"{name} {argv[1]}"
    return name[:80]


def _process(pid: int, start: int | None) -> tuple[bool, str | None]:
    """Whether ``pid`` is still the process that wrote the lock, and its state."""
    letter, started = _proc_stat(pid)
    if letter is None:
        if os.path.isdir("/proc"):
            return False, None
        try:  # no /proc (macOS): existence is all there is to know
            os.kill(pid, 0)
        except ProcessLookupError:
            return False, None
        except PermissionError:
            pass
        return True, None
    if start is not None and started is not None and start != started:
        return False, None  # the pid was reused
    state = _STATES.get(letter, letter)
    return state != "exited", state


def _proc_stat(pid: int) -> tuple[str | None, int | None]:
    """The state letter and start time (clock ticks after boot) of ``pid``, from ``/proc``."""
    fields = process_stat(pid)
    try:
        return (fields[0].decode("ascii", "replace"), int(fields[19])) if fields else (None, None)
    except (ValueError, IndexError):
        return None, None


# -- stale git locks --------------------------------------------------------------------------


def git_locks(git_dir: Path) -> list[Path]:
    """The git lock files in the shadow repository (top level and under ``refs/``)."""
    return _scan(git_dir)[0]


def _scan(git_dir: Path) -> tuple[list[Path], list[Path]]:
    """The git lock files, and keel's temporary files (``keel-ref.<pid>.<hex>``, ...)."""
    locks: list[Path] = []
    temps: list[Path] = []
    with os.scandir(git_dir) as entries:
        for entry in entries:
            name = entry.name
            if name.endswith(".lock") and name != LOCK_NAME:
                if not entry.is_dir(follow_symlinks=False):
                    locks.append(Path(entry.path))
            elif _TEMP_LEFTOVER.fullmatch(name):
                temps.append(Path(entry.path))
    for folder, _dirs, files in os.walk(git_dir / "refs"):
        locks.extend(Path(folder, name) for name in files if name.endswith(".lock"))
    return sorted(locks), temps


def recover(git_dir: Path) -> tuple[LockRecovery, ...]:
    """Remove the git locks and temporary files dead processes left; call with the flock held.

    Each lock removed is returned and saved in ``keel-recovered.json``. ``OSError`` (a lock
    that cannot be removed) passes through: the git command after it would fail anyway.
    """
    locks, temps = _scan(git_dir)
    for temp in temps:
        with suppress(OSError):  # half-written by a process killed mid-write
            temp.unlink()
    now = time.time()
    done: list[LockRecovery] = []
    for path in locks:
        try:
            mtime = path.lstat().st_mtime
            path.unlink()
        except FileNotFoundError:
            continue
        lock = path.relative_to(git_dir).as_posix()
        age = round(max(0.0, now - mtime), 3)
        done.append(LockRecovery(lock, age, mtime, now, os.getpid()))
    if done:
        _save_recoveries(git_dir, done)
    return tuple(done)


def last_recoveries(git_dir: Path) -> tuple[LockRecovery, ...]:
    """The locks removed by the latest recovery (from ``keel-recovered.json``), if any."""
    try:
        data = json.loads((git_dir / RECOVERY_FILE).read_bytes())
        return tuple(LockRecovery.from_dict(r) for r in data["recoveries"])
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def _save_recoveries(git_dir: Path, done: list[LockRecovery]) -> None:
    body = json.dumps({"v": 1, "recoveries": [r.to_dict() for r in done]}, sort_keys=True)
    write_atomic(git_dir / RECOVERY_FILE, body + "\n", prefix="keel-recovered")
