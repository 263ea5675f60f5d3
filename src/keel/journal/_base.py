"""The journal seam and the hash chain every backend shares.

A stored record is a :class:`Row`: the event's columns, its payload as canonical JSON, the hash
of the row before it and its own hash::

    hash = "sha256:" + sha256(prev_hash + canonical_json(event.to_dict() with seq)).hexdigest()

The first row's ``prev_hash`` is the empty string. The algorithm tag travels with each hash so a
later backend can change algorithm without invalidating old chains. :func:`verify_rows` walks
rows in ``seq`` order and reports every broken link, missing link and unreadable row, so the
SQLite backend and the in-memory double check the chain the same way.

This module is on the hook path: standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields, replace
from types import TracebackType
from typing import Any, Literal, Protocol, Self

from keel.errors import JournalError, KeelError
from keel.events import Event, canonical_json

HASH_ALGORITHM = "sha256"
HASH_PREFIX = f"{HASH_ALGORITHM}:"

ProblemCode = Literal[
    "chain.hash_mismatch",
    "chain.broken_link",
    "chain.missing",
    "chain.head_mismatch",
    "row.unparseable",
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


def chain_hash(prev_hash: str, event_dict: dict[str, Any]) -> str:
    """The tagged hash of an event dict linked to ``prev_hash``."""
    body = (prev_hash + canonical_json(event_dict)).encode("utf-8")
    return HASH_PREFIX + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, slots=True)
class Prepared:
    """An event serialised up to its place in the chain, ready for :meth:`place`.

    Everything except ``seq`` and ``prev_hash`` is encoded before the write lock is taken, so
    the lock is held only for a string join and one SHA-256.
    """

    event: Event
    payload: str
    before_seq: str
    after_seq: str

    def body(self, seq: int) -> str:
        """``canonical_json(event.to_dict())`` with ``seq`` filled in."""
        return f"{self.before_seq}{seq}{self.after_seq}"

    def place(self, seq: int, prev_hash: str) -> Row:
        """The row for this event at ``seq`` after ``prev_hash``."""
        body = (prev_hash + self.body(seq)).encode("utf-8")
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
            hash=HASH_PREFIX + hashlib.sha256(body).hexdigest(),
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
            return {scrub(k): scrub(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, list | tuple):
            return [scrub(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value

    try:
        return Event.from_dict(scrub(event.to_dict()))
    except (KeelError, TypeError, ValueError) as exc:
        raise JournalError(
            f"event {event.kind!r} cannot be stored: {exc}", code="journal.unserializable"
        ) from exc


def _check_row(row: Row, expected_prev: str) -> list[Problem]:
    problems: list[Problem] = []
    try:
        data = row.event_dict()
        Event.from_dict(data)
    except (ValueError, TypeError, KeelError) as exc:
        return [Problem(row.seq, "row.unparseable", f"row {row.seq} does not parse: {exc}")]
    try:
        actual = chain_hash(row.prev_hash, data)
    except (TypeError, ValueError) as exc:
        return [Problem(row.seq, "row.unparseable", f"row {row.seq} cannot be hashed: {exc}")]
    if actual != row.hash:
        problems.append(
            Problem(row.seq, "chain.hash_mismatch", f"row {row.seq} does not match its hash")
        )
    if row.prev_hash != expected_prev:
        problems.append(
            Problem(
                row.seq,
                "chain.broken_link",
                f"row {row.seq} does not link to the row before it (prev_hash differs)",
            )
        )
    return problems


def verify_rows(rows: Iterable[Row], head: tuple[int, str] | None = None) -> list[Problem]:
    """Every defect in ``rows`` (in ``seq`` order), checked against the recorded ``head``.

    ``head`` is the ``(seq, hash)`` the backend recorded with its last append; a journal whose
    last row differs from it lost rows at the end.
    """
    problems: list[Problem] = []
    last_seq, last_hash = 0, ""
    for row in rows:
        if row.seq != last_seq + 1:
            missing = (
                f"seq {last_seq + 1}"
                if row.seq == last_seq + 2
                else f"seq {last_seq + 1}..{row.seq - 1}"
            )
            problems.append(
                Problem(row.seq, "chain.missing", f"{missing} missing before {row.seq}")
            )
        problems.extend(_check_row(row, last_hash))
        last_seq, last_hash = row.seq, row.hash
    if head is not None and head != (last_seq, last_hash):
        head_seq, _ = head
        problems.append(
            Problem(
                head_seq,
                "chain.head_mismatch",
                f"the journal head is at seq {head_seq} but the last row is seq {last_seq}: "
                "rows at the end were removed or altered",
            )
        )
    return problems


class Journal(Protocol):
    """Append-only, hash-chained event storage: the seam between keel and a backend."""

    def append(self, event: Event) -> Event:
        """Store ``event`` in one transaction; return it with its ``seq``."""
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
