"""``user_mounts``: the exact bwrap mounts and descriptors of HOME, view, workspace and controls.

In-process, so mutmut mutates ``keel.sandbox.exec._bwrap.user_mounts`` (``keel exec`` runs it
only in a subprocess). Each queued mount is pinned as ``(kind order, destination, arguments)``
in the order ``user_mounts`` adds it, with the descriptors bwrap must inherit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from keel.sandbox.exec._bwrap import PROXY_MOUNT, Mounts, system_args, user_mounts
from keel.sandbox.exec._control import Scan
from keel.sandbox.exec._view import View

ROOT = "/work/ws"
HOME = "/home/dev"
TMP_BYTES = 64 << 20
ROOT_FD, GIT_FD, SUB_GIT_FD, KEEL_FD, HOOKS_FD, MAKE_FD, PROXY_FD = 40, 41, 42, 43, 44, 45, 46
GITCONFIG = (f"{HOME}/.gitconfig", b"[user]\n\tname = dev\n")
TMPFS, RW, RO, MASK, DATA = 0, 1, 2, 3, 3  # _exec_bwrap._ORDER


class Case:
    """A view with one of every kind of entry, its masks real paths of each file type."""

    def __init__(self, base: Path) -> None:
        (base / "dir").mkdir()
        (base / "file").write_text("secret\n")
        (base / "link").symlink_to(base / "dir")
        self.mask_dir = str(base / "dir")
        self.mask_file = str(base / "file")
        self.mask_link = str(base / "link")
        self.mask_missing = str(base / "missing")
        self.view = View(
            etc=("/etc/hosts",),
            home=HOME,
            read_only=("/opt/tool", "/srv/share/lib"),
            writable=(ROOT, "/var/cache/build", "/srv/out"),
            masks=(self.mask_dir, self.mask_file, self.mask_link, self.mask_missing),
            git_configs=(GITCONFIG,),
        )
        self.scan = Scan()
        self.scan.gitdir_fds = {".git": GIT_FD, "sub/.git": SUB_GIT_FD}
        self.scan.fds = {".keel": KEEL_FD, ".git/hooks": HOOKS_FD, "Makefile": MAKE_FD}
        self.scan.secrets = [".env", "keys/id_rsa"]


@pytest.fixture
def case(tmp_path: Path) -> Case:
    return Case(tmp_path)


@contextmanager
def _built(case: Case, proxy_fd: int | None) -> Iterator[Mounts]:
    mounts = user_mounts(ROOT, ROOT_FD, case.view, case.scan, TMP_BYTES, proxy_fd)
    try:
        yield mounts
    finally:
        fake = {ROOT_FD, GIT_FD, SUB_GIT_FD, KEEL_FD, HOOKS_FD, MAKE_FD, PROXY_FD}
        for fd in set(mounts.fds) - fake:  # the git config's memfd: user_mounts opens it
            os.close(fd)


def _expected(case: Case, data_fd: int) -> list[tuple[int, str, list[str]]]:
    size = str(TMP_BYTES)
    return [
        (TMPFS, HOME, ["--size", size, "--perms", "0700", "--tmpfs", HOME]),
        (RO, "/opt/tool", ["--ro-bind", "/opt/tool", "/opt/tool"]),
        (RO, "/srv/share/lib", ["--ro-bind", "/srv/share/lib", "/srv/share/lib"]),
        (RW, ROOT, ["--bind-fd", str(ROOT_FD), ROOT]),
        (RW, "/var/cache/build", ["--bind", "/var/cache/build", "/var/cache/build"]),
        (RW, "/srv/out", ["--bind", "/srv/out", "/srv/out"]),
        (RW, f"{ROOT}/.git", ["--bind-fd", str(GIT_FD), f"{ROOT}/.git"]),
        (RW, f"{ROOT}/sub/.git", ["--bind-fd", str(SUB_GIT_FD), f"{ROOT}/sub/.git"]),
        (
            TMPFS,
            f"{ROOT}/.keel",
            ["--size", "4096", "--tmpfs", f"{ROOT}/.keel", "--remount-ro", f"{ROOT}/.keel"],
        ),
        (RO, f"{ROOT}/.git/hooks", ["--ro-bind-fd", str(HOOKS_FD), f"{ROOT}/.git/hooks"]),
        (RO, f"{ROOT}/Makefile", ["--ro-bind-fd", str(MAKE_FD), f"{ROOT}/Makefile"]),
        (MASK, f"{ROOT}/.env", ["--ro-bind", "/dev/null", f"{ROOT}/.env"]),
        (MASK, f"{ROOT}/keys/id_rsa", ["--ro-bind", "/dev/null", f"{ROOT}/keys/id_rsa"]),
        (
            MASK,
            case.mask_dir,
            ["--size", "4096", "--tmpfs", case.mask_dir, "--remount-ro", case.mask_dir],
        ),
        (MASK, case.mask_file, ["--ro-bind", "/dev/null", case.mask_file]),
        (MASK, case.mask_link, ["--ro-bind", "/dev/null", case.mask_link]),
        (MASK, case.mask_missing, ["--ro-bind", "/dev/null", case.mask_missing]),
        (DATA, GITCONFIG[0], ["--ro-bind-data", str(data_fd), GITCONFIG[0]]),
    ]


def _queued(mounts: Mounts) -> list[tuple[int, str, list[str]]]:
    return [(order, dest, args) for _, order, dest, args in mounts.items]


def test_every_mount_and_descriptor_without_a_proxy(case: Case) -> None:
    with _built(case, None) as mounts:
        fds = [ROOT_FD, GIT_FD, SUB_GIT_FD, HOOKS_FD, MAKE_FD]
        assert mounts.fds[:-1] == fds
        data_fd = mounts.fds[-1]
        assert data_fd not in fds
        assert _queued(mounts) == _expected(case, data_fd)


def test_the_proxy_directory_is_bound_read_only_from_its_descriptor(case: Case) -> None:
    with _built(case, PROXY_FD) as mounts:
        data_fd = mounts.fds[-2]
        assert mounts.fds == [ROOT_FD, GIT_FD, SUB_GIT_FD, HOOKS_FD, MAKE_FD, data_fd, PROXY_FD]
        proxy = (RO, PROXY_MOUNT, ["--ro-bind-fd", str(PROXY_FD), PROXY_MOUNT])
        assert _queued(mounts) == [*_expected(case, data_fd), proxy]
        assert PROXY_MOUNT == "/run/keel"


def test_the_filtered_git_config_is_a_rewound_memfd(case: Case) -> None:
    with _built(case, None) as mounts:
        data_fd = mounts.fds[-1]
        assert os.readlink(f"/proc/self/fd/{data_fd}").startswith("/memfd:keel-data")
        assert os.read(data_fd, 4096) == GITCONFIG[1]


def test_home_tmpfs_is_sized_from_the_limit(case: Case) -> None:
    mounts = user_mounts(ROOT, ROOT_FD, case.view, Scan(), 1 << 20, None)
    try:
        assert mounts.items[0][3] == ["--size", "1048576", "--perms", "0700", "--tmpfs", HOME]
    finally:
        os.close(mounts.fds[-1])


SCRIPT = """
cat Makefile; cat .env || echo env-hidden; ls -A .keel
cat "$HOME/.gitconfig"; ls -A "$TREE/secret.d"; cat "$TREE/visible"
ls -A "$HOME" | grep -v .gitconfig; echo made > out.txt
echo x > Makefile || echo ro-control; touch .keel/x || echo ro-keel
touch "$TREE/new" || echo ro-view
"""


def test_the_mounts_show_the_workspace_and_hide_its_secrets_in_a_real_bwrap(
    workdir: Path,
) -> None:
    binary = shutil.which("bwrap")
    if binary is None:
        pytest.skip("bwrap is not installed")
    ws, tree, home = workdir / "ws", workdir / "tree", workdir / "home"
    for path in (ws / ".keel", tree / "secret.d", home):
        path.mkdir(parents=True)
    (ws / "Makefile").write_text("all:\n")
    (home / ".netrc").write_text("password hunter2\n")
    (ws / ".env").write_text("TOKEN=hunter2\n")
    (ws / ".keel" / "hook.sock").write_text("")
    (tree / "visible").write_text("tool\n")
    (tree / "secret.d" / "key").write_text("hunter2\n")
    config = (str(home / ".gitconfig"), GITCONFIG[1])
    view = View((), str(home), (str(tree),), (str(ws),), (str(tree / "secret.d"),), (config,))
    opened = [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in (ws, ws / ".keel", ws / "Makefile")]
    scan = Scan()
    scan.fds = {".keel": opened[1], "Makefile": opened[2]}
    scan.secrets = [".env"]
    mounts = user_mounts(str(ws), opened[0], view, scan, TMP_BYTES, None)
    try:
        argv = [binary, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
        argv += [*system_args(view, TMP_BYTES, str(workdir / "state")), *mounts.args()]
        argv += ["--remount-ro", "/", "--chdir", str(ws), "--", "/bin/sh", "-c", SCRIPT]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TREE": str(tree)}
        done = subprocess.run(
            argv, env=env, pass_fds=mounts.fds, capture_output=True, text=True, check=False
        )
    finally:
        for fd in {*opened, *mounts.fds}:
            os.close(fd)
    assert done.stdout.split() == [
        "all:",
        "env-hidden",
        *GITCONFIG[1].decode().split(),
        "tool",
        "ro-control",
        "ro-keel",
        "ro-view",
    ], done.stderr
    assert "hunter2" not in done.stdout
    assert (ws / "out.txt").read_text() == "made\n"
    assert (ws / "Makefile").read_text() == "all:\n"
    assert sorted(os.listdir(ws / ".keel")) == ["hook.sock"]
