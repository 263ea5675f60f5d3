"""Pieces every backend shares: the sandbox identity, rlimits, the environment, scratch dirs."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import resource
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from keel.core.errors import SandboxError
from keel.sandbox.probe._python import can_reach

TYPE_CHECKING = False
if TYPE_CHECKING:
    from keel.core.schema import SandboxConfig

BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the sandboxed process runs as; ``drop`` when keel runs as root and must switch."""

    uid: int
    gid: int
    drop: bool


def identity(config: SandboxConfig) -> Identity:
    """The unprivileged identity for sandboxed processes (never root)."""
    if os.geteuid() != 0:
        return Identity(os.getuid(), os.getgid(), False)
    if config.uid <= 0:
        raise SandboxError(
            "[sandbox] uid must be an unprivileged uid, not root", code="sandbox.config"
        )
    try:
        gid = pwd.getpwuid(config.uid).pw_gid
    except KeyError:
        gid = config.uid
    return Identity(config.uid, gid, True)


def rlimits(config: SandboxConfig) -> tuple[tuple[int, int, int], ...]:
    """``(resource, soft, hard)`` triples from the config, clamped to the current hard limits."""
    mib = 1 << 20
    wanted = (
        (resource.RLIMIT_NPROC, config.max_processes, config.max_processes),
        (resource.RLIMIT_AS, config.memory_mb * mib, config.memory_mb * mib),
        # hard > soft so the process gets SIGXCPU first rather than a bare SIGKILL.
        (resource.RLIMIT_CPU, config.cpu_seconds, config.cpu_seconds + 1),
        (resource.RLIMIT_FSIZE, config.max_file_mb * mib, config.max_file_mb * mib),
        (resource.RLIMIT_NOFILE, config.max_open_files, config.max_open_files),
        (resource.RLIMIT_CORE, 0, 0),
    )
    return tuple((res, *_clamp(res, soft, hard)) for res, soft, hard in wanted)


def _clamp(res: int, soft: int, hard: int) -> tuple[int, int]:
    _, cur_hard = resource.getrlimit(res)
    if cur_hard != resource.RLIM_INFINITY:
        hard = min(hard, cur_hard)
        soft = min(soft, hard)
    return soft, hard


def limits_preexec(
    limits: tuple[tuple[int, int, int], ...], then: Callable[[], None] | None = None
) -> Callable[[], None]:
    """A ``preexec_fn`` that applies ``limits`` (after the uid switch), then ``then``."""

    def apply() -> None:
        for res, soft, hard in limits:
            resource.setrlimit(res, (soft, hard))
        if then is not None:
            then()

    return apply


def sandbox_env(extra: Mapping[str, str] | None, **fixed: str) -> dict[str, str]:
    """The whole environment of a sandboxed process: a minimal base, ``fixed``, then ``extra``."""
    env = {**BASE_ENV, **fixed}
    for name, value in (extra or {}).items():
        if not _ENV_NAME.match(name) or "\x00" in value:
            raise SandboxError(f"bad environment variable {name!r}", code="sandbox.env")
        env[name] = value
    return env


def check_workspace(workspace: Path, ident: Identity) -> Path:
    """The resolved workspace, if it is a directory the sandbox uid can reach."""
    real = Path(os.path.realpath(workspace))
    if not real.is_dir():
        raise SandboxError(f"workspace {workspace} is not a directory", code="sandbox.workspace")
    if not can_reach(real, ident.uid, ident.gid):
        raise SandboxError(
            f"uid {ident.uid} cannot reach the workspace {real}: every parent directory must "
            "be traversable (0755)",
            code="sandbox.workspace_unreachable",
        )
    return real


