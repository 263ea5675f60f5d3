"""``SQLiteJournal``: the journal in one SQLite file in WAL mode, safe across processes.

Every agent hook is its own process, so many writers append at once. Each append is one
``BEGIN IMMEDIATE`` transaction: it takes the write lock first, reads the chain head, inserts the
rows, moves the head, stores the request id and session state that go with them, then commits.
The write lock is what makes ``seq`` global and gap-free and the chain linear; ``busy_timeout``
makes a writer wait for it (never past the caller's deadline) and a retry loop covers the few
places where SQLite reports ``SQLITE_BUSY`` without waiting. A process killed mid-append leaves
either the whole transaction or nothing: SQLite rolls back the unfinished one.

After each commit the head is recorded outside the database (``keel.journal._head``), and
:func:`open_journal` compares the two: a database that lost committed events (a damaged WAL is
cut at its first bad frame, silently), was truncated, replaced, or cannot be read at all is
moved aside and a new chain starts with a ``journal.break`` event (``keel.journal._breaks``),
so a broken journal never blocks decisions. A head that cannot be recorded (a full disk, a
read-only state directory), or a journal with events found without one, is recorded in the
chain as a ``journal.head_unrecorded`` event (once until the user acknowledges it), never lost
silently. ``verify`` also runs SQLite's own integrity check: damage outside the rows the chain
covers (the session state, an index) is reported too.

``synchronous=NORMAL`` (the default) survives any process crash; after a power loss the last
few commits may be missing, and the recorded head then says so. Pass ``synchronous="FULL"``
to trade an fsync per append for power-loss durability.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from keel.core.errors import AlreadyAnswered, JournalError
from keel.core.events import Event
from keel.core.root import STATE_DIR, ensure_state_dir, state_dir
from keel.journal import _migrations
from keel.journal._base import (
    BREAK_KIND,
    BREAK_SESSION,
    Chain,
    Prepared,
    Problem,
    Row,
    SessionSummary,
    is_keyed,
    json_text,
    place_all,
    prepare,
    too_late,
    verify_rows,
)
from keel.journal._breaks import (
    HEAD_KIND,
    JOURNAL_KINDS,
    LOCK_FILE,
    JournalBreak,
    JournalHealth,
    OpenLock,
    ack_event,
    break_event,
    head_event,
    incidents,
    move_aside,
    successor_ids,
)
from keel.journal._head import (
    DbFacts,
    Finding,
    RecordedHead,
    compare,
    head_missing,
    head_path,
    head_unwritable,
    key_missing,
    read_head,
    unreadable,
    workspace_id,
    write_head,
)
from keel.journal._key import journal_key, key_path, read_key

T = TypeVar("T")

JOURNAL_FILE = "journal.db"
_COLUMNS = (
    "seq, kind, session_id, trace_id, span_id, parent_span_id, ts, agent, payload, prev_hash, hash"
)
_INSERT = f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_UPSERT_STATE = (
    "INSERT INTO session_state (session_id, version, data) VALUES (?, 1, ?) "
    "ON CONFLICT (session_id) DO UPDATE SET version = version + 1, data = excluded.data"
)
_FACTS = (
    "SELECT seq, hash, (SELECT hash FROM events WHERE seq = ?) FROM events"
    " ORDER BY seq DESC LIMIT 1"
)
_INCIDENTS = (
    f"SELECT {_COLUMNS} FROM events WHERE session_id = ? "
    f"AND kind IN ({', '.join('?' * len(JOURNAL_KINDS))}) ORDER BY seq"
)
_INTEGRITY_LINES = 5  # SQLite's integrity check stops after this many findings
_PAGE = 500
_PRUNE_EVERY = 128  # prune old request ids when a transaction's seqs cross a multiple of this
REQUEST_TTL = 86400.0
"""Seconds a request id is remembered; older ones are pruned now and then."""

Synchronous = Literal["OFF", "NORMAL", "FULL"]


def journal_path(root: Path) -> Path:
    """Where the journal of workspace ``root`` lives: ``<root>/.keel/journal.db``."""
    return state_dir(root) / JOURNAL_FILE


def open_journal(root: str | os.PathLike[str], *, timeout: float | None = None) -> SQLiteJournal:
    """Open ``root``'s journal for writing, creating ``.keel/`` and the database if needed.

    A journal that cannot continue its recorded chain (unreadable, events lost, replaced, key
    gone) is moved aside and a new chain starts with a ``journal.break`` event.

    Args:
        root: the workspace root.
        timeout: bound (seconds) for every wait while opening: the database's busy lock and
            another process's recovery. Default: 10 s busy wait, 60 s in all.

    Raises:
        JournalError: ``.keel/`` or the database cannot be opened, or a wait timed out.
    """
    root = Path(root)
    try:
        ensure_state_dir(root)
    except OSError as exc:
        raise JournalError(
            f"cannot create {state_dir(root)}: {exc}", code="journal.open", path=str(root)
        ) from exc
    if timeout is None:
        return SQLiteJournal(journal_path(root), workspace=root, recover=True)
    return SQLiteJournal(
        journal_path(root), workspace=root, recover=True, busy_timeout=timeout, retry_for=timeout
    )


def read_journal(root: Path) -> SQLiteJournal:
    """Open ``root``'s existing journal read-only: nothing is written, migrated or recovered.

    Raises:
        JournalError: there is no journal (``journal.open``) or it is unreadable
            (``journal.corrupt``).
    """
    return SQLiteJournal(journal_path(root), workspace=root, readonly=True)


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


def _workspace_of(path: Path) -> Path:
    """The workspace a database path belongs to: ``W`` for ``W/.keel/journal.db``."""
    return path.parent.parent if path.parent.name == STATE_DIR else path


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _ro_uri(path: Path) -> str:
    quoted = str(path.absolute()).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}?mode=ro"


def _values(row: Row) -> tuple[object, ...]:
    return (
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
    )


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        message = f"stored {what} does not parse: {exc}"
        raise JournalError(message, code="journal.corrupt_row") from exc
    if not isinstance(value, dict):
        raise JournalError(f"stored {what} is not an object", code="journal.corrupt_row")
    return value


class SQLiteJournal:
    """The journal in a SQLite database at ``path``; migrated to the current schema on open.

    Args:
        path: the database file.
        busy_timeout: seconds to wait for SQLite's write lock before a retry.
        retry_for: seconds to keep retrying a busy database (and to wait for a recovery).
        synchronous: SQLite's ``synchronous`` setting.
        key: the chain key; default the per-user key (``keel.journal._key``), created at the
            first append if there is none.
        workspace: the workspace whose head record this journal keeps; default the directory
            holding ``.keel/``.
        recover: on open, move aside a database that cannot continue its recorded chain and
            start a new one (what :func:`open_journal` does).
        readonly: open without writing anything (no WAL switch, no migration, no recovery).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        busy_timeout: float = 10.0,
        retry_for: float = 60.0,
        synchronous: Synchronous = "NORMAL",
        key: bytes | None = None,
        workspace: Path | None = None,
        recover: bool = False,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path)
        self.workspace = Path(workspace) if workspace is not None else _workspace_of(self.path)
        self.head_file = head_path(self.workspace)
        self._root_id = workspace_id(self.workspace)
        self.readonly = readonly
        self.journal_id: str | None = None
        """The random id this database was created with (None: a database before ids)."""
        self._busy_timeout = busy_timeout
        self._retry_for = retry_for
        self._synchronous = synchronous
        self._recover = recover and not readonly
        self._chain = Chain(key) if key is not None else None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None
        self._existed = False
        self._has_events = True
        self._unrecorded_at: int | None = None
        """The last seq of a journal found with events but no recorded head."""
        self._adopted = False
        """This open gave a journal from before ids its id (it had no head to record)."""
        self._lock_path = self.path.parent / LOCK_FILE
        with self._lock:
            self._open()

    # -- opening and recovery ---------------------------------------------------------------

    def _open(self) -> None:
        if self._chain is None:
            key = read_key()
            self._chain = Chain(key) if key is not None else None
        with OpenLock(self._lock_path, create=not self.readonly, timeout=self._retry_for) as lock:
            if not self._recover:
                self._db = self._connect()
                return
            finding = self._connect_checked()
            if finding is not None:
                lock.exclusive()
                self._recover_from(finding)
        if self._unrecorded_at is not None:  # outside the flock: a lost key recovers under it
            self._note_missing_head(self._unrecorded_at)

    def _recorded(self) -> RecordedHead | None:
        """The head recorded for this workspace's journal, if any."""
        return read_head(self.head_file, self._root_id)

    def _connect(self) -> sqlite3.Connection:
        self._existed = self.path.exists()
        with _sqlite_errors("open", self.path):
            target = _ro_uri(self.path) if self.readonly else str(self.path)
            db = sqlite3.connect(
                target,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=self.readonly,
            )
            try:
                self.journal_id = self._retrying(lambda: self._setup(db))
            except BaseException:
                db.close()
                raise
        self._file = _file_id(self.path)
        return db

    def _setup(self, db: sqlite3.Connection) -> str | None:
        if self.readonly:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            self._has_events = "events" in tables
            if "journal_meta" not in tables:
                return None
        else:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise JournalError(
                    f"journal {self.path} cannot use WAL mode (got {mode!r})", code="journal.open"
                )
            db.execute(f"PRAGMA synchronous={self._synchronous}")
            if _migrations.pending(db):
                applied = _migrations.migrate(db)
                # A journal from before ids had no head record to lose: adopted, not reported.
                self._adopted = self._adopted or _migrations.m003_journal_id.__name__ in applied
        row = db.execute("SELECT value FROM journal_meta WHERE key = 'journal_id'").fetchone()
        return str(row[0]) if row is not None else None

    def _connect_checked(self) -> Finding | None:
        """Connect and compare the database with its recorded head; what is wrong, if anything."""
        recorded = self._recorded()
        self._unrecorded_at = None
        try:
            self._db = self._connect()
            with _sqlite_errors("open", self.path):
                facts = self._facts(self._db, recorded)
        except JournalError as exc:
            if exc.code != "journal.corrupt":
                raise
            return unreadable(recorded, str(exc.__cause__ or exc.message))
        # A missing key is not checked here: readers need no key, and the first append
        # without one starts the new chain (see _write_chain).
        finding = compare(recorded, facts)
        if finding is None and recorded is None and facts.last_seq > 0 and not self._adopted:
            self._unrecorded_at = facts.last_seq  # recorded, with the head, once the lock is let go
        elif finding is None and (recorded is None or recorded.journal_id != facts.journal_id):
            # A new journal, or the chain that replaced the recorded one: a failure here is
            # noted by the first append, whose head write fails the same way.
            self._record(facts.last_seq, facts.last_hash)
        return finding

    def _recover_from(self, finding: Finding) -> None:
        """Under the exclusive lock: move the broken database aside and start a new chain."""
        if self._db is None or self._moved():
            self._close_db()  # another process recovered first (or our connect failed): look again
            again = self._connect_checked()
            if again is None:
                return
            finding = again
        moved_to = move_aside(self.path) if self._existed else None
        self._close_db()  # after the rename: SQLite then keeps the moved WAL as it is
        if finding.reason == "key_missing":
            self._chain = None  # the new chain gets a new key
        self._db = self._connect()
        prepared = [prepare(break_event(finding, moved_to))]
        with _sqlite_errors("recover", self.path):
            chain = self._write_chain()
            rows = self._retrying(lambda: self._write(prepared, chain, None))
            self._unrecorded_at = None  # a new chain: its head is recorded now
            self._head_written(rows[-1], chain)

    def _facts(self, db: sqlite3.Connection, recorded: RecordedHead | None) -> DbFacts:
        if not self._has_events:
            return DbFacts(self.journal_id, 0, "", None, frozenset())
        wanted = recorded.seq if recorded is not None and recorded.seq > 0 else -1
        row = db.execute(_FACTS, (wanted,)).fetchone()  # one statement: one consistent read
        if row is None:  # no events at all
            row = (0, "", None)
        last_seq, last_hash = int(row[0]), str(row[1])
        at = str(row[2]) if row[2] is not None else None
        successor: frozenset[str] = frozenset()
        if recorded is not None and recorded.journal_id != self.journal_id and last_seq:
            successor = self._successor_of(db)
        return DbFacts(self.journal_id, last_seq, last_hash, at, successor)

    def _successor_of(self, db: sqlite3.Connection) -> frozenset[str]:
        """The journals this one's opening break event (keyed, intact) says it replaced."""
        found = db.execute(f"SELECT {_COLUMNS} FROM events WHERE seq = 1").fetchone()
        if found is None or self._chain is None:
            return frozenset()
        row = Row(*found)
        if row.kind != BREAK_KIND or row.prev_hash != "":
            return frozenset()
        try:
            if self._chain.hash_event("", row.event_dict()) != row.hash:
                return frozenset()
        except (TypeError, ValueError):
            return frozenset()
        return successor_ids(row)

    def _moved(self) -> bool:
        return _file_id(self.path) != self._file

    def _follow_moves(self) -> None:
        """Reopen if the database file was moved aside (another process recovered it)."""
        self._conn  # noqa: B018 - raises journal.closed on a closed journal
        if self._moved():
            self._close_db()
            self._open()

    def _close_db(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    @property
    def _conn(self) -> sqlite3.Connection:
        db = self._db
        if db is None:
            raise JournalError(f"journal {self.path} is closed", code="journal.closed")
        return db

    def _record(self, seq: int, hash_: str) -> OSError | None:
        if self.journal_id is None:
            return None
        head = RecordedHead(self.journal_id, seq, hash_, self._root_id)
        return write_head(self.head_file, head, self.path)

    def _head_written(self, row: Row, chain: Chain, deadline: float | None = None) -> None:
        """Record the head after ``row`` committed; a failure is journaled, never dropped."""
        error = self._record(row.seq, row.hash)
        if error is not None:
            message = head_unwritable(self.head_file, row.seq, error)
            event = head_event("write_failed", message, row.seq, self.head_file)
            self._note_head(event, chain, deadline)

    def _note_missing_head(self, last_seq: int) -> None:
        """Journal that the head of a journal with events was not recorded, then record it.

        The caller holds ``self._lock``.
        """
        message = head_missing(self.head_file, last_seq)
        event = head_event("missing", message, last_seq, self.head_file)
        try:
            with _sqlite_errors("append", self.path):
                chain = self._write_chain()
                if self._unrecorded_at is not None:  # not recovered meanwhile (a lost key)
                    self._note_head(event, chain, None)
        except JournalError:
            pass  # the head stays unrecorded, so the next open notices again

    def _note_head(self, event: Event, chain: Chain, deadline: float | None) -> None:
        """Append ``event`` (a head incident) unless one is already open, then record the head.

        Best effort: the caller's own transaction has committed. Whatever is not noted now
        is noted by the next append or open, which finds the head unrecorded the same way.
        """
        prepared = [prepare(event)]

        def unless_open(db: sqlite3.Connection) -> Sequence[Prepared]:
            return () if self._head_incident_open(db) else prepared

        try:
            rows: list[Row] = []
            if not self._head_incident_open(self._conn):  # no write lock while one is open
                rows = self._retrying(
                    lambda: self._write((), chain, None, deadline=deadline, build=unless_open),
                    deadline,
                )
            seq, hash_ = (rows[-1].seq, rows[-1].hash) if rows else self._head_for_append()
        except (JournalError, sqlite3.Error):
            return
        self._record(seq, hash_)

    def _head_incident_open(self, db: sqlite3.Connection) -> bool:
        """True while an unrecorded head is journaled and not acknowledged."""
        found = self._incidents(db)
        return any(i.kind == HEAD_KIND and i.acknowledged is None for i in found)

    # -- writing ----------------------------------------------------------------------------

    def _retrying(self, fn: Callable[[], T], deadline: float | None = None) -> T:
        """Run ``fn``, retrying with backoff while SQLite reports the database busy.

        With ``deadline`` (a ``time.monotonic()`` instant) no wait, SQLite's or ours, runs
        past it.
        """
        give_up = time.monotonic() + self._retry_for
        if deadline is not None:
            give_up = min(give_up, deadline)
        delay = 0.002
        while True:
            if deadline is not None:
                left = max(0.0, min(deadline - time.monotonic(), self._busy_timeout))
                self._conn.execute(f"PRAGMA busy_timeout = {int(left * 1000)}")
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= give_up:
                    raise
            # Jitter by pid so processes that collided do not retry in lockstep.
            pause = delay * (1.0 + (os.getpid() % 13) / 13.0)
            time.sleep(max(0.0, min(pause, give_up - time.monotonic())))
            delay = min(delay * 2, 0.1)

    def migrations(self) -> list[str]:
        """Names of the migrations applied to this journal, oldest first."""
        with self._lock, _sqlite_errors("read", self.path):
            return _migrations.applied(self._conn)

    def append(self, event: Event) -> Event:
        """Store ``event`` in one transaction after the chain head; return it with its ``seq``."""
        return self.append_many([event])[0]

    def append_many(
        self,
        events: Sequence[Event],
        *,
        request_id: str | None = None,
        outcome: Mapping[str, Any] | None = None,
        session_state: tuple[str, Mapping[str, Any]] | None = None,
        deadline: float | None = None,
    ) -> list[Event]:
        """Store ``events`` (in order, consecutive seqs, chained) in ONE transaction.

        Args:
            events: the events to store; may be empty (then only the request and state).
            request_id: if a transaction with this id was already committed, nothing is
                written and ``AlreadyAnswered`` carries the outcome stored then. Otherwise
                the id and ``outcome`` are stored in the same transaction (remembered for
                :data:`REQUEST_TTL` seconds).
            outcome: the JSON object to store with ``request_id``.
            session_state: ``(session_id, data)`` upserted in the same transaction; its
                version goes up by one with every write.
            deadline: a ``time.monotonic()`` instant no wait runs past.

        Returns:
            The events as stored, with their seqs.

        Raises:
            AlreadyAnswered: ``request_id`` was committed before.
            JournalError: ``journal.busy`` when the write lock was not had by the deadline;
                ``journal.too_late`` when it was, but after the deadline (rolled back); other
                ``journal.*`` codes when the events cannot be stored.
        """
        prepared = [prepare(e) for e in events]
        request = None
        if request_id is not None:
            request = (request_id, json_text(outcome, "the outcome"))
        state = None
        if session_state is not None:
            state = (session_state[0], json_text(session_state[1], "the session state"))
        with self._lock, _sqlite_errors("append", self.path):
            self._follow_moves()
            chain = self._write_chain()
            try:
                rows = self._retrying(
                    lambda: self._write(prepared, chain, request, state, deadline), deadline
                )
                if rows:
                    self._head_written(rows[-1], chain, deadline)
            finally:
                if deadline is not None and self._db is not None:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        return [replace(p.event, seq=r.seq) for p, r in zip(prepared, rows, strict=True)]

    def _write_chain(self) -> Chain:
        """The chain to append with; the per-user key is created on the first append.

        Keyed rows without their key cannot be continued: a recovering journal moves them
        aside and starts a new chain (and key); any other raises ``journal.key_missing``.
        """
        if self.readonly:
            raise JournalError(f"journal {self.path} is open read-only", code="journal.readonly")
        if self._chain is not None:
            return self._chain
        key = read_key()  # another process may have created it since we opened
        if key is None and self._keyed_rows():
            if not self._recover:
                raise JournalError(
                    f"the journal key {key_path()} is missing: {self.path} cannot be continued",
                    code="journal.key_missing",
                )
            self._recover_lost_key()
            key = read_key()
        self._chain = Chain(key if key is not None else journal_key())
        return self._chain

    def _keyed_rows(self) -> bool:
        last = self._conn.execute("SELECT hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        return last is not None and is_keyed(str(last[0]))

    def _recover_lost_key(self) -> None:
        recorded = self._recorded()
        finding = key_missing(recorded, self._facts(self._conn, recorded), key_path())
        with OpenLock(self._lock_path, create=True, timeout=self._retry_for) as lock:
            lock.exclusive()
            self._recover_from(finding)

    def _write(
        self,
        prepared: Sequence[Prepared],
        chain: Chain,
        request: tuple[str, str] | None,
        state: tuple[str, str] | None = None,
        deadline: float | None = None,
        build: Callable[[sqlite3.Connection], Sequence[Prepared]] | None = None,
    ) -> list[Row]:
        """One write transaction; ``build``, if given, picks the events under the write lock."""
        db = self._conn
        db.execute("BEGIN IMMEDIATE")
        try:
            if deadline is not None and time.monotonic() > deadline:
                raise too_late()
            if build is not None:
                prepared = build(db)
            now = time.time()
            if request is not None:
                found = db.execute("SELECT outcome FROM requests WHERE id = ?", (request[0],))
                stored = found.fetchone()
                if stored is not None:
                    raise AlreadyAnswered(_object(stored[0], "outcome"), request_id=request[0])
            last_seq, last_hash = self._head_for_append()
            rows = place_all(prepared, last_seq, last_hash, chain)
            if rows:
                db.executemany(_INSERT, [_values(r) for r in rows])
                db.execute(
                    "INSERT OR REPLACE INTO journal_head (id, seq, hash) VALUES (1, ?, ?)",
                    (rows[-1].seq, rows[-1].hash),
                )
                if (rows[0].seq - 1) // _PRUNE_EVERY != rows[-1].seq // _PRUNE_EVERY:
                    db.execute("DELETE FROM requests WHERE ts < ?", (now - REQUEST_TTL,))
            if request is not None:
                db.execute(
                    "INSERT INTO requests (id, ts, outcome) VALUES (?, ?, ?)",
                    (request[0], now, request[1]),
                )
            if state is not None:
                db.execute(_UPSERT_STATE, state)
            if deadline is not None and time.monotonic() > deadline:
                raise too_late()
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return rows

    def _head_for_append(self) -> tuple[int, str]:
        db = self._conn
        head = db.execute("SELECT seq, hash FROM journal_head WHERE id = 1").fetchone()
        if head is not None:
            return int(head[0]), str(head[1])
        # The head record was removed: continue after the last row so seq never repeats;
        # verify() still reports the missing head.
        last = db.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        return (int(last[0]), str(last[1])) if last is not None else (0, "")

    # -- reading ----------------------------------------------------------------------------

    def answered(self, request_id: str) -> dict[str, Any] | None:
        """The outcome stored with ``request_id``, or None if it was never committed."""
        with self._lock, _sqlite_errors("read", self.path):
            sql = "SELECT outcome FROM requests WHERE id = ?"
            row = self._conn.execute(sql, (request_id,)).fetchone()
        return None if row is None else _object(row[0], "outcome")

    def session_state(self, session_id: str) -> tuple[int, dict[str, Any]] | None:
        """``(version, data)`` of ``session_id``'s state, or None if none was stored."""
        with self._lock, _sqlite_errors("read", self.path):
            sql = "SELECT version, data FROM session_state WHERE session_id = ?"
            row = self._conn.execute(sql, (session_id,)).fetchone()
        return None if row is None else (int(row[0]), _object(row[1], "session state"))

    def session_state_version(self, session_id: str) -> int:
        """The version of ``session_id``'s state; 0 when none was stored."""
        with self._lock, _sqlite_errors("read", self.path):
            sql = "SELECT version FROM session_state WHERE session_id = ?"
            row = self._conn.execute(sql, (session_id,)).fetchone()
        return 0 if row is None else int(row[0])

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
        if (wanted is not None and not wanted) or not self._has_events:
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
            return [Row(*r) for r in self._conn.execute(sql, params).fetchall()]

    def sessions(self) -> list[SessionSummary]:
        """One summary per session, in order of each session's first event."""
        if not self._has_events:
            return []
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
            rows = self._conn.execute(sql).fetchall()
        return [SessionSummary(*r) for r in rows]

    def _incidents(self, db: sqlite3.Connection) -> list[JournalBreak]:
        """The recorded incidents, each with its (keyed) acknowledgement, if any."""
        if not self._has_events:
            return []
        rows = db.execute(_INCIDENTS, (BREAK_SESSION, *JOURNAL_KINDS))
        return incidents((Row(*r) for r in rows), self._chain)

    def _finding(self, recorded: RecordedHead | None, facts: DbFacts) -> Finding | None:
        finding = compare(recorded, facts)
        if finding is None and self._chain is None and is_keyed(facts.last_hash):
            key = read_key()  # the first writer may have made it since we looked
            if key is None:
                return key_missing(recorded, facts, key_path())
            self._chain = Chain(key)
        return finding

    def verify(self) -> list[Problem]:
        """Every defect in the chain, its head and the file, and every unacknowledged incident.

        Empty only when the chain is intact, keyed, agrees with the head recorded outside
        the database, SQLite finds the file sound and no break or unrecorded head is left
        unacknowledged. Reads in one read transaction so concurrent appends do not show up
        half way.
        """
        return self.check()[0]

    def check(self) -> tuple[list[Problem], list[JournalBreak]]:
        """``(problems, incidents)``: what :meth:`verify` reports, and every incident.

        Each incident carries its acknowledgement, if any (an acknowledged one is no problem).
        """
        recorded = self._recorded()
        with self._lock, _sqlite_errors("verify", self.path):
            db = self._conn
            if not self._has_events:
                facts = DbFacts(self.journal_id, 0, "", None, frozenset())
                problems: list[Problem] = []
                found: list[JournalBreak] = []
            else:
                problems, found = self._verify_chain(db)
                facts = self._facts(db, recorded)
            problems.extend(self._integrity(db))
        finding = compare(recorded, facts)
        if finding is not None:
            code = "head.events_lost" if finding.reason == "events_lost" else "head.replaced"
            problems.append(Problem(finding.seq, code, finding.message))
        elif recorded is None and facts.last_seq > 0:
            message = head_missing(self.head_file, facts.last_seq)
            problems.append(Problem(facts.last_seq, "head.missing", message))
        problems.extend(Problem(i.seq, i.code, i.describe()) for i in found if not i.acknowledged)
        return problems, found

    def _integrity(self, db: sqlite3.Connection) -> list[Problem]:
        """SQLite's own check of the whole file: pages the chain never reads included."""
        try:
            rows = db.execute(f"PRAGMA integrity_check({_INTEGRITY_LINES})").fetchall()
            found = [str(r[0]) for r in rows if str(r[0]) != "ok"]
        except sqlite3.DatabaseError as exc:  # damage bad enough that the check cannot go on
            found = [str(exc)]
        if not found:
            return []
        detail = "; ".join(" ".join(line.split()) for line in found)
        return [
            Problem(
                0,
                "db.integrity",
                f"SQLite's integrity check of {self.path} failed ({detail}): the file is "
                "damaged where the chain does not look (session state, request ids or an "
                "index). Keep a copy and move it aside; the next keel decision starts a new "
                "chain and records the break",
            )
        ]

    def _verify_chain(self, db: sqlite3.Connection) -> tuple[list[Problem], list[JournalBreak]]:
        db.execute("BEGIN")
        try:
            head = db.execute("SELECT seq, hash FROM journal_head WHERE id = 1").fetchone()
            rows = (Row(*r) for r in db.execute(f"SELECT {_COLUMNS} FROM events ORDER BY seq"))
            if head is None:
                problems = verify_rows(rows, self._chain)
                problems.append(
                    Problem(0, "chain.head_mismatch", "the journal head record is missing")
                )
            else:
                problems = verify_rows(rows, self._chain, (int(head[0]), str(head[1])))
            found = self._incidents(db)
        finally:
            if db.in_transaction:
                db.execute("COMMIT")
        return problems, found

    def health(self) -> JournalHealth:
        """Incidents, event count and what is wrong with the head right now; no chain walk."""
        recorded = self._recorded()
        with self._lock, _sqlite_errors("read", self.path):
            db = self._conn
            facts = self._facts(db, recorded)
            found = tuple(self._incidents(db))
        finding = self._finding(recorded, facts)
        problem = finding.message if finding is not None else None
        if problem is None and recorded is None and facts.last_seq > 0:
            problem = head_missing(self.head_file, facts.last_seq)
        ok = problem is None and all(i.acknowledged for i in found)
        return JournalHealth(ok, facts.last_seq, found, problem)

    def acknowledge(
        self, seen: Iterable[JournalBreak], reason: str | None, by: str
    ) -> list[JournalBreak]:
        """Record that ``by`` has seen the incidents ``seen``; the ones acknowledged now.

        Only incidents still in this journal (same ``seq``, same hash) and not acknowledged
        yet are named, checked under the write lock: a journal that broke again since the
        user looked gets nothing acknowledged it was not shown.

        Raises:
            JournalError: the acknowledgement cannot be stored.
        """
        wanted = {(i.seq, i.hash) for i in seen}
        named: list[JournalBreak] = []

        def open_ones(db: sqlite3.Connection) -> Sequence[Prepared]:
            named[:] = [
                i
                for i in self._incidents(db)
                if i.acknowledged is None and (i.seq, i.hash) in wanted
            ]
            return [prepare(ack_event(named, reason, by))] if named else ()

        with self._lock, _sqlite_errors("append", self.path):
            self._follow_moves()
            chain = self._write_chain()
            rows = self._retrying(lambda: self._write((), chain, None, build=open_ones))
            if rows:
                self._head_written(rows[-1], chain)
        return list(named)

    def close(self) -> None:
        """Close the database connection; safe to call twice."""
        with self._lock:
            self._close_db()

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
