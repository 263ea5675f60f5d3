"""The monitor's values: ``Diagnostic`` (frozen) and ``MonitorState`` (its bounded memory).

``MonitorState`` is what a hook process loads before a call and stores after it, so it holds
only windows, counters and short hashes, never the history itself: its JSON stays a few
kilobytes however long the session runs (``seen`` is capped by ``[monitor] seen_cap``, the
other maps by ``MAP_CAP``, ``recent`` by the largest detector window). ``to_dict()`` /
``from_dict()`` give the same data as a JSON-ready dict, for a caller that stores it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple, get_args

from keel.core.decision import GUIDANCE_LEVELS, GuidanceLevel
from keel.core.errors import PayloadError
from keel.core.events import DiagnosticPayload, Event

DetectorName = Literal[
    "repeat",
    "alternation",
    "failure",
    "no_progress",
    "monologue",
    "budget",
    "scope",
    "test_weakening",
    "unverified_finish",
    "plan_drift",
    "judge",
]
DETECTORS: tuple[DetectorName, ...] = get_args(DetectorName)
STATE_VERSION = 1
MAP_CAP = 64
"""Entries kept in each per-key map (failures, errors, gates) of the state."""
EDIT, TEST, POLL, READ, WRITES = 1, 2, 4, 8, 16
"""Flags of a call: it may change files, runs tests, waits or polls, only reads, changes files
it names (a write or edit tool, a patch, a command with written paths)."""


class CallEntry(NamedTuple):
    """One recent call as the detectors remember it; a JSON list in the persisted state."""

    step: int
    key: str
    """The hash of the call's tool and canonical arguments (``call_key``)."""
    kind: str
    out: str | None
    """The content hash of its result, once the result came."""
    ok: bool | None
    tool_use_id: str | None
    flags: int
    """``EDIT | TEST | POLL | READ | WRITES``."""
    gates: tuple[str, ...]
    """The ``[gates]`` commands it ran so that their status is its own."""
    label: str
    """A short human label (``describe``)."""

    @classmethod
    def from_list(cls, value: Any) -> CallEntry:
        """The entry of a JSON list; a ``PayloadError`` if it is not one."""
        items: list[Any] = list(value) if isinstance(value, list | tuple) else []
        if not (len(items) == len(cls._fields) and _entry_types(items)):
            raise PayloadError("monitor state has malformed recent", code="payload.monitor_state")
        items[7] = tuple(items[7])
        return cls(*items)


