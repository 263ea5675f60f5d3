"""``write_atomic``: the one way keel replaces a file whole.

Every small state file keel keeps (the config cache, the emergency-stop flag, the daemon's
record, hook registrations, checkpoint bookkeeping, the journal's recorded head) is written
the same way: the data goes to a new, uniquely named file in the same directory, which is
renamed over the target, so a reader sees the old content or the new one, never a torn
write; a failure removes the temporary file and leaves the target as it was.

Standard library only (``os``): this runs on the hook path.
"""

from __future__ import annotations

import contextlib
import os


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    fsync: bool = False,
    mode: int = 0o644,
    prefix: str | None = None,
) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) in one rename.

    Args:
        path: the file to write; its directory must exist.
        data: the whole new content.
        fsync: flush the data to disk before the rename (survives a power loss).
        mode: the permission bits of a newly created file.
        prefix: the temporary file's name before ``.<pid>.<random>``; default ``.<name>``
            (with ``.tmp`` appended), so leftovers of a killed writer are recognisable.

    Raises:
        OSError: the file could not be written; the target is unchanged.
    """
    target = os.fspath(path)
    folder, name = os.path.split(target)
    suffix = f".{os.getpid()}.{os.urandom(3).hex()}"
    temp = os.path.join(folder, f"{prefix}{suffix}" if prefix else f".{name}{suffix}.tmp")
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
