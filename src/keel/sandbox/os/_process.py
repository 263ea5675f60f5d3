"""Spawning a sandboxed process: capped output, a wall-clock timeout, killing the whole group.

Output is read through a selector with a byte cap so a process that prints gigabytes cannot
exhaust the host's memory; past the cap the pipes are drained and discarded. At the timeout,
and after a normal exit, the whole process group is killed; backends add their own cleanup
(bwrap: its pid namespace; Landlock: a ``sweep`` of ``/proc``) through ``after_exit``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from keel.core.errors import SandboxError

Stdin = bytes | int | None
"""Bytes to feed, an open file descriptor to inherit (e.g. a pty), or nothing (``/dev/null``)."""

ACTIVE: set[int] = set()
"""Pids of sandboxed processes whose ``Popen`` is still waiting for them: never reap these."""
PR_SET_CHILD_SUBREAPER = 36
SPAWN_LOCK = threading.Lock()
"""Held from ``Popen`` to registering its pid, and while reaping, so a reaper in another
thread never sees a fresh child that is not yet in ``ACTIVE`` (it would steal its status)."""
DRAIN_GRACE_SECONDS = 0.2
"""How long to keep reading after the main process exited, for output still in flight."""


@dataclass(frozen=True, slots=True)
class Completed:
    """A finished (or killed) process and what it printed."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration_ms: float
    truncated: bool


