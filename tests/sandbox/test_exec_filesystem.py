"""keel exec, by effect: what the contained command can read and write on the host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from exec_helpers import Box


def test_runs_in_place_in_the_workspace_as_the_invoking_user(box: Box) -> None:
    (box.ws / "sub").mkdir()
    done = box.sh("pwd; id -u; echo made > made.txt", cwd=box.ws / "sub")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(box.ws / "sub"), str(os.getuid())]
    made = box.ws / "sub" / "made.txt"
    assert made.read_text() == "made\n"
    assert (made.stat().st_uid, made.stat().st_gid) == (os.getuid(), os.getgid())


def test_cwd_outside_the_workspace_runs_at_the_root(box: Box) -> None:
    done = box.run("/bin/pwd", cwd=box.outside)
    assert done.stdout.strip() == str(box.ws)


@pytest.mark.parametrize(
    "attack",
    [
        "echo x > {marker}",
        "echo x > /tmp/../{rel}",
        "cd .. && echo x > outside/marker.txt",
        "ln -s {marker} link && echo x > link",
        "ln -s {outside} dirlink && echo x > dirlink/new.txt",
        "ln {marker} hard && echo x >> hard",
        "cp /bin/sh {outside}/sh",
        "mkdir {outside}/newdir",
        "rm -f {marker}",
        "mv {marker} moved",
        "touch -d 2001-01-01 {marker}",
        "chmod 777 {marker}",
    ],
)
def test_nothing_outside_the_writable_set_changes(box: Box, attack: str) -> None:
    # The documented Landlock gap: it does not govern a file's mode and times, only its
    # content and names; for those two attacks the content is what must hold there.
    gap = box.backend == "landlock" and attack.startswith(("touch", "chmod"))
    marker = box.outside / "marker.txt"
    before = (marker.read_bytes(), marker.stat().st_mode, marker.stat().st_mtime_ns)
    script = attack.format(marker=marker, outside=box.outside, rel=str(marker).lstrip("/"))
    box.sh(script)
    after = (marker.read_bytes(), marker.stat().st_mode, marker.stat().st_mtime_ns)
    assert after[:1] == before[:1] if gap else after == before
    assert sorted(p.name for p in box.outside.iterdir()) == ["marker.txt"]


def test_writable_paths_from_keel_toml_are_writable(box: Box) -> None:
    extra = box.base / "cache"
    extra.mkdir(mode=0o755)
    box.config(f'[sandbox]\nwritable = ["{extra}"]\n')
    done = box.sh(f"echo ok > {extra}/w.txt && echo no > {box.outside}/w.txt")
    assert (extra / "w.txt").read_text() == "ok\n"
    assert not (box.outside / "w.txt").exists()
    assert done.returncode != 0


def test_private_tmp_does_not_reach_the_host(box: Box) -> None:
    done = box.sh('echo secret > "$TMPDIR/kx-private-probe" && ls "$TMPDIR"')
    assert done.returncode == 0, done.stderr
    assert "kx-private-probe" in done.stdout
    assert not Path("/tmp/kx-private-probe").exists()


def test_system_files_programs_need_are_readable(box: Box) -> None:
    tmp = "/tmp" if box.backend == "bwrap" else '"$TMPDIR"'  # Landlock: /tmp is the host's
    done = box.sh(f"cat /etc/os-release >/dev/null && ls {tmp} >/dev/null && cat ~/.gitconfig")
    assert done.returncode == 0, done.stderr
    assert "Box Tester" in done.stdout


@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root/.ssh"])
def test_host_secrets_are_not_readable(box: Box, path: str) -> None:
    done = box.sh(f"cat {path} || ls {path}/")
    assert done.returncode != 0
    assert "root:" not in done.stdout
    assert done.stdout == ""


def test_ssl_private_keys_are_not_visible(bwrap_box: Box) -> None:
    done = bwrap_box.sh("ls /etc/ssl/private /etc/ssh")
    assert done.returncode != 0
    assert done.stdout == ""


def test_read_only_binds_cannot_be_remounted_writable(bwrap_box: Box) -> None:
    script = (
        "mount -o remount,rw /usr; mount -o remount,rw /; mount -t tmpfs none /mnt; "
        "umount /etc; echo x > /usr/kx-probe; echo done"
    )
    done = bwrap_box.sh(script)
    assert "done" in done.stdout
    assert not Path("/usr/kx-probe").exists()


def test_root_inside_has_no_capabilities_and_no_new_privileges(box: Box) -> None:
    done = box.run("/usr/bin/python3", "-c", _CAPS)
    assert done.returncode == 0, done.stderr
    caps, nnp = done.stdout.split()
    assert int(caps, 16) == 0
    assert nnp == "1"


_CAPS = """
import os
try:
    text = open('/proc/self/status').read()
