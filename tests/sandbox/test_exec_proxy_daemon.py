"""keel exec's network through the workspace's one proxy, kept by ``keel hookd``.

By effect, with a real daemon and real bwrap sandboxes: the daemon puts the listener in each
sandbox and enforces the current keel.toml; a listener on the host's 127.0.0.1 is never
reached; no second interpreter runs inside; a socket planted in ``.keel/`` is never handed a
sandbox; and the daemon keeps the proxy of a command that outlives its idle time.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from exec_helpers import Box, canary, journal_events, run_fork_bomb

from _support import KEEL, keel, keel_env
from keel.core.daemon import RECORD_NAME, process_start, read_record
from keel.sandbox import run_contained

_CONNECT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(f"CONNECT {sys.argv[1]} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n".encode())
print(s.recv(200).decode().splitlines()[0])
"""

_DIRECT = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    print("CONNECTED")
except OSError as exc:
    print("blocked", type(exc).__name__)
"""


def _wait(what: str, check: Callable[[], object], limit: float = 30.0) -> None:
    end = time.monotonic() + limit
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def _allow(box: Box, *entries: str) -> None:
    listed = ", ".join(f'"{e}"' for e in entries)
    box.config(f'[policy]\npreset = "developer"\nnetwork_allow = [{listed}]\n')


@pytest.fixture
def daemon(bwrap_box: Box) -> Iterator[subprocess.Popen[bytes]]:
    """The workspace's ``keel hookd``, as a hook starts it (its idle time: 120 s)."""
    with _running_daemon(bwrap_box, idle="120") as proc:
        yield proc


