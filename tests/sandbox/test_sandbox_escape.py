"""The escape suite: every attempt must be blocked by the real backend (bwrap and landlock).

Each test runs a small payload inside the sandbox that tries one escape and reports what
happened as JSON; the test asserts it was blocked and that no canary text leaked.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import stat
import tty
from pathlib import Path

import pytest
from sandbox_helpers import CANARY, Host, SandboxFactory, processes_of, tree_digest

from keel.sandbox import Sandbox, SandboxResult

PRELUDE = """
import json, os, sys
def read(p):
    try:
        with open(p, 'rb') as f:
            return 'READ:' + f.read(300).decode('latin1')
    except Exception as e:
        return type(e).__name__
def write(p, data='x'):
    try:
        with open(p, 'w') as f:
            f.write(data)
        return 'WROTE'
    except Exception as e:
        return type(e).__name__
def listdir(p):
    try:
        return 'LISTED:' + ','.join(sorted(os.listdir(p)))
    except Exception as e:
        return type(e).__name__
"""


def attempt(
    sandbox: Sandbox, host: Host, python3: str, body: str, *args: str, mode: str = "probe"
) -> dict[str, str]:
    result = sandbox.run(
        [python3, "-c", PRELUDE + body, *args],
        workspace=host.workspace,
        mode=mode,  # type: ignore[arg-type]
        timeout=30,
    )
    assert_clean(result)
    assert result.exit_code == 0, result.stderr.decode()
    return json.loads(result.stdout)


def assert_clean(result: SandboxResult) -> None:
    assert CANARY.encode() not in result.stdout + result.stderr


def assert_blocked(outcomes: dict[str, str]) -> None:
    leaked = {k: v for k, v in outcomes.items() if v.startswith(("READ", "WROTE", "LISTED"))}
    assert not leaked, leaked


def test_uid_inside_is_not_root(sandbox: Sandbox, host: Host) -> None:
    result = sandbox.run(["/usr/bin/id", "-u"], workspace=host.workspace, mode="probe", timeout=30)
    assert result.exit_code == 0
    assert int(result.stdout) != 0


def test_host_secrets_are_unreadable(sandbox: Sandbox, host: Host, python3: str) -> None:
    body = (
        "print(json.dumps({p: read(p) for p in sys.argv[1:]} | {'ls_ssh': listdir(sys.argv[-1])}))"
    )
    paths = ["/etc/shadow", "/root/.ssh/id_rsa", str(host.canary), str(host.secret)]
    paths += [str(host.home / ".ssh" / "id_rsa"), "/root/.ssh"]
    assert_blocked(attempt(sandbox, host, python3, body, *paths))


def test_dotdot_traversal_is_blocked(sandbox: Sandbox, host: Host, python3: str) -> None:
    body = "print(json.dumps({p: read(p) for p in sys.argv[1:]}))"
    paths = ["../canary.txt", "sub/../../canary.txt", "../../../../.." + str(host.canary)]
    paths += ["/workspace/../canary.txt", "../../../../../../etc/shadow"]
    assert_blocked(attempt(sandbox, host, python3, body, *paths))


def test_workspace_symlinks_to_host_files_are_blocked(
    sandbox: Sandbox, host: Host, python3: str
) -> None:
    ws = host.workspace
    (ws / "abs_link").symlink_to(host.canary)
    (ws / "rel_link").symlink_to("../canary.txt")
    (ws / "deep_rel_link").symlink_to("sub/../../canary.txt")
    (ws / "shadow_link").symlink_to("/etc/shadow")
    (ws / "ssh_link").symlink_to(host.home / ".ssh")
    body = "print(json.dumps({p: read(p) for p in sys.argv[1:-1]} | {'ssh': listdir('ssh_link')}))"
    names = ["abs_link", "rel_link", "deep_rel_link", "shadow_link", "ssh_link/id_rsa", "-"]
    assert_blocked(attempt(sandbox, host, python3, body, *names))
    assert_blocked(attempt(sandbox, host, python3, body, *names, mode="exec"))


def test_writes_outside_the_workspace_are_blocked(
    sandbox: Sandbox, host: Host, python3: str
) -> None:
    before = tree_digest(host.base)
    body = "print(json.dumps({p: write(p) for p in sys.argv[1:]}))"
    targets = [str(host.base / "planted.txt"), "../planted.txt", str(host.canary)]
    targets += [
        "/etc/keel-planted",
        "/usr/keel-planted",
        str(host.home / ".ssh" / "authorized_keys"),
    ]
    for mode in ("probe", "exec"):
        assert_blocked(attempt(sandbox, host, python3, body, *targets, mode=mode))
    assert tree_digest(host.base) == before
    assert not Path("/etc/keel-planted").exists()


def test_probe_mode_workspace_is_read_only(sandbox: Sandbox, host: Host, python3: str) -> None:
    before = tree_digest(host.workspace)
    body = """
