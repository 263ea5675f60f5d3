"""``keel journal migrate --to URL``: a workspace's SQLite journal copied into PostgreSQL.

The rows are copied as stored: the same ``seq``, payloads, ``prev_hash`` and keyed hashes, so
the chain the SQLite journal built is the chain PostgreSQL keeps, and ``verify`` checks it
with the same key. The request outcomes, the session states and the journal's id come along,
in one transaction, into a workspace of the database that holds no events yet. The source is
only read and stays where it is. Both sides are verified; the report says what each found.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import JournalError, UsageError
from keel.journal._base import Problem, Row
from keel.journal._health import verify_sqlite_journal
from keel.journal._open import default_workspace_name
from keel.journal._sqlite import _ro_uri, journal_path

_COLUMNS = (
    "seq, kind, session_id, trace_id, span_id, parent_span_id, ts, agent, payload, prev_hash, hash"
)


@dataclass(frozen=True, slots=True)
class MigrateReport:
    """What ``keel journal migrate`` copied, and what ``verify`` says of both sides."""

    source: str
    target: str
    events: int
    last_seq: int
    source_problems: tuple[Problem, ...]
    target_problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when the copy verifies."""
        return not self.target_problems

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "ok": self.ok,
            "source": self.source,
            "target": self.target,
            "events": self.events,
            "last_seq": self.last_seq,
            "source_problems": [p.to_dict() for p in self.source_problems],
            "target_problems": [p.to_dict() for p in self.target_problems],
        }


def migrate_journal(
    root: Path, url: str, *, workspace: str | None = None, timeout: float | None = None
) -> MigrateReport:
    """Copy ``root``'s SQLite journal, chain and all, into the PostgreSQL database at ``url``.

    Args:
        root: the workspace whose ``.keel/journal.db`` is copied.
        url: ``postgresql://USER@HOST:PORT/DATABASE``; the password comes from the
            environment (``PGPASSWORD``, or ``[journal] password_env``), never from the URL.
        workspace: the chain's name in the database; default ``[journal] workspace``, else
            the name the journal of ``root`` would get (``HOST:/real/path``).
        timeout: bound (seconds) for connecting.

    Raises:
        UsageError: ``url`` is not a PostgreSQL URL or holds a password (``usage.url``).
        JournalError: there is no SQLite journal, the target workspace already holds events
            (``journal.migrate_not_empty``), or a database cannot be read or written.
    """
    from keel.core.configview import config_view
    from keel.core.schema import journal_url
    from keel.journal._postgres import PgTarget, PostgresJournal, copy_into

    try:
        checked = journal_url(url, "--to")
    except ValueError as exc:
        raise UsageError(f"--to: {exc}", code="usage.url") from None
    if checked is None:
        raise UsageError("--to: a PostgreSQL URL is needed", code="usage.url")
    path = journal_path(root)
    if not path.is_file():
        raise JournalError(f"there is no SQLite journal to migrate at {path}", code="journal.open")
    settings = config_view(root).journal
    name = workspace or settings.workspace or default_workspace_name(root)
    target = PgTarget(settings.replace(url=checked), name)
    source_problems = verify_sqlite_journal(root).problems
    journal_id, rows, requests, states = _read_sqlite(path)
    copied, last_seq, _ = copy_into(
        target, rows, journal_id=journal_id, requests=requests, states=states, timeout=timeout
    )
    with PostgresJournal(target, readonly=True, timeout=timeout) as copy:
        target_problems = copy.verify()
    return MigrateReport(
        str(path), target.describe(), copied, last_seq, source_problems, tuple(target_problems)
    )


def _read_sqlite(
    path: Path,
) -> tuple[str | None, list[Row], list[tuple[str, float, str]], list[tuple[str, int, str]]]:
    """The journal id, rows, request outcomes and session states, read in one transaction."""
    try:
        db = sqlite3.connect(_ro_uri(path), uri=True)
    except sqlite3.Error as exc:
        raise JournalError(f"cannot open {path}: {exc}", code="journal.open") from exc
    try:
        db.execute("BEGIN")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        journal_id = None
        if "journal_meta" in tables:
            found = db.execute("SELECT value FROM journal_meta WHERE key = 'journal_id'")
            row = found.fetchone()
            journal_id = str(row[0]) if row is not None else None
        rows: list[Row] = []
        if "events" in tables:
            rows = [Row(*r) for r in db.execute(f"SELECT {_COLUMNS} FROM events ORDER BY seq")]
        requests: list[tuple[str, float, str]] = []
        if "requests" in tables:
            requests = list(db.execute("SELECT id, ts, outcome FROM requests"))
        states: list[tuple[str, int, str]] = []
        if "session_state" in tables:
            states = list(db.execute("SELECT session_id, version, data FROM session_state"))
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read {path}: {exc}", code="journal.corrupt") from exc
    finally:
        db.close()
    return journal_id, rows, requests, states
