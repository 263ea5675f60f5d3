"""``BwrapProcess`` in-process: spawn, status pipe, init pidfd, wait, kill, finish, close.

The class is the bwrap process of ``keel exec``: these tests pin what it hands the spawned
process (descriptors, signal dispositions and mask), how it reads bwrap's JSON status, and
the descriptors and timeouts it waits on. A real bwrap runs one command end to end; the
other cases spawn ``/bin/sh``, ``/bin/sleep`` or a Python reporter directly (the class spawns
any argv) and feed the status pipe by hand, so every byte it reads is known. Timeouts are
pinned through a recording wrapper around the real ``select.poll``.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from keel.sandbox.exec import _bwrap as eb

ENV = {"PATH": "/usr/bin:/bin"}
SLEEP = ("/bin/sleep", "60")  # long-lived: every test kills it long before it ends


def _spawn(argv: list[str], status_read: int, env_fds: tuple[int, ...] = ()) -> eb.BwrapProcess:
    return eb.BwrapProcess(argv, ENV, list(env_fds), status_read)


def _exited(proc: eb.BwrapProcess) -> None:
    """Block until the spawned process has exited (its pidfd is readable); do not reap it."""
    poller = select.poll()
    poller.register(proc.pidfd, select.POLLIN)
    poller.poll(-1)


def _pidfd_pid(fd: int) -> int:
    for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
        if line.startswith("Pid:"):
            return int(line.split()[1])
    raise AssertionError(f"fd {fd} is not a pidfd")


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


class _SpyPoll:
    """A real ``select.poll`` that records what it is asked (registrations and timeouts)."""

    def __init__(self, log: list[tuple[object, ...]]) -> None:
        self.real = select.poll()
        self.log = log

    def register(self, *args: int) -> None:
        self.log.append(("register", *args))
        self.real.register(*args)

    def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
        self.log.append(("poll", timeout))
        return self.real.poll(timeout)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    log: list[tuple[object, ...]] = []
    fake = SimpleNamespace(poll=lambda: _SpyPoll(log), POLLIN=select.POLLIN)
    monkeypatch.setattr(eb, "select", fake)
    return log


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for the pid namespace's init (``kill`` may SIGKILL it)."""
    child = subprocess.Popen(SLEEP)
    yield child
    child.kill()
    child.wait()


@pytest.fixture
def status() -> Iterator[tuple[int, int]]:
    """A status pipe: the test writes bwrap's JSON, the process under test reads it."""
    r, w = os.pipe()
    pipe = os.fstat(r).st_ino
    yield r, w
    for fd in (r, w):  # the ones neither the test nor ``close`` closed (never a reused number)
        try:
            same = os.fstat(fd).st_ino == pipe
        except OSError:
            continue
        if same:
            os.close(fd)


# --- _parse: bwrap's JSON status, by hand -------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{ "child-pid": 12 }', {"child-pid": 12}),
        (b'{"child-pid":12}', {"child-pid": 12}),
        (
            b'{ "child-pid": 12, "pid-namespace": 4026532472 }\n{ "exit-code": 3 }\n',
            {"child-pid": 12, "pid-namespace": 4026532472, "exit-code": 3},
        ),
        # the first value of a key is bwrap's own: a later one never replaces it
        (b'{ "exit-code": 0 }{ "exit-code": 7 }', {"exit-code": 0}),
        (b'{ "exit-code": -1 }', {"exit-code": -1}),
        (b'{ "Xid": 4, "exit-code": 1 }', {"Xid": 4, "exit-code": 1}),
        # not integers, or not one field: ignored, never half-parsed
        (b'{ "exit-code": "x", "child-pid": 5 }', {"child-pid": 5}),
        (b'{ "a": X1, "b": 1-, "c": 1:2, "d": 2 }', {"d": 2}),
        (b'{ 7, "e": }', {}),
        (b'"child-pid": 12 }', {}),
        (b"", {}),
    ],
)
def test_parse_status(data: bytes, expected: dict[str, int]) -> None:
    proc = eb.BwrapProcess.__new__(eb.BwrapProcess)
    proc.status = {}
    proc._parse(data)  # pyright: ignore[reportPrivateUsage]
    assert proc.status == expected


