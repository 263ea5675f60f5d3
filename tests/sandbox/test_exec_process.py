"""keel exec, by effect: exit codes, time limits, keel stop, leftovers, refusals."""

from __future__ import annotations

import json
import marshal
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from exec_helpers import KEEL, Box, run_fork_bomb

import keel
from keel.sandbox.exec._select import CACHE_NAME, _key


def _sleepers(tag: str) -> list[int]:
    """Pids of live processes whose command line holds ``tag``."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline.startswith(b"sleep") and tag.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize(("script", "code"), [("exit 0", 0), ("exit 3", 3), ("kill -INT $$", 130)])
def test_exit_code_passes_through(box: Box, script: str, code: int) -> None:
    assert box.sh(script).returncode == code


def test_stdin_and_stdout_are_the_callers(box: Box, workdir: Path) -> None:
    source = workdir / "in.txt"
    source.write_text("piped\n")
    with open(source) as fh:
        done = box.run("/bin/cat", stdin=fh.fileno())
    assert done.stdout == "piped\n"


def test_wall_clock_limit_kills_the_command(box: Box) -> None:
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    started = time.monotonic()
    done = box.sh(f"sleep 3{tag} & sleep 4{tag}", options=["--timeout", "1"])
    assert done.returncode == 124
    assert time.monotonic() - started < 30
    assert "timed out" in done.stderr
    assert _sleepers(tag) == []


def test_no_process_outlives_the_command(box: Box) -> None:
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    done = box.sh(f"sleep 5{tag} & setsid sleep 6{tag} & nohup sleep 7{tag} >/dev/null 2>&1 & true")
    assert done.returncode == 0
    deadline = time.monotonic() + 5
    while _sleepers(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleepers(tag) == []


@pytest.mark.parametrize("box", ["bwrap"], indirect=True)  # Landlock: no pid namespace
@pytest.mark.parametrize(
    "preset",
    [
        "developer",  # a proxy: keel exec's own fork that places its listener also caps
        "strict",  # no proxy: keel exec forks to cap (_pidns.cap)
    ],
)
def test_a_fork_bomb_is_held_to_the_process_limit_and_killed_at_its_timeout(
    box: Box, preset: str
) -> None:
    """As root too: RLIMIT_NPROC does not bind root; the namespace's own pid_max does.

    Without a daemon (``KEEL_HOOKD=0``); ``test_exec_proxy_daemon`` runs it with one.
    """
    box.config(f'[policy]\npreset = "{preset}"\n[sandbox]\nexec_max_processes = 300\n')
    run_fork_bomb(box, max_processes=300)


def _running(box: Box, script: str, tag: str, sleepers: int = 1) -> subprocess.Popen[str]:
    """``keel exec -- sh -c SCRIPT`` in the background, once ``sleepers`` of its are running."""
    argv = [KEEL, "exec", "--workspace", str(box.ws), "--backend", box.backend, "--"]
    proc = subprocess.Popen(
        [*argv, "/bin/sh", "-c", script],
        env=box.env,
        cwd=box.ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while len(_sleepers(tag)) < sleepers and time.monotonic() < deadline:
        time.sleep(0.05)
    if len(_sleepers(tag)) != sleepers:
        proc.kill()
        raise AssertionError(f"{len(_sleepers(tag))} of {sleepers} sleepers started")
    return proc


def test_keel_stop_kills_a_running_command_and_its_children(box: Box) -> None:
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    proc = _running(box, f"sleep 6{tag} & setsid sleep 7{tag} & sleep 8{tag}", tag, 3)
    try:
        stop = subprocess.run(
            [KEEL, "--workspace", str(box.ws), "stop", "--reason", "test"],
            env=box.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert "killed 1 contained command" in stop.stdout, stop.stderr
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 126, err  # as documented: the emergency stop
    assert "emergency stop is set (test)" in err
    assert _sleepers(tag) == []
    assert list((box.ws / ".keel" / "exec").glob("*.json")) == []
    refused = box.run("/bin/true")
    assert refused.returncode == 126
    assert "emergency stop" in refused.stderr


def test_keel_stop_kills_before_it_journals_so_a_broken_journal_stops_nothing_running(
    box: Box,
) -> None:
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    proc = _running(box, f"sleep 9{tag}", tag)
    try:
        (box.ws / ".keel" / "journal.db").mkdir()  # every journal write fails
        stop = subprocess.run(
            [KEEL, "--workspace", str(box.ws), "stop", "--reason", "test"],
            env=box.env,
            capture_output=True,
            text=True,
            check=False,
        )
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert stop.returncode == 1 and "IS set" in stop.stderr, stop.stderr
    assert proc.returncode == 126, err
    assert _sleepers(tag) == []


@pytest.mark.parametrize("box", ["bwrap"], indirect=True)  # the bwrap process is killed
def test_a_sandbox_killed_from_outside_is_reported_killed_not_as_a_failed_start(box: Box) -> None:
    """bwrap SIGKILLed mid-run (what ``keel stop`` does before its SIGTERM reaches keel exec,
    or the OOM killer) ended a command that had started: 128 + SIGKILL, not exit 125."""
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    proc = _running(box, f"sleep 9{tag}", tag)
    try:
        [record] = (box.ws / ".keel" / "exec").glob("*.json")
        bwrap = json.loads(record.read_text())["processes"][0][0]
        os.kill(bwrap, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGKILL, err
    assert "failed to start" not in err
    assert _sleepers(tag) == []


def test_interrupting_keel_exec_kills_the_command(box: Box) -> None:
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    proc = _running(box, f"sleep 9{tag}", tag)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "interrupted by SIGINT" in err
    assert _sleepers(tag) == []


def test_a_command_that_does_not_exist_exits_127(box: Box) -> None:
    done = box.run("no-such-command-kx")
    assert done.returncode == 127
    assert "command not found" in done.stderr


def test_an_unavailable_backend_is_a_clear_refusal(box: Box) -> None:
    state = Path(box.env["KEEL_STATE_DIR"])
    (state / "cache").mkdir(parents=True, exist_ok=True)
    verdict = {"ok": False, "path": None, "version": None, "reason": "bwrap is broken here"}
    (state / "cache" / CACHE_NAME).write_bytes(marshal.dumps({**verdict, "key": _key(None)}))
    done = subprocess.run(
        [KEEL, "exec", "--workspace", str(box.ws), "--backend", "bwrap", "--", "/bin/true"],
        env=box.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 125
    assert "bwrap is broken here" in done.stderr
    assert "[sandbox.unavailable]" in done.stderr


def test_an_invalid_keel_toml_refuses(box: Box) -> None:
    box.config("[sandbox]\nno_such_key = 1\n")
    done = box.run("/bin/true")
    assert done.returncode == 125
    assert "keel.toml" in done.stderr


def test_usage_errors_exit_2(box: Box) -> None:
    for args in (["--timeout", "soon", "--", "true"], ["--backend", "docker", "--", "true"], []):
        done = subprocess.run(
            [KEEL, "exec", *args], env=box.env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, args
        assert "usage" in done.stderr


def test_pyenv_shim_python_runs_inside(box: Box) -> None:
    shim = Path.home() / ".pyenv" / "shims" / "python3"
    if not shim.exists():
        pytest.skip("no pyenv shim on this machine")
    path = f"{shim.parent}:{Path.home() / '.pyenv' / 'bin'}:/usr/bin:/bin"
    done = box.run("python3", "-c", "print(1)", env={"PATH": path})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"


def test_the_backend_comes_from_keel_toml(box: Box) -> None:
    from keel.sandbox import run_contained

    box.config(f'[sandbox]\nbackend = "{box.backend}"\n')
    result = run_contained(["/bin/true"], workspace=box.ws, environ=box.env)
    assert result.backend == box.backend
    assert result.exit_code == 0


def test_sandbox_check_reports_the_exec_backend(box: Box) -> None:
    done = subprocess.run(
        [KEEL, "--workspace", str(box.ws), "sandbox", "check"],
        env=box.env,
        capture_output=True,
        text=True,
        check=False,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("exec"))
    assert line.split()[1] in ("bwrap", "landlock")


def test_keel_exec_imports_nothing_heavy(bwrap_box: Box) -> None:
    argv = [sys.executable, "-X", "importtime", KEEL, "exec", "--", "/bin/true"]
    for _ in range(3):  # the first run fills the caches (config view, seccomp filter, verdict)
        done = subprocess.run(
            argv, cwd=bwrap_box.ws, env=bwrap_box.env, capture_output=True, text=True, check=False
        )
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    heavy = {"pydantic", "typing", "dataclasses", "subprocess", "json", "re", "pathlib", "enum"}
    heavy |= {"typer", "contextlib", "signal", "socket", "threading", "pyseccomp", "ctypes"}
    assert imported & heavy == set()


def test_a_daemon_that_clears_its_environment_is_still_killed(box: Box) -> None:
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    box.sh(f"(exec env -i setsid sleep 5{tag} &) ; true")
    deadline = time.monotonic() + 5
    while _sleepers(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleepers(tag) == []


def test_keel_exec_imports_from_its_code_cache_once_written(box: Box) -> None:
    from keel.core.codecache import _open, cache_path

    path = Path(cache_path("exec", box.env["KEEL_STATE_DIR"]))
    path.unlink(missing_ok=True)
    first = box.run("true")
    written = path.stat()
    second = box.run("true")
    third = box.sh("exit 5")
    fd, entries, _ = _open(str(path), str(Path(keel.__file__).parent.parent), "keel")
    os.close(fd)
    assert (first.returncode, second.returncode, third.returncode) == (0, 0, 5), third.stderr
    assert {"keel.sandbox.exec._exec", "keel.sandbox.exec._control"} <= entries.keys()
    # every module of the later runs came from the file: none missed, nothing rewritten
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == (written.st_mtime_ns, written.st_ino)
