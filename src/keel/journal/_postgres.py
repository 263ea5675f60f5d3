"""``PostgresJournal``: the journals of many workspaces in one PostgreSQL database, for a team.

Each workspace has its own chain, named by ``[journal] workspace`` (default ``HOST:/real/path``):
the same events, the same keyed chain (``keel.journal._base``: rows are placed with
``place_all`` and checked with ``verify_rows``, one copy of each rule) and the same head as the
SQLite journal, in five tables, every row carrying its workspace:

- ``keel_workspaces``: one row per workspace, its journal id and chain head (``seq``, ``hash``);
- ``keel_events``: the rows of every chain, keyed by ``(workspace, seq)``;
- ``keel_requests`` and ``keel_session_state``: request outcomes and session state;
- ``keel_migrations``: the schema steps applied (under an advisory lock, so concurrent openers
  on any host apply each once).

Every append is ONE transaction that starts by locking its workspace's head row
(``SELECT ... FOR UPDATE``): writers of a workspace, on any number of hosts, take turns, so
``seq`` stays gap-free and the chain linear; writers of other workspaces never wait. The rows,
the new head, the request id and the session state are written by one statement, then
committed: a connection that dies before the commit leaves nothing (the server rolls the
transaction back). With a deadline, ``lock_timeout`` and ``statement_timeout`` bound every wait.

As with SQLite, the head each host committed is also recorded outside the database, in the
user's state directory (one record per database and workspace, ``keel.journal._head``): rows
removed from the end of a chain, or a chain replaced, are noticed by ``verify`` and by the next
writer, which records a ``journal.break`` event in the chain (a shared database is not moved
aside) and goes on. A writer whose key does not verify the chain's last row refuses to append:
rows written with another key could not be checked by anyone else (every host that writes one
chain needs the same ``journal.key``).

Errors are ``JournalError``; a lost connection is reopened by the next call, within its
deadline. psycopg is imported here only, and this module only when keel.toml names PostgreSQL.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, LiteralString, Self

from keel.core.errors import AlreadyAnswered, JournalError
from keel.core.events import Event
from keel.core.schema import JournalConfig
from keel.journal._base import (
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
    JournalBreak,
    JournalHealth,
    ack_event,
    break_event,
    head_event,
    incidents,
)
from keel.journal._head import (
    DbFacts,
    RecordedHead,
    compare,
    head_unwritable,
    named_head_path,
    read_head,
    write_head,
)
from keel.journal._key import journal_key, key_path, read_key

if TYPE_CHECKING:
    import psycopg

_COLUMNS: LiteralString = (
    "seq, kind, session_id, trace_id, span_id, parent_span_id, ts, agent, payload, prev_hash, hash"
)
_PAGE = 500
_PRUNE_EVERY = 128
REQUEST_TTL = 86400.0
"""Seconds a request id is remembered; older ones are pruned now and then."""
_MIGRATE_LOCK = 0x6B65656C  # "keel": the advisory lock concurrent migrations take turns on

MIGRATIONS: tuple[tuple[str, tuple[LiteralString, ...]], ...] = (
    (
        "m001_initial",
        (
            """
            CREATE TABLE keel_workspaces (
                workspace TEXT PRIMARY KEY,
                journal_id TEXT NOT NULL,
                seq BIGINT NOT NULL,
                hash TEXT NOT NULL,
                created DOUBLE PRECISION NOT NULL
            )
            """,
            """
            CREATE TABLE keel_events (
                workspace TEXT NOT NULL,
                seq BIGINT NOT NULL,
                kind TEXT NOT NULL,
                session_id TEXT NOT NULL,
                trace_id TEXT NOT NULL,
                span_id TEXT NOT NULL,
                parent_span_id TEXT,
                ts DOUBLE PRECISION NOT NULL,
                agent TEXT NOT NULL,
                payload TEXT NOT NULL,
                prev_hash TEXT NOT NULL,
                hash TEXT NOT NULL,
                PRIMARY KEY (workspace, seq)
            )
            """,
            "CREATE INDEX keel_events_session ON keel_events (workspace, session_id, seq)",
            """
            CREATE TABLE keel_requests (
                workspace TEXT NOT NULL,
                id TEXT NOT NULL,
                ts DOUBLE PRECISION NOT NULL,
                outcome TEXT NOT NULL,
                PRIMARY KEY (workspace, id)
            )
            """,
            "CREATE INDEX keel_requests_ts ON keel_requests (workspace, ts)",
            """
            CREATE TABLE keel_session_state (
                workspace TEXT NOT NULL,
                session_id TEXT NOT NULL,
                version BIGINT NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (workspace, session_id)
            )
            """,
        ),
    ),
)
"""Each schema step, by name; never edit a released one: add the next."""

_ENSURE: LiteralString = """
    INSERT INTO keel_workspaces (workspace, journal_id, seq, hash, created)
    SELECT %(ws)s, %(id)s, COALESCE(MAX(seq), 0),
           COALESCE((SELECT hash FROM keel_events WHERE workspace = %(ws)s
                     ORDER BY seq DESC LIMIT 1), ''),
           %(now)s
    FROM keel_events WHERE workspace = %(ws)s
    ON CONFLICT (workspace) DO NOTHING
