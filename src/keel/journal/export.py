"""Exporting journal events: JSON Lines, and OpenTelemetry OTLP/JSON traces.

``jsonl`` writes one canonical event per line; :meth:`keel.core.events.Event.from_json` reads each
back into an equal event.

``otlp-json`` maps each session onto the OpenTelemetry GenAI semantic conventions (see the
observability reference, sections 5.1 and 5.4), as one ``resourceSpans`` document:

- a root ``invoke_agent <agent>`` span per session, carrying ``gen_ai.conversation.id``;
- an ``execute_tool <tool>`` span per ``tool.call`` event, ended by its ``tool.result``;
- an ``apply_guardrail keel`` span per ``decision``, a child of the call it judged, with the
  draft ``gen_ai.security.*`` attributes and keel's own ``keel.decision``, ``keel.decision.rule``
  and ``keel.decision.reason``. A deny is not an error: its status stays unset;
- a ``chat <model>`` span (kind CLIENT) per ``model.request``, a child of the root, ended by its
  ``model.response``: ``gen_ai.request.model``, ``gen_ai.provider.name``,
  ``gen_ai.usage.input_tokens`` and ``output_tokens``, ``gen_ai.response.finish_reasons``. A
  request refused by a budget (never sent) and a call that failed are errors;
- diagnostics and guidance as span events (``gen_ai.security.finding`` and ``keel.guidance``)
  with ``keel.diagnostic.kind`` and ``keel.guidance.level``;
- any other event as a ``keel.<kind>`` span event on its parent span or the root.

Every span and span event carries the journal ``seq`` as ``keel.journal.seq``. Span ids come
from the events; a session is one trace, the one its ``session.start`` names, else
``trace_id_for(session)`` (what the guard and the model client give their events; an event
recorded with a stray trace id, such as ``keel run``'s first checkpoint, still joins its
session's tree). Times are unix nanoseconds as strings. Tool arguments are left out
unless asked for, since they may hold secrets; prompts and model messages always are.

The mapping is built event by event (:class:`SessionTrace`), so the live push
(``keel.journal.otlp``) uses it too: a span is *done* once nothing more can change it (a
decision at once; a call at its result, or at a deny, which gets none; a model call at its
response; everything at ``session.end``), and :meth:`SessionTrace.take` hands over each done
span once.
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
    trace_id_for,
)

ExportFormat = Literal["jsonl", "otlp-json"]

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
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


def unix_nanos(ts: float) -> int:
    """Unix seconds as unix nanoseconds (microsecond precision, as the journal keeps them)."""
    return round(ts * 1_000_000) * 1000


def nanos(ts: float) -> str:
    """Unix seconds as the OTLP/JSON unix-nanoseconds string (microsecond precision)."""
    return str(unix_nanos(ts))


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
class SpanEvent:
    """An event on a span: a diagnostic, guidance, or any event that is no span of its own."""

    name: str
    ts: float
    attrs: dict[str, Any]

    def to_otlp(self) -> dict[str, Any]:
        """The OTLP/JSON span event."""
        return {
            "timeUnixNano": nanos(self.ts),
            "name": self.name,
            "attributes": attributes(self.attrs),
        }


@dataclass(slots=True)
class Span:
    """A span being built from journal events; turned into OTLP/JSON by :meth:`to_otlp`."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start: float
    end: float
    attrs: dict[str, Any]
    kind: int = SPAN_KIND_INTERNAL
    events: list[SpanEvent] = field(default_factory=list[SpanEvent])
    error: str | None = None
    done: bool = False
    """Nothing more will change it (see the module)."""
    sent: bool = False
    """Handed over by :meth:`SessionTrace.take`."""

    def to_otlp(self) -> dict[str, Any]:
        """The OTLP/JSON span."""
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": self.kind,
            "startTimeUnixNano": nanos(self.start),
            "endTimeUnixNano": nanos(max(self.end, self.start)),
            "attributes": attributes(self.attrs),
        }
        if self.parent_span_id:
            span["parentSpanId"] = self.parent_span_id
        if self.events:
            span["events"] = [e.to_otlp() for e in self.events]
        if self.error is not None:
            span["status"] = {"code": STATUS_CODE_ERROR, "message": self.error}
        return span