except OSError:  # Landlock: /proc is not granted; ask the kernel directly
    import ctypes
    libc = ctypes.CDLL(None)
    bound = sum(1 for cap in range(41) if libc.prctl(23, cap, 0, 0, 0) == 1)
    print(f"{bound:x}", libc.prctl(39, 0, 0, 0, 0))
else:
    fields = dict(line.split(':\\t', 1) for line in text.splitlines() if ':\\t' in line)
    print(fields['CapEff'].strip(), fields['NoNewPrivs'].strip())
"""


def test_proc_sys_and_sysrq_are_read_only(bwrap_box: Box) -> None:
    done = bwrap_box.sh(
        "echo 1 > /proc/sys/vm/drop_caches; echo rc=$?; echo h > /proc/sysrq-trigger; echo rc=$?"
    )
    assert done.stdout.split() == ["rc=2", "rc=2"] or "rc=0" not in done.stdout


def test_host_processes_are_invisible(bwrap_box: Box) -> None:
    done = bwrap_box.sh("ls /proc | grep '^[0-9]'")
    pids = {int(p) for p in done.stdout.split()}
    assert 0 < len(pids) < 10
    assert max(pids) < 20  # numbered from 1 in its own pid namespace


def test_no_descriptor_of_the_caller_leaks_inside(box: Box, tmp_path: Path) -> None:
    leak = open(tmp_path / "leak.txt", "w")  # noqa: SIM115
    try:
        os.set_inheritable(leak.fileno(), True)
        done = box.run(
            "/usr/bin/python3",
            "-c",
            "import os; print(sorted(int(f) for f in os.listdir('/dev/fd')))",
        )
    finally:
        leak.close()
    fds = [int(f) for f in done.stdout.strip()[1:-1].split(",") if f.strip()]
    assert [f for f in fds if f > 3] == []


def test_setuid_modes_are_refused(box: Box) -> None:
    target = box.ws / "tool"
    target.write_text("#!/bin/sh\n")
    done = box.sh(f"chmod 4755 {target}; chmod 2755 {target}; chmod 755 {target}")
    assert target.stat().st_mode & 0o7777 == 0o755, done.stderr


_TIOCSTI = """
import fcntl, os, termios
try:
    os.setsid()
except OSError:
    pass
try:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
except OSError:
    pass
for request in (termios.TIOCSTI, termios.TIOCSTI | (1 << 32)):
    try:
        for ch in b"echo PWNED\\n":
            fcntl.ioctl(0, request, bytes([ch]))
        print("WROTE")
    except (OSError, OverflowError) as exc:
        print(type(exc).__name__)
"""


def test_the_callers_terminal_cannot_be_injected_into(box: Box) -> None:
    import tty

    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        done = box.run("/usr/bin/python3", "-c", _TIOCSTI, stdin=slave)
        assert "WROTE" not in done.stdout, done.stdout
        os.set_blocking(slave, False)
        with pytest.raises(BlockingIOError):
            os.read(slave, 100)  # nothing was pushed into the terminal's input queue
    finally:
        os.close(master)
        os.close(slave)
