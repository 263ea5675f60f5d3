"""The per-user secret that keys the journal's hash chain.

32 random bytes in ``<user_state_dir>/journal.key`` (mode 0600, directory 0700), outside every
workspace, so an agent that can rewrite ``.keel/journal.db`` cannot recompute the chain. The
file is written in full under a private name and then hard-linked into place: ``link`` fails
if the name exists, so two processes creating it at once end with one key, and a reader never
sees a half-written one.

Standard library only: the hook path reads the key on every open.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from keel.core.errors import JournalError
from keel.core.userstate import ensure_user_state_dir, user_state_dir

KEY_FILE = "journal.key"
KEY_BYTES = 32


def key_path() -> Path:
    """Where the journal key lives: ``<user_state_dir>/journal.key`` (not created)."""
    return Path(user_state_dir()) / KEY_FILE


def read_key() -> bytes | None:
    """The journal key, or None when there is none yet.

    Raises:
        JournalError: the file cannot be read (``journal.key``) or is not a key
            (``journal.key_invalid``).
    """
    path = key_path()
    try:
        with open(path, "rb") as f:
            data = f.read(KEY_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(
            f"cannot read the journal key {path}: {exc.strerror or exc}",
            code="journal.key",
            path=str(path),
        ) from exc
    if len(data) != KEY_BYTES:
        raise JournalError(
            f"{path} is not a journal key ({len(data)} bytes, expected {KEY_BYTES}); "
            "move it away to start a new key (existing journals then record a break)",
            code="journal.key_invalid",
            path=str(path),
        )
    return data


def journal_key() -> bytes:
    """The journal key, created (32 random bytes, mode 0600) if there is none yet.

    Raises:
        JournalError: the key cannot be read or created (``journal.key``, ``journal.key_invalid``).
    """
    key = read_key()
    if key is not None:
        return key
    try:
        _create(key_path())
    except OSError as exc:
        raise JournalError(
            f"cannot create the journal key {key_path()}: {exc.strerror or exc}",
            code="journal.key",
            path=str(key_path()),
        ) from exc
    key = read_key()
    if key is None:  # removed again between our link and our read
        raise JournalError(f"the journal key {key_path()} vanished", code="journal.key")
    return key


def _create(path: Path) -> None:
    """Write a new key at ``path`` unless one appears there first."""
    directory = Path(ensure_user_state_dir())
    with contextlib.suppress(OSError):  # not ours to fix if we do not own it
        if directory.stat().st_mode & 0o077:
            directory.chmod(0o700)
    tmp = directory / f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)  # once per user: a key lost to a power cut would break every chain
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process won the race: its key is the key
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            _create_in_place(path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _create_in_place(path: Path) -> None:
    """For file systems without hard links: O_EXCL on the final name, one write."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
