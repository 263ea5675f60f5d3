"""Best-effort operating-system calls, for ``keel exec``'s hot path.

Each ignores ``OSError`` (the thing is already gone, closed or there). ``contextlib.suppress``
would do the same, but importing ``contextlib`` costs this path about 1.5 ms.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def call(fn: Callable[..., object], *args: object, **kwargs: object) -> bool:
    """``fn(*args, **kwargs)``; False if it raised ``OSError``."""
    try:
        fn(*args, **kwargs)
    except OSError:
        return False
    return True


def close(fd: int | None) -> None:
    """Close ``fd`` if it is one."""
    if fd is not None:
        call(os.close, fd)


def unlink(path: str) -> None:
    """Remove the file at ``path`` if it is there."""
    call(os.unlink, path)


def mkdir(path: str, mode: int, *, dir_fd: int | None = None) -> None:
    """Create the directory ``path``; an existing entry is left as it is (callers check it).

    Raises:
        OSError: anything but ``FileExistsError``.
    """
    try:
        os.mkdir(path, mode, dir_fd=dir_fd)
    except FileExistsError:
        return
