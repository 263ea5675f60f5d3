from __future__ import annotations

import json

import pytest

from keel.core.errors import PayloadError
from keel.core.events import (
    EVENT_KINDS,
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
    payload_type,
)

SAMPLES = [
    Event(
        kind="tool.call",
        session_id="s1",
        payload=ToolCallPayload(
            tool="Bash", kind="exec", command="ls -la 'ünï cödé'", args={"n": [1, 2.5, None, True]}
        ),
        agent="claude",
    ),
    Event(
        kind="tool.result",
        session_id="s1",
        payload=ToolResultPayload(tool="Bash", ok=False, exit_code=2),
    ),
    Event(
        kind="decision",
        session_id="s1",
        payload=DecisionPayload(
            decision="deny", rule="risk.rm_recursive", reason="no", suggestion=None
        ),
        parent_span_id="0123456789abcdef",
        seq=42,
    ),
    Event(kind="stop", session_id="a", payload=StopPayload(reason="lunch", by="me")),
    Event(
        kind="diagnostic",
        session_id="a",
        payload=DiagnosticPayload("loop", "hint", "m", 3, {"n": 4}),
    ),
    Event(kind="guidance", session_id="a", payload=GuidancePayload("stop", "halt", "loop", "t1")),
    Event(kind="checkpoint", session_id="a", payload=CheckpointPayload("c1", "x", "t", ["a.py"])),
    Event(
        kind="probe",
        session_id="a",
        payload=ProbePayload("p1", "fs.exists", {"path": "x"}, True, {"exists": False}),
    ),
    Event(kind="gate", session_id="a", payload=GatePayload("pytest -q", True, 0)),
    Event(kind="prompt", session_id="a", payload=DataPayload({"text": "fix the bug\n\u2028"})),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.kind)
def test_json_round_trip_is_lossless(event: Event) -> None:
    text = event.to_json()
    back = Event.from_json(text)
    assert back == event
    assert back.to_json() == text


def test_every_kind_has_a_payload_type() -> None:
    for kind in EVENT_KINDS:
        assert payload_type(kind) is not None


def test_events_are_frozen() -> None:
    event = SAMPLES[0]
    with pytest.raises(AttributeError):
        event.kind = "prompt"  # type: ignore[misc]


def test_trace_ids_have_otel_shape() -> None:
    event = SAMPLES[0]
    assert len(event.trace_id) == 32 and int(event.trace_id, 16) >= 0
    assert len(event.span_id) == 16 and int(event.span_id, 16) >= 0


def test_wrong_payload_type_for_kind_is_rejected() -> None:
    with pytest.raises(PayloadError) as err:
        Event(kind="decision", session_id="s", payload=DataPayload({}))
    assert err.value.code == "payload.event_type"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("{not json", "payload.json"),
        ("[]", "payload.event_shape"),
        ('{"kind": "nope", "session_id": "s", "payload": {}}', "payload.event_kind"),
        (
            '{"kind": "gate", "session_id": "s", '
            '"payload": {"command": "x", "passed": true, "zz": 1}}',
            "payload.event_payload",
        ),
        ('{"kind": "gate", "session_id": "s", "payload": {}}', "payload.event_payload"),
        (
            '{"kind": "gate", "session_id": "s", '
            '"payload": {"command": "x", "passed": true}, "extra": 1}',
            "payload.event_shape",
        ),
    ],
)
def test_bad_event_json_gives_structured_error(text: str, code: str) -> None:
    with pytest.raises(PayloadError) as err:
        Event.from_json(text)
    assert err.value.code == code


def test_canonical_json_is_sorted_and_compact() -> None:
    data = json.loads(SAMPLES[2].to_json())
    assert list(data) == sorted(data)
    assert ", " not in SAMPLES[2].to_json()
