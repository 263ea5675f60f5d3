"""Events: the one vocabulary every part of keel speaks.

An ``Event`` is frozen and typed: ``kind`` picks the payload class (``tool.call`` carries a
``ToolCallPayload``, ``decision`` a ``DecisionPayload`` and so on); kinds without a dedicated
shape carry ``DataPayload``. Trace ids follow OpenTelemetry: a 32-hex ``trace_id`` per session,
a 16-hex ``span_id`` per event, ``parent_span_id`` linking a decision to its call.

``Event.to_json()`` / ``Event.from_json()`` round-trip losslessly: ``from_json(e.to_json()) == e``.
``seq`` is 0 until the journal assigns the event its place.

This module is on the hook path: standard library only.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, get_args

from keel.core.errors import PayloadError

EventKind = Literal[
    "session.start",
    "session.end",
    "prompt",
    "plan",
    "thought",
    "tool.call",
    "tool.result",
    "decision",
    "diagnostic",
    "guidance",
    "checkpoint",
    "rollback",
    "patch",
    "probe",
    "gate",
    "model.request",
    "model.response",
    "stop",
    "resume",
    "config",
    "error",
    "exec",
    "network.denied",
    "scope.outside",
    "judgement",
    "journal.break",
    "journal.head_unrecorded",
    "journal.acknowledged",
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)


@dataclass(frozen=True, slots=True)
class ToolCallPayload:
    """A tool call as the agent asked for it."""

    tool: str
    kind: str
    command: str | None = None
    paths: list[str] = field(default_factory=list[str])
    url: str | None = None
    args: dict[str, Any] = field(default_factory=dict[str, Any])
    tool_use_id: str | None = None
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResultPayload:
    """What a tool call returned."""

    tool: str
    ok: bool
    output: str = ""
    error: str | None = None
    exit_code: int | None = None
    tool_use_id: str | None = None
    output_hash: str | None = None


@dataclass(frozen=True, slots=True)
class DecisionPayload:
    """The guard's answer for a call."""

    decision: str
    rule: str
    reason: str
    suggestion: str | None = None
    tool_use_id: str | None = None
    subject: str | None = None
    """What was judged: the command line, path or URL."""


@dataclass(frozen=True, slots=True)
class StopPayload:
    """The emergency stop was set (kind ``stop``) or cleared (kind ``resume``)."""

    reason: str
    by: str | None = None


@dataclass(frozen=True, slots=True)
class DiagnosticPayload:
    """A monitor detector fired."""

    detector: str
    level: str
    message: str
    step: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True, slots=True)
class GuidancePayload:
    """Guidance delivered (or to be delivered) to the agent."""

    level: str
    message: str
    detector: str
    tool_use_id: str | None = None


@dataclass(frozen=True, slots=True)
class CheckpointPayload:
    """A checkpoint, rollback or patch on the workspace."""

    checkpoint_id: str
    label: str | None = None
    tool_use_id: str | None = None
    files: list[str] = field(default_factory=list[str])
    detail: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True, slots=True)
class ProbePayload:
    """A plan probe and its result."""

    step_id: str
    function: str
    args: dict[str, Any] = field(default_factory=dict[str, Any])
    ok: bool = True
    result: Any = None
    error: dict[str, Any] | None = None
    sandbox: str | None = None
    duration_ms: float | None = None


@dataclass(frozen=True, slots=True)
class GatePayload:
    """A gate command ran."""

    command: str
    passed: bool
    exit_code: int | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class DataPayload:
    """Free-form data for kinds without a dedicated shape (prompts, plans, model calls)."""

    data: dict[str, Any] = field(default_factory=dict[str, Any])


Payload = (
    ToolCallPayload
    | ToolResultPayload
    | DecisionPayload
    | StopPayload
    | DiagnosticPayload
    | GuidancePayload
    | CheckpointPayload
    | ProbePayload
    | GatePayload
    | DataPayload
)

PAYLOAD_TYPES: dict[str, type[Any]] = {
    "tool.call": ToolCallPayload,
    "tool.result": ToolResultPayload,
    "decision": DecisionPayload,
    "stop": StopPayload,
    "resume": StopPayload,
    "diagnostic": DiagnosticPayload,
    "guidance": GuidancePayload,
    "checkpoint": CheckpointPayload,
    "rollback": CheckpointPayload,
    "patch": CheckpointPayload,
    "probe": ProbePayload,
    "gate": GatePayload,
}


