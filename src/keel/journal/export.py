"""Exporting journal events: JSON Lines, and OpenTelemetry OTLP/JSON traces.

``jsonl`` writes one canonical event per line; :meth:`keel.core.events.Event.from_json` reads each
back into an equal event.

``otlp-json`` maps each session onto the OpenTelemetry GenAI semantic conventions (see the
observability reference, sections 5.1 and 5.4), as one ``resourceSpans`` document:

- a root ``invoke_agent <agent>`` span per session, carrying ``gen_ai.conversation.id``;
- an ``execute_tool <tool>`` span per ``tool.call`` event, ended by its ``tool.result``;
- an ``apply_guardrail keel`` span per ``decision``, a child of the call it judged, with the
  draft ``gen_ai.security.*`` attributes. A deny is not an error: its status stays unset;
- diagnostics and guidance as span events (``gen_ai.security.finding`` and ``keel.guidance``)
  with ``keel.diagnostic.kind`` and ``keel.guidance.level``;
- any other event as a ``keel.<kind>`` span event on its parent span or the root.

Every span and span event carries the journal ``seq`` as ``keel.journal.seq``. Trace and span
ids come from the events; times are unix nanoseconds as strings. Tool arguments are left out
unless asked for, since they may hold secrets.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO, assert_never

from keel import __version__
from keel.core.events import (
    CheckpointPayload,
    DataPayload,
    DecisionPayload,
    DiagnosticPayload,
    Event,
    GatePayload,
    GuidancePayload,
    ProbePayload,
    StopPayload,
    ToolCallPayload,
    ToolResultPayload,
)

ExportFormat = Literal["jsonl", "otlp-json"]

SPAN_KIND_INTERNAL = 1
STATUS_CODE_ERROR = 2
GUARDIAN_NAME = "keel"
SCOPE_NAME = "keel.journal"

_DECISION_TYPES = {"allow": "allow", "deny": "deny", "ask": "warn"}
_SEVERITY = {"hint": "low", "correct": "medium", "replan": "high", "stop": "critical"}


def export_jsonl(events: Iterable[Event]) -> Iterator[str]:
    """One canonical JSON line per event, without the newline."""
    for event in events:
        yield event.to_json()


def write_export(
    events: Iterable[Event],
    fmt: ExportFormat,
    out: TextIO,
    *,
    include_arguments: bool = False,
) -> int:
    """Write ``events`` to ``out`` in ``fmt``; the number of events written."""
    match fmt:
        case "jsonl":
            count = 0
            for line in export_jsonl(events):
                out.write(line + "\n")
                count += 1
            return count
        case "otlp-json":
            listed = list(events)
            doc = export_otlp(listed, include_arguments=include_arguments)
            out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
            return len(listed)
        case _:
            assert_never(fmt)


def nanos(ts: float) -> str:
    """Unix seconds as the OTLP/JSON unix-nanoseconds string (microsecond precision)."""
    return str(round(ts * 1_000_000) * 1000)


def any_value(value: Any) -> dict[str, Any]:
    """An OTLP ``AnyValue``: strings, bools, ints (as strings), doubles and arrays."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        items: Sequence[Any] = value
        return {"arrayValue": {"values": [any_value(v) for v in items]}}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": json.dumps(value, sort_keys=True, default=str)}


def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP key/value attributes, dropping ``None`` values."""
    return [{"key": k, "value": any_value(v)} for k, v in values.items() if v is not None]


def root_span_id(session_id: str) -> str:
    """A stable span id for a session's root span when it has no ``session.start`` event."""
    return hashlib.sha256(f"keel.session:{session_id}".encode()).hexdigest()[:16]


