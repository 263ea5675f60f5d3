"""The live push hands over each span once, when it is done, and the same spans as the export.

The mapping is ``keel.journal.export.SessionTrace``'s, built event by event; events arrive in
the batches the guard commits them in (a call with its decision; a result with its guidance).
"""

from __future__ import annotations

from typing import Any

from keel.core.events import (
    DataPayload,
    DecisionPayload,
    Event,
    GuidancePayload,
    Payload,
    ToolCallPayload,
    ToolResultPayload,
)
from keel.journal import MemoryJournal
from keel.journal.export import SPAN_KIND_CLIENT, SessionTrace, export_otlp, session_traces

TRACE = "ab" * 16
T0 = 1_700_000_000.0


class Recorder:
    """Events of one session with fixed ids and times, in the journal's order."""

    def __init__(self, session: str = "live-1", agent: str = "claude") -> None:
        self.session, self.agent = session, agent
        self.journal = MemoryJournal()
        self.n = 0

    def event(self, kind: str, payload: Payload, parent: str | None = None) -> Event:
        self.n += 1
        event = Event(
            kind,  # pyright: ignore[reportArgumentType]
            self.session, payload, agent=self.agent, trace_id=TRACE,
            span_id=f"{self.n:016x}", parent_span_id=parent, ts=T0 + self.n,
        )  # fmt: skip
        return self.journal.append(event)

    def call(self, use_id: str, command: str, decision: str) -> list[Event]:
        call = self.event("tool.call", ToolCallPayload("Bash", "exec", command, tool_use_id=use_id))
        verdict = DecisionPayload(decision, f"rule.{decision}", "why", tool_use_id=use_id)
        return [call, self.event("decision", verdict, call.span_id)]

    def result(self, use_id: str, call: Event, guidance: str | None = None) -> list[Event]:
        out = [self.event("tool.result", ToolResultPayload("Bash", True, tool_use_id=use_id),
                          call.span_id)]  # fmt: skip
        if guidance:
            out.append(self.event("guidance", GuidancePayload(guidance, "look", "loop", use_id)))
        return out


def _feed(trace: SessionTrace | None, batch: list[Event]) -> tuple[SessionTrace, list[str]]:
    for event in batch:
        trace = trace or SessionTrace(event)
        trace.add(event)
    assert trace is not None
    return trace, [s.name for s in trace.take()]


def test_each_span_is_handed_over_once_when_nothing_more_can_change_it() -> None:
    rec = Recorder()
    start = [rec.event("session.start", DataPayload({"source": "startup"}))]
    trace, taken = _feed(None, start)
    assert taken == []  # the root waits for the session's end

    allowed = rec.call("t1", "pytest -q", "allow")
    trace, taken = _feed(trace, allowed)
    assert taken == ["apply_guardrail keel"]  # the call waits for its result

    trace, taken = _feed(trace, rec.result("t1", allowed[0], guidance="hint"))
    assert taken == ["execute_tool Bash"]
    (call,) = [s for s in trace.spans.values() if s.name == "execute_tool Bash"]
    assert [e.name for e in call.events] == ["keel.guidance"]  # the same batch: kept

    trace, taken = _feed(trace, rec.call("t2", "rm -rf /", "deny"))
    assert taken == ["execute_tool Bash", "apply_guardrail keel"]  # a denied call never runs

    trace, taken = _feed(trace, rec.call("t3", "make", "ask"))
    assert taken == ["apply_guardrail keel"]
    end = [rec.event("session.end", DataPayload({"reason": "exit"}))]
    trace, taken = _feed(trace, end)
    assert taken == ["invoke_agent claude", "execute_tool Bash"]  # the root, the unanswered ask
    assert trace.take(final=True) == []


def test_the_spans_pushed_are_the_spans_exported() -> None:
    rec = Recorder()
    batches = [
        [rec.event("session.start", DataPayload({}))],
        first := rec.call("t1", "ls", "allow"),
        rec.result("t1", first[0]),
        rec.call("t2", "rm -rf /", "deny"),
        [rec.event("session.end", DataPayload({}))],
    ]
    trace: SessionTrace | None = None
    pushed: list[dict[str, Any]] = []
    for batch in batches:
        for event in batch:
            trace = trace or SessionTrace(event)
            trace.add(event)
        assert trace is not None
        pushed.extend(span.to_otlp() for span in trace.take())
    (resource,) = export_otlp(rec.journal.events())["resourceSpans"]
    exported = resource["scopeSpans"][0]["spans"]
    key = lambda s: s["spanId"]  # noqa: E731
    assert sorted(pushed, key=key) == sorted(exported, key=key)


def test_a_trace_rebuilt_from_the_journal_hands_over_only_what_was_not_sent() -> None:
    rec = Recorder()
    rec.event("session.start", DataPayload({}))
    first = rec.call("t1", "ls", "allow")
    stored = list(rec.journal.events())
    (rebuilt,) = session_traces(stored).values()
    # the process before had sent the decision; the call and the root were still open
    rebuilt.settle([rebuilt.root.span_id, first[0].span_id])
    assert rebuilt.take() == []
    for event in rec.result("t1", first[0]):
        rebuilt.add(event)
    assert [s.span_id for s in rebuilt.take()] == [first[0].span_id]


def test_model_calls_are_chat_spans_with_their_usage() -> None:
    rec = Recorder("run-1", agent="keel")
    rec.event("session.start", DataPayload({"event": "agent.start"}))
    request = rec.event(
        "model.request",
        DataPayload({"call_id": "c1", "model": "gpt-test", "provider": "openai",
                     "settings": {"temperature": 0.0, "max_tokens": 512, "seed": 0},
                     "messages": [{"role": "user", "content": "secret prompt"}],
                     "request_hash": "sha256:abc", "refused": None}),
    )  # fmt: skip
    rec.event(
        "model.response",
        DataPayload({"call_id": "c1", "model": "gpt-test", "response_model": "gpt-test-0613",
                     "finish_reason": "tool_calls", "content": "secret answer",
                     "usage": {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150},
                     "tool_calls": [{"name": "read_file", "arguments": "{}"}],
                     "cost_usd": 0.001, "latency_ms": 12.5, "attempts": 1, "error": None}),
        request.span_id,
    )  # fmt: skip
    refused = rec.event(
        "model.request",
        DataPayload({"model": "gpt-test", "provider": "openai",
                     "refused": {"message": "model budget: max_calls is 1"}}),
    )  # fmt: skip
    (trace,) = session_traces(rec.journal.events()).values()
    chat = trace.spans[request.span_id]
    assert (chat.name, chat.kind, chat.parent_span_id) == (
        "chat gpt-test",
        SPAN_KIND_CLIENT,
        trace.root.span_id,
    )
    assert chat.done and chat.error is None and chat.end == T0 + 3
    assert {k: chat.attrs[k] for k in (
        "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
        "gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
        "gen_ai.response.finish_reasons", "keel.model.tool_calls",
    )} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test", "gen_ai.response.model": "gpt-test-0613",
        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30,
        "gen_ai.response.finish_reasons": ["tool_calls"], "keel.model.tool_calls": ["read_file"],
    }  # fmt: skip
    never_sent = trace.spans[refused.span_id]
    assert never_sent.done and never_sent.attrs["error.type"] == "keel.budget_exceeded"
    assert "secret" not in repr(export_otlp(rec.journal.events()))  # no prompt, no answer