# --- read_child_pid -------------------------------------------------------------------------


def test_read_child_pid_opens_the_init_pidfd(
    status: tuple[int, int], sleeper: subprocess.Popen[bytes]
) -> None:
    r, w = status
    me = sleeper.pid
    os.write(w, b'{ "child-pid": %d, "pid-namespace": 9 }\n' % me)
    os.close(w)
    proc = _spawn(["/bin/true"], r)
    try:
        assert proc.read_child_pid() == me
        assert proc.init_pid == me
        assert proc.init_fd is not None
        assert _pidfd_pid(proc.init_fd) == me
        assert proc.status == {"child-pid": me, "pid-namespace": 9}
    finally:
        proc.kill()
        proc.wait(60.0)
        proc.close()


def test_read_child_pid_gone_init_is_none(status: tuple[int, int]) -> None:
    r, w = status
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    os.write(w, b'{ "child-pid": %d }' % (pid_max + 1))
    os.close(w)
    proc = _spawn(["/bin/true"], r)
    try:
        assert proc.read_child_pid() is None
        assert proc.init_pid is None
        assert proc.init_fd is None
        assert proc.status == {"child-pid": pid_max + 1}
    finally:
        proc.wait(60.0)
        proc.close()


def test_read_child_pid_parses_a_cut_status(
    status: tuple[int, int], sleeper: subprocess.Popen[bytes]
) -> None:
    """bwrap gone mid-write: what came before the end of the pipe still counts."""
    r, w = status
    os.write(w, b'{ "child-pid": %d, "pid-namespace": 9' % sleeper.pid)
    os.close(w)
    proc = _spawn(["/bin/true"], r)
    try:
        assert proc.read_child_pid() == sleeper.pid
        assert proc.status == {"child-pid": sleeper.pid, "pid-namespace": 9}
    finally:
        proc.kill()
        proc.wait(60.0)
        proc.close()


def test_read_child_pid_eof_without_status(status: tuple[int, int]) -> None:
    r, w = status
    os.close(w)
    proc = _spawn(["/bin/true"], r)
    try:
        assert proc.read_child_pid() is None
        assert (proc.status, proc.init_fd) == ({}, None)
    finally:
        proc.wait(60.0)
        proc.close()


def test_read_child_pid_reads_until_the_first_object_ends(
    status: tuple[int, int], sleeper: subprocess.Popen[bytes]
) -> None:
    """Reads of 4096 bytes, kept together, until a ``}``; nothing after that read."""
    r, w = status
    me = sleeper.pid
    first = b'{ "child-pid": %d, ' % me
    first += b" " * (4096 - len(first))  # the first read: no "}" in it yet
    second = b'"a": 5 }'
    second += b" " * (4096 - len(second) - len(b'{ "b": 1')) + b'{ "b": 1'  # ends at 8192
    rest = b'2 }{ "exit-code": 0 }'
    os.write(w, first + second + rest)
    os.close(w)
    proc = _spawn(["/bin/true"], r)
    try:
        assert proc.read_child_pid() == me
        assert proc.status == {"child-pid": me, "a": 5, "b": 1}
        assert os.read(r, 100) == rest  # what the command could write later is left unread
    finally:
        proc.kill()
        proc.wait(60.0)
        proc.close()


# --- wait, kill ---------------------------------------------------------------------------


def test_wait_returns_the_status_and_keeps_it(status: tuple[int, int]) -> None:
    proc = _spawn(["/bin/sh", "-c", "exit 3"], status[0])
    _exited(proc)
    try:
        assert proc.wait(0) == 3 << 8
        assert proc.reaped == 3 << 8
        assert proc.wait(0) == 3 << 8  # reaped once; never waited for again
    finally:
        proc.close()


@pytest.mark.parametrize(("timeout", "ms"), [(0.5, 500.0), (2.5, 2500.0), (-2.0, 0)])
def test_wait_polls_the_pidfd_for_the_timeout(
    spy: list[tuple[object, ...]], status: tuple[int, int], timeout: float, ms: float
) -> None:
    proc = _spawn(["/bin/true"], status[0])
    _exited(proc)
    try:
        assert proc.wait(timeout) == 0
        assert spy == [("register", proc.pidfd, select.POLLIN), ("poll", ms)]
    finally:
        proc.close()