@contextmanager
def _running_daemon(box: Box, idle: str) -> Iterator[subprocess.Popen[bytes]]:
    keel_dir = box.ws / ".keel"
    keel_dir.mkdir(exist_ok=True)
    env = keel_env({**box.env, "KEEL_HOOKD_IDLE": idle}, hookd=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "keel.hook.server", str(box.ws)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(
            "the daemon",
            lambda: read_record(str(keel_dir)) and (keel_dir / "proxy.sock").exists(),
        )
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _helpers_of(pid: int) -> list[str]:
    """The command lines of the children of ``pid`` that are keel's namespace helper."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid and "_netns.py" in cmdline:
            out.append(cmdline)
    return out


def test_the_daemon_serves_each_sandbox_and_the_allowlist_holds(
    bwrap_box: Box, daemon: subprocess.Popen[bytes]
) -> None:
    with canary() as allowed, canary() as other:
        _allow(bwrap_box, f"127.0.0.1:{allowed.port}")
        reached = bwrap_box.run("/usr/bin/python3", "-c", _CONNECT, f"127.0.0.1:{allowed.port}")
        refused = bwrap_box.run("/usr/bin/python3", "-c", _CONNECT, f"127.0.0.1:{other.port}")
        direct = bwrap_box.run("/usr/bin/python3", "-c", _DIRECT, str(other.port))
        _wait("the allowed connection", lambda: allowed.hits == 1)
        assert other.hits == 0
    assert reached.stdout.strip() == "HTTP/1.1 200 Connection established", reached.stderr
    assert refused.stdout.startswith("HTTP/1.1 403"), refused.stderr
    assert "network.port_not_allowed" in (bwrap_box.ws / ".keel/exec/proxy.log").read_text()
    assert direct.stdout.startswith("blocked"), direct.stdout
    # the daemon made the listeners: its namespace helper runs (keel exec forked none)
    assert _helpers_of(daemon.pid), "the daemon did not place the listener"


def test_the_daemon_returns_each_runs_decisions(
    bwrap_box: Box, daemon: subprocess.Popen[bytes]
) -> None:
    with canary() as other:
        _allow(bwrap_box, "127.0.0.1:1")
        result = run_contained(
            ["/usr/bin/python3", "-c", _CONNECT, f"127.0.0.1:{other.port}"],
            workspace=bwrap_box.ws,
            backend="bwrap",
            environ=bwrap_box.env,
        )
        assert other.hits == 0
    assert [(c.host, c.port, c.allowed, c.rule) for c in result.connections] == [
        ("127.0.0.1", other.port, False, "network.port_not_allowed")
    ]
    assert _helpers_of(daemon.pid)


def test_the_daemon_journals_each_refusal_with_the_runs_command(
    bwrap_box: Box, daemon: subprocess.Popen[bytes]
) -> None:
    with canary() as other:
        _allow(bwrap_box, "127.0.0.1:1")
        target = f"127.0.0.1:{other.port}"
        refused = bwrap_box.run("/usr/bin/python3", "-c", _CONNECT, target)
        assert other.hits == 0
    assert refused.stdout.startswith("HTTP/1.1 403"), refused.stderr
    [denied] = journal_events(bwrap_box, "network.denied", 1)
    assert (denied["host"], denied["port"]) == ("127.0.0.1", other.port)
    assert denied["command"] == ["/usr/bin/python3", "-c", _CONNECT, target]  # its record's
    assert f"keel allow-host {target}" in denied["reason"]
    assert _helpers_of(daemon.pid)  # the daemon served (and journaled) it
    journal_events(bwrap_box, "exec", 1)
    done = keel("log", "-s", "keel-exec", "--json", workspace=bwrap_box.ws, env=bwrap_box.env)
    kinds = [e["kind"] for e in json.loads(done.stdout)["events"]]
    assert kinds == ["network.denied", "exec"]  # the run's event after its refusals


def test_the_daemon_proxy_enforces_the_current_keel_toml(
    bwrap_box: Box, daemon: subprocess.Popen[bytes]
) -> None:
    with canary() as server:
        target = f"127.0.0.1:{server.port}"
        _allow(bwrap_box, target)
        before = bwrap_box.run("/usr/bin/python3", "-c", _CONNECT, target)
        _wait("the allowed connection", lambda: server.hits == 1)
        _allow(bwrap_box, "127.0.0.1:1")  # the entry is gone: the same daemon must refuse
        after = bwrap_box.run("/usr/bin/python3", "-c", _CONNECT, target)
        assert server.hits == 1
    assert before.stdout.startswith("HTTP/1.1 200"), before.stderr
    assert after.stdout.startswith("HTTP/1.1 403"), after.stderr
    assert daemon.poll() is None


def test_no_interpreter_runs_in_front_of_a_networked_command(
    bwrap_box: Box, daemon: subprocess.Popen[bytes]
) -> None:
    _allow(bwrap_box, "example.invalid")
    listing = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
    served = bwrap_box.run("/bin/sh", "-c", listing)
    own = bwrap_box.run("/bin/sh", "-c", listing, env={"KEEL_HOOKD": "0"})  # its own proxy
    for run in (served, own):
        assert run.returncode == 0, run.stderr
        processes = [line.split(" ")[0] for line in run.stdout.splitlines() if line]
        # bwrap's init (pid 1) and the command: no relay, no bridge interpreter
        assert [os.path.basename(p) for p in processes] == ["bwrap", "sh"], run.stdout


def test_a_socket_planted_in_dot_keel_is_never_handed_a_sandbox(bwrap_box: Box) -> None:
    keel_dir = bwrap_box.ws / ".keel"
    keel_dir.mkdir(exist_ok=True)
    planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    planted.bind(str(keel_dir / "proxy.sock"))
    planted.listen(4)
    heard: list[bytes] = []

    def serve() -> None:  # a proxy that would answer "ok" to anything it is sent
        while True:
            try:
                conn, _ = planted.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                heard.append(data)
                if data:
                    conn.sendall(b"ok")

    threading.Thread(target=serve, daemon=True).start()
    # the record names another live process than the one listening
    other = subprocess.Popen(["sleep", "60"])
    try:
        (keel_dir / RECORD_NAME).write_text(f"{other.pid} {process_start(other.pid)}\n")
        with canary() as target:
            _allow(bwrap_box, "127.0.0.1:1")
            done = bwrap_box.run("/usr/bin/python3", "-c", _CONNECT, f"127.0.0.1:{target.port}")
            assert target.hits == 0
        inside = bwrap_box.run("/bin/sh", "-c", "ls -A .keel; echo end")
    finally:
        other.kill()
        other.wait()
        planted.close()
    assert heard and not any(heard), heard  # connected to (each run), then never asked
    assert done.stdout.startswith("HTTP/1.1 403"), done.stderr  # keel exec's own proxy judged
    assert inside.stdout == "end\n", inside.stdout  # .keel is empty inside


def test_the_daemon_keeps_the_proxy_of_a_command_that_outlives_its_idle_time(
    bwrap_box: Box,
) -> None:
    with _running_daemon(bwrap_box, idle="2") as proc, canary() as server:
        target = f"127.0.0.1:{server.port}"
        _allow(bwrap_box, target)
        wait_then_connect = (
            "import os, time\nwhile not os.path.exists('go'): time.sleep(0.05)\n" + _CONNECT
        )
        command = subprocess.Popen(
            [*_exec_argv(bwrap_box), "/usr/bin/python3", "-c", wait_then_connect, target],
            cwd=bwrap_box.ws,
            env=bwrap_box.env,
            stdout=subprocess.PIPE,
            text=True,
        )
        _wait("the daemon to place the listener", lambda: _helpers_of(proc.pid))
        time.sleep(5)  # over twice the idle time, and the daemon's poll, pass
        assert proc.poll() is None, "the daemon went idle under a running command"
        (bwrap_box.ws / "go").write_text("")
        out, _ = command.communicate(timeout=120)
        _wait("the allowed connection", lambda: server.hits == 1)
        assert out.startswith("HTTP/1.1 200"), out
        _wait("the daemon to go idle once the command ended", lambda: proc.poll() is not None)


def _exec_argv(box: Box) -> list[str]:
    return [KEEL, "exec", "--workspace", str(box.ws), "--backend", box.backend, "--"]


def test_a_fork_bomb_the_daemon_serves_is_held_to_the_process_limit(
    bwrap_box: Box, daemon: subprocess.Popen[bytes]
) -> None:
    """Root's runs: the daemon's helper caps the pid namespace as it places the listener."""
    bwrap_box.config('[policy]\npreset = "developer"\n[sandbox]\nexec_max_processes = 300\n')
    run_fork_bomb(bwrap_box, max_processes=300, env={"KEEL_HOOKD": "1"})
    assert _helpers_of(daemon.pid)  # the daemon served it (keel exec caps only if it did not)


def test_a_run_the_daemon_serves_loads_no_proxy_of_its_own(
    bwrap_box: Box, daemon: subprocess.Popen[bytes]
) -> None:
    _allow(bwrap_box, "example.invalid")
    argv = [sys.executable, "-X", "importtime", KEEL, "exec", "--", "/bin/true"]
    runs = [
        subprocess.run(
            argv, cwd=bwrap_box.ws, env=bwrap_box.env, capture_output=True, text=True, check=False
        )
        for _ in range(2)  # the first run fills the caches (config view, seccomp filter, verdict)
    ]
    done = runs[-1]
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "keel.sandbox.exec._proxyd" in imported  # it asked the daemon
    # no listener placed, no namespace joined (root's pid cap included: the daemon sets it)
    own = {"keel.sandbox.exec._proxy", "threading", "keel.sandbox.exec._netns", "_ctypes"}
    heavy = {"re", "json", "socket", "typing", "signal", "contextlib", "ctypes", "pydantic"}
    assert imported & (own | heavy) == set()
    assert "keel.sandbox.exec._journal" not in imported  # the daemon journaled the run


# A subreaper: the orphans of `keel exec` come back to it; it counts those that are keel
# (a detached journal writer is a fork of keel exec), not bwrap's own (its pid 1 may outlive
# the bwrap that made it by a moment).
_REAPER = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
run = subprocess.run(sys.argv[1:], capture_output=True)
writers, deadline = 0, time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        break
    if info is None:
        time.sleep(0.05)
        continue
    with open(f"/proc/{info.si_pid}/stat") as fh:
        writers += "(bwrap)" not in fh.read()
    os.waitpid(info.si_pid, 0)
print(run.returncode, writers)
"""


def _orphans_of(box: Box, env: dict[str, str], *argv: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", _REAPER, KEEL, "exec", "--", *argv],
        cwd=box.ws,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    code, orphans = done.stdout.split()
    return int(code), int(orphans)


@pytest.mark.parametrize(
    "preset",
    [
        "developer",  # on the connection that served the run's proxy
        "strict",  # no proxy: on a connection of its own
    ],
)
def test_the_daemon_journals_a_run_so_keel_exec_leaves_no_journal_writer_behind(
    bwrap_box: Box, daemon: subprocess.Popen[bytes], preset: str
) -> None:
    bwrap_box.config(f'[policy]\npreset = "{preset}"\n')
    served = _orphans_of(bwrap_box, {**bwrap_box.env, "KEEL_HOOKD": "1"}, "/bin/sh", "-c", "exit 4")
    alone = _orphans_of(bwrap_box, {**bwrap_box.env, "KEEL_HOOKD": "0"}, "/bin/sh", "-c", "exit 5")
    assert served == (4, 0)  # the daemon took the event: no fork outlived keel exec
    assert alone == (5, 1)  # without it, one detached fork journals the run
    runs = journal_events(bwrap_box, "exec", 2)
    assert sorted(r["exit_code"] for r in runs) == [4, 5]
    assert daemon.poll() is None