out = {p: write(p) for p in sys.argv[1:]}
ops = (('unlink', lambda: os.unlink('data.txt')), ('mkdir', lambda: os.mkdir('d')),
       ('rename', lambda: os.rename('data.txt', 'x')),
       ('chmod', lambda: os.chmod('data.txt', 0o777)))
for name, op in ops:
    try:
        op(); out[name] = 'WROTE'
    except Exception as e:
        out[name] = type(e).__name__
print(json.dumps(out))
"""
    outcomes = attempt(sandbox, host, python3, body, "data.txt", "new.txt", "sub/new.txt")
    assert_blocked(outcomes)
    assert tree_digest(host.workspace) == before


def test_exec_mode_writes_never_reach_the_workspace(
    sandbox: Sandbox, host: Host, python3: str
) -> None:
    (host.workspace / "link").symlink_to("data.txt")
    before = tree_digest(host.workspace)
    body = """
out = {'new': write('new.txt'), 'modify': write('data.txt', 'changed'), 'sub': write('sub/n.txt')}
os.unlink('sub/nested.txt'); os.mkdir('made'); os.rename('link', 'moved_link')
out['read_back'] = read('data.txt')
print(json.dumps(out))
"""
    outcomes = attempt(sandbox, host, python3, body, mode="exec")
    assert outcomes["new"] == outcomes["modify"] == outcomes["sub"] == "WROTE"
    assert outcomes["read_back"] == "READ:changed"
    assert tree_digest(host.workspace) == before


def test_hard_link_to_a_host_secret_stays_unreadable(
    sandbox: Sandbox, host: Host, python3: str
) -> None:
    os.link(host.secret, host.workspace / "hardlink.txt")
    body = """
out = {'hardlink': read('hardlink.txt')}
for src in ('/etc/passwd', '/etc/shadow', sys.argv[1]):
    try:
        os.link(src, 'stolen'); out['link:' + src] = 'WROTE:' + read('stolen')
    except Exception as e:
        out['link:' + src] = type(e).__name__
print(json.dumps(out))
"""
    for mode in ("probe", "exec"):
        assert_blocked(attempt(sandbox, host, python3, body, str(host.canary), mode=mode))


def test_device_nodes_are_blocked(sandbox: Sandbox, host: Host, python3: str) -> None:
    body = """
out = {p: read(p) for p in ('/dev/sda', '/dev/vda', '/dev/mem', '/dev/kmsg')}
for where in ('mk_char', 'mk_block'):
    kind = stat.S_IFCHR if where == 'mk_char' else stat.S_IFBLK
    for d in ('.', '/tmp'):
        try:
            os.mknod(os.path.join(d, where), kind | 0o666, os.makedev(1, 1))
            out[where + d] = 'WROTE:' + read(os.path.join(d, where))
        except Exception as e:
            out[where + d] = type(e).__name__