class SessionTrace:
    """The spans of one session, built event by event (see the module)."""

    def __init__(self, first: Event, include_arguments: bool = False) -> None:
        """Start the trace of ``first``'s session: ``first`` must be its first event.

        The root span's id is ``first``'s when it is a ``session.start``, else one derived from
        the session id (``root_span_id``); either way every process that reads the same
        journal names the same root.
        """
        self.session_id = first.session_id
        self.include_arguments = include_arguments
        self.seq = 0
        """The ``seq`` of the last event added."""
        started = first.kind == "session.start"
        root_id = first.span_id if started else root_span_id(first.session_id)
        self.root = Span(
            trace_id=first.trace_id if started else trace_id_for(first.session_id),
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
        self.spans: dict[str, Span] = {root_id: self.root}
        self.calls: dict[str, Span] = {}

    def add(self, event: Event) -> None:
        """Map one more event of the session (in journal order)."""
        self.seq = max(self.seq, event.seq)
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
            case DataPayload() if event.kind == "model.request":
                self._model_request(event, payload.data)
            case DataPayload() if event.kind == "model.response":
                self._model_response(event, payload.data)
            case (
                StopPayload() | CheckpointPayload() | ProbePayload() | GatePayload() | DataPayload()
            ):
                self._other(event)
            case _:
                assert_never(payload)
        if event.kind == "session.end":
            for span in self.spans.values():
                span.done = True

    def take(self, *, final: bool = False) -> list[Span]:
        """The spans done and not taken before, in the order they began; marked taken.

        ``final``: every span not taken yet, done or not (the end of an export, or of the
        process that pushes), as far as the journal says.
        """
        out = [s for s in self.spans.values() if not s.sent and (s.done or final)]
        for span in out:
            span.sent = True
        return out

    def unsent(self) -> list[str]:
        """The ids of the spans not taken yet."""
        return [s.span_id for s in self.spans.values() if not s.sent]

    def settle(self, unsent: Iterable[str]) -> None:
        """Mark every span taken but those in ``unsent``.

        For a trace rebuilt from the journal up to where another process had pushed it.
        """
        keep = set(unsent)
        for span in self.spans.values():
            span.sent = span.span_id not in keep

    def _parent(self, event: Event, tool_use_id: str | None = None) -> Span:
        if event.parent_span_id and event.parent_span_id in self.spans:
            return self.spans[event.parent_span_id]
        if tool_use_id and tool_use_id in self.calls:
            return self.calls[tool_use_id]
        return self.root

    def _new_span(
        self,
        event: Event,
        name: str,
        parent: Span,
        attrs: dict[str, Any],
        kind: int = SPAN_KIND_INTERNAL,
    ) -> Span:
        span = Span(
            trace_id=self.root.trace_id,
            span_id=event.span_id,
            parent_span_id=parent.span_id,
            name=name,
            start=event.ts,
            end=event.ts,
            attrs={**attrs, "keel.journal.seq": event.seq},
            kind=kind,
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
        span.done = True

    def _decision(self, event: Event, decision: DecisionPayload) -> None:
        parent = self._parent(event, decision.tool_use_id)
        target = decision.tool_use_id or parent.attrs.get("gen_ai.tool.call.id")
        span = self._new_span(
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
                "keel.decision.rule": decision.rule,
                "keel.decision.reason": decision.reason,
                "keel.decision.suggestion": decision.suggestion,
                "keel.decision.subject": decision.subject,
            },
        )
        span.done = True
        if parent is not self.root:
            parent.end = max(parent.end, event.ts)
            if decision.decision == "deny":  # a denied call never runs: no result will come
                parent.done = True

    def _model_request(self, event: Event, data: dict[str, Any]) -> None:
        model = str(data.get("model") or "unknown")
        settings = data.get("settings") or {}
        span = self._new_span(
            event,
            f"chat {model}",
            self._parent(event),
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": data.get("provider"),
                "gen_ai.request.model": model,
                "gen_ai.request.temperature": settings.get("temperature"),
                "gen_ai.request.top_p": settings.get("top_p"),
                "gen_ai.request.max_tokens": settings.get("max_tokens"),
                "gen_ai.request.seed": settings.get("seed"),
                "gen_ai.conversation.id": event.session_id,
                "keel.model.caller": event.agent,
                "keel.model.request_hash": data.get("request_hash"),
            },
            kind=SPAN_KIND_CLIENT,
        )
        refused = data.get("refused")
        if isinstance(refused, dict):  # over a budget: journaled, never sent
            span.attrs["error.type"] = "keel.budget_exceeded"
            span.error = str(refused.get("message") or "refused by a budget")
            span.done = True

    def _model_response(self, event: Event, data: dict[str, Any]) -> None:
        span = self.spans.get(event.parent_span_id or "")
        if span is None or span.attrs.get("gen_ai.operation.name") != "chat":
            self._other(event)
            return
        usage = data.get("usage") or {}
        span.end = max(span.end, event.ts)
        finish = data.get("finish_reason")
        span.attrs.update(
            {
                "gen_ai.response.model": data.get("response_model"),
                "gen_ai.response.finish_reasons": [finish] if finish else None,
                "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                "gen_ai.usage.output_tokens": usage.get("output_tokens"),
                "keel.model.cost_usd": data.get("cost_usd"),
                "keel.model.latency_ms": data.get("latency_ms"),
                "keel.model.attempts": data.get("attempts"),
                "keel.model.tool_calls": [
                    str(c.get("name")) for c in data.get("tool_calls") or [] if isinstance(c, dict)
                ]
                or None,
                "keel.model.response.seq": event.seq,
            }
        )
        error = data.get("error")
        if isinstance(error, dict):
            span.attrs["error.type"] = str(error.get("code") or "model_error")
            span.error = str(error.get("message") or "model call failed")
        span.done = True

    def _span_event(self, event: Event, span: Span, name: str, attrs: dict[str, Any]) -> None:
        span.events.append(SpanEvent(name, event.ts, {**attrs, "keel.journal.seq": event.seq}))

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
        case DataPayload() if event.kind == "error":
            return {
                "keel.error.event": _text_or_none(payload.data.get("event")),
                "keel.error.code": _text_or_none(payload.data.get("code")),
            }
        case _:
            return {}


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def session_traces(
    events: Iterable[Event], *, include_arguments: bool = False
) -> dict[str, SessionTrace]:
    """Every session's trace in ``events`` (any number of sessions), by session id."""
    sessions: dict[str, SessionTrace] = {}
    for event in events:
        trace = sessions.get(event.session_id)
        if trace is None:
            trace = sessions[event.session_id] = SessionTrace(event, include_arguments)
        trace.add(event)
    return sessions


def export_otlp(events: Iterable[Event], *, include_arguments: bool = False) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` for ``events`` (any number of sessions)."""
    sessions = session_traces(events, include_arguments=include_arguments)
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
