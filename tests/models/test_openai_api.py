"""``openai:MODEL`` through the real ``openai`` SDK against a fake Chat Completions server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from model_helpers import KEY, opened
from model_servers import HANG, FakeModelServer, chat_reply, openai_error

from keel.config import ModelConfig
from keel.core.errors import BudgetExceeded, ModelError
from keel.core.events import DataPayload, trace_id_for
from keel.journal import SQLiteJournal
from keel.journal.timeline import describe_model_call
from keel.models import (
    Budget,
    Message,
    ModelClient,
    ModelRequest,
    OutputSchema,
    Retry,
    Sampling,
    Tool,
    client_for,
    open_model,
)

WEATHER = Tool(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def model(server: FakeModelServer, **settings: Any) -> Any:
    config = ModelConfig(**settings)
    return open_model("openai:fake-gpt", config, base_url=f"{server.url}/v1",
                      environ={"OPENAI_API_KEY": KEY})  # fmt: skip


def client(server: FakeModelServer, journal: SQLiteJournal | None = None, **kw: Any) -> Any:
    sleeps: list[float] = []
    made = ModelClient(
        model(server, **kw.pop("settings", {})), session_id="s-openai", journal=journal,
        sleep=sleeps.append, **kw,
    )  # fmt: skip
    made.sleeps = sleeps  # type: ignore[attr-defined]
    return opened(made)


def ask(text: str = "hello", **kw: Any) -> ModelRequest:
    return ModelRequest((Message.system("be brief"), Message.user(text)), **kw)


def data_of(journal: SQLiteJournal, kind: str) -> list[dict[str, Any]]:
    return [
        e.payload.data
        for e in journal.events(session_id="s-openai", kinds=(kind,))
        if isinstance(e.payload, DataPayload)
    ]


def test_every_sampling_setting_is_sent_explicitly(server: FakeModelServer) -> None:
    server.queue(chat_reply("hi"))
    request = ask(sampling=Sampling(temperature=0.3, max_tokens=99, seed=7, top_p=0.9))
    answer = client(server).complete(request)
    assert answer.content == "hi" and answer.finish_reason == "stop"
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (12, 7)
    (seen,) = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    body = seen.body
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == (
        "fake-gpt", 0.3, 99, 7,
    )  # fmt: skip
    assert body["top_p"] == 0.9 and body["stream"] is False
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
    ]


def test_tool_calls_round_trip(server: FakeModelServer) -> None:
    server.queue(
        chat_reply(tool_calls=[("call_XYZ", "get_weather", {"city": "Oslo"})]),
        chat_reply("It is cold in Oslo."),
    )
    made = client(server)
    first = made.complete(ask("weather?", tools=(WEATHER,), tool_choice="auto"))
    (call,) = first.tool_calls
    assert (call.id, call.name, call.parsed()) == ("call_XYZ", "get_weather", {"city": "Oslo"})
    assert first.finish_reason == "tool_calls"
    follow = ModelRequest(
        (*ask("weather?").messages, first.message(), Message.tool(call.id, "-3 C")),
        tools=(WEATHER,), tool_choice="get_weather",
    )  # fmt: skip
    assert made.complete(follow).content == "It is cold in Oslo."
    sent = server.requests[0].body
    assert sent["tools"] == [{"type": "function", "function": WEATHER.to_dict()}]
    assert sent["tool_choice"] == "auto"
    second = server.requests[1].body
    assert second["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assistant, tool = second["messages"][2:]
    assert assistant["tool_calls"][0]["id"] == "call_XYZ"
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert tool == {"role": "tool", "content": "-3 C", "tool_call_id": "call_XYZ"}


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "off"])
def test_structured_output_switch(server: FakeModelServer, mode: str) -> None:
    server.queue(chat_reply('{"answer": "42"}'))
    made = client(server, settings={"structured_output": mode})
    answer = made.complete(ask(output=OutputSchema("reply", SCHEMA)))
    assert json.loads(answer.content) == {"answer": "42"}
    body = server.requests[0].body
    if mode == "json_schema":  # OpenAI's form
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": SCHEMA},
        }
    elif mode == "json_object":  # llama.cpp server's form (it rejects json_schema)
        assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    else:
        assert "response_format" not in body


def test_the_endpoint_is_recorded_without_credentials() -> None:
    url = "http://user:hunter2-secret@127.0.0.1:9/v1/?api_key=zzz-secret-zzz"
    opened = open_model("openai:m", ModelConfig(), base_url=url, environ={})
    assert opened.info.structured == "json_schema"  # "auto" on openai: is OpenAI's form
    assert opened.info.endpoint == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (openai_error(429, "slow down", {"retry-after": "7"}), "model.rate_limited"),
        (openai_error(500, "boom"), "model.server_error"),
        (openai_error(503, "overloaded"), "model.server_error"),
    ],
)
def test_429_and_5xx_are_retried_with_backoff(
    server: FakeModelServer, journal: SQLiteJournal, failure: Any, code: str
) -> None:
    server.queue(failure, failure, chat_reply("finally"))
    made = client(server, journal, retry=Retry(max_retries=3, backoff_seconds=0.25))
    assert made.complete(ask()).content == "finally"
    assert len(server.requests) == 3
    expected = [7.0, 7.0] if code == "model.rate_limited" else [0.25, 0.5]  # Retry-After wins
    assert made.sleeps == expected
    (response,) = data_of(journal, "model.response")
    assert response["attempts"] == 3 and response["error"] is None
    assert [r["code"] for r in response["retries"]] == [code, code]
    assert made.spend.calls == 1


def test_retries_run_out_and_the_failure_is_journaled(
    server: FakeModelServer, journal: SQLiteJournal
) -> None:
    server.queue(*[openai_error(500, "down")] * 3)
    made = client(server, journal, retry=Retry(max_retries=2, backoff_seconds=1))
    with pytest.raises(ModelError) as caught:
        made.complete(ask())
    assert caught.value.code == "model.server_error" and caught.value.status == 500
    assert len(server.requests) == 3 and made.sleeps == [1, 2]
    (response,) = data_of(journal, "model.response")
    assert response["error"]["code"] == "model.server_error"
    assert response["finish_reason"] == "error" and response["attempts"] == 3
    assert "FAILED model.server_error" in describe_model_call("model.response", response)


def test_a_client_error_is_not_retried(server: FakeModelServer) -> None:
    server.queue(openai_error(400, "bad request: unknown field"))
    made = client(server)
    with pytest.raises(ModelError) as caught:
        made.complete(ask())
    assert caught.value.code == "model.rejected" and not caught.value.retryable
    assert len(server.requests) == 1 and made.sleeps == []


def test_timeouts_and_connection_errors_are_retried(server: FakeModelServer) -> None:
    server.queue(HANG, chat_reply("after a timeout"))
    made = client(server, retry=Retry(max_retries=1, backoff_seconds=0, timeout_seconds=0.5))
    assert made.complete(ask()).content == "after a timeout"
    assert len(server.requests) == 2

    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    closed = open_model("openai:m", None, base_url=f"http://127.0.0.1:{port}/v1",
                        environ={"OPENAI_API_KEY": KEY})  # fmt: skip
    sleeps: list[float] = []
    retry = Retry(max_retries=2, backoff_seconds=0.1)
    dead = opened(ModelClient(closed, session_id="s", retry=retry, sleep=sleeps.append))
    with pytest.raises(ModelError) as caught:
        dead.complete(ask())
    assert caught.value.code == "model.connection" and caught.value.retryable
    assert sleeps == [0.1, 0.2]


def test_a_call_over_budget_is_refused_journaled_and_never_sent(
    server: FakeModelServer, journal: SQLiteJournal
) -> None:
    server.queue(chat_reply("one"), chat_reply("never asked for"))
    made = client(server, journal, budget=Budget(max_calls=1))
    made.complete(ask())
    with pytest.raises(BudgetExceeded) as caught:
        made.complete(ask("again"))
    assert caught.value.code == "model.budget" and "max_calls is 1" in caught.value.message
    assert len(server.requests) == 1  # the refused call never reached the server
    requests = data_of(journal, "model.request")
    assert [r["refused"] is None for r in requests] == [True, False]
    assert requests[1]["refused"]["code"] == "model.budget"
    assert requests[1]["messages"][-1]["content"] == "again"
    assert len(data_of(journal, "model.response")) == 1
    shown = describe_model_call("model.request", requests[1])  # as `keel show` lists it
    assert "REFUSED" in shown and "max_calls is 1" in shown


def test_token_and_cost_budgets_refuse_before_sending(
    server: FakeModelServer, journal: SQLiteJournal
) -> None:
    big = ask(sampling=Sampling(max_tokens=5000))
    made = client(server, journal, budget=Budget(max_tokens=1000))
    with pytest.raises(BudgetExceeded, match="max_tokens is 1000"):
        made.complete(big)
    priced = client(server, journal, budget=Budget(max_cost_usd=1.0))
    with pytest.raises(BudgetExceeded, match=r"price .* is unknown"):
        priced.complete(ask())  # a cost budget with no price fails closed
    assert server.requests == []
    refused = [r["refused"]["limit"] for r in data_of(journal, "model.request")]
    assert refused == ["max_tokens", "max_cost_usd"]


def session_client(server: FakeModelServer, journal: SQLiteJournal, settings: Any) -> Any:
    config = ModelConfig(**settings)
    return opened(client_for(model(server), config, session_id="s-openai", journal=journal))


def test_usage_and_cost_are_accounted_and_budgets_span_clients(
    server: FakeModelServer, journal: SQLiteJournal
) -> None:
    """The spend is read back from the journal: a new client of the session keeps counting."""
    settings = {"input_price_per_mtok": 2.0, "output_price_per_mtok": 10.0, "max_calls": 2}
    server.queue(chat_reply("a", usage=(1000, 100)), chat_reply("b", usage=(3000, 500)))
    first = session_client(server, journal, settings)
    first.complete(ask())
    second = session_client(server, journal, settings)
    assert second.spend.calls == 1 and second.spend.tokens == 1100
    second.complete(ask())
    assert second.spend.tokens == 1100 + 3500
    assert second.spend.cost_usd == pytest.approx((1000 * 2 + 100 * 10 + 3000 * 2 + 500 * 10) / 1e6)
    costs = [r["cost_usd"] for r in data_of(journal, "model.response")]
    assert costs == [pytest.approx(0.003), pytest.approx(0.011)]
    third = session_client(server, journal, settings)
    with pytest.raises(BudgetExceeded, match="max_calls is 2"):
        third.complete(ask())
    assert len(server.requests) == 2


def test_both_events_are_linked_to_the_session_trace(
    server: FakeModelServer, journal: SQLiteJournal
) -> None:
    server.queue(chat_reply(tool_calls=[("call_1", "get_weather", {"city": "Rome"})]))
    made = client(server, journal)
    made.complete(ask(tools=(WEATHER,), tool_choice="auto", output=OutputSchema("r", SCHEMA)))
    request_event, response_event = journal.events(session_id="s-openai")
    assert request_event.trace_id == response_event.trace_id == trace_id_for("s-openai")
    assert response_event.parent_span_id == request_event.span_id
    request = request_event.payload.data  # type: ignore[union-attr]
    assert request["messages"][1] == {"role": "user", "content": "hello"}
    assert request["tools"] == [WEATHER.to_dict()]
    assert request["settings"]["temperature"] == 0.0 and request["settings"]["seed"] == 0
    assert request["settings"]["structured_output"] == "json_schema"
    assert request["endpoint"] == f"{server.url}/v1"
    assert request["request_hash"].startswith("sha256:")
    response = response_event.payload.data  # type: ignore[union-attr]
    assert response["call_id"] == request["call_id"]
    assert response["model"] == "openai:fake-gpt" and response["response_model"] == "fake-gpt"
    assert response["tool_calls"] == [
        {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Rome"}'}
    ]
    assert response["finish_reason"] == "tool_calls"
    assert response["usage"] == {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19}
    assert isinstance(response["latency_ms"], float)


def test_no_key_is_an_error_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as caught:
        open_model("openai:gpt-x", ModelConfig(api_key_env="KEEL_TEST_MODEL_KEY"), environ={})
    assert caught.value.code == "model.no_key" and "KEEL_TEST_MODEL_KEY" in caught.value.message
    env = {"KEEL_TEST_MODEL_KEY": KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    named = open_model("openai:m", ModelConfig(api_key_env="KEEL_TEST_MODEL_KEY"), environ=env)
    assert named.info.endpoint == "http://127.0.0.1:9/v1"
