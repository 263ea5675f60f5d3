"""keel exec's bwrap command line, in process: mount order, system mounts, argv, descriptors.

Pins what ``keel.sandbox.exec._bwrap`` hands bwrap (every flag and its place: a reordered or
misspelt mount is a hole or a failed start), and the small descriptor helpers around it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path
from unittest.mock import ANY

import pytest

from keel.sandbox.exec import _bwrap as eb
from keel.sandbox.exec._view import SMALL_DIR, View, etc_mirror


def _view(etc: tuple[str, ...]) -> View:
    return View(etc=etc, home="/home/u", read_only=(), writable=(), masks=(), git_configs=())


# --- Mounts: shallowest destination first, then tmpfs < rw < ro < mask/data, then the path --


def _order(*items: tuple[str, str]) -> list[str]:
    """The destinations of ``(kind, dest)`` mounts in the order ``Mounts.args`` emits them."""
    m = eb.Mounts()
    for kind, dest in items:
        m.add(kind, dest, ["--x", dest])
    return m.args()[1::2]


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        # depth beats kind: a deeper tmpfs never goes under a shallower read-only bind
        ((("tmpfs", "/a/b/c"), ("ro", "/a/b")), ["/a/b", "/a/b/c"]),
        # a trailing slash is not a level (``/a/b/`` is as deep as ``/a/b``)
        ((("tmpfs", "/a/b/c"), ("ro", "/a/b/")), ["/a/b/", "/a/b/c"]),
        ((("tmpfs", "/a/b/c/"), ("ro", "/a/b/")), ["/a/b/", "/a/b/c/"]),
        # only slashes are stripped: a name ending in X keeps its depth
        ((("tmpfs", "/a/b"), ("ro", "/a/X")), ["/a/b", "/a/X"]),
        # same depth: kind order, whatever the paths' alphabetical order
        ((("mask", "/a"), ("ro", "/b"), ("rw", "/c"), ("tmpfs", "/d")), ["/d", "/c", "/b", "/a"]),
        ((("data", "/a"), ("ro", "/b")), ["/b", "/a"]),
        # same depth and kind: by path, not by the arguments
        ((("ro", "/b"), ("ro", "/a")), ["/a", "/b"]),
    ],
)
def test_mounts_order(items: tuple[tuple[str, str], ...], expected: list[str]) -> None:
    assert _order(*items) == expected


def test_mounts_keep_every_argument_and_insertion_order_on_ties() -> None:
    m = eb.Mounts()
    m.add("ro", "/b/x", ["--ro-bind", "/b/x", "/b/x"])
    m.add("ro", "/a", ["--ro-bind", "/z", "/a"])
    m.add("ro", "/a", ["--ro-bind", "/a", "/a"], 7)  # same dest and kind: stays second
    m.add("tmpfs", "/a", ["--size", "1", "--tmpfs", "/a"])
    assert m.args() == [
        *("--size", "1", "--tmpfs", "/a"),
        *("--ro-bind", "/z", "/a"),
        *("--ro-bind", "/a", "/a"),
        *("--ro-bind", "/b/x", "/b/x"),
    ]
    assert m.fds == [7]
    m.add("rw", "/c", ["--bind-fd", "0", "/c"], 0)
    assert m.fds == [7, 0]
    assert eb.Mounts().args() == []


def test_mounts_reject_an_unknown_kind() -> None:
    with pytest.raises(KeyError):
        eb.Mounts().add("bind", "/a", ["--bind", "/a", "/a"])


# --- system_args --------------------------------------------------------------------------

_TAIL = ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]


def _sized(size: str) -> list[str]:
    return [
        *("--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"),
        *("--size", size, "--perms", "1777", "--tmpfs", "/tmp"),
    ]


@pytest.fixture
def root_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """ROOT_LINKS replaced by a symlink, a directory, a missing path and a plain file."""
    link = tmp_path / "lnk"
    link.symlink_to("usr/lnk")
    real = tmp_path / "dir"
    real.mkdir()
    (tmp_path / "file").write_text("x")
    links = (str(link), str(real), str(tmp_path / "missing"), str(tmp_path / "file"))
    monkeypatch.setattr(eb, "ROOT_LINKS", links)
    return str(link), str(real)


def test_system_args_without_a_mirror(tmp_path: Path, root_links: tuple[str, str]) -> None:
    state = tmp_path / "state-is-a-file"
    state.write_text("")  # the mirror cannot be built: each /etc entry is bound on its own
    view = _view(("/etc/passwd", "/etc/ssl"))
    assert etc_mirror(view.etc, str(state)) is None
    link, real = root_links
    assert eb.system_args(view, 12345, str(state)) == [
        *("--ro-bind", "/usr", "/usr"),
        *("--symlink", "usr/lnk", link),
        *("--ro-bind", real, real),
        *("--ro-bind", "/etc/passwd", "/etc/passwd"),
        *("--ro-bind", "/etc/ssl", "/etc/ssl"),
        *("--symlink", "../proc/self/mounts", "/etc/mtab"),
        *_TAIL,
        *_sized("12345"),
    ]


def test_system_args_with_a_mirror(tmp_path: Path, root_links: tuple[str, str]) -> None:
    view = _view(("/etc/passwd", "/etc/ssl", "/etc/alternatives"))
    argv = eb.system_args(view, 4096, str(tmp_path))
    mirror = etc_mirror(view.etc, str(tmp_path))
    assert mirror is not None and mirror[1] == ("/etc/ssl", "/etc/alternatives")
    assert (Path(mirror[0]) / "passwd").read_bytes() == Path("/etc/passwd").read_bytes()
    link, real = root_links
    assert argv == [
        *("--ro-bind", "/usr", "/usr"),
        *("--symlink", "usr/lnk", link),
        *("--ro-bind", real, real),
        *("--ro-bind", mirror[0], "/etc"),
        *("--ro-bind", "/etc/ssl", "/etc/ssl"),
        *("--ro-bind", "/etc/alternatives", "/etc/alternatives"),
        *_TAIL,
        *_sized("4096"),
    ]


def test_system_args_host_root_links(tmp_path: Path) -> None:
    """The real ROOT_LINKS: each symlink recreated, each directory bound, the rest skipped."""
    expected: list[str] = []
    for path in eb.ROOT_LINKS:
        if os.path.islink(path):
            expected += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            expected += ["--ro-bind", path, path]
    argv = eb.system_args(_view(()), 1, str(tmp_path))
    assert argv[:3] == ["--ro-bind", "/usr", "/usr"]
    assert argv[3 : 3 + len(expected)] == expected
    assert argv[-len(_TAIL) - 12 :] == [*_TAIL, *_sized("1")]


# --- bwrap_argv ---------------------------------------------------------------------------


def test_bwrap_argv_exact() -> None:
    m = eb.Mounts()
    m.add("ro", "/w/b", ["--ro-bind-fd", "9", "/w/b"], 9)
    m.add("rw", "/w", ["--bind-fd", "8", "/w"], 8)
    argv = eb.bwrap_argv(
        "/usr/bin/bwrap",
        system=["--ro-bind", "/usr", "/usr"],
        mounts=m,
        cwd="/w/sub",
        seccomp_fd=11,
        status_fd=12,
        command=["/bin/sh", "-c", "echo --"],
    )
    assert argv == [
        "/usr/bin/bwrap",
        *("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"),
        *("--new-session", "--cap-drop", "ALL"),
        *("--ro-bind", "/usr", "/usr"),
        *("--bind-fd", "8", "/w"),
        *("--ro-bind-fd", "9", "/w/b"),
        *("--remount-ro", "/", "--chdir", "/w/sub"),
        *("--seccomp", "11", "--json-status-fd", "12"),
        *("--", "/bin/sh", "-c", "echo --"),
    ]


# --- descriptor helpers -------------------------------------------------------------------


def test_open_fds_lists_this_process() -> None:
    r, w = os.pipe()
    # far above the lowest free number, which listing /proc/self/fd itself takes
    high = fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, 900)
    os.close(r)
    os.close(w)
    try:
        fds = eb._open_fds()
        assert all(isinstance(fd, int) for fd in fds)
        assert {0, 1, 2, high} <= set(fds)
        assert len(fds) == len(set(fds))
    finally:
        os.close(high)
    assert high not in eb._open_fds()


def test_drain_reads_everything_left_without_blocking() -> None:
    r, w = os.pipe()
    try:
        fcntl.fcntl(r, fcntl.F_SETPIPE_SZ, 1 << 20)
        data = bytes(range(256)) * 800  # 204800 bytes: more than one 64 KiB read
        assert os.write(w, data) == len(data)
        os.close(w)
        w = -1
        assert eb._drain(r) == data
        assert os.get_blocking(r) is False
        assert eb._drain(r) == b""
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    # Checked only now (a blocking drain would hang here): a writer still open somewhere
    # (a process inside kept the status pipe) does not stop the drain at an empty pipe.
    r, w = os.pipe()
    try:
        os.write(w, b'{"exit-code": 3}')
        assert eb._drain(r) == b'{"exit-code": 3}'
        assert eb._drain(r) == b""
    finally:
        os.close(r)
        os.close(w)


def test_data_fd_is_an_anonymous_file_at_offset_zero() -> None:
    content = b"[user]\n\tname = X\n"
    fd = eb._data_fd(content)
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == "/memfd:keel-data (deleted)"
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        assert os.read(fd, 4096) == content
        # created without MFD_CLOEXEC/sealing flags (BwrapProcess passes it to bwrap)
        assert os.get_inheritable(fd) is True
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) == fcntl.F_SEAL_SEAL
    finally:
        os.close(fd)


# --- the argv bwrap really runs -----------------------------------------------------------


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_bwrap_runs_the_argv(tmp_path: Path) -> None:
    """The pinned command line works and confines by effect: read-only ``/``, ``/proc`` and
    inner binds, a writable workspace, a 1777 ``/tmp``, bwrap's status on the status fd."""
    from keel.sandbox.os._seccomp import seccomp_blob

    ws = tmp_path / "ws"
    (ws / "ro").mkdir(parents=True)
    ws_fd = os.open(ws, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    seccomp = os.memfd_create("keel-seccomp", os.MFD_CLOEXEC)
    os.write(seccomp, seccomp_blob("exec"))
    os.lseek(seccomp, 0, os.SEEK_SET)
    status_r, status_w = os.pipe()
    m = eb.Mounts()
    m.add("ro", f"{ws}/ro", ["--ro-bind", f"{ws}/ro", f"{ws}/ro"])  # deeper: mounted after
    m.add("rw", str(ws), ["--bind-fd", str(ws_fd), str(ws)], ws_fd)
    script = (
        "stat -c %a /tmp; echo t > /tmp/t && cat /tmp/t; echo w > w && cat w; pwd;"
        " echo s > /dev/shm/s && cat /dev/shm/s;"
        " for p in /x ro/x /proc/sys/kernel/hostname;"
        " do (true > $p) 2>/dev/null || echo no $p; done;"
        " exit 7"
    )
    try:
        argv = eb.bwrap_argv(
            str(shutil.which("bwrap")),
            system=eb.system_args(_view(("/etc/passwd",)), 1 << 20, str(tmp_path / "state")),
            mounts=m,
            cwd=str(ws),
            seccomp_fd=seccomp,
            status_fd=status_w,
            command=["/bin/sh", "-c", script],
        )
        done = subprocess.run(
            argv,
            pass_fds=(seccomp, status_w, ws_fd),
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        os.close(status_w)
        status_w = -1
        status = eb._drain(status_r)
    finally:
        for fd in (ws_fd, seccomp, status_r, status_w):
            if fd >= 0:
                os.close(fd)
    assert (done.returncode, done.stderr) == (7, "")
    assert done.stdout.split("\n") == [
        *("1777", "t", "w", str(ws), "s"),
        *("no /x", "no ro/x", "no /proc/sys/kernel/hostname", ""),
    ]
    assert (ws / "w").read_text() == "w\n"
    assert b'"child-pid": ' in status and b'{ "exit-code": 7 }' in status


# --- the /etc mirror: small directories copied, large ones bound ---------------------------


def _fake_etc(tmp_path: Path) -> Path:
    etc = tmp_path / "etc"
    (etc / "small" / "sub").mkdir(parents=True)
    (etc / "small" / "a.conf").write_text("a = 1\n")
    (etc / "small" / "hook").write_text("#!/bin/sh\n")
    (etc / "small" / "hook").chmod(0o755)
    (etc / "small" / "sub" / "b.conf").write_text("b = 2\n")
    (etc / "small" / "link").symlink_to("a.conf")
    (etc / "big").mkdir()
    for i in range(SMALL_DIR + 1):
        (etc / "big" / f"f{i}").write_text(str(i))
    (etc / "closed").mkdir()
    (etc / "closed" / "secret").write_text("s3cret")
    (etc / "closed" / "secret").chmod(0o600)
    (etc / "hosts").write_text("127.0.0.1 localhost\n")
    return etc


def test_etc_mirror_copies_small_directories_and_binds_the_rest(tmp_path: Path) -> None:
    etc = _fake_etc(tmp_path)
    entries = tuple(str(etc / n) for n in ("hosts", "small", "big", "closed"))
    mirror = etc_mirror(entries, str(tmp_path / "state"), etc_root=str(etc))
    assert mirror is not None
    copy, bound = Path(mirror[0]), mirror[1]
    assert bound == (str(etc / "big"), str(etc / "closed"))  # too many entries; not all readable
    assert (copy / "small" / "a.conf").read_text() == "a = 1\n"
    assert (copy / "small" / "sub" / "b.conf").read_text() == "b = 2\n"
    assert os.readlink(copy / "small" / "link") == "a.conf"
    assert (copy / "small" / "hook").stat().st_mode & 0o777 == 0o755
    assert (copy / "small" / "a.conf").stat().st_mode & 0o777 == 0o644
    assert (copy / "big").is_dir() and not any((copy / "big").iterdir())  # bound over
    assert not (copy / "closed" / "secret").exists()  # never copied world-readable


def test_etc_mirror_follows_a_copied_directory(tmp_path: Path) -> None:
    etc = _fake_etc(tmp_path)
    entries = (str(etc / "small"),)
    state = str(tmp_path / "state")
    first = etc_mirror(entries, state, etc_root=str(etc))
    (etc / "small" / "sub" / "b.conf").write_text("b = 3, longer\n")
    changed = etc_mirror(entries, state, etc_root=str(etc))
    assert first is not None and changed is not None and changed[0] != first[0]
    assert (Path(changed[0]) / "small" / "sub" / "b.conf").read_text() == "b = 3, longer\n"
    assert not Path(first[0]).exists()  # the stale copy is removed
    (etc / "small" / "new.conf").write_text("n\n")
    added = etc_mirror(entries, state, etc_root=str(etc))
    assert added is not None and added[0] != changed[0]
    assert (Path(added[0]) / "small" / "new.conf").read_text() == "n\n"


def test_etc_mirror_binds_a_directory_that_grew_past_the_limit(tmp_path: Path) -> None:
    etc = _fake_etc(tmp_path)
    entries = (str(etc / "small"),)
    state = str(tmp_path / "state")
    assert etc_mirror(entries, state, etc_root=str(etc)) == (ANY, ())
    for i in range(SMALL_DIR):
        (etc / "small" / f"more{i}").write_text("x")
    grown = etc_mirror(entries, state, etc_root=str(etc))
    assert grown is not None and grown[1] == (str(etc / "small"),)
