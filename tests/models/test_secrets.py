"""API keys are never written: not in the journal's bytes, its exports, or error messages.

The key is a distinctive string shaped like no known credential, so only keel's own
bookkeeping (the key is registered when a backend opens) can keep it out. Each test first
shows the key did reach the server, so its absence elsewhere means something.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from model_helpers import KEY, journal_bytes, opened
from model_servers import FakeModelServer, anthropic_error, chat_reply, openai_error

from _support import keel
from keel.core.errors import ModelError
from keel.journal import SQLiteJournal
from keel.models import Message, ModelClient, ModelRequest, Retry, open_model


def sent_key(server: FakeModelServer) -> bool:
    return any(KEY in json.dumps(seen.headers) for seen in server.requests)


def exports(root: Path) -> str:
    """``keel export`` as JSON Lines and as OTLP with tool arguments."""
    jsonl = keel("export", cwd=root)
    otlp = keel("export", "--format", "otlp-json", "--include-arguments", cwd=root)
    assert jsonl.returncode == 0 and otlp.returncode == 0, jsonl.stderr + otlp.stderr
    assert "model.request" in jsonl.stdout and "model.response" in jsonl.stdout
    json.loads(otlp.stdout)
    return jsonl.stdout + otlp.stdout + jsonl.stderr + otlp.stderr


def ask(text: str) -> ModelRequest:
    return ModelRequest((Message.user(text),))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_key_is_in_no_journal_byte_export_or_error(
    server: FakeModelServer, journal: SQLiteJournal, workdir: Path, provider: str
) -> None:
    echo = f"Incorrect API key provided: {KEY}"
    if provider == "openai":
        server.queue(
            chat_reply(f"the key you use is {KEY}"),
            openai_error(400, f"bad request from key {KEY}"),
            openai_error(401, echo),
        )
        url = f"{server.url}/v1"
    else:
        from model_servers import messages_reply

        server.queue(
            messages_reply(f"the key you use is {KEY}"),
            anthropic_error(400, f"bad request from key {KEY}"),
            anthropic_error(401, echo),
        )
        url = server.url
    backend = open_model(f"{provider}:m", None, base_url=url,
                         environ={f"{provider.upper()}_API_KEY": KEY})  # fmt: skip
    client = opened(ModelClient(backend, session_id="s-secret", journal=journal,
                                retry=Retry(max_retries=0)))  # fmt: skip
    answer = client.complete(ask("what key do I use?"))
    assert KEY in answer.content  # the caller gets the answer; the journal gets it scrubbed
    errors: list[ModelError] = []
    for _ in range(2):
        with pytest.raises(ModelError) as caught:
            client.complete(ask("again"))
        errors.append(caught.value)
    assert [e.code for e in errors] == ["model.rejected", "model.auth"]
    assert sent_key(server)
    for error in errors:
        assert KEY not in error.message and KEY not in json.dumps(error.to_dict())
        assert KEY not in str(error)
    journal.close()
    stored = journal_bytes(workdir)
    assert b"the key you use is [redacted]" in stored  # the answer was journaled, scrubbed
    assert KEY.encode() not in stored
    assert KEY not in exports(workdir)


def test_the_cli_never_prints_the_key(server: FakeModelServer, workdir: Path) -> None:
    """``keel plan draft`` against a server that echoes the key in its 401."""
    server.queue(openai_error(401, f"Incorrect API key provided: {KEY}"))
    done = keel(
        "plan", "draft", "say hello", "--model", "openai:fake-gpt", "--base-url",
        f"{server.url}/v1", cwd=workdir, env={"OPENAI_API_KEY": KEY},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "model.auth" in done.stderr or "refused" in done.stderr
    assert sent_key(server)
    assert KEY not in done.stdout + done.stderr
    assert KEY.encode() not in journal_bytes(workdir)
    assert KEY not in exports(workdir)


def test_an_authorization_header_in_any_text_is_scrubbed() -> None:
    from keel.models._redact import scrub

    data: dict[str, Any] = {
        "a": "Authorization: Bearer abcdefghijklmnop",
        "b": ["x-api-key: sk-ant-api03-zzzzzzzzzzzz"],
        "c": {"d": 'headers {"api_key": "Zz9-long-secret-value"}'},
    }
    text = json.dumps(scrub(data))
    for secret in ("abcdefghijklmnop", "sk-ant-api03-zzzzzzzzzzzz", "Zz9-long-secret-value"):
        assert secret not in text
    assert text.count("[redacted]") == 3
