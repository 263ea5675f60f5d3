"""Versioned schema migrations for the SQLite journal, applied when a journal is opened.

Each migration is a function ``mNNN_<what>(db)`` registered with :func:`migration`; its name is
recorded in ``_migrations`` in the same transaction that applies it, so a migration runs exactly
once however many hook processes open a fresh journal at the same moment. Never edit a released
migration: add the next one.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    """The events table and its session index."""
    db.execute(
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            session_id TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            span_id TEXT NOT NULL,
            parent_span_id TEXT,
            ts REAL NOT NULL,
            agent TEXT NOT NULL,
            payload TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        )
        """
    )
    db.execute("CREATE INDEX events_session ON events (session_id, seq)")


@migration
def m002_head(db: sqlite3.Connection) -> None:
    """The chain head, updated with every append, so rows removed from the end are noticed."""
    db.execute(
        """
        CREATE TABLE journal_head (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            seq INTEGER NOT NULL,
            hash TEXT NOT NULL
        )
        """
    )
    db.execute(
        """
        INSERT INTO journal_head (id, seq, hash)
        SELECT 1, COALESCE(MAX(seq), 0),
               COALESCE((SELECT hash FROM events ORDER BY seq DESC LIMIT 1), '')
        FROM events
        """
    )


@migration
def m003_journal_id(db: sqlite3.Connection) -> None:
    """A random id for this journal, created with it, so a replaced database is noticed."""
    db.execute(
        "CREATE TABLE journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
    )
    db.execute(
        "INSERT INTO journal_meta (key, value) VALUES ('journal_id', ?)", (os.urandom(16).hex(),)
    )


@migration
def m004_requests(db: sqlite3.Connection) -> None:
    """Committed request ids and their outcomes, so a retried request is answered once."""
    db.execute(
        """
        CREATE TABLE requests (
            id TEXT PRIMARY KEY,
            ts REAL NOT NULL,
            outcome TEXT NOT NULL
        ) WITHOUT ROWID
        """
    )
    db.execute("CREATE INDEX requests_ts ON requests (ts)")


@migration
def m005_session_state(db: sqlite3.Connection) -> None:
    """Per-session state, versioned, written in the same transaction as the session's events."""
    db.execute(
        """
        CREATE TABLE session_state (
            session_id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            data TEXT NOT NULL
        ) WITHOUT ROWID
        """
    )


def applied(db: sqlite3.Connection) -> list[str]:
    """Names of the migrations recorded in ``db``, oldest first; empty if none."""
    try:
        rows = db.execute("SELECT name FROM _migrations ORDER BY rowid").fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [name for (name,) in rows]


def pending(db: sqlite3.Connection) -> list[Migration]:
    """The registered migrations ``db`` has not recorded yet."""
    done = set(applied(db))
    return [fn for fn in MIGRATIONS if fn.__name__ not in done]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every pending migration in one write transaction; the names applied.

    ``db`` must be in autocommit mode (``isolation_level=None``).
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS _migrations"
            " (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        names: list[str] = []
        for fn in pending(db):
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (fn.__name__, time.time()),
            )
            names.append(fn.__name__)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return names