print(json.dumps(out))
"""
    for mode in ("probe", "exec"):
        outcomes = attempt(sandbox, host, python3, "import stat\n" + body, mode=mode)
        assert not any(v.startswith(("READ", "WROTE")) for v in outcomes.values()), outcomes


def test_no_network_tcp_udp_or_unix(sandbox: Sandbox, host: Host, python3: str) -> None:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix_path = host.base / "canary.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    unix_path.chmod(0o777)
    unix.listen(16)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_name = f"\0keel-canary-{os.getpid()}-{id(host)}"
    abstract.bind(abstract_name)
    abstract.listen(16)
    body = """
import socket
tcp_port, udp_port = int(sys.argv[1]), int(sys.argv[2])
unix_path, abstract = sys.argv[3], sys.argv[4]
out = {}
def go(name, family, kind, addr, send=False):
    try:
        s = socket.socket(family, kind)
        s.settimeout(2)
        if send:
            s.sendto(b'ping', addr)
        else:
            s.connect(addr)
        out[name] = 'WROTE'
    except Exception as e:
        out[name] = type(e).__name__
go('tcp', socket.AF_INET, socket.SOCK_STREAM, ('127.0.0.1', tcp_port))
go('udp', socket.AF_INET, socket.SOCK_DGRAM, ('127.0.0.1', udp_port), send=True)
go('udp6', socket.AF_INET6, socket.SOCK_DGRAM, ('::1', udp_port), send=True)
go('unix', socket.AF_UNIX, socket.SOCK_STREAM, unix_path)
go('abstract', socket.AF_UNIX, socket.SOCK_STREAM, '\\0' + abstract)
go('raw', socket.AF_INET, socket.SOCK_RAW, ('127.0.0.1', 0), send=True)
try:
    socket.getaddrinfo('example.com', 80); out['dns'] = 'WROTE'
except Exception as e:
    out['dns'] = type(e).__name__
print(json.dumps(out))
"""
    args = (str(tcp.getsockname()[1]), str(udp.getsockname()[1]), str(unix_path), abstract_name[1:])
    try:
        outcomes = attempt(sandbox, host, python3, body, *args)
        assert_blocked(outcomes)
        for listener in (tcp, unix, abstract):
            listener.setblocking(False)
            with pytest.raises(BlockingIOError):
                listener.accept()
        udp.setblocking(False)
        with pytest.raises(BlockingIOError):
            udp.recvfrom(16)
    finally:
        for s in (tcp, udp, unix, abstract):
            s.close()


def test_environment_is_cleared(
    sandbox: Sandbox, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY)
    result = sandbox.run(["/usr/bin/env"], workspace=host.workspace, mode="probe", timeout=30)
    assert result.exit_code == 0
    assert_clean(result)
    names = {line.split("=", 1)[0] for line in result.stdout.decode().splitlines()}
    assert "AWS_SECRET_ACCESS_KEY" not in names
    assert {"PATH", "HOME", "LANG"} <= names


def test_no_inherited_file_descriptors(sandbox: Sandbox, host: Host) -> None:
    leak = os.open(host.canary, os.O_RDONLY)  # not CLOEXEC-cleared on purpose
    os.set_inheritable(leak, True)
    try:
        result = sandbox.run(
            ["/bin/ls", "/proc/self/fd", "/dev/fd"],
            workspace=host.workspace,
            mode="probe",
            timeout=30,
        )
    finally:
        os.close(leak)
    fds = {line for line in result.stdout.decode().split() if line.isdigit()}
    assert fds <= {"0", "1", "2", "3"}, fds  # 3 is ls's own directory fd


@pytest.mark.skipif(platform.machine() != "x86_64", reason="syscall numbers are x86_64's")
def test_seccomp_denies_dangerous_syscalls(sandbox: Sandbox, host: Host, python3: str) -> None:
    body = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = {'ptrace': (101, 0, 0, 0, 0), 'mount': (165, 0, 0, 0, 0), 'unshare_user': (272, 0x10000000),
         'unshare_net': (272, 0x40000000), 'keyctl': (250, 0, 0), 'bpf': (321, 0, 0, 0),
         'perf_event_open': (298, 0, 0, -1, -1, 0), 'io_uring_setup': (425, 1, 0),
         'kexec_load': (246, 0, 0, 0, 0), 'init_module': (175, 0, 0, 0), 'setns': (308, -1, 0),
         'add_key': (248, 0, 0, 0, 0, 0), 'userfaultfd': (323, 0),
         'clone_newuser': (56, 0x10000000 | 17, 0, 0, 0, 0)}
out = {}
for name, (nr, *args) in calls.items():
    rc = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    out[name] = 'OK' if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
print(json.dumps(out))
"""
    outcomes = attempt(sandbox, host, python3, body)
    assert all(v == "EPERM" for v in outcomes.values()), outcomes