"""
_LOCK_HEAD: LiteralString = """
    SELECT w.seq, w.hash, r.outcome FROM keel_workspaces AS w
    LEFT JOIN keel_requests AS r ON r.workspace = w.workspace AND r.id = %s
    WHERE w.workspace = %s FOR UPDATE OF w
"""
_FACTS: LiteralString = f"""
    SELECT w.journal_id, w.seq, w.hash,
           (SELECT hash FROM keel_events WHERE workspace = w.workspace AND seq = %s),
           e.{_COLUMNS.replace(", ", ", e.")}
    FROM keel_workspaces AS w
    LEFT JOIN LATERAL (
        SELECT * FROM keel_events WHERE workspace = w.workspace ORDER BY seq DESC LIMIT 1
    ) AS e ON TRUE
    WHERE w.workspace = %s
"""
_INSERT_EVENTS: LiteralString = (
    f"ev AS (INSERT INTO keel_events (workspace, {_COLUMNS}) SELECT %s, * FROM unnest("
    "%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::float8[], %s::text[], %s::text[], %s::text[], %s::text[]))"
)
_MOVE_HEAD: LiteralString = (
    "hd AS (UPDATE keel_workspaces SET seq = %s, hash = %s WHERE workspace = %s)"
)
_PRUNE: LiteralString = "pr AS (DELETE FROM keel_requests WHERE workspace = %s AND ts < %s)"
_REQUEST: LiteralString = (
    "rq AS (INSERT INTO keel_requests (workspace, id, ts, outcome) VALUES (%s, %s, %s, %s))"
)
_STATE: LiteralString = (
    "st AS (INSERT INTO keel_session_state (workspace, session_id, version, data) "
    "VALUES (%s, %s, 1, %s) ON CONFLICT (workspace, session_id) DO UPDATE "
    "SET version = keel_session_state.version + 1, data = excluded.data)"
)
_SESSIONS: LiteralString = """
    SELECT g.session_id, e.agent, g.first_ts, g.last_ts, g.n, e.trace_id
    FROM (
        SELECT session_id, MIN(seq) AS first_seq, MIN(ts) AS first_ts,
               MAX(ts) AS last_ts, COUNT(*) AS n
        FROM keel_events WHERE workspace = %s GROUP BY session_id
    ) AS g
    JOIN keel_events AS e ON e.workspace = %s AND e.seq = g.first_seq
    ORDER BY g.first_seq
