"""``MemoryJournal``: the in-process test double, with the same chain as the SQLite backend."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import Self

from keel.events import Event
from keel.journal._base import Problem, Row, SessionSummary, prepare, verify_rows


class MemoryJournal:
    """A journal held in a list; ``rows`` is public so tests can tamper with it."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.head: tuple[int, str] = (0, "")
        self._lock = threading.Lock()

    def append(self, event: Event) -> Event:
        """Store ``event`` after the head of the chain; return it with its ``seq``."""
        prepared = prepare(event)
        with self._lock:
            last_seq, last_hash = self.head
            row = prepared.place(last_seq + 1, last_hash)
            self.rows.append(row)
            self.head = (row.seq, row.hash)
        return replace(prepared.event, seq=row.seq)

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
        return verify_rows(sorted(self.rows, key=lambda r: r.seq), self.head)

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
