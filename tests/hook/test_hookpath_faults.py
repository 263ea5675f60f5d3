"""The hook path under faults: a hung daemon, an open stdin, a lying socket, a failed checkpoint.

Each test drives the hook exactly as a client does, through the launcher ``keel init``
registers (``python -I -S <keel>/_launch.py ...``), and checks the effect: the exit code the
client sees, the answer, and what the journal recorded for it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import hook, keel, keel_env, make_workspace
from keel.core.calls import ToolCall
from keel.core.daemon import RECORD_NAME, process_start, read_record
from keel.core.stop import set_stop
from keel.guard import Guard
from keel.hook import relay, wire
from keel.hook.install import default_keel_command
from keel.hook.server import socket_path
from keel.journal import open_journal

DANGER = "rm -rf /"


def _call(command: str, n: int) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": f"toolu_{n}"}


def _payload(command: str, n: int) -> bytes:
    """What a client writes to the hook's stdin (for a process the test holds open)."""
    body = {"session_id": "faults", "hook_event_name": "PreToolUse", **_call(command, n)}
    return json.dumps(body).encode()


def _env(root: Path, **extra: str) -> dict[str, str]:
    return keel_env({"CLAUDE_PROJECT_DIR": str(root), **extra}, hookd=True)


def _launcher(*args: str) -> list[str]:
    return [*default_keel_command(), "hook", "PreToolUse", "--agent", "claude", *args]


def _hook(root: Path, command: str, n: int, **env: str) -> subprocess.CompletedProcess[str]:
    """The registered launcher as Claude Code runs it, with the relay to hookd on."""
    payload = _call(command, n)
    return hook(
        "PreToolUse", payload, workspace=root, via="launcher", session="faults", env=env, hookd=True
    )


def _denied(proc: subprocess.CompletedProcess[str]) -> bool:
    return proc.returncode == 2 or '"deny"' in proc.stdout


def _decisions(root: Path, session: str = "faults") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with open_journal(root) as journal:
        for event in journal.events(session_id=session, kinds=["decision"]):
            data: Any = event.payload
            out.setdefault(str(data.tool_use_id), []).append(data.decision)
    return out