"""
_INCIDENTS: LiteralString = (
    f"SELECT {_COLUMNS} FROM keel_events WHERE workspace = %s AND session_id = %s "
    "AND kind = ANY(%s) ORDER BY seq"
)


@dataclass(frozen=True, slots=True)
class PgTarget:
    """Where a workspace's journal is in PostgreSQL: ``[journal]`` and the chain's name."""

    settings: JournalConfig
    """``[journal]``: the URL (never with a password: ``keel.core.schema``), the password's
    variable."""
    name: str
    """The chain's name in the database (``[journal] workspace``, or its default)."""

    @property
    def url(self) -> str:
        """``postgresql://USER@HOST:PORT/DATABASE``."""
        return self.settings.url or ""

    def describe(self) -> str:
        """``URL (workspace NAME)``, for messages."""
        return f"{self.url} (workspace {self.name!r})"


def _psycopg() -> Any:
    """The psycopg module, or a ``JournalError`` naming the extra that installs it."""
    try:
        import psycopg
    except ImportError as exc:
        from keel.core.installed import hint

        raise JournalError(
            "the journal is on PostgreSQL ([journal] url in keel.toml) but psycopg is not "
            f"installed: {hint('postgres')}",
            code="journal.postgres_missing",
        ) from exc
    return psycopg


def _code(exc: Exception) -> str:
    from psycopg import errors

    if isinstance(exc, errors.LockNotAvailable | errors.QueryCanceled):
        return "journal.busy"
    if isinstance(exc, errors.UndefinedTable | errors.UndefinedColumn):
        return "journal.schema"
    if isinstance(exc, errors.IntegrityError):
        return "journal.integrity"
    if isinstance(exc, errors.OperationalError | errors.InterfaceError):
        return "journal.unreachable"
    return "journal.postgres"


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        message = f"stored {what} does not parse: {exc}"
        raise JournalError(message, code="journal.corrupt_row") from exc
    if not isinstance(value, dict):
        raise JournalError(f"stored {what} is not an object", code="journal.corrupt_row")
    return value


def _row(values: Sequence[Any]) -> Row:
    seq, kind, session, trace, span, parent, ts, agent, payload, prev, hash_ = values
    return Row(int(seq), kind, session, trace, span, parent, float(ts), agent, payload, prev, hash_)