def test_wait_polls_pidfd_not_another_ready_fd(status: tuple[int, int]) -> None:
    """Only the pidfd's readiness counts: fd 1 made never-ready changes nothing."""
    proc = _spawn(["/bin/sh", "-c", "exit 4"], status[0])
    _exited(proc)
    r, w = os.pipe()
    saved = os.dup(1)
    os.dup2(r, 1)  # an empty pipe's read end: never ready
    try:
        got = proc.wait(0)
    finally:
        os.dup2(saved, 1)
        for fd in (saved, r, w):
            os.close(fd)
        proc.close()
    assert got == 4 << 8


def test_wait_times_out_then_kill_ends_it(status: tuple[int, int]) -> None:
    proc = _spawn(list(SLEEP), status[0])
    try:
        assert proc.wait(0) is None
        assert proc.reaped is None
        proc.kill()
        got = proc.wait(60.0)
        assert got is not None
        assert os.WIFSIGNALED(got)
        assert os.WTERMSIG(got) == signal.SIGKILL
    finally:
        proc.kill()
        proc.wait(60.0)
        proc.close()


def test_kill_signals_bwrap_and_the_init(status: tuple[int, int]) -> None:
    init = subprocess.Popen(SLEEP)
    proc = _spawn(list(SLEEP), status[0])
    try:
        proc.init_fd = os.pidfd_open(init.pid)
        proc.kill()
        assert init.wait() == -signal.SIGKILL
        got = proc.wait(60.0)
        assert got is not None
        assert os.WTERMSIG(got) == signal.SIGKILL
        proc.kill()  # both gone: no error
    finally:
        init.kill()
        init.wait()
        proc.kill()
        proc.wait(60.0)
        proc.close()


# --- finish, close ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "started"),
    [
        (b'{ "exit-code": 0 }\n', True),
        (b'{ "exit-code": 12 }\n', True),
        (b'{ "child-pid": 5 }\n', False),
        (b"", False),
    ],
)
def test_finish_drains_the_status(status: tuple[int, int], data: bytes, started: bool) -> None:
    r, w = status
    proc = _spawn(["/bin/true"], r)
    os.write(w, data)
    os.close(w)
    try:
        assert proc.finish() is started
        assert proc.wait(60.0) == 0
    finally:
        proc.close()


def test_finish_waits_on_an_exited_init(
    spy: list[tuple[object, ...]], status: tuple[int, int]
) -> None:
    r, w = status
    init = subprocess.Popen(["/bin/true"])
    init_fd = os.pidfd_open(init.pid)
    init.wait()
    proc = _spawn(["/bin/true"], r)
    proc.init_fd = init_fd
    os.write(w, b'{ "exit-code": 0 }')
    os.close(w)
    try:
        assert proc.finish() is True
        assert spy == [("register", init_fd, select.POLLIN), ("poll", 5000.0)]
    finally:
        spy.clear()
        proc.wait(60.0)
        proc.close()


