"""``MemoryJournal``: the in-process test double, with the same chain as the SQLite backend."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

from keel.core.errors import AlreadyAnswered
from keel.core.events import Event
from keel.journal._base import (
    Chain,
    Problem,
    Row,
    SessionSummary,
    json_text,
    place_all,
    prepare,
    too_late,
    verify_rows,
)


class MemoryJournal:
    """A journal held in a list; ``rows`` is public so tests can tamper with it.

    Args:
        key: the chain key; default a random key of this instance's own.
    """

    def __init__(self, key: bytes | None = None) -> None:
        self.chain = Chain(key if key is not None else os.urandom(32))
        self.rows: list[Row] = []
        self.head: tuple[int, str] = (0, "")
        self.requests: dict[str, tuple[float, str]] = {}
        self.states: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()

    def append(self, event: Event) -> Event:
        """Store ``event`` after the head of the chain; return it with its ``seq``."""
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
        """Store ``events`` all at once, as ``SQLiteJournal.append_many`` does.

        There is no lock to wait for, so ``deadline`` only ever gives ``journal.too_late``.
        """
        prepared = [prepare(e) for e in events]
        outcome_text = json_text(outcome, "the outcome") if request_id is not None else ""
        state_text = json_text(session_state[1], "the session state") if session_state else ""
        with self._lock:
            if deadline is not None and time.monotonic() > deadline:
                raise too_late()
            if request_id is not None and request_id in self.requests:
                stored = self.requests[request_id][1]
                raise AlreadyAnswered(_loads(stored), request_id=request_id)
            rows = place_all(prepared, *self.head, self.chain)
            self.rows.extend(rows)
            if rows:
                self.head = (rows[-1].seq, rows[-1].hash)
            if request_id is not None:
                self.requests[request_id] = (time.time(), outcome_text)
            if session_state is not None:
                version = self.states.get(session_state[0], (0, ""))[0] + 1
                self.states[session_state[0]] = (version, state_text)
        return [replace(p.event, seq=r.seq) for p, r in zip(prepared, rows, strict=True)]

    def answered(self, request_id: str) -> dict[str, Any] | None:
        """The outcome stored with ``request_id``, or None."""
        stored = self.requests.get(request_id)
        return None if stored is None else _loads(stored[1])

    def session_state(self, session_id: str) -> tuple[int, dict[str, Any]] | None:
        """``(version, data)`` of ``session_id``'s state, or None."""
        stored = self.states.get(session_id)
        return None if stored is None else (stored[0], _loads(stored[1]))

    def session_state_version(self, session_id: str) -> int:
        """The version of ``session_id``'s state; 0 when none was stored."""
        return self.states.get(session_id, (0, ""))[0]

    def events(
        self,
        session_id: str | None = None,
        kinds: Iterable[str] | None = None,
        after_seq: int = 0,
    ) -> Iterator[Event]:
        """Stored events in ``seq`` order, optionally of one session and some kinds."""
        wanted = set(kinds) if kinds is not None else None
        for row in sorted(self.rows, key=lambda r: r.seq):
            if row.seq <= after_seq:
                continue
            if session_id is not None and row.session_id != session_id:
                continue
            if wanted is not None and row.kind not in wanted:
                continue
            yield row.to_event()

    def sessions(self) -> list[SessionSummary]:
        """One summary per session, in order of each session's first event."""
        firsts: dict[str, Row] = {}
        spans: dict[str, tuple[float, float, int]] = {}
        for row in sorted(self.rows, key=lambda r: r.seq):
            firsts.setdefault(row.session_id, row)
            lo, hi, n = spans.get(row.session_id, (row.ts, row.ts, 0))
            spans[row.session_id] = (min(lo, row.ts), max(hi, row.ts), n + 1)
        return [
            SessionSummary(sid, first.agent, *spans[sid], first.trace_id)
            for sid, first in firsts.items()
        ]

    def verify(self) -> list[Problem]:
        """Every defect in the chain; empty when it is intact."""
        return verify_rows(sorted(self.rows, key=lambda r: r.seq), self.chain, self.head)

    def close(self) -> None:
        """Nothing to release."""

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


def _loads(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}