@dataclass(frozen=True, slots=True)
class Spawn:
    """How to start the process."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str | None = None
    user: int | None = None
    group: int | None = None
    pass_fds: tuple[int, ...] = ()
    preexec: Callable[[], None] | None = None


def run_process(
    spawn: Spawn,
    *,
    stdin: Stdin,
    timeout: float,
    max_output: int,
    after_exit: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> Completed:
    """Start ``spawn``, feed ``stdin``, collect capped output, kill the group at ``timeout``."""
    drop = spawn.user is not None
    stdin_arg: Any = subprocess.DEVNULL if stdin is None else stdin
    if isinstance(stdin, bytes):
        stdin_arg = subprocess.PIPE
    start = time.perf_counter()
    with SPAWN_LOCK:
        try:
            proc = subprocess.Popen(
                list(spawn.argv),
                stdin=stdin_arg,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(spawn.env),
                cwd=spawn.cwd,
                close_fds=True,
                pass_fds=spawn.pass_fds,
                start_new_session=True,
                user=spawn.user,
                group=spawn.group if drop else None,
                extra_groups=[] if drop else None,
                preexec_fn=spawn.preexec,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            argv0 = spawn.argv[0]
            raise SandboxError(
                f"cannot start {argv0!r}: {exc}", code="sandbox.spawn", argv0=argv0
            ) from exc
        ACTIVE.add(proc.pid)
    deadline = start + timeout
    try:
        out, err, timed_out, truncated = _communicate(
            proc, stdin if isinstance(stdin, bytes) else None, deadline, max_output
        )
        if not timed_out:
            try:
                proc.wait(max(deadline - time.perf_counter(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        _kill_group(proc)
        proc.wait()
        ACTIVE.discard(proc.pid)
        if after_exit is not None:
            after_exit(proc)
    duration = (time.perf_counter() - start) * 1000
    code = None if timed_out else proc.returncode
    return Completed(code, out, err, timed_out, duration, truncated)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _Collector:
    """Reads stdout and stderr and writes stdin without blocking; keeps ``cap`` bytes of each."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes | None, cap: int) -> None:
        self.proc = proc
        self.cap = cap
        self.truncated = False
        self.sel = selectors.DefaultSelector()
        self.buffers: dict[int, bytearray] = {}
        for pipe in (proc.stdout, proc.stderr):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe, selectors.EVENT_READ)
            self.buffers[pipe.fileno()] = bytearray()
        self.pending = memoryview(data or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            if self.pending:
                self.sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()

    def output(self, pipe: IO[bytes] | None) -> bytes:
        assert pipe is not None
        return bytes(self.buffers[pipe.fileno()])

    def step(self, wait: float) -> None:
        for key, _ in self.sel.select(wait):
            stream: IO[bytes] = key.fileobj  # pyright: ignore[reportAssignmentType]
            if stream is self.proc.stdin:
                self._write(stream)
            else:
                self._read(stream)

    def _read(self, stream: IO[bytes]) -> None:
        try:
            chunk = os.read(stream.fileno(), 65536)
        except BlockingIOError:
            return
        if not chunk:
            self.sel.unregister(stream)
            return
        buf = self.buffers[stream.fileno()]
        room = self.cap - len(buf)
        if len(chunk) > room:
            self.truncated = True
        buf += chunk[: max(room, 0)]

    def _write(self, stream: IO[bytes]) -> None:
        try:
            written = os.write(stream.fileno(), self.pending[:65536])
        except BlockingIOError:
            return
        except OSError:
            written = len(self.pending)
        self.pending = self.pending[written:]
        if not self.pending:
            self.sel.unregister(stream)
            with contextlib.suppress(OSError):
                stream.close()

    def close(self) -> None:
        self.sel.close()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _communicate(
    proc: subprocess.Popen[bytes], data: bytes | None, deadline: float, cap: int
) -> tuple[bytes, bytes, bool, bool]:
    io = _Collector(proc, data, cap)
    timed_out = False
    exited_at: float | None = None
    try:
        while io.sel.get_map():
            now = time.perf_counter()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            # A daemonised grandchild may hold the pipes open after the main process exits.
            if exited_at is not None and now - exited_at > DRAIN_GRACE_SECONDS:
                break
            io.step(min(deadline - now, 0.05 if exited_at is None else DRAIN_GRACE_SECONDS))
        return io.output(proc.stdout), io.output(proc.stderr), timed_out, io.truncated
    finally:
        io.close()


@functools.cache
def become_subreaper() -> bool:
    """Make this process the reaper of orphaned descendants (bwrap leaves its pid 1 behind)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def reap_orphans(uid: int) -> int:
    """Reap zombies of ``uid`` orphaned to this process (a subreaper); returns how many.

    Only zombies running as the sandbox uid, parented to us and not awaited by a live
    ``Popen`` of this module are touched. Code elsewhere in the process that starts its own
    children as the sandbox uid could lose an exit status; keel does not do that.
    """
    return sweep(uid, lambda _pid, _orphan: False)[1]


def sweep(
    uid: int, doomed: Callable[[int, bool], bool], killed_pids: set[int] | None = None
) -> tuple[int, int]:
    """One pass over ``/proc``: kill what ``doomed`` picks, reap our zombie orphans of ``uid``.

    Live processes of ``uid`` for which ``doomed(pid, orphan)`` is true get SIGKILL (their
    pids added to ``killed_pids``); zombies of ``uid`` parented to this process are reaped.
    Returns ``(killed, reaped)``. Runs under the spawn lock, so a child between ``fork`` and
    its registration in ``ACTIVE`` (still carrying keel's own environment) is never examined.
    """
    me = os.getpid()
    killed = reaped = 0
    with SPAWN_LOCK:
        for pid, ppid, state, owner in proc_table():
            if owner != uid or pid in ACTIVE:
                continue
            if state == "Z":
                if ppid == me:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, os.WNOHANG)
                        reaped += 1
            elif doomed(pid, ppid == me):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                    if killed_pids is not None:
                        killed_pids.add(pid)
    return killed, reaped


def still_here(pid: int) -> bool:
    """``pid`` is alive, exiting, or a zombie this process must reap (not one of another's)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return False
    fields = raw[raw.rindex(b")") + 2 :].split()
    return fields[0] != b"Z" or int(fields[1]) == os.getpid()


Sweep = Callable[[set[int]], tuple[int, int]]
"""One pass of :func:`kill_marked` for a run: kills (pids into the set) and reaps."""


def clear_marked(
    token: str,
    uid: int,
    seconds: float,
    *,
    sweep_once: Sweep | None = None,
    present: Callable[[int], bool] = still_here,
) -> bool:
    """Kill a run's leftovers and reap them until none is left, or ``seconds`` pass.

    A process SIGKILLed in one pass can still be exiting in the next: not yet a zombie to
    reap, its environment no longer readable, so that pass finds nothing to do. Stopping
    there left it to die afterwards as a zombie of ours nobody reaps (a fork bomb left 23,
    under load). So the sweep goes on while any process it killed is still here. True: nothing
    is left. ``sweep_once`` and ``present`` are seams for tests (default: ``kill_marked`` of
    ``token`` and ``uid``, ``/proc``).
    """
    one = sweep_once or (lambda into: kill_marked(token, uid, into))
    deadline = time.monotonic() + seconds
    killed_pids: set[int] = set()
    while True:
        killed, reaped = one(killed_pids)
        killed_pids = {pid for pid in killed_pids if present(pid)}
        if not (killed or reaped or killed_pids):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def proc_table() -> list[tuple[int, int, str, int]]:
    """``(pid, ppid, state, uid)`` of every process, from ``/proc``."""
    rows: list[tuple[int, int, str, int]] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            owner = entry.stat().st_uid
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        rows.append((int(entry.name), int(fields[1]), fields[0].decode(), owner))
    return rows


def kill_marked(token: str, uid: int, killed_pids: set[int] | None = None) -> tuple[int, int]:
    """SIGKILL this run's leftovers and reap zombie orphans; returns ``(killed, reaped)``.

    A leftover is a live process of ``uid`` carrying this run's marker, or an orphan of
    ``uid`` reparented to us (we are a subreaper) that carries no run marker at all: it
    cleared its environment to hide, and no live run owns it.
    """
    from keel.sandbox.os._landlock_abi import MARKER

    needle = f"{MARKER}={token}".encode()
    prefix = f"{MARKER}=".encode()

    def doomed(pid: int, orphan: bool) -> bool:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            return False
        return needle in env or (orphan and not any(e.startswith(prefix) for e in env))

    return sweep(uid, doomed, killed_pids)