def _wait(what: str, check: Any, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def workspace(workdir: Path) -> Path:
    root = make_workspace(workdir, keel_toml='[policy]\npreset = "developer"\n')
    (root / ".keel").mkdir()
    return root


@pytest.fixture
def daemon(workspace: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = _env(workspace, KEEL_HOOKD_IDLE="120")
    proc = subprocess.Popen(
        [sys.executable, "-m", "keel.hook.server", str(workspace)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    keel_dir = str(workspace / ".keel")
    try:
        _wait("the daemon's record", lambda: read_record(keel_dir) is not None)
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=30)


# -- exit codes ---------------------------------------------------------------------------------


def _open_stdin_hook(root: Path, deadline: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        _launcher("--deadline", deadline),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(root, KEEL_HOOKD="0"),
        cwd=root,
    )


def _output(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Stdout and stderr once ``proc`` ended, its stdin left open (``communicate`` closes it)."""
    got: dict[str, bytes] = {}

    def read(name: str, pipe: Any) -> None:
        with pipe:
            got[name] = pipe.read()

    readers = [
        threading.Thread(target=read, args=("out", proc.stdout)),
        threading.Thread(target=read, args=("err", proc.stderr)),
    ]
    for reader in readers:
        reader.start()
    proc.wait(timeout=60)
    for reader in readers:
        reader.join(60)
    return got["out"], got["err"]


def test_a_held_open_stdin_is_answered_with_0_or_2_within_the_deadline(workspace: Path) -> None:
    for command, n in (("ls", 1), (DANGER, 2)):
        proc = _open_stdin_hook(workspace, "4")
        assert proc.stdin is not None
        proc.stdin.write(_payload(command, n))
        proc.stdin.flush()  # and never closed, as a misbehaving client might do
        out, err = _output(proc)
        assert proc.returncode in (0, 2), (proc.returncode, err)
        if command == "ls":
            assert proc.returncode == 0 and b"deny" not in out, (out, err)
        else:
            assert b"risk.rm_recursive" in out, (out, err)
        proc.stdin.close()


def test_an_open_stdin_that_never_sends_json_is_blocked_not_aborted(workspace: Path) -> None:
    proc = _open_stdin_hook(workspace, "2")
    assert proc.stdin is not None
    proc.stdin.write(b'{"session_id": "x", "tool_na')
    proc.stdin.flush()
    _, err = _output(proc)
    proc.stdin.close()
    assert proc.returncode == 2, err
    assert b"blocked to be safe" in err


class _Socket:
    """A process of the user's that listens on ``.keel/hookd.sock`` and answers ``reply``."""

    def __init__(self, root: Path, reply: list[bytes], *, record: bool) -> None:
        self.reply = reply
        self.requests: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(socket_path(root)))
        self.sock.listen(8)
        if record:  # claims to be the daemon keel started (the pid is this test process)
            pid = os.getpid()
            (root / ".keel" / RECORD_NAME).write_text(f"{pid} {process_start(pid)}\n")
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                chunks = []
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
                self.requests.append(b"".join(chunks))
                conn.sendall(wire.netstrings(self.reply))

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("code", [b"7", b"1", b"-1", b"134", b"0x2"])
def test_a_socket_answering_another_exit_code_is_never_passed_on(
    workspace: Path, code: bytes
) -> None:
    (workspace / ".keel" / relay.SPAWN_STAMP).touch()  # no real daemon for this test
    fake = _Socket(workspace, [wire.MAGIC, b"ok", code, b"", b""], record=True)
    try:
        allowed = _hook(workspace, "ls", 1)
        denied = _hook(workspace, DANGER, 2)
    finally:
        fake.close()
    assert fake.requests, "the relay did ask the (authenticated) daemon"
    assert allowed.returncode == 0 and "deny" not in allowed.stdout, allowed
    assert denied.returncode in (0, 2) and "risk.rm_recursive" in denied.stdout, denied


def test_a_socket_keel_did_not_start_is_never_asked(workspace: Path) -> None:
    (workspace / ".keel" / relay.SPAWN_STAMP).touch()
    allow_all = [wire.MAGIC, b"ok", b"0", b"", b""]
    fake = _Socket(workspace, allow_all, record=False)
    try:
        denied = _hook(workspace, DANGER, 1)
    finally:
        fake.close()
    assert _denied(denied) and "risk.rm_recursive" in denied.stdout, denied
    assert all(r == b"" for r in fake.requests), "the impostor got no request"


def test_under_the_stop_no_socket_is_asked_even_an_authenticated_one(workspace: Path) -> None:
    (workspace / ".keel" / relay.SPAWN_STAMP).touch()
    fake = _Socket(workspace, [wire.MAGIC, b"ok", b"0", b"", b""], record=True)
    set_stop(workspace, "drill")
    try:
        stopped = _hook(workspace, "ls", 1)
    finally:
        fake.close()
    assert _denied(stopped) and "stop.active" in stopped.stdout, stopped
    assert fake.requests == []


# -- a hung daemon ------------------------------------------------------------------------------


def test_a_stopped_daemon_during_a_burst_is_replaced_and_nothing_is_journaled_twice(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    assert _hook(workspace, "ls", 0).returncode == 0  # the daemon answers
    calls = 12
    results: dict[int, subprocess.CompletedProcess[str]] = {}

    def run(n: int) -> None:
        # distinct commands: the same `ls` five times in a row (as the threads happen to be
        # scheduled) is the monitor's repeat, denied for a reason that is not under test
        command = f"ls -d dir-{n}" if n % 2 else f"touch made-{n}"
        # The deadline is no part of what is tested, and must not decide the outcome: the
        # burst's work (twelve interpreters deciding in process, six shadow-git checkpoints
        # one after another under the workspace lock, a replacement daemon starting) all
        # falls within every call's deadline, so its wall time grows with the machine's
        # load. With 5 s, a busy machine (a mutation run beside it) failed calls closed
        # (hook.deadline); the stopped daemon is found by its state, never by the clock.
        results[n] = _hook(workspace, command, n, KEEL_HOOK_DEADLINE="60")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(1, calls + 1)]
    for i, thread in enumerate(threads):
        thread.start()
        if i == 3:
            os.kill(daemon.pid, signal.SIGSTOP)  # hung in the middle of the burst
    for thread in threads:
        thread.join()
    # Every call was decided (by the daemon before the stop, else in process) within its
    # deadline: a call that was not would have failed closed with hook.deadline.
    for n, proc in results.items():
        assert proc.returncode == 0 and "deny" not in proc.stdout, (n, proc.stderr)
        assert "hook.deadline" not in proc.stderr
    assert daemon.wait(timeout=30) == -signal.SIGKILL  # replaced: killed by a hook's relay
    decisions = _decisions(workspace)
    for n in range(0, calls + 1):
        assert decisions[f"toolu_{n}"] == ["allow"], (n, decisions.get(f"toolu_{n}"))


def test_a_daemon_stopped_while_holding_the_journal_lock_costs_no_call(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    assert _hook(workspace, "ls", 0).returncode == 0
    os.kill(daemon.pid, signal.SIGSTOP)
    got = _hook(workspace, "touch after-stop", 1, KEEL_HOOK_DEADLINE="2")
    assert got.returncode == 0 and "deny" not in got.stdout, got.stderr
    assert (workspace / ".keel" / RECORD_NAME).exists() or daemon.poll() is not None
    assert _decisions(workspace)["toolu_1"] == ["allow"]


def test_hookd_stop_removes_a_hung_daemon(workspace: Path, daemon: subprocess.Popen[bytes]) -> None:
    os.kill(daemon.pid, signal.SIGSTOP)
    proc = keel("hookd", "stop", "--workspace", str(workspace), hookd=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert daemon.wait(timeout=30) != 0  # gone, although it could not take a SIGTERM


# -- one transaction: the journal says what the agent was told ------------------------------


def test_a_failed_checkpoint_is_journaled_as_the_deny_the_agent_got(workspace: Path) -> None:
    (workspace / ".keel" / "checkpoints").write_text("not a directory")  # checkpoints fail
    guard = Guard.open(workspace, session_id="cp", agent="claude")
    try:
        decision = guard.decide(ToolCall("Bash", "exec", command="touch x", tool_use_id="t1"))
    finally:
        guard.close()
    assert (decision.decision, decision.rule) == ("deny", "internal_error")
    assert "checkpoint" in decision.reason
    with open_journal(workspace) as journal:
        events = list(journal.events(session_id="cp"))
    recorded = [e.payload for e in events if e.kind == "decision"]
    assert [(p.decision, p.rule) for p in recorded] == [("deny", "internal_error")]  # pyright: ignore[reportAttributeAccessIssue]
    assert [e.kind for e in events] == ["tool.call", "decision"]
    assert len({e.seq for e in events}) == 2


def test_a_request_answered_once_is_answered_the_same_again(workspace: Path) -> None:
    call = ToolCall("Bash", "exec", command="touch y", tool_use_id="t2")
    first = Guard.open(workspace, session_id="rq", agent="claude")
    try:
        decided = first.decide(call, request_id="req1")
    finally:
        first.close()
    (workspace / "keel.toml").write_text('[policy]\npreset = "developer"\ndeny = ["touch"]\n')
    again = Guard.open(workspace, session_id="rq", agent="claude")
    try:
        repeated = again.decide(call, request_id="req1")
    finally:
        again.close()
    assert decided.allowed and repeated == decided  # not decided again under the new config
    assert _decisions(workspace, "rq") == {"t2": ["allow"]}