def _entry_types(items: list[Any]) -> bool:
    step, key, kind, out, ok, tool_use_id, flags, gates, label = items
    return (
        type(step) is int
        and type(flags) is int
        and all(isinstance(v, str) for v in (key, kind, label))
        and all(v is None or isinstance(v, str) for v in (out, tool_use_id))
        and (ok is None or isinstance(ok, bool))
        and isinstance(gates, list | tuple)
        and all(isinstance(g, str) for g in gates)
    )


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A detector fired: at which step, how strongly, what it saw and what to do instead."""

    step: int
    """The 1-based index of the tool call the diagnostic is about."""
    detector: DetectorName
    level: GuidanceLevel
    """The ladder's level for it: the detector's base level, escalated if it came back."""
    message: str
    evidence: dict[str, Any] = field(default_factory=dict[str, Any])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "step": self.step,
            "detector": self.detector,
            "level": self.level,
            "message": self.message,
            "evidence": self.evidence,
        }

    def to_event(self, session_id: str, agent: str = "keel") -> Event:
        """The ``diagnostic`` journal event for this diagnostic."""
        payload = DiagnosticPayload(
            detector=self.detector,
            level=self.level,
            message=self.message,
            step=self.step,
            evidence=self.evidence,
        )
        return Event("diagnostic", session_id, payload, agent=agent)


@dataclass(slots=True)
class MonitorState:
    """The monitor's memory of one session: bounded, JSON round-trippable.

    Mutable on purpose: the monitor updates it in place on every event; hand a copy
    (``from_json(to_json())``) to anything that must not see later changes.
    """

    version: int = STATE_VERSION
    step: int = 0
    """Tool calls seen so far."""
    started: float | None = None
    last_ts: float | None = None
    tokens: int = 0
    recent: list[CallEntry] = field(default_factory=list[CallEntry])
    """The last calls, oldest first (JSON: lists)."""
    streak_key: str | None = None
    streak_n: int = 0
    streak_out: str | None = None
    failures: dict[str, int] = field(default_factory=dict[str, int])
    """Call key → failures in a row."""
    errors: dict[str, int] = field(default_factory=dict[str, int])
    """Error signature → times seen."""
    seen: dict[str, int] = field(default_factory=dict[str, int])
    """Result hash → step last seen (insertion order is recency)."""
    no_gain: int = 0
    last_edit_step: int = 0
    last_test_pass_step: int = 0
    gates: dict[str, list[Any]] = field(default_factory=dict[str, list[Any]])
    """Gate command → ``[step, passed]`` of its latest run."""
    plan_words: list[str] = field(default_factory=list[str])
    plan_steps: list[str] = field(default_factory=list[str])
    drift: int = 0
    replan: str | None = None
    """Why a new plan is required; non-read calls are denied while set."""
    replan_detector: str | None = None
    stopped: str | None = None
    """Why the session was stopped; every call is denied while set."""
    stop_detector: str | None = None
    ladder: dict[str, list[Any]] = field(default_factory=dict[str, list[Any]])
    """Detector → ``[level, step]`` of its latest guidance."""
    finish_blocks: int = 0
    message_hash: str | None = None
    message_n: int = 0
    budget_warned: list[str] = field(default_factory=list[str])
    last_guidance: list[Any] | None = None
    """``[level, message, detector, step]`` of the latest guidance, for re-injection."""
    pending_hint: list[Any] | None = None
    """``[message, detector, step]`` of a pre-call hint, delivered again with the result."""
    judged: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """The model judge's deliverable verdicts (``Judged.to_dict``) not yet delivered: they
    reach the ladder with the next call."""
    judged_seen: list[str] = field(default_factory=list[str])
    """``category:window hash`` of the verdicts landed so far (the newest): the same verdict
    on the same window (a cached judgement of an unchanged trajectory) lands once."""

    def to_json(self) -> str:
        """Compact JSON of the whole state."""
        # every field is already a JSON value (a CallEntry is a tuple); asdict() would
        # deep-copy them all (10x slower)
        data = {name: getattr(self, name) for name in _FIELDS}
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        """The state as a JSON-ready dict (a copy: later changes to the state do not show)."""
        return json.loads(self.to_json())

    @classmethod
    def from_json(cls, text: str | bytes) -> MonitorState:
        """Rebuild a state; malformed or foreign JSON is a ``PayloadError``."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PayloadError(
                f"monitor state is not JSON: {exc}", code="payload.monitor_state"
            ) from exc
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> MonitorState:
        """Rebuild a state from ``to_dict()``; anything malformed is a ``PayloadError``.

        The state takes over ``data``'s lists and dicts (pass a copy to keep them).
        """
        if not isinstance(data, dict):
            raise PayloadError("monitor state must be an object", code="payload.monitor_state")
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown or data.get("version") != STATE_VERSION:
            raise PayloadError(
                f"monitor state has unknown keys {unknown} or version {data.get('version')!r}",
                code="payload.monitor_state",
            )
        values: dict[str, Any] = dict(data)
        recent = values.get("recent", [])
        if not isinstance(recent, list):
            raise PayloadError("monitor state has malformed recent", code="payload.monitor_state")
        values["recent"] = [CallEntry.from_list(e) for e in recent]
        try:
            state = cls(**values)
        except TypeError as exc:
            raise PayloadError(str(exc), code="payload.monitor_state") from exc
        _check_types(state)
        return state


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(MonitorState))


def _check_types(state: MonitorState) -> None:
    """A state file that would break the detectors later is rejected now, with its field."""
    checks: dict[str, bool] = {
        "counters": all(
            type(v) is int
            for v in (state.step, state.tokens, state.no_gain, state.last_edit_step, state.drift)
        ),
        "maps": all(
            isinstance(m, dict) and all(type(v) is int for v in m.values())
            for m in (state.seen, state.failures, state.errors)
        ),
        "ladder": isinstance(state.ladder, dict)
        and all(_is_pair(v, lambda x: x in GUIDANCE_LEVELS) for v in state.ladder.values()),
        "gates": isinstance(state.gates, dict)
        and all(_is_pair(v, lambda x: type(x) is int) for v in state.gates.values()),
        "lists": all(
            isinstance(v, list)
            for v in (
                state.plan_words,
                state.plan_steps,
                state.budget_warned,
                state.judged,
                state.judged_seen,
            )
        ),
    }
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        raise PayloadError(
            f"monitor state has malformed {', '.join(bad)}", code="payload.monitor_state"
        )


def _is_pair(value: Any, first: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and bool(first(value[0]))
        and (type(value[1]) in (int, bool))
    )
