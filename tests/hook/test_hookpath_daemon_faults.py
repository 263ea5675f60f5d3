"""A daemon that trickles, floods or hangs, and a socket path that is no socket.

The daemon here is a real process at the workspace's ``.keel/hookd.sock`` with its pid and
start time in ``.keel/hookd.pid``, so the relay trusts it as it trusts ``keel hookd``: the
recorded process listens, and a worker it forked answers its connections (and outlives the
recorded one, which the relay kills, to report what it saw). Each test runs the hook as a
client does, through the launcher ``keel init`` registers, and checks the effect: the call
ends within its deadline and a dangerous call is denied, the hook's memory stays bounded, a
hung daemon costs one call a bounded wait and no later call anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _support import keel, keel_env, make_workspace
from keel.core.daemon import RECORD_NAME, read_record
from keel.doctor import diagnose
from keel.hook import relay
from keel.hook.install import default_keel_command
from keel.hook.server import socket_path

sys.path.insert(0, str(Path(__file__).parent))
from test_hookperf_config import hook_process

DANGER = "rm -rf /"
LIMIT = 120.0
"""Seconds after which a stuck process fails its test (a bound, never a measurement)."""

FAKE = r"""
import os, select, socket, sys, time
from keel.core.daemon import process_start
from keel.hook import wire

sock_path, record, log_path, mode, size = sys.argv[1:6]
size = int(size)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sock_path)
listener.listen(8)  # the peer credentials every client sees are this process's
if os.fork():  # the recorded daemon: the process the relay trusts, and kills
    pid = os.getpid()
    with open(record + ".tmp", "w") as fh:
        fh.write(f"{pid} {process_start(pid)}\n")
    os.rename(record + ".tmp", record)
    while True:
        time.sleep(60)
log = open(log_path, "a", buffering=1)
log.write(f"worker {os.getpid()}\n")
listener.settimeout(120)
while True:
    try:
        conn, _ = listener.accept()
    except OSError:
        os._exit(0)
    accepted = time.monotonic()
    log.write("accepted\n")
    while conn.recv(65536):  # the request, up to the relay's end of file
        pass
    sent = 0
    try:
        if mode == "hang":  # never a byte; wait for the relay to close the connection
            poller = select.poll()
            poller.register(conn, 0)  # POLLHUP is always reported
            poller.poll()
            log.write(f"waited {time.monotonic() - accepted:.3f}\n")
        elif mode == "trickle":  # an allow, one byte every 10 ms
            reply = wire.netstrings([wire.MAGIC, wire.OK, b"0", b" " * size, b""])
            for byte in reply:
                conn.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.01)
        elif mode == "flood":  # an allow whose stderr is `size` bytes long
            conn.sendall(wire.netstrings([wire.MAGIC, wire.OK, b"0", b""]) + b"%d:" % size)
            chunk = b"x" * (1 << 20)
            while sent < size:
                conn.sendall(chunk[: size - sent])
                sent += min(len(chunk), size - sent)
            conn.sendall(b",")
    except OSError:
        pass
    log.write(f"sent {sent}\n")
    conn.close()
"""


class FakeDaemon:
    """The fake daemon of ``FAKE``: the recorded process, and the worker's log."""

    def __init__(self, root: Path, mode: str, size: int = 0) -> None:
        self.log = root.parent / f"fake-{mode}.log"
        keel_dir = root / ".keel"
        where = [str(socket_path(root)), str(keel_dir / RECORD_NAME), str(self.log)]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE, *where, mode, str(size)],
            env=keel_env(),
            stdin=subprocess.DEVNULL,
        )
        end = time.monotonic() + LIMIT
        while read_record(str(keel_dir)) is None or "worker" not in self._text():
            assert time.monotonic() < end and self.proc.poll() is None, "the fake did not start"
            time.sleep(0.02)

    def _text(self) -> str:
        try:
            return self.log.read_text()
        except FileNotFoundError:
            return ""

    def lines(self, word: str) -> list[str]:
        """What the worker logged after ``word``, one entry per line that starts with it."""
        return [ln.split(" ", 1)[-1] for ln in self._text().splitlines() if ln.startswith(word)]

    def close(self) -> None:
        """End both processes (the worker by the pid it logged)."""
        for pid in self.lines("worker"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=LIMIT)