class PostgresJournal:
    """The journal of one workspace in a PostgreSQL database; the schema is created on open.

    Args:
        target: the database and the workspace's name in it.
        timeout: bound (seconds) for connecting; default 10 s.
        key: the chain key; default the per-user key (``keel.journal._key``), created at the
            first append of a chain that has no keyed row yet.
        readonly: read only: no schema, no workspace row, no head record written.
    """

    def __init__(
        self,
        target: PgTarget,
        *,
        timeout: float | None = None,
        key: bytes | None = None,
        readonly: bool = False,
    ) -> None:
        self.target = target
        self.workspace = target.name
        self.readonly = readonly
        self.head_file = named_head_path(f"{target.url}#{target.name}")
        self.journal_id: str | None = None
        self._timeout = 10.0 if timeout is None else timeout
        self._chain = Chain(key) if key is not None else None
        self._fixed_key = key is not None
        self._lock = threading.Lock()
        self._db: psycopg.Connection[Any] | None = None
        self._closed = False
        self._has_tables = True
        with self._lock, self._errors("open"):
            self._connect(time.monotonic() + self._timeout)

    # -- connecting ----------------------------------------------------------------------------

    @contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        psycopg = _psycopg()
        try:
            yield
        except psycopg.Error as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            raise JournalError(
                f"journal {op} failed ({self.target.describe()}): {text}",
                code=_code(exc),
                op=op,
                url=self.target.url,
            ) from exc

    def _connect(self, deadline: float) -> psycopg.Connection[Any]:
        """A new connection, the schema checked (created unless read-only), the head compared."""
        psycopg = _psycopg()
        left = max(deadline - time.monotonic(), 0.0)
        extra: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(2, int(left + 0.999)),
            "application_name": "keel",
        }
        variable = self.target.settings.password_env
        if variable:
            password = os.environ.get(variable)
            if password is None:
                raise JournalError(
                    f"[journal] password_env names {variable}, which is not set",
                    code="journal.password_missing",
                )
            extra["password"] = password
        if self.readonly:
            extra["options"] = "-c default_transaction_read_only=on"
        db = psycopg.connect(self.target.url, **extra)
        try:
            self._setup(db)
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _setup(self, db: psycopg.Connection[Any]) -> None:
        if self.readonly:
            found = db.execute("SELECT to_regclass('keel_workspaces') IS NOT NULL").fetchone()
            self._has_tables = bool(found and found[0])
            if self._has_tables:
                sql = "SELECT journal_id FROM keel_workspaces WHERE workspace = %s"
                row = db.execute(sql, (self.workspace,)).fetchone()
                self.journal_id = str(row[0]) if row is not None else None
            return
        _migrate(db)
        with db.transaction():
            params = {"ws": self.workspace, "id": os.urandom(16).hex(), "now": time.time()}
            db.execute(_ENSURE, params)
        self._check_on_open(db)

    def _conn(self, deadline: float | None) -> psycopg.Connection[Any]:
        """The open connection, or a new one if it was lost (never past ``deadline``)."""
        if self._closed:
            raise JournalError(f"journal {self.target.describe()} is closed", code="journal.closed")
        db = self._db
        if db is not None and not db.closed and not db.broken:
            return db
        if db is not None:
            db.close()
            self._db = None
        return self._connect(deadline if deadline is not None else time.monotonic() + self._timeout)

    def _recorded(self) -> RecordedHead | None:
        return read_head(self.head_file)

    def _facts(
        self, db: psycopg.Connection[Any], recorded: RecordedHead | None
    ) -> tuple[DbFacts, Row | None]:
        """The database's side of the head, and the chain's last row."""
        wanted = recorded.seq if recorded is not None and recorded.seq > 0 else -1
        found = db.execute(_FACTS, (wanted, self.workspace)).fetchone()
        if found is None:
            return DbFacts(None, 0, "", None, frozenset()), None
        journal_id, at = str(found[0]), found[3]
        self.journal_id = journal_id
        last = _row(found[4:]) if found[4] is not None else None
        last_seq, last_hash = (last.seq, last.hash) if last is not None else (0, "")
        hash_at = str(at) if at is not None else None
        return DbFacts(journal_id, last_seq, last_hash, hash_at, frozenset()), last

    def _check_on_open(self, db: psycopg.Connection[Any]) -> None:
        """Compare the chain with the head recorded here; refuse a chain keyed otherwise."""
        recorded = self._recorded()
        facts, last = self._facts(db, recorded)
        if last is not None and is_keyed(last.hash):
            self._check_key(last)
        finding = compare(recorded, facts)
        if finding is not None:
            chain = self._write_chain(db)
            rows = self._write(db, [prepare(break_event(finding, None))], chain, None)
            self._record(rows[-1].seq, rows[-1].hash)
        elif recorded is None or recorded.journal_id != facts.journal_id:
            self._record(facts.last_seq, facts.last_hash)

    def _check_key(self, last: Row) -> None:
        if self._chain is None:
            key = read_key()
            if key is None:
                return  # readers need no key; the first append refuses (_write_chain)
            self._chain = Chain(key)
        try:
            ok = self._chain.hash_event(last.prev_hash, last.event_dict()) == last.hash
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise JournalError(
                f"the last event (seq {last.seq}) of {self.target.describe()} does not verify "
                f"with this host's journal key {key_path()}: the chain was written with "
                "another key (every host that writes one chain needs the same journal.key) "
                "or the row was altered (`keel verify` says which); nothing is appended",
                code="journal.key_mismatch",
            )

    def _write_chain(self, db: psycopg.Connection[Any]) -> Chain:
        """The chain to append with; a key is created only for a chain without keyed rows."""
        if self.readonly:
            raise JournalError(
                f"journal {self.target.describe()} is open read-only", code="journal.readonly"
            )
        if self._chain is not None:
            return self._chain
        key = read_key()
        if key is None:
            sql = "SELECT hash FROM keel_events WHERE workspace = %s ORDER BY seq DESC LIMIT 1"
            last = db.execute(sql, (self.workspace,)).fetchone()
            if last is not None and is_keyed(str(last[0])):
                raise JournalError(
                    f"the journal key {key_path()} is missing: {self.target.describe()} was "
                    "written with a key this host does not have; copy that journal.key here",
                    code="journal.key_missing",
                )
            key = journal_key()
        self._chain = Chain(key)
        return self._chain

    def _record(self, seq: int, hash_: str) -> OSError | None:
        if self.journal_id is None or self.readonly:
            return None
        head = RecordedHead(self.journal_id, seq, hash_)
        return write_head(self.head_file, head, self.target.describe())

    def _head_written(self, db: psycopg.Connection[Any], row: Row, chain: Chain) -> None:
        """Record the head after ``row`` committed; a failure is journaled, never dropped."""
        error = self._record(row.seq, row.hash)
        if error is None:
            return
        message = head_unwritable(self.head_file, row.seq, error)
        event = head_event("write_failed", message, row.seq, self.head_file)

        def unless_open(cur: psycopg.Connection[Any]) -> Sequence[Prepared]:
            open_ = any(
                i.kind == HEAD_KIND and i.acknowledged is None for i in self._incidents(cur)
            )
            return () if open_ else [prepare(event)]

        try:
            self._write(db, (), chain, None, build=unless_open)
        except Exception:
            return

    # -- writing -------------------------------------------------------------------------------

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
        """Store ``events`` (consecutive seqs, chained), request id and state in ONE transaction.

        The same contract as ``SQLiteJournal.append_many``: ``AlreadyAnswered`` when
        ``request_id`` was committed before (nothing written); ``journal.busy`` when the
        workspace's head could not be locked by ``deadline``; ``journal.too_late`` when it was,
        but the deadline passed before the commit (rolled back); ``journal.unreachable`` when
        the database cannot be reached.
        """
        prepared = [prepare(e) for e in events]
        request = None
        if request_id is not None:
            request = (request_id, json_text(outcome, "the outcome"))
        state = None
        if session_state is not None:
            state = (session_state[0], json_text(session_state[1], "the session state"))
        with self._lock, self._errors("append"):
            if deadline is not None and time.monotonic() > deadline:
                raise too_late()
            db = self._conn(deadline)
            chain = self._write_chain(db)
            rows = self._write(db, prepared, chain, request, state, deadline)
            if rows:
                self._head_written(db, rows[-1], chain)
        return [replace(p.event, seq=r.seq) for p, r in zip(prepared, rows, strict=True)]

    def _write(
        self,
        db: psycopg.Connection[Any],
        prepared: Sequence[Prepared],
        chain: Chain,
        request: tuple[str, str] | None,
        state: tuple[str, str] | None = None,
        deadline: float | None = None,
        build: Callable[[psycopg.Connection[Any]], Sequence[Prepared]] | None = None,
    ) -> list[Row]:
        """One transaction; ``build``, if given, picks the events once the head is locked."""
        with db.transaction():
            if deadline is not None:
                left = f"{max(1, int((deadline - time.monotonic()) * 1000))}ms"
                db.execute(
                    "SELECT set_config('lock_timeout', %s, true), "
                    "set_config('statement_timeout', %s, true)",
                    (left, left),
                )
            head = self._lock_head(db, request[0] if request is not None else None)
            if request is not None and head[2] is not None:
                raise AlreadyAnswered(_object(head[2], "outcome"), request_id=request[0])
            if build is not None:
                prepared = build(db)
            now = time.time()
            rows = place_all(prepared, int(head[0]), str(head[1]), chain)
            parts: list[LiteralString] = []
            params: list[Any] = []
            ws = self.workspace
            if rows:
                columns = list(zip(*(_values(r) for r in rows), strict=True))
                parts.extend((_INSERT_EVENTS, _MOVE_HEAD))
                params += [ws, *(list(c) for c in columns), rows[-1].seq, rows[-1].hash, ws]
                if (rows[0].seq - 1) // _PRUNE_EVERY != rows[-1].seq // _PRUNE_EVERY:
                    parts.append(_PRUNE)
                    params += [ws, now - REQUEST_TTL]
            if request is not None:
                parts.append(_REQUEST)
                params += [ws, request[0], now, request[1]]
            if state is not None:
                parts.append(_STATE)
                params += [ws, state[0], state[1]]
            if parts:
                db.execute("WITH " + ", ".join(parts) + " SELECT 1", params)
            if deadline is not None and time.monotonic() > deadline:
                raise too_late()
        return rows

    def _lock_head(self, db: psycopg.Connection[Any], request_id: str | None) -> Sequence[Any]:
        """Lock the workspace's head row: ``(seq, hash, outcome of request_id or None)``."""
        found = db.execute(_LOCK_HEAD, (request_id, self.workspace)).fetchone()
        if found is None:  # the head row was deleted: put it back after the last row
            params = {"ws": self.workspace, "id": os.urandom(16).hex(), "now": time.time()}
            db.execute(_ENSURE, params)
            found = db.execute(_LOCK_HEAD, (request_id, self.workspace)).fetchone()
            if found is None:
                raise JournalError(
                    f"the head of {self.target.describe()} cannot be locked",
                    code="journal.schema",
                )
        return found

    # -- reading -------------------------------------------------------------------------------

    def _read(self) -> psycopg.Connection[Any] | None:
        """The connection to read with; None when the tables are not there (nothing to read)."""
        db = self._conn(None)
        return db if self._has_tables else None

    def answered(self, request_id: str) -> dict[str, Any] | None:
        """The outcome stored with ``request_id``, or None if it was never committed."""
        with self._lock, self._errors("read"):
            db = self._read()
            if db is None:
                return None
            sql = "SELECT outcome FROM keel_requests WHERE workspace = %s AND id = %s"
            row = db.execute(sql, (self.workspace, request_id)).fetchone()
        return None if row is None else _object(row[0], "outcome")

    def session_state(self, session_id: str) -> tuple[int, dict[str, Any]] | None:
        """``(version, data)`` of ``session_id``'s state, or None if none was stored."""
        with self._lock, self._errors("read"):
            db = self._read()
            if db is None:
                return None
            sql = (
                "SELECT version, data FROM keel_session_state "
                "WHERE workspace = %s AND session_id = %s"
            )
            row = db.execute(sql, (self.workspace, session_id)).fetchone()
        return None if row is None else (int(row[0]), _object(row[1], "session state"))

    def session_state_version(self, session_id: str) -> int:
        """The version of ``session_id``'s state; 0 when none was stored."""
        with self._lock, self._errors("read"):
            db = self._read()
            if db is None:
                return 0
            sql = "SELECT version FROM keel_session_state WHERE workspace = %s AND session_id = %s"
            row = db.execute(sql, (self.workspace, session_id)).fetchone()
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
        sql: LiteralString = f"SELECT {_COLUMNS} FROM keel_events WHERE workspace = %s AND seq > %s"
        params: list[Any] = [self.workspace, after_seq]
        if session_id is not None:
            sql += " AND session_id = %s"
            params.append(session_id)
        if kinds is not None:
            sql += " AND kind = ANY(%s)"
            params.append(kinds)
        sql += " ORDER BY seq LIMIT %s"
        params.append(_PAGE)
        with self._lock, self._errors("read"):
            db = self._read()
            if db is None:
                return []
            return [_row(r) for r in db.execute(sql, params).fetchall()]

    def sessions(self) -> list[SessionSummary]:
        """One summary per session, in order of each session's first event."""
        with self._lock, self._errors("read"):
            db = self._read()
            if db is None:
                return []
            rows = db.execute(_SESSIONS, (self.workspace, self.workspace)).fetchall()
        return [SessionSummary(s, a, float(f), float(la), int(n), t) for s, a, f, la, n, t in rows]

    def _incidents(self, db: psycopg.Connection[Any]) -> list[JournalBreak]:
        rows = db.execute(_INCIDENTS, (self.workspace, BREAK_SESSION, list(JOURNAL_KINDS)))
        return incidents((_row(r) for r in rows.fetchall()), self._reading_chain())

    def _reading_chain(self) -> Chain | None:
        if self._chain is None and not self._fixed_key:
            key = read_key()
            self._chain = Chain(key) if key is not None else None
        return self._chain

    def verify(self) -> list[Problem]:
        """Every defect in the workspace's chain, its head and every unacknowledged incident."""
        return self.check()[0]

    def check(self) -> tuple[list[Problem], list[JournalBreak]]:
        """``(problems, incidents)``: what :meth:`verify` reports, and every incident.

        The chain, its head row and the incidents are read in one repeatable-read
        transaction, so appends by other hosts meanwhile do not show up half way.
        """
        recorded = self._recorded()
        with self._lock, self._errors("verify"):
            db = self._read()
            if db is None:
                return [], []
            chain = self._reading_chain()
            with db.transaction():
                db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                sql = "SELECT seq, hash FROM keel_workspaces WHERE workspace = %s"
                head = db.execute(sql, (self.workspace,)).fetchone()
                with db.cursor(name="keel_verify") as cur:
                    cur.itersize = 2000
                    cur.execute(
                        f"SELECT {_COLUMNS} FROM keel_events WHERE workspace = %s ORDER BY seq",
                        (self.workspace,),
                    )
                    rows = (_row(r) for r in cur)
                    at = (int(head[0]), str(head[1])) if head is not None else None
                    problems = verify_rows(rows, chain, at)
                if head is None and self._has_rows(db):
                    problems.append(
                        Problem(0, "chain.head_mismatch", "the journal head record is missing")
                    )
                found = self._incidents(db)
                facts, _ = self._facts(db, recorded)
        finding = compare(recorded, facts)
        if finding is not None:
            code = "head.events_lost" if finding.reason == "events_lost" else "head.replaced"
            problems.append(Problem(finding.seq, code, finding.message))
        problems.extend(Problem(i.seq, i.code, i.describe()) for i in found if not i.acknowledged)
        return problems, found

    def _has_rows(self, db: psycopg.Connection[Any]) -> bool:
        sql = "SELECT 1 FROM keel_events WHERE workspace = %s LIMIT 1"
        return db.execute(sql, (self.workspace,)).fetchone() is not None

    def health(self) -> JournalHealth:
        """Incidents, event count and what is wrong with the head right now; no chain walk."""
        recorded = self._recorded()
        with self._lock, self._errors("read"):
            db = self._read()
            if db is None:
                return JournalHealth(True, 0)
            facts, _ = self._facts(db, recorded)
            found = tuple(self._incidents(db))
        finding = compare(recorded, facts)
        problem = finding.message if finding is not None else None
        ok = problem is None and all(i.acknowledged for i in found)
        return JournalHealth(ok, facts.last_seq, found, problem)

    def acknowledge(
        self, seen: Iterable[JournalBreak], reason: str | None, by: str
    ) -> list[JournalBreak]:
        """Record that ``by`` has seen the incidents ``seen``; the ones acknowledged now.

        As ``SQLiteJournal.acknowledge``: only incidents still in the chain (same ``seq`` and
        hash) and not acknowledged yet, looked up with the head locked.
        """
        wanted = {(i.seq, i.hash) for i in seen}
        named: list[JournalBreak] = []

        def open_ones(db: psycopg.Connection[Any]) -> Sequence[Prepared]:
            named[:] = [
                i
                for i in self._incidents(db)
                if i.acknowledged is None and (i.seq, i.hash) in wanted
            ]
            return [prepare(ack_event(named, reason, by))] if named else ()

        with self._lock, self._errors("append"):
            db = self._conn(None)
            chain = self._write_chain(db)
            rows = self._write(db, (), chain, None, build=open_ones)
            if rows:
                self._head_written(db, rows[-1], chain)
        return list(named)

    def migrations(self) -> list[str]:
        """Names of the schema steps applied to this database, oldest first."""
        with self._lock, self._errors("read"):
            db = self._read()
            if db is None:
                return []
            rows = db.execute("SELECT name FROM keel_migrations ORDER BY applied_at, name")
            return [str(r[0]) for r in rows.fetchall()]

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        with self._lock:
            self._closed = True
            if self._db is not None:
                self._db.close()
                self._db = None

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


