"""``SQLiteJournal``: the journal in one SQLite file in WAL mode, safe across processes.

Every agent hook is its own process, so many writers append at once. Each append is one
``BEGIN IMMEDIATE`` transaction: it takes the write lock first, reads the chain head, inserts the
row and moves the head, then commits. The write lock is what makes ``seq`` global and gap-free
and the chain linear; ``busy_timeout`` makes a writer wait for it and a retry loop covers the
few places where SQLite reports ``SQLITE_BUSY`` without waiting. A process killed mid-append
leaves either the whole row or nothing: SQLite rolls back the unfinished transaction.

``synchronous=NORMAL`` (the default) survives any process crash; after a power loss the last
few commits may be missing, but the chain stays intact. Pass ``synchronous="FULL"`` to trade an
fsync per append for power-loss durability.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Literal, Self, TypeVar

from keel.errors import JournalError
from keel.events import Event
from keel.journal import _migrations
from keel.journal._base import Prepared, Problem, Row, SessionSummary, prepare, verify_rows
from keel.root import ensure_state_dir, state_dir

T = TypeVar("T")

JOURNAL_FILE = "journal.db"
_COLUMNS = (
    "seq, kind, session_id, trace_id, span_id, parent_span_id, ts, agent, payload, prev_hash, hash"
)
_INSERT = f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_PAGE = 500

Synchronous = Literal["OFF", "NORMAL", "FULL"]


def journal_path(root: Path) -> Path:
    """Where the journal of workspace ``root`` lives: ``<root>/.keel/journal.db``."""
    return state_dir(root) / JOURNAL_FILE


def open_journal(root: Path) -> SQLiteJournal:
    """Open (creating ``.keel/`` and the database if needed) the journal of ``root``."""
    try:
        ensure_state_dir(root)
    except OSError as exc:
        raise JournalError(
            f"cannot create {state_dir(root)}: {exc}", code="journal.open", path=str(root)
        ) from exc
    return SQLiteJournal(journal_path(root))


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _translate(exc: sqlite3.Error, op: str, path: Path) -> JournalError:
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
        code = "journal.busy"
    elif "closed" in lowered:
        code = "journal.closed"
    elif "unable to open" in lowered or "readonly" in lowered or "read-only" in lowered:
        code = "journal.open"
    elif "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        code = "journal.corrupt"
    elif isinstance(exc, sqlite3.IntegrityError):
        code = "journal.integrity"
    elif "no such table" in lowered or "no such column" in lowered:
        code = "journal.schema"
    else:
        code = "journal.sqlite"
    return JournalError(f"journal {op} failed ({path}): {text}", code=code, op=op, path=str(path))


@contextmanager
def _sqlite_errors(op: str, path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise _translate(exc, op, path) from exc


class SQLiteJournal:
    """The journal in a SQLite database at ``path``; migrated to the current schema on open."""

    def __init__(
        self,
        path: Path | str,
        *,
        busy_timeout: float = 10.0,
        retry_for: float = 60.0,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        self.path = Path(path)
        self._retry_for = retry_for
        self._lock = threading.Lock()
        with _sqlite_errors("open", self.path):
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            try:
                self._retrying(lambda: self._setup(synchronous))
            except BaseException:
                self._db.close()
                raise

    def _setup(self, synchronous: Synchronous) -> None:
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise JournalError(
                f"journal {self.path} cannot use WAL mode (got {mode!r})", code="journal.open"
            )
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        if _migrations.pending(self._db):
            _migrations.migrate(self._db)

    def _retrying(self, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying with backoff while SQLite reports the database busy."""
        deadline = time.monotonic() + self._retry_for
        delay = 0.002
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
            # Jitter by pid so processes that collided do not retry in lockstep.
            time.sleep(delay * (1.0 + (os.getpid() % 13) / 13.0))
            delay = min(delay * 2, 0.1)

    def migrations(self) -> list[str]:
        """Names of the migrations applied to this journal, oldest first."""
        with self._lock, _sqlite_errors("read", self.path):
            return _migrations.applied(self._db)

    def append(self, event: Event) -> Event:
        """Store ``event`` in one transaction after the chain head; return it with its ``seq``."""
        prepared = prepare(event)
        with self._lock, _sqlite_errors("append", self.path):
            seq = self._retrying(lambda: self._append_once(prepared))
        return replace(prepared.event, seq=seq)

    def _append_once(self, prepared: Prepared) -> int:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            last_seq, last_hash = self._head_for_append()
            row = prepared.place(last_seq + 1, last_hash)
            db.execute(
                _INSERT,
                (
                    row.seq,
                    row.kind,
                    row.session_id,
                    row.trace_id,
                    row.span_id,
                    row.parent_span_id,
                    row.ts,
                    row.agent,
                    row.payload,
                    row.prev_hash,
                    row.hash,
                ),
            )
            db.execute(
                "INSERT OR REPLACE INTO journal_head (id, seq, hash) VALUES (1, ?, ?)",
                (row.seq, row.hash),
            )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return row.seq

    def _head_for_append(self) -> tuple[int, str]:
        head = self._db.execute("SELECT seq, hash FROM journal_head WHERE id = 1").fetchone()
        if head is not None:
            return int(head[0]), str(head[1])
        # The head record was removed: continue after the last row so seq never repeats;
        # verify() still reports the missing head.
        last = self._db.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        return (int(last[0]), str(last[1])) if last is not None else (0, "")

    def events(
        self,
        session_id: str | None = None,
        kinds: Iterable[str] | None = None,
        after_seq: int = 0,
    ) -> Iterator[Event]:
        """Stored events in ``seq`` order, optionally of one session and some kinds.

        Rows are read a page at a time, so appending while iterating is safe.
        """
        wanted = list(kinds) if kinds is not None else None
        if wanted is not None and not wanted:
            return
        last = after_seq
        while True:
            page = self._page(last, session_id, wanted)
            for row in page:
                yield row.to_event()
            if len(page) < _PAGE:
                return
            last = page[-1].seq

    def _page(self, after_seq: int, session_id: str | None, kinds: list[str] | None) -> list[Row]:
        sql = f"SELECT {_COLUMNS} FROM events WHERE seq > ?"
        params: list[object] = [after_seq]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        if kinds is not None:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            params.extend(kinds)
        sql += f" ORDER BY seq LIMIT {_PAGE}"
        with self._lock, _sqlite_errors("read", self.path):
            return [Row(*r) for r in self._db.execute(sql, params).fetchall()]

    def sessions(self) -> list[SessionSummary]:
        """One summary per session, in order of each session's first event."""
        sql = """
            SELECT g.session_id, e.agent, g.first_ts, g.last_ts, g.n, e.trace_id
            FROM (
                SELECT session_id, MIN(seq) AS first_seq, MIN(ts) AS first_ts,
                       MAX(ts) AS last_ts, COUNT(*) AS n
                FROM events GROUP BY session_id
            ) AS g
            JOIN events AS e ON e.seq = g.first_seq
            ORDER BY g.first_seq
        """
        with self._lock, _sqlite_errors("read", self.path):
            rows = self._db.execute(sql).fetchall()
        return [SessionSummary(*r) for r in rows]

    def verify(self) -> list[Problem]:
        """Every defect in the chain; empty when it is intact.

        Reads in one read transaction so concurrent appends do not show up half way.
        """
        with self._lock, _sqlite_errors("verify", self.path):
            db = self._db
            db.execute("BEGIN")
            try:
                head = db.execute("SELECT seq, hash FROM journal_head WHERE id = 1").fetchone()
                cursor = db.execute(f"SELECT {_COLUMNS} FROM events ORDER BY seq")
                rows = (Row(*r) for r in cursor)
                if head is None:
                    problems = verify_rows(rows)
                    problems.append(
                        Problem(0, "chain.head_mismatch", "the journal head record is missing")
                    )
                else:
                    problems = verify_rows(rows, (int(head[0]), str(head[1])))
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
        return problems

    def close(self) -> None:
        """Close the database connection; safe to call twice."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        """The journal itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the journal."""
        self.close()