@contextlib.contextmanager
def run_dir(ident: Identity) -> Iterator[Path]:
    """A private per-run directory owned by the sandbox uid, removed afterwards."""
    try:
        path = Path(tempfile.mkdtemp(prefix="keel-sbx-"))
    except OSError as exc:
        raise SandboxError(f"cannot create a temp dir: {exc}", code="sandbox.tmpdir") from exc
    try:
        if ident.drop:
            os.chown(path, ident.uid, ident.gid)
        if not can_reach(path, ident.uid, ident.gid, write=True):
            raise SandboxError(
                f"uid {ident.uid} cannot use the temp dir {path}", code="sandbox.tmpdir"
            )
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def scratch_copy(src: Path, dst: Path, ident: Identity) -> None:
    """Copy ``src`` to a new ``dst`` owned by the sandbox uid, for ``exec`` mode.

    Everything is opened relative to directory fds with ``O_NOFOLLOW``, so a workspace that
    swaps a file for a symlink mid-copy cannot make root copy a host file. Symlinks are copied
    as links; files and directories the sandbox uid could not read on the host are left out
    (a hard link to ``/etc/shadow`` stays unreadable); devices, fifos and sockets are skipped.
    """
    try:
        src_fd = os.open(src, _DIR_FLAGS)
        try:
            os.mkdir(dst, 0o755)
            dst_fd = os.open(dst, _DIR_FLAGS)
            try:
                _copy_dir(src_fd, dst_fd, ident)
                if ident.drop:
                    os.fchown(dst_fd, ident.uid, ident.gid)
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)
    except OSError as exc:
        raise SandboxError(
            f"cannot copy the workspace for exec mode: {exc}", code="sandbox.scratch"
        ) from exc


def _readable(st: os.stat_result, ident: Identity, want: int) -> bool:
    if st.st_uid == ident.uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid == ident.gid:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits & want == want


def _copy_dir(src_fd: int, dst_fd: int, ident: Identity) -> None:
    for entry in os.scandir(src_fd):
        name = entry.name
        st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=src_fd), name, dir_fd=dst_fd)
            _own(name, dst_fd, ident)
        elif stat.S_ISDIR(st.st_mode) and _readable(st, ident, 5):
            _copy_subdir(name, src_fd, dst_fd, st, ident)
        elif stat.S_ISREG(st.st_mode) and _readable(st, ident, 4):
            _copy_file(name, src_fd, dst_fd, ident)


def _copy_subdir(name: str, src_fd: int, dst_fd: int, st: os.stat_result, ident: Identity) -> None:
    try:
        child_src = os.open(name, _DIR_FLAGS, dir_fd=src_fd)
    except OSError:
        return
    try:
        os.mkdir(name, stat.S_IMODE(st.st_mode) & 0o777 | 0o700, dir_fd=dst_fd)
        child_dst = os.open(name, _DIR_FLAGS, dir_fd=dst_fd)
        try:
            _copy_dir(child_src, child_dst, ident)
            if ident.drop:
                os.fchown(child_dst, ident.uid, ident.gid)
        finally:
            os.close(child_dst)
    finally:
        os.close(child_src)


def _copy_file(name: str, src_fd: int, dst_fd: int, ident: Identity) -> None:
    try:
        fin = os.open(name, _FILE_FLAGS, dir_fd=src_fd)
    except OSError:
        return
    try:
        st = os.fstat(fin)
        if not stat.S_ISREG(st.st_mode) or not _readable(st, ident, 4):
            return
        mode = stat.S_IMODE(st.st_mode) & 0o777 | 0o600
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fout = os.open(name, flags, mode, dir_fd=dst_fd)
        try:
            _copy_bytes(fin, fout, st.st_size)
            if ident.drop:
                os.fchown(fout, ident.uid, ident.gid)
            os.fchmod(fout, mode)
        finally:
            os.close(fout)
    finally:
        os.close(fin)


def _copy_bytes(fin: int, fout: int, size: int) -> None:
    try:
        while os.copy_file_range(fin, fout, max(size, 1 << 20)):
            pass
    except OSError:
        os.lseek(fin, 0, os.SEEK_SET)
        os.lseek(fout, 0, os.SEEK_SET)
        os.ftruncate(fout, 0)
        while chunk := os.read(fin, 1 << 20):
            os.write(fout, chunk)


def _own(name: str, dir_fd: int, ident: Identity) -> None:
    if ident.drop:
        os.chown(name, ident.uid, ident.gid, dir_fd=dir_fd, follow_symlinks=False)
