"""The monitor's values: ``Diagnostic`` (frozen) and ``MonitorState`` (its bounded memory).

``MonitorState`` is what a hook process loads before a call and stores after it, so it holds
only windows, counters and short hashes, never the history itself: its JSON stays a few
kilobytes however long the session runs (``seen`` is capped by ``[monitor] seen_cap``, the
other maps by ``MAP_CAP``, ``recent`` by the largest detector window).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from keel.decision import GuidanceLevel
from keel.errors import PayloadError
from keel.events import DiagnosticPayload, Event

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
]
DETECTORS: tuple[DetectorName, ...] = (
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
)
STATE_VERSION = 1
MAP_CAP = 64
"""Entries kept in each per-key map (failures, errors, gates) of the state."""


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
    recent: list[list[Any]] = field(default_factory=list[list[Any]])
    """The last calls: ``[step, key, kind, output hash, ok, tool_use_id, flags, gates, label]``."""
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

    def to_json(self) -> str:
        """Compact JSON of the whole state."""
        # every field is already a JSON value; asdict() would deep-copy them all (10x slower)
        data = {name: getattr(self, name) for name in _FIELDS}
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> MonitorState:
        """Rebuild a state; malformed or foreign JSON is a ``PayloadError``."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PayloadError(
                f"monitor state is not JSON: {exc}", code="payload.monitor_state"
            ) from exc
        if not isinstance(data, dict):
            raise PayloadError("monitor state must be an object", code="payload.monitor_state")
        names = set(_FIELDS)
        unknown = sorted(set(data) - names)  # pyright: ignore[reportUnknownArgumentType]
        if unknown or data.get("version") != STATE_VERSION:
            raise PayloadError(
                f"monitor state has unknown keys {unknown} or version {data.get('version')!r}",  # pyright: ignore[reportUnknownMemberType]
                code="payload.monitor_state",
            )
        try:
            state = cls(**data)
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
        "recent": isinstance(state.recent, list) and all(_is_entry(e) for e in state.recent),  # pyright: ignore[reportUnnecessaryIsInstance]
        "maps": all(
            isinstance(m, dict) and all(type(v) is int for v in m.values())  # pyright: ignore[reportUnnecessaryIsInstance]
            for m in (state.seen, state.failures, state.errors)
        ),
        "ladder": isinstance(state.ladder, dict)
        and all(_is_pair(v, lambda x: x in _LEVELS) for v in state.ladder.values()),  # pyright: ignore[reportUnnecessaryIsInstance]
        "gates": isinstance(state.gates, dict)
        and all(_is_pair(v, lambda x: type(x) is int) for v in state.gates.values()),  # pyright: ignore[reportUnnecessaryIsInstance]
        "lists": all(
            isinstance(v, list) for v in (state.plan_words, state.plan_steps, state.budget_warned)
        ),  # pyright: ignore[reportUnnecessaryIsInstance]
    }
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        raise PayloadError(
            f"monitor state has malformed {', '.join(bad)}", code="payload.monitor_state"
        )


_LEVELS = ("hint", "correct", "replan", "stop")


def _is_entry(entry: Any) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 9  # pyright: ignore[reportUnknownArgumentType]
        and type(entry[0]) is int
        and isinstance(entry[1], str)
        and type(entry[6]) is int
        and isinstance(entry[7], list)
    )


def _is_pair(value: Any, first: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and bool(first(value[0]))
        and (  # pyright: ignore[reportUnknownArgumentType]
            type(value[1]) in (int, bool)
        )
    )