def payload_type(kind: str) -> type[Any]:
    """The payload class events of ``kind`` carry."""
    return PAYLOAD_TYPES.get(kind, DataPayload)


PROBE_SESSION_PREFIX = "keel-doctor-"
"""Sessions whose id starts so are ``keel doctor``'s end-to-end probes (a synthetic ``rm -rf /``):
journaled like any call, kept out of ``keel monitor scan``."""


def is_probe_session(session_id: str) -> bool:
    """True for a session of ``keel doctor``'s probe (``PROBE_SESSION_PREFIX``)."""
    return session_id.startswith(PROBE_SESSION_PREFIX)


EXEC_SESSION = "keel-exec"
"""The session of ``keel exec``'s records: each run (``exec``) and each connection its proxy
refused (``network.denied``), whoever ran the command."""


def is_own_session(session_id: str) -> bool:
    """True for keel's own records rather than an agent's run.

    ``keel doctor``'s probes and ``keel exec``'s runs: left out of ``keel monitor scan`` and
    of the latest session unless named.
    """
    return is_probe_session(session_id) or session_id == EXEC_SESSION


def new_trace_id() -> str:
    """A random 32-hex OpenTelemetry trace id."""
    return os.urandom(16).hex()


def new_span_id() -> str:
    """A random 16-hex OpenTelemetry span id."""
    return os.urandom(8).hex()


def trace_id_for(session_id: str) -> str:
    """A stable 32-hex trace id for a session, the same in every process."""
    import hashlib

    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened, with its place in a trace."""

    kind: EventKind
    session_id: str
    payload: Payload
    agent: str = "keel"
    trace_id: str = field(default_factory=new_trace_id)
    span_id: str = field(default_factory=new_span_id)
    parent_span_id: str | None = None
    seq: int = 0
    ts: float = field(default_factory=time.time)

    KEYS: ClassVar[tuple[str, ...]] = (
        "kind",
        "session_id",
        "trace_id",
        "span_id",
        "parent_span_id",
        "seq",
        "ts",
        "agent",
        "payload",
    )

    def __post_init__(self) -> None:
        expected = payload_type(self.kind)
        if not isinstance(self.payload, expected):
            raise PayloadError(
                f"event kind {self.kind!r} needs a {expected.__name__}, "
                f"got {type(self.payload).__name__}",
                code="payload.event_type",
            )

    def with_seq(self, seq: int) -> Event:
        """A copy placed at ``seq`` in the journal."""
        return replace(self, seq=seq)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; the payload is a plain dict."""
        return {
            "kind": self.kind,
            "session_id": self.session_id,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "seq": self.seq,
            "ts": self.ts,
            "agent": self.agent,
            "payload": asdict(self.payload),
        }

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, compact separators, UTF-8 kept as is."""
        return canonical_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        """Rebuild an event; unknown kinds or payload keys are a ``PayloadError``."""
        if not isinstance(data, dict):
            raise PayloadError("an event must be a JSON object", code="payload.event_shape")
        missing = [k for k in ("kind", "session_id", "payload") if k not in data]
        if missing:
            raise PayloadError(f"event is missing {missing}", code="payload.event_shape")
        unknown = sorted(set(data) - set(cls.KEYS))
        if unknown:
            raise PayloadError(f"event has unknown keys {unknown}", code="payload.event_shape")
        kind = data["kind"]
        if kind not in EVENT_KINDS:
            raise PayloadError(f"unknown event kind {kind!r}", code="payload.event_kind")
        ptype = payload_type(kind)
        raw = data["payload"]
        if not isinstance(raw, dict):
            raise PayloadError("event payload must be an object", code="payload.event_shape")
        names = {f.name for f in fields(ptype)}
        extra = sorted(set(raw) - names)
        if extra:
            raise PayloadError(
                f"{ptype.__name__} has no fields {extra}", code="payload.event_payload"
            )
        try:
            payload = ptype(**raw)
        except TypeError as exc:
            raise PayloadError(str(exc), code="payload.event_payload") from exc
        values = {k: data[k] for k in cls.KEYS if k in data and k != "payload"}
        return cls(payload=payload, **values)

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        """Parse :meth:`to_json` output back into an equal event."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PayloadError(f"event is not valid JSON: {exc}", code="payload.json") from exc
        return cls.from_dict(data)


def canonical_json(value: Any) -> str:
    """Sorted keys, compact separators, no NaN: the form the journal hashes."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
