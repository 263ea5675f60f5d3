"""What the guard journals: every field of the call, its decision, its result and notes.

Spans and traces link a decision and a result to their call; output is capped and hashed; a
note or result request is journaled once; a journal that fails after the call raises.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

import pytest
from guard_helpers import SESSION, BrokenJournal, events_of, open_guard

from keel.core.calls import ToolCall, ToolResult
from keel.core.events import trace_id_for
from keel.core.stop import set_stop
from keel.guard import MAX_OUTPUT_JOURNALED, Guard


def _span(session: str, tool_use_id: str) -> str:
    key = f"{session}\0{tool_use_id}".encode()
    return hashlib.sha256(b"span\0" + key).hexdigest()[:16]


@pytest.mark.parametrize(
    ("call", "subject"),
    [
        (ToolCall("Bash", "exec", command="ls -la", args={"command": "ls -la"}), "ls -la"),
        (ToolCall("Read", "read", paths=("a.txt", "b.txt")), "a.txt, b.txt"),
        (ToolCall("WebFetch", "network", url="http://127.0.0.1/x"), "http://127.0.0.1/x"),
        (ToolCall("mcp__x__y", "mcp", args={"n": 1}), None),
    ],
    ids=["command", "paths", "url", "nothing"],
)
def test_the_call_and_its_decision_are_journaled_exactly(
    workdir: Path, call: ToolCall, subject: str | None
) -> None:
    g = open_guard(workdir)
    call = call.replace(tool_use_id="tu-1", turn_id="turn-9")
    try:
        decision = g.decide(call, request_id="req-1")
        assert g.journal is not None
        assert g.journal.answered("req-1") == {"decision": decision.to_dict()}
    finally:
        g.close()
    events = events_of(workdir)
    assert [e.kind for e in events] == ["tool.call", "decision"]
    ev_call, ev_dec = events
    for ev in events:
        assert (ev.session_id, ev.agent, ev.trace_id) == (SESSION, "tester", trace_id_for(SESSION))
    assert ev_call.span_id == _span(SESSION, "tu-1")
    assert ev_call.parent_span_id is None
    assert ev_dec.parent_span_id == ev_call.span_id and ev_dec.span_id != ev_call.span_id
    assert asdict(ev_call.payload) == {
        "tool": call.tool,
        "kind": call.kind,
        "command": call.command,
        "paths": list(call.paths),
        "url": call.url,
        "args": call.args,
        "tool_use_id": "tu-1",
        "turn_id": "turn-9",
    }
    assert asdict(ev_dec.payload) == {
        **decision.to_dict(),
        "tool_use_id": "tu-1",
        "subject": subject,
    }


def test_a_denied_call_is_journaled_with_its_rule_and_suggestion(
    guard: Guard, workdir: Path
) -> None:
    set_stop(workdir, "why")
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    guard.close()
    dec = events_of(workdir)[-1]
    assert dec.kind == "decision"
    assert asdict(dec.payload) == {**got.to_dict(), "tool_use_id": "t1", "subject": "ls"}
    assert got.suggestion is not None


def test_args_that_are_not_json_are_journaled_as_text(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("mcp__x__y", "mcp", args={"when": Path("/x"), "n": (1, 2)}))
    guard.close()
    assert events_of(workdir)[0].payload.args == {"when": "/x", "n": [1, 2]}  # pyright: ignore[reportAttributeAccessIssue]


def test_a_call_without_an_id_gets_a_random_span(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    guard.close()
    first, dec1, second, _ = events_of(workdir)
    for span in (first.span_id, second.span_id):
        assert len(span) == 16 and int(span, 16) >= 0
    assert first.span_id != second.span_id
    assert dec1.parent_span_id == first.span_id


def test_an_id_that_is_not_valid_unicode_gets_its_span(guard: Guard, workdir: Path) -> None:
    tid = "t\udcff1"
    assert guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id=tid)).allowed
    guard.close()
    key = f"{SESSION}\0{tid}".encode("utf-8", "replace")
    span = hashlib.sha256(b"span\0" + key).hexdigest()[:16]
    assert events_of(workdir)[0].span_id == span


def test_a_result_is_journaled_exactly(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    output = "é" * (MAX_OUTPUT_JOURNALED + 10)
    result = ToolResult(
        "Bash", "exec", False, output=output, error="bad", exit_code=3, tool_use_id="t1"
    )
    assert guard.observe(result, request_id="o1") is None
    assert guard.journal is not None and guard.journal.answered("o1") == {"guidance": None}
    guard.close()
    call, _, got = events_of(workdir)
    assert got.kind == "tool.result" and got.parent_span_id == call.span_id == _span(SESSION, "t1")
    assert (got.session_id, got.agent, got.trace_id) == (SESSION, "tester", trace_id_for(SESSION))
    assert asdict(got.payload) == {
        "tool": "Bash",
        "ok": False,
        "output": output[:MAX_OUTPUT_JOURNALED],
        "error": "bad",
        "exit_code": 3,
        "tool_use_id": "t1",
        "output_hash": "sha256:" + hashlib.sha256(output.encode()).hexdigest(),
    }


def test_a_result_without_output_or_id(guard: Guard, workdir: Path) -> None:
    guard.observe(ToolResult("Read", "read", True))
    guard.close()
    (got,) = events_of(workdir)
    assert got.parent_span_id is None and len(got.span_id) > 0
    assert got.payload.output == ""  # pyright: ignore[reportAttributeAccessIssue]
    assert got.payload.output_hash == "sha256:" + hashlib.sha256(b"").hexdigest()  # pyright: ignore[reportAttributeAccessIssue]


def test_a_result_with_a_lone_surrogate_is_hashed(guard: Guard, workdir: Path) -> None:
    guard.observe(ToolResult("Read", "read", True, output="a\udcffb"))
    guard.close()
    want = hashlib.sha256("a\udcffb".encode("utf-8", "replace")).hexdigest()
    assert events_of(workdir)[0].payload.output_hash == "sha256:" + want  # pyright: ignore[reportAttributeAccessIssue]


def test_a_result_is_observed_once_per_request(guard: Guard, workdir: Path) -> None:
    result = ToolResult("Bash", "exec", True, output="x", tool_use_id="t1")
    assert guard.observe(result, request_id="o") is None
    assert guard.observe(result, request_id="o") is None
    guard.close()
    assert [e.kind for e in events_of(workdir)] == ["tool.result"]


def test_a_note_is_journaled_once(guard: Guard, workdir: Path) -> None:
    guard.note("prompt", {"text": "hi"}, request_id="n")
    guard.note("prompt", {"text": "again"}, request_id="n")
    guard.close()
    (got,) = events_of(workdir)
    assert (got.kind, asdict(got.payload)) == ("prompt", {"data": {"text": "hi"}})


def test_a_journal_failure_after_the_call_is_raised(guard: Guard) -> None:
    guard.journal = BrokenJournal()  # type: ignore[assignment]
    with pytest.raises(OSError, match="disk full"):
        guard.observe(ToolResult("Bash", "exec", True))
    with pytest.raises(OSError, match="disk full"):
        guard.gate_finish()
    with pytest.raises(OSError, match="disk full"):
        guard.note("prompt", {"text": "hi"})