def _migrate(db: psycopg.Connection[Any]) -> list[str]:
    """Apply the schema steps ``db`` lacks, each once however many hosts open it at once."""
    found = db.execute("SELECT to_regclass('keel_migrations') IS NOT NULL").fetchone()
    if found and found[0]:
        done = {str(r[0]) for r in db.execute("SELECT name FROM keel_migrations").fetchall()}
        if all(name in done for name, _ in MIGRATIONS):
            return []
    applied: list[str] = []
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
        db.execute(
            "CREATE TABLE IF NOT EXISTS keel_migrations "
            "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        done = {str(r[0]) for r in db.execute("SELECT name FROM keel_migrations").fetchall()}
        for name, statements in MIGRATIONS:
            if name in done:
                continue
            for statement in statements:
                db.execute(statement)
            db.execute(
                "INSERT INTO keel_migrations (name, applied_at) VALUES (%s, %s)",
                (name, time.time()),
            )
            applied.append(name)
    return applied


def copy_into(
    target: PgTarget,
    rows: Iterable[Row],
    *,
    journal_id: str | None,
    requests: Iterable[tuple[str, float, str]] = (),
    states: Iterable[tuple[str, int, str]] = (),
    timeout: float | None = None,
) -> tuple[int, int, str]:
    """Copy a chain's rows (as stored, hashes and all) into ``target``'s empty workspace.

    One transaction: the workspace row with its head, the rows, the request outcomes and the
    session states; then the head is recorded outside the database as after an append.

    Returns:
        ``(rows copied, last seq, last hash)``.

    Raises:
        JournalError: the workspace already holds events (``journal.migrate_not_empty``), or
            the database cannot be written.
    """
    journal = PostgresJournal(target, timeout=timeout)
    with journal, journal._lock, journal._errors("migrate"):
        db = journal._conn(None)
        listed = list(rows)
        with db.transaction():
            head = journal._lock_head(db, None)
            if int(head[0]) != 0 or journal._has_rows(db):
                raise JournalError(
                    f"{target.describe()} already holds events: migrate only into an empty "
                    "workspace (name another with [journal] workspace)",
                    code="journal.migrate_not_empty",
                )
            with db.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO keel_events (workspace, {_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(target.name, *_values(r)) for r in listed],
                )
                cur.executemany(
                    "INSERT INTO keel_requests (workspace, id, ts, outcome) "
                    "VALUES (%s, %s, %s, %s)",
                    [(target.name, *r) for r in requests],
                )
                cur.executemany(
                    "INSERT INTO keel_session_state (workspace, session_id, version, data) "
                    "VALUES (%s, %s, %s, %s)",
                    [(target.name, *s) for s in states],
                )
            last_seq, last_hash = (listed[-1].seq, listed[-1].hash) if listed else (0, "")
            new_id = journal_id or journal.journal_id
            db.execute(
                "UPDATE keel_workspaces SET seq = %s, hash = %s, journal_id = %s "
                "WHERE workspace = %s",
                (last_seq, last_hash, new_id, target.name),
            )
        journal.journal_id = new_id
        journal._record(last_seq, last_hash)
    return len(listed), last_seq, last_hash
