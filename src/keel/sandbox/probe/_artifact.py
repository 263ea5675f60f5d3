"""Reading what a sandboxed process left behind, without trusting it.

A sandboxed command can plant ``artifact.txt -> /etc/shadow``; a root controller that
opens it leaks the host file. ``read_artifact`` walks the path one component at a time
from a directory fd with ``O_NOFOLLOW``, so no symlink is ever followed, refuses anything but
a regular file, never blocks on a fifo, and caps the size.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from keel.core.errors import SandboxError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def read_artifact(directory: int | str | Path, name: str, max_bytes: int) -> bytes:
    """Read ``directory/name`` with no symlink followed anywhere below ``directory``.

    Args:
        directory: An open directory fd, or a path (which itself is trusted).
        name: A relative path of plain components (no ``..``, not absolute).
        max_bytes: The largest size accepted.

    Raises:
        SandboxError: ``sandbox.artifact`` for a symlink, a non-regular file, a bad name, a
            missing file or one larger than ``max_bytes``.
    """
    parts = _components(name)
    fd = os.dup(directory) if isinstance(directory, int) else os.open(directory, _DIR)
    try:
        for part in parts[:-1]:
            nxt = _open(part, _DIR, fd, name)
            os.close(fd)
            fd = nxt
        file_fd = _open(parts[-1], _FILE, fd, name)
    finally:
        os.close(fd)
    try:
        st = os.fstat(file_fd)
        if not stat.S_ISREG(st.st_mode):
            raise SandboxError(f"artifact {name!r} is not a regular file", code="sandbox.artifact")
        if st.st_size > max_bytes:
            raise _too_big(name, max_bytes)
        data = os.read(file_fd, max_bytes + 1)
        if len(data) > max_bytes:
            raise _too_big(name, max_bytes)
        return data
    finally:
        os.close(file_fd)


def _components(name: str) -> list[str]:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or name.startswith("/") or ".." in parts or "\x00" in name:
        raise SandboxError(f"bad artifact name {name!r}", code="sandbox.artifact")
    return parts


def _open(part: str, flags: int, dir_fd: int, name: str) -> int:
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            reason = "goes through a symlink or a non-directory"
        else:
            reason = exc.strerror or str(exc)
        raise SandboxError(f"artifact {name!r} refused: {reason}", code="sandbox.artifact") from exc


def _too_big(name: str, max_bytes: int) -> SandboxError:
    return SandboxError(
        f"artifact {name!r} is larger than {max_bytes} bytes", code="sandbox.artifact"
    )
