"""``keel hookd`` and the relay: same answers as in process, and never a fail-open."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import keel_env, make_workspace
from keel.core.stop import clear_stop, set_stop
from keel.hook import relay as relay_mod
from keel.hook import wire
from keel.hook.main import parse_hook_args
from keel.hook.server import _respond, _State, socket_path  # pyright: ignore[reportPrivateUsage]
from keel.journal import open_journal

sys.path.insert(0, str(Path(__file__).parent))
from test_hookperf_config import hook_process

IN_PROCESS = "keel.guard"  # imported by a hook process only when it decides itself
DANGER = "rm -rf /"


def _connectable(path: Path) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def _wait(what: str, check: Any, limit: float = 30.0) -> None:
    end = time.monotonic() + limit
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def _daemon_env(idle: str = "120") -> dict[str, str]:
    return keel_env({"KEEL_HOOKD_IDLE": idle}, hookd=True)


@pytest.fixture
def workspace(workdir: Path) -> Path:
    root = make_workspace(workdir, keel_toml='[policy]\npreset = "developer"\n')
    (root / ".keel").mkdir()
    return root


@pytest.fixture
def daemon(workspace: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "keel.hook.server", str(workspace)],
        env=_daemon_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait("the daemon's record", lambda: relay_mod.read_record(str(workspace / ".keel")))
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _calls(root: Path, session: str = "perf") -> list[str]:
    with open_journal(root) as journal:
        return [
            str(e.payload.tool_use_id)  # pyright: ignore[reportAttributeAccessIssue]
            for e in journal.events(session_id=session)
            if e.kind == "tool.call"
        ]


def test_the_daemon_answers_and_the_hook_process_stays_thin(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    got = hook_process(workspace, "ls", 1, daemon=True)
    assert got["rc"] == 0 and "deny" not in got["out"], got
    assert IN_PROCESS not in got["modules"]
    assert not [m for m in got["modules"] if m.split(".")[0] in ("pydantic", "json", "socket")]
    assert _calls(workspace) == ["toolu_1"]  # the daemon journaled the call


def test_daemon_and_in_process_give_the_same_answer(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    via_daemon = hook_process(workspace, DANGER, 1, daemon=True, session="a")
    in_process = hook_process(workspace, DANGER, 2, daemon=False, session="b")
    assert IN_PROCESS not in via_daemon["modules"] and IN_PROCESS in in_process["modules"]
    assert (via_daemon["rc"], via_daemon["out"]) == (in_process["rc"], in_process["out"])
    assert "risk.rm_recursive" in via_daemon["out"]


def test_the_emergency_stop_holds_through_the_daemon(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    assert "deny" not in hook_process(workspace, "ls", 1, daemon=True)["out"]
    set_stop(workspace, "drill")
    stopped = hook_process(workspace, "ls", 2, daemon=True)
    assert IN_PROCESS in stopped["modules"]  # under the stop no socket is asked at all
    assert "stop.active" in stopped["out"] and "drill" in stopped["out"]
    clear_stop(workspace)
    assert "deny" not in hook_process(workspace, "ls", 3, daemon=True)["out"]


def test_keel_toml_changes_are_picked_up_by_the_daemon(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    assert "deny" not in hook_process(workspace, "ls", 1, daemon=True)["out"]
    (workspace / "keel.toml").write_text('[policy]\npreset = "developer"\ndeny = ["ls"]\n')
    denied = hook_process(workspace, "ls", 2, daemon=True)
    assert "config.deny" in denied["out"], denied
    (workspace / "keel.toml").write_text('[policy]\npreset = "developer"\nbogus = 1\n')
    broken = hook_process(workspace, "ls", 3, daemon=True)
    assert broken["rc"] == 2 and "config.schema" in broken["err"], broken


def test_concurrent_hooks_are_all_answered(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    results: dict[int, dict[str, Any]] = {}

    def run(n: int) -> None:
        results[n] = hook_process(workspace, f"ls -{'a' * n}", n, daemon=True, session=f"c{n}")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == list(range(1, 9))
    for n, got in results.items():
        assert got["rc"] == 0 and "deny" not in got["out"], got
        assert _calls(workspace, f"c{n}") == [f"toolu_{n}"]


def test_a_stale_socket_falls_back_and_a_new_daemon_takes_over(workspace: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path(workspace)))
    stale.close()  # the file stays; nobody listens: connect is refused
    got = hook_process(workspace, DANGER, 1, daemon=True, extra_env={"KEEL_HOOKD_IDLE": "60"})
    assert IN_PROCESS in got["modules"] and "risk.rm_recursive" in got["out"]
    # that hook started a daemon for the next call (it inherits KEEL_HOOKD_IDLE from us)
    _wait("the new daemon", lambda: relay_mod.read_record(str(workspace / ".keel")))
    again = hook_process(workspace, DANGER, 2, daemon=True)
    assert IN_PROCESS not in again["modules"] and "risk.rm_recursive" in again["out"]
    socket_path(workspace).unlink()  # the daemon notices and exits


class _FakeDaemon:
    """Listens on the socket and misbehaves: closes, sends garbage, or never answers."""

    def __init__(self, root: Path, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(socket_path(root)))
        self.sock.listen(8)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "hang":
                self.held.append(conn)
                continue
            conn.recv(1 << 20)
            if self.mode == "garbage":
                conn.sendall(b"12:keel-hookd/1,2:ok,1:0,")  # cut off mid-reply
            conn.close()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("mode", ["close", "garbage", "hang"])
def test_a_daemon_that_dies_or_hangs_mid_request_still_gets_a_decision(
    workspace: Path, mode: str
) -> None:
    (workspace / ".keel" / relay_mod.SPAWN_STAMP).touch()  # no real daemon for this test
    fake = _FakeDaemon(workspace, mode)
    deadline = {"KEEL_HOOK_DEADLINE": "6"}  # the hang case waits half of it for the daemon
    try:
        denied = hook_process(workspace, DANGER, 1, daemon=True, extra_env=deadline)
        allowed = hook_process(workspace, "ls", 2, daemon=True, extra_env=deadline)
    finally:
        fake.close()
    assert IN_PROCESS in denied["modules"] and "risk.rm_recursive" in denied["out"], denied
    assert allowed["rc"] == 0 and "deny" not in allowed["out"], allowed


def test_a_daemon_that_takes_a_while_is_not_taken_for_a_hung_one(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    import sqlite3

    from keel.journal import journal_path

    assert hook_process(workspace, "ls", 1, daemon=True)["rc"] == 0  # the journal exists
    held = sqlite3.connect(journal_path(workspace), isolation_level=None, check_same_thread=False)
    held.execute("BEGIN IMMEDIATE")  # the daemon's commit waits for this: well past FIRST_BYTE
    release = threading.Timer(2 * relay_mod.FIRST_BYTE + 1, held.rollback)
    release.start()
    try:
        got = hook_process(workspace, "touch slow", 2, daemon=True)
    finally:
        release.join()
        held.close()
    assert got["rc"] == 0 and "deny" not in got["out"], got
    assert IN_PROCESS not in got["modules"]  # the daemon answered, late: it said it was alive
    assert daemon.poll() is None  # and it was not replaced


def test_the_daemon_exits_when_idle_and_removes_its_socket(workspace: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "keel.hook.server", str(workspace)],
        env=_daemon_env(idle="0.2"),
        stdin=subprocess.DEVNULL,
    )
    assert proc.wait(timeout=60) == 0
    assert not socket_path(workspace).exists()


def test_a_second_daemon_leaves_at_once(workspace: Path, daemon: subprocess.Popen[bytes]) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "keel.hook.server", str(workspace)],
        env=_daemon_env(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 0
    assert daemon.poll() is None and _connectable(socket_path(workspace))


def _fields(workspace: Path) -> list[bytes]:
    args = parse_hook_args(["PreToolUse", "--agent", "claude"])
    request = relay_mod._request(str(workspace), args, b"{}", "r1", time.monotonic() + 20)  # pyright: ignore[reportPrivateUsage]
    fields = wire.parse_netstrings(request)
    assert fields is not None
    return fields


def test_a_relay_of_another_version_is_told_to_retry(workspace: Path) -> None:
    state = _State(0.0, workspace.resolve())
    fields = _fields(workspace)
    fields[1] = b"0.0.0-old"
    assert _respond(fields, state) == [wire.MAGIC, b"retry"]
    assert state.stop
    assert _respond([b"nonsense"], _State(0.0, workspace.resolve()))[1] == b"retry"


def test_netstrings_round_trip_and_reject_truncation() -> None:
    fields = [b"", b"a", b"x:y,z" * 100, bytes(range(256))]
    encoded = wire.netstrings(fields)
    assert wire.parse_netstrings(encoded) == fields
    for cut in (1, 5, len(encoded) - 1):
        assert wire.parse_netstrings(encoded[:cut]) is None
    assert wire.parse_netstrings(b"99999999999999:x,") is None


def test_relay_is_off_with_keel_hookd_0(workspace: Path, daemon: subprocess.Popen[bytes]) -> None:
    got = hook_process(workspace, "ls", 1, daemon=False)
    assert IN_PROCESS in got["modules"]
    assert json.dumps(got["rc"]) == "0"


def test_a_daemon_whose_sources_changed_hands_back_and_leaves(workspace: Path) -> None:
    from keel.hook import server

    state = _State(0.0, workspace.resolve())
    fields = _fields(workspace)
    server._code_changed()  # pyright: ignore[reportPrivateUsage]
    path = next(iter(server._SEEN))  # pyright: ignore[reportPrivateUsage]
    server._SEEN[path] = (0, 0)  # pyright: ignore[reportPrivateUsage]
    try:
        assert _respond(fields, state) == [wire.MAGIC, b"retry"]
        assert state.stop
    finally:
        server._SEEN.clear()  # pyright: ignore[reportPrivateUsage]


def test_hookd_cli_status_and_stop(workspace: Path, daemon: subprocess.Popen[bytes]) -> None:
    import typer
    from typer.testing import CliRunner

    from keel.cli.hookd import register
    from keel.hook.server import daemon_running

    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:  # pyright: ignore[reportUnusedFunction]
        """Test app."""

    runner = CliRunner()
    shown = runner.invoke(app, ["hookd", "status", "--workspace", str(workspace), "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["running"] is True
    stopped = runner.invoke(app, ["hookd", "stop", "--workspace", str(workspace)])
    assert stopped.exit_code == 0 and "stopping" in stopped.stdout
    assert daemon.wait(timeout=30) == 0
    assert not daemon_running(workspace)
    again = runner.invoke(app, ["hookd", "stop", "--workspace", str(workspace)])
    assert "not running" in again.stdout


def test_a_call_that_overran_its_deadline_retires_the_daemon(workspace: Path) -> None:
    from keel.hook import server

    release = threading.Event()
    stuck = threading.Thread(target=release.wait, name="keel-hook", daemon=True)
    stuck.start()
    try:
        assert server._stray_work()  # pyright: ignore[reportPrivateUsage]
    finally:
        release.set()
        stuck.join()
    assert not server._stray_work()  # pyright: ignore[reportPrivateUsage]


def test_a_killed_daemon_leaves_a_socket_the_next_hook_survives(
    workspace: Path, daemon: subprocess.Popen[bytes]
) -> None:
    daemon.kill()
    daemon.wait(timeout=30)
    assert socket_path(workspace).exists()  # SIGKILL: no clean-up
    (workspace / ".keel" / relay_mod.SPAWN_STAMP).touch()  # no replacement for this test
    got = hook_process(workspace, DANGER, 1, daemon=True)
    assert IN_PROCESS in got["modules"] and "risk.rm_recursive" in got["out"], got
    allowed = hook_process(workspace, "ls", 2, daemon=True)
    assert allowed["rc"] == 0 and "deny" not in allowed["out"], allowed


def test_the_daemon_imports_no_cli_module() -> None:
    code = (
        "import sys; from keel.hook.server import preload; preload(); "
        "print(sorted(m for m in sys.modules if m.startswith('keel.cli') or m == 'typer'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