def test_tiocsti_cannot_inject_into_the_terminal(
    sandbox: Sandbox, host: Host, python3: str
) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)  # deliver every byte, not only complete lines
    try:
        body = """
import fcntl, termios, os
out = {}
try:
    os.setsid()
except OSError:
    pass
try:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
except OSError as e:
    out['ctty'] = type(e).__name__
for name, req in (('tiocsti', termios.TIOCSTI), ('tiocsti_high', termios.TIOCSTI | (1 << 32))):
    try:
        for ch in b'echo PWNED\\n':
            fcntl.ioctl(0, req, bytes([ch]))
        out[name] = 'WROTE'
    except (OSError, OverflowError) as e:
        out[name] = type(e).__name__
sys.stdout.write(json.dumps(out))
"""
        result = sandbox.run(
            [python3, "-c", PRELUDE + body], workspace=host.workspace, mode="probe",
            timeout=30, stdin=slave,
        )  # fmt: skip
        outcomes = json.loads(result.stdout)
        assert outcomes.get("tiocsti") != "WROTE", outcomes
        assert outcomes.get("tiocsti_high") != "WROTE", outcomes
        os.set_blocking(slave, False)
        with pytest.raises(BlockingIOError):
            os.read(slave, 100)  # nothing was pushed into the terminal's input queue
    finally:
        os.close(master)
        os.close(slave)


def test_tiocsti_harness_detects_injection_without_a_sandbox(host: Host, python3: str) -> None:
    """Control: the same pty harness sees the injection when nothing blocks it."""
    import subprocess
    import sys

    legacy = Path("/proc/sys/dev/tty/legacy_tiocsti")
    if legacy.exists() and legacy.read_text().strip() == "0":
        pytest.skip("TIOCSTI is disabled by the kernel here (dev.tty.legacy_tiocsti=0)")
    master, slave = os.openpty()
    tty.setraw(slave)  # deliver every byte, not only complete lines
    try:
        code = (
            "import fcntl, termios, os\nos.setsid()\nfcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
            "fcntl.ioctl(0, termios.TIOCSTI, b'Z')\n"
        )
        subprocess.run([sys.executable, "-c", code], stdin=slave, check=True, timeout=30)
        os.set_blocking(slave, False)
        assert os.read(slave, 100) == b"Z"
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize("uid", [64101])
def test_fork_bomb_is_bounded(
    sandbox_with: SandboxFactory, host: Host, python3: str, uid: int, backend: str
) -> None:
    sandbox = sandbox_with(max_processes=24, uid=uid + (backend == "landlock"))
    body = """
import time
made = 0
for _ in range(300):
    try:
        if os.fork() == 0:
            time.sleep(5); os._exit(0)
        made += 1
    except OSError:
        break
print(json.dumps({'forks': str(made)}), flush=True)
os._exit(0)
"""
    outcomes = attempt(sandbox, host, python3, body)
    assert int(outcomes["forks"]) < 24
    assert processes_of(uid + (backend == "landlock")) == []


