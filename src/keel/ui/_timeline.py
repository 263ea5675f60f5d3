"""A session's timeline as the web page shows it: one item per thing that happened.

Each journal event becomes a :class:`TimelineItem` carrying the one-line description
``keel show`` prints (``keel.journal.timeline.describe``: one copy of what matters about each
kind) and the labelled fields the page lists under it. A tool call is one item: the guard's
decision (rule, reason, suggestion) and the tool's result are folded into the call they answer
(their ``parent_span_id`` is the call's span), and the item is sent again, updated, when they
arrive. Everything here is agent-written text: the page puts it in as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from keel.core.events import (
    CheckpointPayload,
    DataPayload,
    DecisionPayload,
    DiagnosticPayload,
    Event,
    GuidancePayload,
    ProbePayload,
    StopPayload,
    ToolCallPayload,
    ToolResultPayload,
)
from keel.journal.timeline import describe

ItemGroup = Literal[
    "call", "decision", "guidance", "checkpoint", "model", "judgement", "phase", "plan",
    "probe", "stop", "other",
]  # fmt: skip
GROUPS: tuple[ItemGroup, ...] = (
    "call", "decision", "guidance", "checkpoint", "model", "judgement", "phase", "plan",
    "probe", "stop", "other",
)  # fmt: skip
"""Every group, in the order the page offers them as filters."""
FOLDED_KINDS = ("tool.call", "decision", "tool.result")
"""The kinds a later event can fold into (what a live stream must have seen before it)."""

Fields = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class TimelineItem:
    """One row of the timeline: an event, or a tool call with its decision and result."""

    id: int
    """The ``seq`` of the event that opened the item: a later update carries the same id."""
    seq: int
    """The ``seq`` of the last event folded in."""
    ts: float
    kind: str
    group: ItemGroup
    title: str
    text: str
    """What ``keel show`` prints for the event (for a call: the call's line)."""
    decision: str | None = None
    level: str | None = None
    """A guidance's or diagnostic's level (hint, correct, replan, stop)."""
    checkpoint: str | None = None
    """A checkpoint id, for the link to its diff."""
    fields: Fields = ()

    def folded(self, seq: int, fields: Fields, decision: str | None = None) -> TimelineItem:
        """This item with a later event folded in: its ``seq``, fields and decision."""
        return TimelineItem(
            self.id, max(self.seq, seq), self.ts, self.kind, self.group, self.title, self.text,
            decision or self.decision, self.level, self.checkpoint, (*self.fields, *fields),
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``fields`` as ``[label, value]`` pairs)."""
        return {
            "id": self.id,
            "seq": self.seq,
            "ts": self.ts,
            "kind": self.kind,
            "group": self.group,
            "title": self.title,
            "text": self.text,
            "decision": self.decision,
            "level": self.level,
            "checkpoint": self.checkpoint,
            "fields": [list(pair) for pair in self.fields],
        }


class TimelineBuilder:
    """Turns events, in journal order, into items; remembers calls to fold answers into."""

    def __init__(self) -> None:
        self._calls: dict[str, TimelineItem] = {}

    def add(self, event: Event) -> TimelineItem:
        """The new item for ``event``, or the call item it updates (same ``id``)."""
        call = self._calls.get(event.parent_span_id or "")
        payload = event.payload
        if call is not None and isinstance(payload, DecisionPayload):
            fields = _decision_fields(payload, call.text)
            return self._update(event, call.folded(event.seq, fields, payload.decision))
        if call is not None and isinstance(payload, ToolResultPayload):
            return self._update(event, call.folded(event.seq, _result_fields(payload)))
        item = item_of(event)
        if isinstance(payload, ToolCallPayload):
            self._calls[event.span_id] = item
        return item

    def _update(self, event: Event, item: TimelineItem) -> TimelineItem:
        self._calls[event.parent_span_id or ""] = item
        return item


def build_items(events: Iterable[Event]) -> list[TimelineItem]:
    """The items of ``events`` in order, each call once with its decision and result."""
    builder = TimelineBuilder()
    items: dict[int, TimelineItem] = {}
    for event in events:
        item = builder.add(event)
        items[item.id] = item
    return list(items.values())


def item_of(event: Event) -> TimelineItem:
    """The item of one event on its own."""
    group, title, extra = _shape(event)
    text = extra.pop("text", None) or describe(event)
    return TimelineItem(event.seq, event.seq, event.ts, event.kind, group, title, text, **extra)


def _shape(event: Event) -> tuple[ItemGroup, str, dict[str, Any]]:
    """The group, title and other fields of the item of ``event`` (built once: it is hot)."""
    payload = event.payload
    match payload:
        case ToolCallPayload():
            return "call", payload.tool, {}
        case DecisionPayload():
            fields = _decision_fields(payload, "")
            return "decision", "decision", {"decision": payload.decision, "fields": fields}
        case ToolResultPayload():
            return "call", payload.tool, {"fields": _result_fields(payload)}
        case GuidancePayload() | DiagnosticPayload():
            return "guidance", event.kind, {"level": payload.level}
        case CheckpointPayload():
            kind = str(payload.detail.get("kind", "")) if isinstance(payload.detail, dict) else ""
            fields = _present((("kind", kind), ("files", ", ".join(payload.files))))
            checkpoint = payload.checkpoint_id if event.kind == "checkpoint" else None
            return "checkpoint", event.kind, {"checkpoint": checkpoint, "fields": fields}
        case ProbePayload():
            return "probe", f"probe {payload.function}", {}
        case StopPayload():
            fields = _present((("reason", payload.reason), ("by", payload.by or "")))
            return "stop", event.kind, {"fields": fields}
        case DataPayload():
            return _data_shape(event.kind, payload.data)
        case _:
            return "other", event.kind, {}


def _decision_fields(payload: DecisionPayload, text: str) -> Fields:
    """Rule, reason, suggestion, and what was judged unless ``text`` (the call's) says it."""
    subject = payload.subject or ""
    fields = (
        ("rule", payload.rule),
        ("reason", payload.reason),
        ("suggestion", payload.suggestion or ""),
        ("on", "" if subject in text else subject),
    )
    return _present(fields)


def _result_fields(payload: ToolResultPayload) -> Fields:
    status = "ok" if payload.ok else "FAILED"
    if payload.exit_code is not None:
        status += f", exit {payload.exit_code}"
    return _present((("result", status), ("error", payload.error or "")))


def _data_shape(kind: str, data: dict[str, Any]) -> tuple[ItemGroup, str, dict[str, Any]]:
    if kind in ("model.request", "model.response"):
        return "model", kind, {"fields": _model_fields(data)}
    if kind == "judgement":
        return "judgement", "judge", {"fields": _judgement_fields(data)}
    if kind == "plan" and data.get("event") == "agent.phase":
        phase = f"{data.get('from', '?')} -> {data.get('to', '?')}"
        fields = _present((("phase", phase), ("why", str(data.get("why") or ""))))
        return "phase", "phase", {"text": phase, "fields": fields}
    if kind == "plan":
        return "plan", f"plan {data.get('event', '')}".strip(), {}
    return "other", kind, {}


def _model_fields(data: dict[str, Any]) -> Fields:
    usage = data.get("usage") or {}
    cost = data.get("cost_usd")
    latency = data.get("latency_ms")
    fields = (
        ("model", str(data.get("model") or "")),
        ("input tokens", _text(usage.get("input_tokens"))),
        ("output tokens", _text(usage.get("output_tokens"))),
        ("cost", f"${cost:.4f}" if isinstance(cost, int | float) else ""),
        ("latency", f"{latency:.0f} ms" if isinstance(latency, int | float) else ""),
    )
    return _present(fields)


def _judgement_fields(data: dict[str, Any]) -> Fields:
    found = data.get("verdict")
    verdict: dict[str, Any] = found if isinstance(found, dict) else {}
    fields = (
        ("status", _text(data.get("status"))),
        ("category", _text(verdict.get("category"))),
        ("confidence", _text(verdict.get("confidence"))),
        ("step", _text(data.get("step"))),
        ("why asked", ", ".join(str(t) for t in data.get("triggers") or [])),
        ("model", _text(data.get("model"))),
    )
    return _present(fields)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _present(fields: Fields) -> Fields:
    """The fields that have a value."""
    return tuple((label, value) for label, value in fields if value)
