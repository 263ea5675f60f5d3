"""The journal seam and the keyed hash chain every backend shares.

A stored record is a :class:`Row`: the event's columns, its payload as canonical JSON, the hash
of the row before it and its own hash::

    hash = "hmac-sha256:" + HMAC-SHA256(key, prev_hash + canonical_json(event with seq)).hex

The first row's ``prev_hash`` is the empty string. The key is a per-user secret kept outside
the workspace (``keel.journal._key``): a plain hash chain can be recomputed by whoever edits
the database, a keyed one only by whoever holds the key. The algorithm tag travels with each
hash; a row tagged anything else (the ``sha256:`` of older journals) is reported, never
trusted. :class:`Chain` computes links and :func:`verify_rows` walks rows in ``seq`` order
reporting every broken, missing, unkeyed or unreadable link, so the SQLite backend and the
in-memory double build and check the chain with the same code.

This module is on the hook path: standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from types import TracebackType
from typing import Any, Literal, Protocol, Self

from keel.core.errors import JournalError, KeelError
from keel.core.events import Event, canonical_json

HASH_ALGORITHM = "hmac-sha256"
HASH_PREFIX = f"{HASH_ALGORITHM}:"

BREAK_KIND = "journal.break"
"""The kind of the event that opens a new chain after the old journal was found broken."""
BREAK_SESSION = "keel.journal"
"""The session id of break events (indexed, so finding them is cheap)."""

ProblemCode = Literal[
    "chain.hash_mismatch",
    "chain.broken_link",
    "chain.missing",
    "chain.head_mismatch",
    "chain.unkeyed",
    "chain.key_missing",
    "row.unparseable",
    "head.events_lost",
    "head.replaced",
    "head.missing",
    "db.integrity",
    "journal.break",
    "journal.head_unrecorded",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """One defect in the journal's chain, at ``seq``."""

    seq: int
    code: ProblemCode
    message: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"seq": self.seq, "code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session as the journal saw it."""

    session_id: str
    agent: str
    first_ts: float
    last_ts: float
    events: int
    trace_id: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "session_id": self.session_id,
            "agent": self.agent,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "events": self.events,
            "trace_id": self.trace_id,
        }


@dataclass(frozen=True, slots=True)
class Row:
    """One stored record: the event's columns plus its links in the chain."""

    seq: int
    kind: str
    session_id: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    ts: float
    agent: str
    payload: str
    prev_hash: str
    hash: str

    def event_dict(self) -> dict[str, Any]:
        """The event as a dict, exactly as it was hashed; raises ``ValueError`` on bad JSON."""
        return {
            "kind": self.kind,
            "session_id": self.session_id,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "seq": self.seq,
            "ts": self.ts,
            "agent": self.agent,
            "payload": json.loads(self.payload),
        }

    def to_event(self) -> Event:
        """The stored event; a row that does not parse is a ``JournalError``."""
        try:
            return Event.from_dict(self.event_dict())
        except (ValueError, TypeError, KeelError) as exc:
            raise JournalError(
                f"journal row {self.seq} does not parse: {exc}", code="journal.corrupt_row"
            ) from exc


class Chain:
    """The keyed chain: links a row's canonical JSON to the hash of the row before it."""

    __slots__ = ("_mac",)

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a chain key needs at least 16 bytes")
        # Keyed once; each link copies the keyed state instead of re-deriving it.
        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    def link(self, prev_hash: str, body: str) -> str:
        """The tagged hash of ``body`` (canonical event JSON) after ``prev_hash``."""
        mac = self._mac.copy()
        mac.update((prev_hash + body).encode("utf-8"))
        return HASH_PREFIX + mac.hexdigest()

    def hash_event(self, prev_hash: str, event_dict: dict[str, Any]) -> str:
        """The tagged hash of an event dict (with its ``seq``) after ``prev_hash``."""
        return self.link(prev_hash, canonical_json(event_dict))


def chain_hash(prev_hash: str, event_dict: dict[str, Any], key: bytes) -> str:
    """The tagged hash of an event dict linked to ``prev_hash`` under ``key``."""
    return Chain(key).hash_event(prev_hash, event_dict)


def is_keyed(hash_: str) -> bool:
    """True if ``hash_`` carries the keyed chain's tag."""
    return hash_.startswith(HASH_PREFIX)


@dataclass(frozen=True, slots=True)
class Prepared:
    """An event serialised up to its place in the chain, ready for :meth:`place`.

    Everything except ``seq`` and ``prev_hash`` is encoded before the write lock is taken, so
    the lock is held only for a string join and one HMAC.
    """

    event: Event
    payload: str
    before_seq: str
    after_seq: str

    def body(self, seq: int) -> str:
        """``canonical_json(event.to_dict())`` with ``seq`` filled in."""
        return f"{self.before_seq}{seq}{self.after_seq}"

    def place(self, seq: int, prev_hash: str, chain: Chain) -> Row:
        """The row for this event at ``seq`` after ``prev_hash``."""
        event = self.event
        return Row(
            seq=seq,
            kind=event.kind,
            session_id=event.session_id,
            trace_id=event.trace_id,
            span_id=event.span_id,
            parent_span_id=event.parent_span_id,
            ts=event.ts,
            agent=event.agent,
            payload=self.payload,
            prev_hash=prev_hash,
            hash=chain.link(prev_hash, self.body(seq)),
        )


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}