def test_memory_limit(sandbox_with: SandboxFactory, host: Host, python3: str) -> None:
    sandbox = sandbox_with(memory_mb=256)
    body = """
try:
    block = bytearray(1 << 30); out = 'ALLOCATED'
except MemoryError:
    out = 'MemoryError'
print(json.dumps({'alloc': out}))
"""
    assert attempt(sandbox, host, python3, body) == {"alloc": "MemoryError"}


def test_cpu_limit_kills_a_busy_loop(
    sandbox_with: SandboxFactory, host: Host, python3: str
) -> None:
    sandbox = sandbox_with(cpu_seconds=1)
    result = sandbox.run(
        [python3, "-c", "while True: pass"], workspace=host.workspace, mode="probe", timeout=60
    )
    assert not result.timed_out
    assert result.exit_code not in (0, None)


def test_file_size_and_tmp_size_limits(
    sandbox_with: SandboxFactory, host: Host, python3: str, backend: str
) -> None:
    sandbox = sandbox_with(max_file_mb=1, tmp_mb=4)
    body = """
import signal, tempfile
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
tmp = tempfile.gettempdir()
out = {'big': write(os.path.join(tmp, 'big'), 'x' * (2 << 20))}
written = 0
for i in range(20):
    r = write(os.path.join(tmp, f'f{i}'), 'y' * (900 << 10))
    if r != 'WROTE':
        out['fill'] = r
        break
    written += 1
out['files'] = str(written)
print(json.dumps(out))
"""
    outcomes = attempt(sandbox, host, python3, body)
    assert outcomes["big"] == "OSError"  # EFBIG
    if backend == "bwrap":  # Landlock has no sized tmpfs: only RLIMIT_FSIZE bounds a file
        assert int(outcomes["files"]) < 20
        assert outcomes["fill"] == "OSError"  # ENOSPC


@pytest.mark.parametrize("uid", [64111])
def test_timeout_leaves_no_process_behind(
    sandbox_with: SandboxFactory, host: Host, uid: int, backend: str
) -> None:
    uid = uid + (backend == "landlock")
    sandbox = sandbox_with(uid=uid)
    script = "setsid sleep 300 & (sleep 300 &) ; (env -i setsid sleep 300 &) ; exec sleep 300"
    result = sandbox.run(
        ["/bin/sh", "-c", script], workspace=host.workspace, mode="probe", timeout=1
    )
    assert result.timed_out
    assert result.exit_code is None
    assert processes_of(uid) == []


@pytest.mark.parametrize("uid", [64121])
def test_exit_leaves_no_daemon_behind(
    sandbox_with: SandboxFactory, host: Host, uid: int, backend: str
) -> None:
    uid = uid + (backend == "landlock")
    sandbox = sandbox_with(uid=uid)
    script = "setsid sleep 300 > /dev/null 2>&1 < /dev/null & "
    script += "(env -i setsid sleep 301 > /dev/null 2>&1 < /dev/null &) ; echo started"
    result = sandbox.run(
        ["/bin/sh", "-c", script], workspace=host.workspace, mode="probe", timeout=30
    )
    assert result.exit_code == 0
    assert processes_of(uid) == []


def test_output_is_capped(sandbox_with: SandboxFactory, host: Host) -> None:
    sandbox = sandbox_with(max_output_kb=64)
    result = sandbox.run(
        ["/bin/sh", "-c", "head -c 10000000 /dev/zero"], workspace=host.workspace, mode="probe",
        timeout=30,
    )  # fmt: skip
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout) == 64 * 1024


def test_workspace_stays_unreadable_when_its_mode_says_so(
    sandbox: Sandbox, host: Host, python3: str
) -> None:
    private = host.workspace / "private"
    private.mkdir(mode=0o700)
    (private / "key").write_text(CANARY)
    private.chmod(0o700)
    body = "print(json.dumps({'list': listdir('private'), 'read': read('private/key')}))"
    for mode in ("probe", "exec"):
        assert_blocked(attempt(sandbox, host, python3, body, mode=mode))
    assert stat.S_IMODE(private.stat().st_mode) == 0o700


