"""Which journal a workspace has: ``.keel/journal.db``, or its chain in a PostgreSQL database.

``[journal] url`` in keel.toml (``keel.core.schema.JournalConfig``) names a PostgreSQL database
a team shares; without it the journal is the workspace's SQLite file. Every command opens the
journal through here, so ``keel verify``, ``show``, ``log``, ``export``, ``status``, the monitor
and the hooks work the same on either. The PostgreSQL backend (and psycopg) is imported only
when the config names it: the hook path of a SQLite workspace pays one cached config read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from keel.journal._sqlite import SQLiteJournal, journal_path
from keel.journal._sqlite import open_journal as open_sqlite_journal

if TYPE_CHECKING:
    from keel.core.schema import JournalConfig
    from keel.journal._postgres import PgTarget, PostgresJournal

    AnyJournal = SQLiteJournal | PostgresJournal


def default_workspace_name(root: Path) -> str:
    """A workspace's default name in a shared database: ``HOST:/its/real/path``."""
    return f"{os.uname().nodename}:{os.path.realpath(root)}"


def journal_target(
    root: str | os.PathLike[str], settings: JournalConfig | None = None
) -> PgTarget | None:
    """Where ``root``'s journal is in PostgreSQL; None when it is ``.keel/journal.db``.

    ``settings``: ``[journal]`` of the config the caller already holds (the guard's), so the
    hook path reads keel.toml once.

    Raises:
        ConfigError: keel.toml is invalid.
    """
    if settings is None:
        settings = _settings(Path(root))
    if not settings.url:
        return None
    from keel.journal._postgres import PgTarget

    name = settings.workspace or default_workspace_name(Path(root))
    return PgTarget(settings, name)


def _settings(root: Path) -> JournalConfig:
    """``[journal]`` of ``root``'s keel.toml, read through the config cache when it has one.

    Only a keel.toml that says ``journal`` can name a database, and only that one is loaded:
    the journal of every other workspace opens without reading the config, so a broken,
    unreadable or special keel.toml (a FIFO) never keeps ``keel stop``, ``keel log`` or a patch
    from their journal, and looking at a journal writes no cache into the tree (``keel
    replay``'s scratch copies, a fresh checkout).
    """
    from keel.core.configview import config_source, config_view
    from keel.core.schema import JournalConfig

    text = _peek(config_source(root))
    if text is None or b"journal" not in text:
        return JournalConfig()
    return config_view(root).journal


_PEEK_LIMIT = 1 << 20


def _peek(source: str | None) -> bytes | None:
    """The first MiB of a regular file at ``source``; None for anything else (never blocks)."""
    if source is None:
        return None
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _PEEK_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)


def open_journal(
    root: str | os.PathLike[str],
    *,
    timeout: float | None = None,
    settings: JournalConfig | None = None,
) -> AnyJournal:
    """Open ``root``'s journal for writing: its SQLite file, or its chain in PostgreSQL.

    SQLite: ``.keel/`` and the database are created if needed, and a journal that cannot
    continue its recorded chain is moved aside (``keel.journal._sqlite.open_journal``).
    PostgreSQL: the schema and the workspace's row are created if needed.

    Args:
        root: the workspace root.
        timeout: bound (seconds) for every wait while opening.
        settings: ``[journal]`` of ``root``'s config, when the caller holds it already.

    Raises:
        JournalError: the journal cannot be opened (for PostgreSQL: ``journal.unreachable``,
            ``journal.postgres_missing`` when psycopg is not installed, ...).
        ConfigError: keel.toml is invalid.
    """
    target = journal_target(root, settings)
    if target is None:
        return open_sqlite_journal(root, timeout=timeout)
    from keel.journal._postgres import PostgresJournal

    return PostgresJournal(target, timeout=timeout)


def read_journal(root: Path) -> AnyJournal:
    """Open ``root``'s existing journal read-only: nothing is written, migrated or recovered.

    Raises:
        JournalError: there is no journal (``journal.open``), it is unreadable
            (``journal.corrupt``) or its database cannot be reached.
    """
    target = journal_target(root)
    if target is None:
        return SQLiteJournal(journal_path(root), workspace=root, readonly=True)
    from keel.journal._postgres import PostgresJournal

    return PostgresJournal(target, readonly=True)


def has_journal(root: Path) -> bool:
    """True when there may be something to read: the SQLite file exists, or PostgreSQL is named."""
    return journal_target(root) is not None or journal_path(root).exists()


def journal_location(root: Path) -> str:
    """Where ``root``'s journal is, for messages: a path, or a URL and a workspace name."""
    target = journal_target(root)
    return str(journal_path(root)) if target is None else target.describe()


def journal_stamp(root: Path) -> tuple[object, ...]:
    """What tells a long-lived holder (``keel hookd``) to reopen ``root``'s journal.

    keel.toml's stat (the ``[journal]`` it names may have changed) and journal.db's inode (a
    SQLite journal moved aside or deleted). A PostgreSQL connection that was lost is reopened
    by the journal itself.
    """
    from keel.core.configview import config_stamp

    try:
        inode: int | None = journal_path(root).stat().st_ino
    except OSError:
        inode = None
    return (config_stamp(root), inode)
