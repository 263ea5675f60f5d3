"""The shipped doubles (script, replay), the request hash and the packaged prompt templates."""

from __future__ import annotations

import hashlib
import json
import subprocess
from importlib import resources
from pathlib import Path

import pytest
from model_helpers import KEY, opened
from model_servers import FakeModelServer, chat_reply

from keel.config import KeelConfig
from keel.core.errors import ModelError
from keel.journal import SQLiteJournal
from keel.models import (
    Message,
    ModelClient,
    ModelRequest,
    ModelToolCall,
    Retry,
    Sampling,
    Tool,
    load_prompt,
    open_model,
)
from keel.models.testing import ReplayModel, ScriptedModel
from keel.plan.draft import draft_plan

REPO = Path(__file__).resolve().parents[2]
PROMPTS = REPO / "src" / "keel" / "models" / "prompts"


def convo(call_id: str, temperature: float = 0.0) -> ModelRequest:
    call = ModelToolCall(call_id, "get", '{"k": 1}')
    return ModelRequest(
        (Message.user("q"), Message("assistant", "", (call,)), Message.tool(call_id, "v")),
        tools=(Tool("get", "get a value"),),
        sampling=Sampling(temperature=temperature),
    )


def test_the_request_hash_ignores_volatile_ids_and_nothing_else() -> None:
    assert convo("call_abc").request_hash("openai:m") == convo("call_xyz").request_hash("openai:m")
    assert convo("a").request_hash("openai:m") != convo("a", 0.5).request_hash("openai:m")
    assert convo("a").request_hash("openai:m") != convo("a").request_hash("openai:n")
    assert convo("call_abc").canonical()["messages"][2]["tool_call_id"] == "call_0"


def test_a_script_answers_in_order_then_refuses(workdir: Path) -> None:
    path = workdir / "s.yaml"
    path.write_text(
        "- hello\n"
        "- tool_calls: [{name: get, arguments: {k: 2}}]\n"
        "- error: {code: model.server_error, message: down, status: 503, retryable: true}\n"
        "- json: {done: true}\n",
        encoding="utf-8",
    )
    model = open_model(f"script:{path}", None)
    sleeps: list[float] = []
    client = ModelClient(model, session_id="s", sleep=sleeps.append, retry=Retry(backoff_seconds=1))
    ask = ModelRequest((Message.user("go"),))
    assert client.complete(ask).content == "hello"
    (call,) = client.complete(ask).tool_calls
    assert (call.name, call.parsed()) == ("get", {"k": 2})
    assert json.loads(client.complete(ask).content) == {"done": True}  # the 503 was retried
    assert sleeps == [1]
    with pytest.raises(ModelError) as caught:
        client.complete(ask)
    assert caught.value.code == "model.script_exhausted"


def test_a_bad_script_is_an_error(workdir: Path) -> None:
    path = workdir / "s.json"
    path.write_text('[{"text": "x"}]', encoding="utf-8")
    with pytest.raises(ModelError) as caught:
        open_model(f"script:{path}", None)
    assert caught.value.code == "model.script"
    with pytest.raises(ModelError):
        ScriptedModel.from_file(workdir / "missing.json")


def test_replay_serves_recorded_responses_by_request_hash(
    server: FakeModelServer, journal: SQLiteJournal, workdir: Path
) -> None:
    """Record a drafting session against the fake server, then replay it with no server."""
    from test_plan_draft import TASK, first_draft, good_draft, workspace

    root = workspace(workdir)
    server.queue(chat_reply(json.dumps(first_draft())), chat_reply(json.dumps(good_draft())))
    live = open_model("openai:fake-gpt", None, base_url=f"{server.url}/v1",
                      environ={"OPENAI_API_KEY": KEY})  # fmt: skip
    client = opened(ModelClient(live, session_id="recorded", journal=journal))
    recorded = draft_plan(TASK, client=client, config=KeelConfig(), workspace=root)
    assert recorded.ok and len(server.requests) == 2
    journal.close()

    replay = open_model("replay:recorded", None, workspace=root)
    assert isinstance(replay, ReplayModel)
    again = draft_plan(TASK, client=ModelClient(replay, session_id="again"), config=KeelConfig(),
                       workspace=root)  # fmt: skip
    assert again.plan == recorded.plan and len(again.rounds) == 2
    assert len(server.requests) == 2  # nothing was sent

    other = open_model("replay:recorded", None, workspace=root)
    with pytest.raises(ModelError) as caught:
        draft_plan("a different task", client=ModelClient(other, session_id="x"),
                   config=KeelConfig(), workspace=root)  # fmt: skip
    assert caught.value.code == "model.replay_diverged"
    assert "/messages/1/content" in caught.value.message


def test_prompt_templates_are_versioned_files_in_the_package() -> None:
    files = sorted(PROMPTS.glob("*.md"))
    assert len(files) >= 4
    for file in files:
        template = load_prompt(file.stem)
        assert template.id == file.stem and template.version >= 1 and template.text.strip()
        body = file.read_text(encoding="utf-8").split("\n---\n", 1)[1]
        assert template.sha256 == hashlib.sha256(body.encode("utf-8")).hexdigest()
        packaged = resources.files("keel.models") / "prompts" / file.name
        assert packaged.read_text(encoding="utf-8") == file.read_text(encoding="utf-8")
    # the wheel takes every file under src/keel that git does not ignore
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'packages = ["src/keel"]' in pyproject
    ignored = subprocess.run(["git", "check-ignore", *map(str, files)], cwd=REPO,
                             capture_output=True, text=True)  # fmt: skip
    assert ignored.stdout == ""


def test_every_message_of_a_draft_comes_from_a_template(workdir: Path) -> None:
    from test_plan_draft import TASK, first_draft, good_draft, workspace

    model = ScriptedModel([{"json": first_draft()}, {"json": good_draft()}])
    draft_plan(TASK, client=ModelClient(model, session_id="s"), config=KeelConfig(),
               workspace=workspace(workdir))  # fmt: skip
    first, second = model.calls
    system = load_prompt("plan_draft.system")
    assert first.messages[0].content.startswith(system.text.split("${", 1)[0])
    assert first.messages[1].content.startswith("Task: " + TASK)
    feedback = load_prompt("plan_draft.feedback").text.split("${", 1)[0]
    assert second.messages[-1].content.startswith(feedback.rstrip("\n"))
    assert [t.id for t in second.templates] == [
        "plan_draft.system", "plan_draft.user", "plan_draft.feedback",
    ]  # fmt: skip
