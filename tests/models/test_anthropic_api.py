"""``anthropic:MODEL`` through the real ``anthropic`` SDK against a fake Messages server."""

from __future__ import annotations

from typing import Any

import pytest
from model_helpers import KEY, opened
from model_servers import FakeModelServer, anthropic_error, messages_reply

from keel.config import ModelConfig
from keel.core.errors import BudgetExceeded, ModelError
from keel.core.events import DataPayload
from keel.journal import SQLiteJournal
from keel.models import (
    Budget,
    Message,
    ModelClient,
    ModelRequest,
    OutputSchema,
    Retry,
    Sampling,
    Tool,
    open_model,
)

LOOKUP = Tool(
    "lookup",
    "Look a word up.",
    {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def client(server: FakeModelServer, journal: SQLiteJournal | None = None, **kw: Any) -> Any:
    backend = open_model("anthropic:fake-claude", ModelConfig(**kw.pop("settings", {})),
                        base_url=server.url, environ={"ANTHROPIC_API_KEY": KEY})  # fmt: skip
    sleeps: list[float] = []
    made = ModelClient(backend, session_id="s-anth", journal=journal, sleep=sleeps.append, **kw)
    made.sleeps = sleeps  # type: ignore[attr-defined]
    return opened(made)


def ask(text: str = "hello", **kw: Any) -> ModelRequest:
    return ModelRequest((Message.system("be brief"), Message.user(text)), **kw)


def test_messages_carry_system_and_every_sampling_setting(server: FakeModelServer) -> None:
    server.queue(messages_reply("hi there"))
    answer = client(server).complete(ask(sampling=Sampling(0.2, 321, seed=5, top_p=0.8)))
    assert (answer.content, answer.finish_reason, answer.model) == ("hi there", "stop",
                                                                     "fake-claude")  # fmt: skip
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (15, 9)
    (seen,) = server.requests
    assert seen.path == "/v1/messages"
    sent_key = seen.headers.get("x-api-key") or seen.headers["authorization"].removeprefix(
        "Bearer "
    )
    assert sent_key == KEY  # the header depends on the SDK's version
    body = seen.body
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert (body["model"], body["max_tokens"], body["temperature"], body["top_p"]) == (
        "fake-claude", 321, 0.2, 0.8,
    )  # fmt: skip
    assert "seed" not in body  # the Messages API has none


def test_tool_use_round_trip(server: FakeModelServer) -> None:
    server.queue(
        messages_reply("Let me look.", tool_uses=[("toolu_1", "lookup", {"word": "keel"})]),
        messages_reply("A keel is the spine of a boat."),
    )
    made = client(server)
    first = made.complete(ask("what is a keel?", tools=(LOOKUP,), tool_choice="auto"))
    (call,) = first.tool_calls
    assert (call.id, call.name, call.parsed()) == ("toolu_1", "lookup", {"word": "keel"})
    assert first.finish_reason == "tool_calls" and first.content == "Let me look."
    follow = ModelRequest(
        (*ask("what is a keel?").messages, first.message(), Message.tool("toolu_1", "a spine")),
        tools=(LOOKUP,), tool_choice="lookup",
    )  # fmt: skip
    assert made.complete(follow).content.startswith("A keel")
    sent, second = server.requests[0].body, server.requests[1].body
    assert sent["tools"] == [
        {"name": "lookup", "description": "Look a word up.", "input_schema": LOOKUP.parameters}
    ]
    assert sent["tool_choice"] == {"type": "auto"}
    assert second["tool_choice"] == {"type": "tool", "name": "lookup"}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"word": "keel"}},
        ],
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a spine"}],
    }


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_structured_output(server: FakeModelServer, mode: str) -> None:
    server.queue(messages_reply('{"answer": "yes"}'))
    made = client(server, settings={"structured_output": mode})
    assert made.complete(ask(output=OutputSchema("reply", SCHEMA))).content == '{"answer": "yes"}'
    body = server.requests[0].body
    if mode == "off":
        assert "output_config" not in body
    else:
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


def test_429_and_500_are_retried(server: FakeModelServer, journal: SQLiteJournal) -> None:
    server.queue(
        anthropic_error(429, "rate limited", {"retry-after": "3"}),
        anthropic_error(500, "internal"),
        anthropic_error(529, "overloaded"),
        messages_reply("ok"),
    )
    made = client(server, journal, retry=Retry(max_retries=3, backoff_seconds=0.5))
    assert made.complete(ask()).content == "ok"
    assert len(server.requests) == 4 and made.sleeps == [3.0, 1.0, 2.0]
    (response,) = [
        e.payload.data
        for e in journal.events(session_id="s-anth", kinds=("model.response",))
        if isinstance(e.payload, DataPayload)
    ]
    assert [r["status"] for r in response["retries"]] == [429, 500, 529]


def test_budget_refusal_sends_nothing(server: FakeModelServer, journal: SQLiteJournal) -> None:
    made = client(server, journal, budget=Budget(max_calls=0))
    with pytest.raises(BudgetExceeded):
        made.complete(ask())
    assert server.requests == []
    (request,) = journal.events(session_id="s-anth", kinds=("model.request",))
    assert request.payload.data["refused"]["limit"] == "max_calls"  # type: ignore[union-attr]


def test_overloaded_then_rejected_is_not_retried_further(server: FakeModelServer) -> None:
    server.queue(anthropic_error(400, "messages: roles must alternate"))
    with pytest.raises(ModelError) as caught:
        client(server).complete(ask())
    assert caught.value.code == "model.rejected" and "roles must alternate" in caught.value.message
    assert len(server.requests) == 1