def _payload_json(payload: Any) -> str:
    ptype = type(payload)
    names = _FIELD_NAMES.get(ptype)
    if names is None:
        names = _FIELD_NAMES[ptype] = tuple(f.name for f in fields(payload))
    try:
        # A shallow dict gives the same JSON as asdict() whenever it serialises at all,
        # without asdict's deep copy.
        return canonical_json({name: getattr(payload, name) for name in names})
    except TypeError:
        return canonical_json(asdict(payload))


def _check_types(event: Event) -> None:
    """Reject ids a TEXT column would silently convert, which would break the hash."""
    texts = (event.kind, event.session_id, event.trace_id, event.span_id, event.agent)
    parent = event.parent_span_id
    if not all(isinstance(t, str) for t in texts) or not (
        parent is None or isinstance(parent, str)
    ):
        raise JournalError(
            "event kind, session_id, trace_id, span_id, agent and parent_span_id must be strings",
            code="journal.invalid_event",
        )


def prepare(event: Event) -> Prepared:
    """Serialise ``event`` for the chain; ``ts`` becomes a float, as a REAL column returns it.

    Raises:
        JournalError: the event does not serialise to JSON (``journal.unserializable``).
    """
    _check_types(event)
    try:
        ts = float(event.ts)
        if type(event.ts) is not float:
            event = replace(event, ts=ts)
        payload = _payload_json(event.payload)
        # Canonical JSON sorts keys: agent, kind, parent_span_id, payload, seq, session_id,
        # span_id, trace_id, ts. Split around seq, the one value only known under the lock.
        head = canonical_json(
            {"agent": event.agent, "kind": event.kind, "parent_span_id": event.parent_span_id}
        )
        tail = canonical_json(
            {
                "session_id": event.session_id,
                "span_id": event.span_id,
                "trace_id": event.trace_id,
                "ts": ts,
            }
        )
    except (TypeError, ValueError) as exc:
        raise JournalError(
            f"event {event.kind!r} cannot be stored as JSON: {exc}", code="journal.unserializable"
        ) from exc
    try:  # lone surrogates (undecodable file names, "\ud800" in JSON) cannot be UTF-8 text
        for text in (head, payload, tail):
            text.encode("utf-8")
    except UnicodeEncodeError:
        return prepare(_scrubbed(event))
    before = f'{head[:-1]},"payload":{payload},"seq":'
    return Prepared(event=event, payload=payload, before_seq=before, after_seq="," + tail[1:])