class Call:
    """One finished hook process: exit code, stdout, seconds from start to exit, peak memory."""

    def __init__(self, code: int, out: str, err: str, seconds: float, max_rss: int) -> None:
        self.code, self.out, self.err, self.seconds = code, out, err, seconds
        self.max_rss = max_rss
        """Bytes."""

    @property
    def denied(self) -> bool:
        return self.code == 2 or '"deny"' in self.out


def run_hook(root: Path, command: str, n: int, *, deadline: float) -> Call:
    """The registered launcher as Claude Code runs it, relay on, output to files (a flood)."""
    body = {
        "session_id": "daemon-faults",
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": f"toolu_{n}",
    }
    env = {"CLAUDE_PROJECT_DIR": str(root), "KEEL_HOOK_DEADLINE": str(deadline)}
    out_path, err_path = root.parent / f"out-{n}", root.parent / f"err-{n}"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            [*default_keel_command(), "hook", "PreToolUse", "--agent", "claude"],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            cwd=root,
            env=keel_env(env, hookd=True),
        )
        timer = threading.Timer(LIMIT, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(body).encode())
            proc.stdin.close()
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak memory
        finally:
            timer.cancel()
        seconds = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    with err_path.open("rb") as fh:
        err_head = fh.read(4096).decode(errors="replace")
    text = out_path.read_bytes()[:65536].decode(errors="replace")
    return Call(proc.returncode, text, err_head, seconds, usage.ru_maxrss * 1024)


@pytest.fixture
def workspace(workdir: Path) -> Path:
    root = make_workspace(workdir / "ws", keel_toml='[policy]\npreset = "developer"\n')
    (root / ".keel").mkdir()
    (root / ".keel" / relay.SPAWN_STAMP).touch()  # no real daemon takes over in these tests
    return root


@pytest.fixture
def fake(workspace: Path, request: pytest.FixtureRequest) -> Iterator[FakeDaemon]:
    mode, size = request.param
    daemon = FakeDaemon(workspace, mode, size)
    try:
        yield daemon
    finally:
        daemon.close()


# -- whatever the daemon sends, the hook ends within its deadline -------------------------------


@pytest.mark.parametrize("fake", [("trickle", 1200)], indirect=True)
def test_a_daemon_that_keeps_sending_cannot_hold_the_hook_past_its_deadline(
    workspace: Path, fake: FakeDaemon
) -> None:
    # the whole allow would take 12 s to arrive, twice the hook's deadline
    deadline = 6.0
    call = run_hook(workspace, DANGER, 1, deadline=deadline)
    assert call.seconds < deadline + 2, call.seconds  # the bound: Claude gives up at 30
    assert call.denied, (call.code, call.out, call.err)  # decided in process, not the trickle
    assert fake.proc.wait(timeout=LIMIT) == -signal.SIGKILL  # replaced, as a late daemon is


@pytest.mark.parametrize("fake", [("flood", 512 << 20)], indirect=True)
def test_a_reply_larger_than_any_real_one_is_refused_not_held_in_memory(
    workspace: Path, fake: FakeDaemon
) -> None:
    call = run_hook(workspace, DANGER, 1, deadline=20)
    # the relay stops at wire.MAX_MESSAGE (64 MiB); reading the 512 MiB would need it twice
    assert call.max_rss < 256 << 20, call.max_rss
    assert call.denied, (call.code, call.out, call.err)  # the huge "allow" was not passed on
    assert fake.proc.wait(timeout=LIMIT) == -signal.SIGKILL
    assert int(fake.lines("sent")[0]) < 512 << 20


