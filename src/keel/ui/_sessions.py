"""The sessions page: one row per session of the journal, with what a person scans for.

Counts come from one pass over the kinds that matter (calls, decisions, guidance, model
responses, session starts and ends, plan runs). The status is the session's own state first:
``ended`` once its last start/end event is an end (for a session of ``keel plan run`` alone,
once its run ended); then the workspace's emergency stop (``stopped``: every call of every
session is denied); then the monitor's hold of that session (``monitor-stopped``, or ``held``
while only a new plan is required); else ``running``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from keel.core.events import DataPayload, DecisionPayload, Event, is_own_session
from keel.journal import BREAK_SESSION, Journal, SessionSummary
from keel.lifecycle import ADMIN_SESSION

if TYPE_CHECKING:
    from keel.core.stop import StopStatus
    from keel.lifecycle import MonitorStop

SessionStatus = Literal["running", "ended", "stopped", "monitor-stopped", "held"]
TALLY_KINDS = (
    "tool.call", "decision", "guidance", "model.response", "session.start", "session.end", "plan",
)  # fmt: skip
ADMIN_SESSIONS = frozenset({ADMIN_SESSION, BREAK_SESSION})
"""keel's own bookkeeping sessions besides ``is_own_session``'s: stops, journal breaks."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session as the sessions page lists it."""

    session_id: str
    agent: str
    first_ts: float
    last_ts: float
    events: int
    calls: int
    denials: int
    asks: int
    guidance: int
    model_calls: int
    cost_usd: float | None
    """The summed cost of the model calls that have one; None when there was no model call."""
    cost_complete: bool
    """False when some model call's price was unknown (``cost_usd`` is then a lower bound)."""
    plans: int
    status: SessionStatus
    detail: str | None
    """Why the status is what it is (the stop's or the monitor's reason), when it says more."""
    own: bool
    """keel's own records (stops, ``keel exec``, ``keel doctor``), not an agent's session."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with the duration in seconds."""
        return {
            "session_id": self.session_id,
            "agent": self.agent,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "duration_s": round(self.last_ts - self.first_ts, 3),
            "events": self.events,
            "calls": self.calls,
            "denials": self.denials,
            "asks": self.asks,
            "guidance": self.guidance,
            "model_calls": self.model_calls,
            "cost_usd": self.cost_usd,
            "cost_complete": self.cost_complete,
            "plans": self.plans,
            "status": self.status,
            "detail": self.detail,
            "own": self.own,
        }


@dataclass(slots=True)
class _Tally:
    calls: int = 0
    denials: int = 0
    asks: int = 0
    guidance: int = 0
    model_calls: int = 0
    cost: float | None = None
    priced: bool = True
    plans: int = 0
    ended: bool = False
    marked: bool = False
    """A session start or end was seen: plan runs no longer say whether it ended."""

    def add(self, event: Event) -> None:
        payload = event.payload
        if event.kind == "tool.call":
            self.calls += 1
        elif isinstance(payload, DecisionPayload):
            self.denials += payload.decision == "deny"
            self.asks += payload.decision == "ask"
        elif event.kind == "guidance":
            self.guidance += 1
        elif event.kind in ("session.start", "session.end"):
            self.ended, self.marked = event.kind == "session.end", True
        elif isinstance(payload, DataPayload):
            self._data(event.kind, payload.data)

    def _data(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "plan":
            started = data.get("event") == "plan.start"
            self.plans += started
            if not self.marked and (started or data.get("event") == "plan.end"):
                self.ended = not started  # a plan's own session ends with its run
            return
        self.model_calls += 1
        cost = data.get("cost_usd")
        if isinstance(cost, int | float):
            self.cost = (self.cost or 0.0) + cost
        else:
            self.priced = False


def tally(events: Iterable[Event]) -> dict[str, _Tally]:
    """The counts of each session in ``events`` (of ``TALLY_KINDS``)."""
    found: dict[str, _Tally] = {}
    for event in events:
        found.setdefault(event.session_id, _Tally()).add(event)
    return found


def session_rows(
    journal: Journal, stop: StopStatus, holds: Mapping[str, MonitorStop]
) -> list[SessionRow]:
    """Every session of ``journal``, the most recently active first.

    Args:
        journal: the journal to read.
        stop: the workspace's emergency stop.
        holds: the sessions the monitor stopped or holds (``keel.lifecycle.monitor_stops``).
    """
    counts = tally(journal.events(kinds=TALLY_KINDS))
    rows = [
        _row(s, counts.get(s.session_id) or _Tally(), stop, holds.get(s.session_id))
        for s in journal.sessions()
    ]
    return sorted(rows, key=lambda r: r.last_ts, reverse=True)


def _row(
    summary: SessionSummary, counts: _Tally, stop: StopStatus, hold: MonitorStop | None
) -> SessionRow:
    status, detail = _status(counts.ended, stop, hold)
    sid = summary.session_id
    return SessionRow(
        session_id=sid,
        agent=summary.agent,
        first_ts=summary.first_ts,
        last_ts=summary.last_ts,
        events=summary.events,
        calls=counts.calls,
        denials=counts.denials,
        asks=counts.asks,
        guidance=counts.guidance,
        model_calls=counts.model_calls,
        cost_usd=counts.cost if counts.model_calls else None,
        cost_complete=counts.priced,
        plans=counts.plans,
        status=status,
        detail=detail,
        own=is_own_session(sid) or sid in ADMIN_SESSIONS,
    )


def _status(
    ended: bool, stop: StopStatus, hold: MonitorStop | None
) -> tuple[SessionStatus, str | None]:
    if ended:
        return "ended", None
    if stop.active:
        return "stopped", stop.reason
    if hold is not None:
        return ("monitor-stopped" if hold.stopped else "held"), hold.describe()
    return "running", None