@dataclass(slots=True)
class _Span:
    """A span being built; turned into OTLP/JSON by :meth:`to_otlp`."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start: float
    end: float
    attrs: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    error: str | None = None

    def to_otlp(self) -> dict[str, Any]:
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": SPAN_KIND_INTERNAL,
            "startTimeUnixNano": nanos(self.start),
            "endTimeUnixNano": nanos(max(self.end, self.start)),
            "attributes": attributes(self.attrs),
        }
        if self.parent_span_id:
            span["parentSpanId"] = self.parent_span_id
        if self.events:
            span["events"] = self.events
        if self.error is not None:
            span["status"] = {"code": STATUS_CODE_ERROR, "message": self.error}
        return span


class _SessionTrace:
    """The spans of one session, built event by event."""

    def __init__(self, first: Event, include_arguments: bool) -> None:
        self.include_arguments = include_arguments
        root_id = first.span_id if first.kind == "session.start" else root_span_id(first.session_id)
        self.root = _Span(
            trace_id=first.trace_id,
            span_id=root_id,
            parent_span_id=None,
            name=f"invoke_agent {first.agent}",
            start=first.ts,
            end=first.ts,
            attrs={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": first.agent,
                "gen_ai.conversation.id": first.session_id,
                "session.id": first.session_id,
                "keel.journal.seq": first.seq,
            },
        )
        self.spans: dict[str, _Span] = {root_id: self.root}
        self.calls: dict[str, _Span] = {}

    def add(self, event: Event) -> None:
        self.root.start = min(self.root.start, event.ts)
        self.root.end = max(self.root.end, event.ts)
        payload = event.payload
        match payload:
            case ToolCallPayload():
                self._tool_call(event, payload)
            case ToolResultPayload():
                self._tool_result(event, payload)
            case DecisionPayload():
                self._decision(event, payload)
            case DiagnosticPayload():
                self._diagnostic(event, payload)
            case GuidancePayload():
                self._guidance(event, payload)
            case (
                StopPayload() | CheckpointPayload() | ProbePayload() | GatePayload() | DataPayload()
            ):
                self._other(event)
            case _:
                assert_never(payload)

    def _parent(self, event: Event, tool_use_id: str | None = None) -> _Span:
        if event.parent_span_id and event.parent_span_id in self.spans:
            return self.spans[event.parent_span_id]
        if tool_use_id and tool_use_id in self.calls:
            return self.calls[tool_use_id]
        return self.root

    def _child_parent_id(self, event: Event, parent: _Span) -> str | None:
        if parent.trace_id == event.trace_id:
            return parent.span_id
        return event.parent_span_id

    def _new_span(self, event: Event, name: str, parent: _Span, attrs: dict[str, Any]) -> _Span:
        span = _Span(
            trace_id=event.trace_id,
            span_id=event.span_id,
            parent_span_id=self._child_parent_id(event, parent),
            name=name,
            start=event.ts,
            end=event.ts,
            attrs={**attrs, "keel.journal.seq": event.seq},
        )
        self.spans[event.span_id] = span
        return span

    def _tool_call(self, event: Event, call: ToolCallPayload) -> None:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call.tool_use_id or f"keel-{event.seq}",
            "gen_ai.tool.type": "extension" if call.kind == "mcp" else "function",
            "keel.tool.kind": call.kind,
        }
        if self.include_arguments:
            attrs["gen_ai.tool.call.arguments"] = json.dumps(
                {"command": call.command, "paths": call.paths, "url": call.url, "args": call.args},
                sort_keys=True,
                default=str,
            )
        span = self._new_span(event, f"execute_tool {call.tool}", self._parent(event), attrs)
        if call.tool_use_id:
            self.calls[call.tool_use_id] = span

    def _tool_result(self, event: Event, result: ToolResultPayload) -> None:
        span = self._parent(event, result.tool_use_id)
        if span is self.root:
            self._other(event)
            return
        span.end = max(span.end, event.ts)
        span.attrs["keel.tool.ok"] = result.ok
        span.attrs["keel.tool.exit_code"] = result.exit_code
        span.attrs["keel.tool.result.seq"] = event.seq
        if not result.ok:
            span.attrs["error.type"] = "tool_error"
            span.error = result.error or "tool call failed"

    def _decision(self, event: Event, decision: DecisionPayload) -> None:
        parent = self._parent(event, decision.tool_use_id)
        target = decision.tool_use_id or parent.attrs.get("gen_ai.tool.call.id")
        self._new_span(
            event,
            f"apply_guardrail {GUARDIAN_NAME}",
            parent,
            {
                "gen_ai.operation.name": "apply_guardrail",
                "gen_ai.guardian.name": GUARDIAN_NAME,
                "gen_ai.security.decision.type": _DECISION_TYPES.get(
                    decision.decision, decision.decision
                ),
                "gen_ai.security.target.type": "tool_call",
                "gen_ai.security.target.id": target,
                "gen_ai.security.policy.id": decision.rule,
                "gen_ai.security.decision.reason": decision.reason,
                "langfuse.observation.type": "guardrail",
                "keel.decision": decision.decision,
                "keel.decision.suggestion": decision.suggestion,
                "keel.decision.subject": decision.subject,
            },
        )

    def _span_event(self, event: Event, span: _Span, name: str, attrs: dict[str, Any]) -> None:
        span.events.append(
            {
                "timeUnixNano": nanos(event.ts),
                "name": name,
                "attributes": attributes({**attrs, "keel.journal.seq": event.seq}),
            }
        )

    def _diagnostic(self, event: Event, diag: DiagnosticPayload) -> None:
        self._span_event(
            event,
            self._parent(event),
            "gen_ai.security.finding",
            {
                "gen_ai.security.risk.category": f"custom:{diag.detector}",
                "gen_ai.security.risk.severity": _SEVERITY.get(diag.level, "low"),
                "keel.diagnostic.kind": diag.detector,
                "keel.guidance.level": diag.level,
                "keel.diagnostic.message": diag.message,
            },
        )

    def _guidance(self, event: Event, guidance: GuidancePayload) -> None:
        self._span_event(
            event,
            self._parent(event, guidance.tool_use_id),
            "keel.guidance",
            {
                "keel.diagnostic.kind": guidance.detector,
                "keel.guidance.level": guidance.level,
                "keel.guidance.message": guidance.message,
            },
        )

    def _other(self, event: Event) -> None:
        if event.kind == "session.start" and event.span_id == self.root.span_id:
            return
        tool_use_id = getattr(event.payload, "tool_use_id", None)
        parent = self._parent(event, tool_use_id)
        self._span_event(event, parent, f"keel.{event.kind}", _summary_attrs(event))


def _summary_attrs(event: Event) -> dict[str, Any]:
    """A few safe attributes per kind; prompts and model payloads are left out."""
    payload = event.payload
    match payload:
        case StopPayload():
            return {"keel.stop.reason": payload.reason, "keel.stop.by": payload.by}
        case CheckpointPayload():
            return {
                "keel.checkpoint.id": payload.checkpoint_id,
                "keel.checkpoint.files": payload.files,
            }
        case ProbePayload():
            return {
                "keel.probe.step": payload.step_id,
                "keel.probe.function": payload.function,
                "keel.probe.ok": payload.ok,
            }
        case GatePayload():
            return {"keel.gate.command": payload.command, "keel.gate.passed": payload.passed}
        case ToolResultPayload():
            return {"keel.tool.name": payload.tool, "keel.tool.ok": payload.ok}
        case _:
            return {}


def export_otlp(events: Iterable[Event], *, include_arguments: bool = False) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` for ``events`` (any number of sessions)."""
    sessions: dict[str, _SessionTrace] = {}
    for event in events:
        trace = sessions.get(event.session_id)
        if trace is None:
            trace = sessions[event.session_id] = _SessionTrace(event, include_arguments)
        trace.add(event)
    spans = [span.to_otlp() for trace in sessions.values() for span in trace.spans.values()]
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": attributes(
                        {"service.name": "keel", "service.version": __version__}
                    )
                },
                "scopeSpans": [
                    {"scope": {"name": SCOPE_NAME, "version": __version__}, "spans": spans}
                ],
            }
        ]
    }