@pytest.mark.parametrize("fake", [("hang", 0)], indirect=True)
def test_a_hung_daemon_costs_the_first_call_at_most_3_s_and_no_later_call(
    workspace: Path, fake: FakeDaemon
) -> None:
    # a deadline of 12 s would let the relay wait 7 s (all but its in-process reserve)
    first = run_hook(workspace, DANGER, 1, deadline=12)
    assert first.denied, (first.code, first.out, first.err)
    waited = [float(w) for w in fake.lines("waited")]
    assert len(waited) == 1 and waited[0] < 3.0, waited  # the bound, from the daemon
    assert fake.proc.wait(timeout=LIMIT) == -signal.SIGKILL  # replaced
    later = run_hook(workspace, "ls", 2, deadline=12)
    assert later.code == 0 and "deny" not in later.out, (later.out, later.err)
    assert len(fake.lines("accepted")) == 1  # the later call never waited on it


# -- something at the socket path that is no socket ---------------------------------------------


def _blocked_socket_path(root: Path) -> Path:
    """A directory with a file in it where the daemon's socket belongs."""
    path = socket_path(root)
    path.mkdir()
    (path / "kept").write_text("mine")
    return path


def test_hookd_moves_a_directory_at_its_socket_path_aside_and_serves(workspace: Path) -> None:
    path = _blocked_socket_path(workspace)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "keel.hook.server", str(workspace)],
        env=keel_env({"KEEL_HOOKD_IDLE": "60"}, hookd=True),
        stdin=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + LIMIT
        while read_record(str(workspace / ".keel")) is None:
            assert daemon.poll() is None, "hookd gave up on the directory at its socket path"
            assert time.monotonic() < end
            time.sleep(0.02)
        got = hook_process(workspace, DANGER, 1, daemon=True)
    finally:
        daemon.terminate()
        daemon.wait(timeout=LIMIT)
    assert "keel.guard" not in got["modules"], got  # the daemon answered, not the hook itself
    assert "risk.rm_recursive" in got["out"], got
    assert (path.with_name("hookd.sock.stale-1") / "kept").read_text() == "mine"  # not deleted


def test_hookd_refuses_to_serve_when_what_is_at_its_socket_path_cannot_be_moved(
    workspace: Path,
) -> None:
    """A mount point at the socket path cannot be renamed (EBUSY): hookd says so and exits."""
    import shutil

    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to make a private mount point")
    path = _blocked_socket_path(workspace)
    script = 'mount --bind "$1" "$1" && shift && exec "$@"'
    done = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(path),
         sys.executable, "-m", "keel.hook.server", str(workspace)],
        env=keel_env({"KEEL_HOOKD_IDLE": "60"}, hookd=True),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "workspace.hookd_socket" in done.stderr and str(path) in done.stderr, done.stderr
    assert "cannot be moved aside" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert read_record(str(workspace / ".keel")) is None  # it never claimed the workspace
    assert (path / "kept").read_text() == "mine"  # nothing of the user's was touched
    assert not path.with_name("hookd.sock.stale-1").exists()


def test_hookd_status_and_doctor_name_a_socket_path_that_is_no_socket(workspace: Path) -> None:
    path = _blocked_socket_path(workspace)
    shown = keel("hookd", "status", workspace=workspace)
    assert shown.returncode == 0, shown.stderr
    assert "not running" in shown.stdout and "is a directory, not a socket" in shown.stdout
    assert f"rm -r {path}" in shown.stdout, shown.stdout  # the fix
    data = json.loads(keel("hookd", "status", "--json", workspace=workspace).stdout)
    assert data["problem"]["code"] == "workspace.hookd_socket"
    assert data["problem"]["path"] == str(path)
    stopped = keel("hookd", "stop", workspace=workspace)  # nothing to stop, and no crash
    assert stopped.returncode == 0 and "not running" in stopped.stdout, stopped.stderr
    report = diagnose(workspace, [], quick=True)
    found = [c for c in report.workspace if c.name == "hookd"]
    assert [c.status for c in found] == ["warn"], report.workspace
    assert "is a directory, not a socket" in found[0].detail and found[0].fix
    assert "rm -r" in found[0].fix
    assert (path / "kept").read_text() == "mine"  # status, stop and doctor only look