def _scrubbed(event: Event) -> Event:
    r"""``event`` with each lone surrogate spelled out as text (``\udcff``): storable, readable."""

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        if isinstance(value, dict):
            return {scrub(k): scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [scrub(v) for v in value]
        return value

    try:
        return Event.from_dict(scrub(event.to_dict()))
    except (KeelError, TypeError, ValueError) as exc:
        raise JournalError(
            f"event {event.kind!r} cannot be stored: {exc}", code="journal.unserializable"
        ) from exc


def place_all(
    prepared: Sequence[Prepared], last_seq: int, last_hash: str, chain: Chain
) -> list[Row]:
    """Rows for ``prepared`` at consecutive seqs after ``(last_seq, last_hash)``, chained."""
    rows: list[Row] = []
    for item in prepared:
        row = item.place(last_seq + 1, last_hash, chain)
        rows.append(row)
        last_seq, last_hash = row.seq, row.hash
    return rows


def json_text(value: Mapping[str, Any] | None, what: str) -> str:
    """Canonical JSON of ``value`` (``{}`` for None), for the journal's side tables.

    Raises:
        JournalError: ``value`` is not JSON or not UTF-8 text (``journal.unserializable``).
    """
    try:
        text = canonical_json(dict(value or {}))
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise JournalError(
            f"{what} cannot be stored as JSON: {exc}", code="journal.unserializable"
        ) from exc
    return text


def too_late() -> JournalError:
    """The error for a transaction whose caller's deadline passed before it could commit."""
    return JournalError(
        "the deadline passed before the journal transaction could commit; nothing was written",
        code="journal.too_late",
    )


class _Walk:
    """The state of one pass over the chain: problems so far and the last link seen."""

    def __init__(self, chain: Chain | None) -> None:
        self.chain = chain
        self.problems: list[Problem] = []
        self.last_seq, self.last_hash = 0, ""
        self._run: tuple[int, int] | None = None  # unkeyed run: (index in problems, first seq)
        self._unchecked: list[int] = []  # keyed rows seen without a key

    def add(self, row: Row) -> None:
        if row.seq != self.last_seq + 1:
            missing = (
                f"seq {self.last_seq + 1}"
                if row.seq == self.last_seq + 2
                else f"seq {self.last_seq + 1}..{row.seq - 1}"
            )
            self.problems.append(
                Problem(row.seq, "chain.missing", f"{missing} missing before {row.seq}")
            )
        self._check(row)
        self.last_seq, self.last_hash = row.seq, row.hash

    def _check(self, row: Row) -> None:
        try:
            data = row.event_dict()
            Event.from_dict(data)
        except (ValueError, TypeError, KeelError) as exc:
            self._run = None
            self.problems.append(
                Problem(row.seq, "row.unparseable", f"row {row.seq} does not parse: {exc}")
            )
            return
        if not is_keyed(row.hash):
            self._unkeyed(row)
        else:
            self._run = None
            if self.chain is None:
                self._unchecked.append(row.seq)
            else:
                try:
                    actual = self.chain.hash_event(row.prev_hash, data)
                except (TypeError, ValueError) as exc:
                    message = f"row {row.seq} cannot be hashed: {exc}"
                    self.problems.append(Problem(row.seq, "row.unparseable", message))
                    return
                if actual != row.hash:
                    self.problems.append(
                        Problem(
                            row.seq, "chain.hash_mismatch", f"row {row.seq} does not match its hash"
                        )
                    )
        if row.prev_hash != self.last_hash:
            self.problems.append(
                Problem(
                    row.seq,
                    "chain.broken_link",
                    f"row {row.seq} does not link to the row before it (prev_hash differs)",
                )
            )

    def _unkeyed(self, row: Row) -> None:
        """One problem per run of consecutive unkeyed rows, so a legacy journal is one line."""
        tag = row.hash.split(":", 1)[0] if ":" in row.hash else "untagged"
        if self._run is not None and self.last_seq == row.seq - 1:
            index, first = self._run
            self.problems[index] = Problem(
                first,
                "chain.unkeyed",
                f"rows {first}..{row.seq} are not keyed ({tag} hashes): "
                "anyone able to edit the database could have computed them",
            )
            return
        self._run = (len(self.problems), row.seq)
        self.problems.append(
            Problem(
                row.seq,
                "chain.unkeyed",
                f"row {row.seq} is not keyed ({tag} hash): "
                "anyone able to edit the database could have computed it",
            )
        )

    def finish(self, head: tuple[int, str] | None) -> list[Problem]:
        if self._unchecked:
            first, count = self._unchecked[0], len(self._unchecked)
            self.problems.append(
                Problem(
                    first,
                    "chain.key_missing",
                    f"the journal key is missing: {count} keyed row(s) from seq {first} "
                    "cannot be checked",
                )
            )
        if head is not None and head != (self.last_seq, self.last_hash):
            head_seq, _ = head
            self.problems.append(
                Problem(
                    head_seq,
                    "chain.head_mismatch",
                    f"the journal head is at seq {head_seq} but the last row is seq "
                    f"{self.last_seq}: rows at the end were removed or altered",
                )
            )
        return self.problems


def verify_rows(
    rows: Iterable[Row], chain: Chain | None, head: tuple[int, str] | None = None
) -> list[Problem]:
    """Every defect in ``rows`` (in ``seq`` order), checked against the recorded ``head``.

    Args:
        rows: the stored rows, in ``seq`` order.
        chain: the keyed chain to check hashes with; None when the key is missing, which makes
            the keyed rows uncheckable (one ``chain.key_missing`` problem), never intact.
        head: the ``(seq, hash)`` the backend recorded with its last append; a journal whose
            last row differs from it lost rows at the end.
    """
    walk = _Walk(chain)
    for row in rows:
        walk.add(row)
    return walk.finish(head)


class Journal(Protocol):
    """Append-only, hash-chained event storage: the seam between keel and a backend."""

    def append(self, event: Event) -> Event:
        """Store ``event`` in one transaction; return it with its ``seq``."""
        ...

    def append_many(
        self,
        events: Sequence[Event],
        *,
        request_id: str | None = None,
        outcome: Mapping[str, Any] | None = None,
        session_state: tuple[str, Mapping[str, Any]] | None = None,
        deadline: float | None = None,
    ) -> list[Event]:
        """Store ``events`` in one transaction, chained at consecutive seqs; return them.

        With ``request_id`` already committed: write nothing, raise ``AlreadyAnswered``.
        """
        ...

    def answered(self, request_id: str) -> dict[str, Any] | None:
        """The outcome stored with ``request_id``, or None if it was never committed."""
        ...

    def session_state(self, session_id: str) -> tuple[int, dict[str, Any]] | None:
        """``(version, data)`` of a session's state, or None if none was stored."""
        ...

    def session_state_version(self, session_id: str) -> int:
        """The version of a session's state; 0 when none was stored."""
        ...

    def events(
        self,
        session_id: str | None = None,
        kinds: Iterable[str] | None = None,
        after_seq: int = 0,
    ) -> Iterator[Event]:
        """Stored events in ``seq`` order, optionally of one session and some kinds."""
        ...

    def sessions(self) -> list[SessionSummary]:
        """One summary per session, oldest first."""
        ...

    def verify(self) -> list[Problem]:
        """Every defect in the chain; empty when it is intact."""
        ...

    def close(self) -> None:
        """Release the backend."""
        ...

    def __enter__(self) -> Self:
        """The journal itself."""
        ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the journal."""
        ...