def test_finish_kills_an_init_left_running(
    spy: list[tuple[object, ...]], status: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The init still there after the teardown wait is SIGKILLed, then waited for again."""
    monkeypatch.setattr(eb, "TEARDOWN_SECONDS", 0.05)  # sleep 60 outlives 50 ms
    r, w = status
    init = subprocess.Popen(SLEEP)
    proc = _spawn(["/bin/true"], r)
    proc.init_fd = os.pidfd_open(init.pid)
    os.close(w)
    try:
        assert proc.finish() is False
        assert spy == [("register", proc.init_fd, select.POLLIN), ("poll", 50.0), ("poll", 50.0)]
        assert init.wait() == -signal.SIGKILL
    finally:
        init.kill()
        init.wait()
        proc.wait(60.0)
        proc.close()


def test_close_releases_every_descriptor(
    status: tuple[int, int], sleeper: subprocess.Popen[bytes]
) -> None:
    r, _ = status
    proc = _spawn(["/bin/true"], r)
    init_fd = os.pidfd_open(sleeper.pid)
    proc.init_fd = init_fd
    fds = (proc.pidfd, init_fd, r)
    proc.wait(60.0)
    proc.close()
    assert [_closed(fd) for fd in fds] == [True, True, True]
    proc.close()  # twice: no error


# --- __init__: what the spawned process gets -----------------------------------------------

_REPORT = """
import os
def is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
fds = " ".join(str(fd) for fd in range(1024) if is_open(fd))
with open("/proc/self/status") as f:
    status = f.read()
os.write(REPORT_FD, (fds + "\\n" + status).encode())
"""
"""A Python child's report: its open descriptors, then its ``/proc/self/status``."""


def _report(status_read: int) -> tuple[list[int], dict[str, str], int]:
    """Spawn the reporter; its descriptors, its status fields and the pipe's write end."""
    r, w = os.pipe()
    os.dup2(w, 101, inheritable=False)  # not inheritable: __init__ makes the env fds so
    os.close(w)
    code = _REPORT.replace("REPORT_FD", "101")
    proc = _spawn([sys.executable, "-I", "-S", "-c", code], status_read, (101,))
    try:
        inheritable = os.get_inheritable(101)
        assert proc.wait(60.0) == 0
        os.close(101)
        out = eb._drain(r).decode()  # pyright: ignore[reportPrivateUsage]
    finally:
        proc.close()
        os.close(r)
    assert inheritable
    first, _, rest = out.partition("\n")
    fields = dict(line.split(":\t", 1) for line in rest.splitlines() if line.startswith("Sig"))
    return [int(fd) for fd in first.split()], fields, 101


def test_spawn_passes_only_stdio_and_env_fds(status: tuple[int, int]) -> None:
    """Inherited descriptors never reach the command; the env fds do."""
    stray = os.open("/dev/null", os.O_RDONLY)
    os.dup2(stray, 100)  # a descriptor keel exec inherited from its caller (inheritable)
    os.close(stray)
    try:
        fds, _, w = _report(status[0])
    finally:
        os.close(100)
    stdio = [fd for fd in (0, 1, 2) if not _closed(fd)]
    assert fds == [*stdio, w]


def test_spawn_resets_signals(status: tuple[int, int]) -> None:
    """Signals keel exec ignores or blocks are neither in the command."""
    sigs = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        _, fields, _ = _report(status[0])
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert fields["SigBlk"] == "0" * 16
    ignored = int(fields["SigIgn"], 16)
    # Python ignores SIGPIPE and SIGXFSZ itself at startup; it leaves the others as it finds them
    assert [sig for sig in sigs[2:] if ignored & 1 << (sig - 1)] == []


def test_spawn_runs_argv_zero(status: tuple[int, int]) -> None:
    proc = _spawn(["/bin/sh", "-c", "exit 5", "ignored"], status[0])
    try:
        assert proc.wait(60.0) == 5 << 8
    finally:
        proc.close()


# --- a real bwrap, end to end ---------------------------------------------------------------


def _bwrap_argv(binary: str, status_fd: int, command: list[str]) -> list[str]:
    system = ["--ro-bind", "/usr", "/usr"]
    for path in eb.ROOT_LINKS:
        if os.path.islink(path):
            system += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            system += ["--ro-bind", path, path]
    args = [binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
    args += ["--new-session", "--cap-drop", "ALL", *system, "--proc", "/proc", "--dev", "/dev"]
    args += ["--remount-ro", "/", "--chdir", "/", "--json-status-fd", str(status_fd)]
    return [*args, "--", *command]


def test_real_bwrap_lifecycle() -> None:
    binary = shutil.which("bwrap")
    if binary is None:
        pytest.skip("bwrap is not installed")
    r, w = os.pipe()
    proc = eb.BwrapProcess(_bwrap_argv(binary, w, ["/bin/sh", "-c", "exit 7"]), ENV, [w], r)
    os.close(w)
    try:
        init = proc.read_child_pid()
        assert init is not None
        assert proc.init_fd is not None
        assert _pidfd_pid(proc.init_fd) == init
        assert proc.wait(60.0) == 7 << 8
        assert proc.finish() is True
        assert proc.status["exit-code"] == 7
        assert proc.status["child-pid"] == init
    finally:
        proc.kill()
        proc.wait(60.0)
        proc.close()