INT80_C = r"""
#include <stdio.h>
int main(void) {
    long ret;
    /* i386 socket(AF_INET, SOCK_STREAM, 0) is 359 and ptrace is 26 in the int 0x80 table */
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(359), "b"(2), "c"(1), "d"(0) : "memory");
    printf("socket=%ld\n", ret);
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(26), "b"(0), "c"(0), "d"(0) : "memory");
    printf("ptrace=%ld\n", ret);
    return 0;
}
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 ABI test is x86_64's")
def test_i386_syscalls_cannot_bypass_seccomp(sandbox: Sandbox, host: Host) -> None:
    import shutil
    import subprocess

    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build the int 0x80 test")
    source = host.base / "int80.c"
    source.write_text(INT80_C)
    binary = host.workspace / "int80"
    built = subprocess.run(
        [gcc, "-O0", "-static", "-o", str(binary), str(source)], capture_output=True, check=False
    )
    if built.returncode != 0:
        pytest.skip(f"cannot build a static i386-syscall binary: {built.stderr[-200:]!r}")
    binary.chmod(0o755)
    unsandboxed = subprocess.run([str(binary)], capture_output=True, check=False)
    assert b"socket=" in unsandboxed.stdout  # the harness works: the calls go through outside
    done = sandbox.run(["./int80"], workspace=host.workspace, mode="probe", timeout=30)
    assert done.exit_code in (-31, 128 + 31), done  # SIGSYS: the foreign-arch action kills it
    assert b"socket=" not in done.stdout


def test_setuid_binaries_give_no_privilege(sandbox: Sandbox, host: Host) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to plant a setuid-root binary")
    planted = host.workspace / "suid_id"
    planted.write_bytes(Path("/usr/bin/id").read_bytes())
    os.chown(planted, 0, 0)
    planted.chmod(0o4755)
    for mode in ("probe", "exec"):
        done = sandbox.run(["./suid_id", "-u"], workspace=host.workspace, mode=mode, timeout=30)  # type: ignore[arg-type]
        assert done.exit_code == 0, done
        assert done.stdout.strip() != b"0"
    status = sandbox.run(
        ["/bin/cat", "/proc/self/status"], workspace=host.workspace, mode="probe", timeout=30
    )
    if status.exit_code == 0:  # Landlock does not grant /proc
        assert b"NoNewPrivs:\t1" in status.stdout


def test_host_processes_and_their_environment_are_hidden(
    sandbox: Sandbox, host: Host, python3: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEL_HOST_CANARY", CANARY)  # visible in this (host) process's environ
    body = """
found = []
try:
    pids = [p for p in os.listdir('/proc') if p.isdigit()]
except Exception as e:
    pids = []
for pid in pids:
    r = read(f'/proc/{pid}/environ')
    if r.startswith('READ'):
        found.append(r)
hostpid = read(f'/proc/{sys.argv[1]}/environ')
print(json.dumps({'pids': str(len(pids)), 'host': hostpid, 'leaks': str(len(found))}))
"""
    outcomes = attempt(sandbox, host, python3, body, str(os.getpid()))
    assert not outcomes["host"].startswith("READ")
    assert int(outcomes["pids"]) < 10  # bwrap: its own pid namespace; Landlock: /proc denied


def test_exec_mode_copes_with_special_files(sandbox: Sandbox, host: Host) -> None:
    os.mkfifo(host.workspace / "fifo")
    (host.workspace / "loop").symlink_to("loop")
    (host.workspace / "dirlink").symlink_to("sub")
    done = sandbox.run(
        ["/bin/sh", "-c", "ls; cat dirlink/nested.txt"], workspace=host.workspace, mode="exec",
        timeout=30,
    )  # fmt: skip
    assert done.exit_code == 0, done
    names = done.stdout.decode().split()
    assert "fifo" not in names  # special files are not copied
    assert {"loop", "dirlink", "data.txt"} <= set(names)
    assert "nested" in names
