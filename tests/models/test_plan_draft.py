"""``keel plan draft``: a model writes a plan, the validator's messages go back until it holds."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from model_helpers import KEY
from model_servers import FakeModelServer, chat_reply

from _support import keel, make_workspace
from keel.config import KeelConfig
from keel.journal import open_journal
from keel.models.testing import ScriptedModel
from keel.plan import check_plan, validate_plan
from keel.plan.draft import LISTING_CAP, draft_schema, extract_plan, workspace_listing

TASK = "report the database host in config.yaml"
TOML = """\
[[constraints]]
text = "never touch the production database"

[model]
retry_backoff_seconds = 0
"""


def first_draft() -> dict[str, Any]:
    """An unknown probe function, and a condition naming a variable without braces."""
    return {
        "goal": "report the database host",
        "steps": [
            {"id": "look", "type": "evidence_collection",
             "action": {"function": "fs.check_it_exists", "args": ["config.yaml"]},
             "output_to": "has_config"},
            {"id": "branch", "type": "conditional",
             "condition": {"op": "and", "vars": ["has_config"]},
             "true_branch": [
                 {"id": "say", "type": "final_action",
                  "action": {"function": "output.result", "args": ["config found"]}}],
             "false_branch": [
                 {"id": "none", "type": "final_action",
                  "action": {"function": "output.result", "args": ["no config"]}}]},
        ],
    }  # fmt: skip


def good_draft() -> dict[str, Any]:
    return {
        "goal": "report the database host",
        "steps": [
            {"id": "look", "type": "evidence_collection",
             "action": {"function": "fs.exists", "args": ["config.yaml"]},
             "output_to": "has_config"},
            {"id": "branch", "type": "conditional",
             "condition": {"op": "and", "vars": ["{{has_config}}"]},
             "true_branch": [
                 {"id": "read", "type": "evidence_collection",
                  "action": {"function": "parse.yaml", "args": ["config.yaml"]},
                  "output_to": "config"},
                 {"id": "say", "type": "final_action",
                  "action": {"function": "output.result",
                             "args": ["database host: {{config.database.host}}"]}}],
             "false_branch": [
                 {"id": "none", "type": "final_action",
                  "action": {"function": "output.result", "args": ["no config"]}}]},
        ],
    }  # fmt: skip


def workspace(root: Path) -> Path:
    return make_workspace(
        root, keel_toml=TOML, files={"config.yaml": "database:\n  host: db.internal\n"}
    )


def draft(root: Path, server: FakeModelServer, *args: str) -> Any:
    return keel(
        "plan", "draft", TASK, "--model", "openai:fake-gpt", "--base-url", f"{server.url}/v1",
        *args, cwd=root, env={"OPENAI_API_KEY": KEY},
    )  # fmt: skip


def test_the_validator_messages_go_back_and_the_second_draft_validates_and_runs(
    server: FakeModelServer, workdir: Path
) -> None:
    root = workspace(workdir)
    server.queue(
        chat_reply(json.dumps(first_draft())),  # as content, bare JSON
        chat_reply(tool_calls=[("call_a1", "submit_plan", good_draft())]),
    )
    done = draft(root, server, "--out", "plan.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "plan valid after 2 draft(s)" in done.stderr

    first, second = (seen.body for seen in server.requests)
    # every problem of the first draft goes back verbatim: the code, the JSON path, the message
    problems = validate_plan(first_draft()).errors
    feedback = second["messages"][-1]
    assert feedback["role"] == "user"  # the plan came as content, so the answer is a user turn
    for issue in problems:
        assert issue.describe() in feedback["content"]
    codes = {i.code: i for i in problems}
    assert "fs.check_it_exists" in codes["plan.unknown_function"].message
    condition = [i for i in problems if i.path.startswith("$.steps[1].condition")]
    assert condition, "the bare identifier in the condition must be reported"
    assert second["messages"][-2] == {"role": "assistant", "content": json.dumps(first_draft())}

    # the written plan validates and runs
    written = json.loads((root / "plan.json").read_text(encoding="utf-8"))
    assert written == good_draft()
    assert keel("plan", "validate", "plan.json", cwd=root).returncode == 0
    ran = keel("plan", "run", "plan.json", cwd=root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "database host: db.internal" in ran.stdout

    # the first request: the ranked, small context, a submit_plan tool and the plan schema
    context = first["messages"][1]["content"]
    order = [TASK, "- fs.exists(", "\nconfig.yaml\n", "- never touch the production database"]
    assert [context.index(part) for part in order] == sorted(context.index(p) for p in order)
    assert "- parse.yaml(path) -> " in context
    assert [t["function"]["name"] for t in first["tools"]] == ["submit_plan"]
    assert first["response_format"]["type"] == "json_schema"
    assert (first["temperature"], first["seed"]) == (0.0, 0)


def test_the_model_calls_are_journaled_with_templates_and_shown(
    server: FakeModelServer, workdir: Path
) -> None:
    root = workspace(workdir)
    server.queue(chat_reply(json.dumps(first_draft())), chat_reply(json.dumps(good_draft())))
    done = draft(root, server, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["valid"] and result["plan"] == good_draft() and len(result["rounds"]) == 2
    session = result["session_id"]

    with open_journal(root) as journal:
        events = list(journal.events(session_id=session))
    kinds = [e.kind for e in events]
    assert kinds == ["model.request", "model.response"] * 2 + ["plan"]
    assert len({e.trace_id for e in events}) == 1
    second = events[2].payload.data  # type: ignore[union-attr]
    used = {t["id"]: t for t in second["templates"]}
    assert set(used) == {"plan_draft.system", "plan_draft.user", "plan_draft.feedback"}
    for template_id, use in used.items():
        raw = (resources.files("keel.models") / "prompts" / f"{template_id}.md").read_text()
        body = raw.split("\n---\n", 1)[1]
        assert use["sha256"] == hashlib.sha256(body.encode()).hexdigest()
        assert use["version"] >= 1
    assert events[0].payload.data["request_hash"] != second["request_hash"]  # type: ignore[union-attr]

    shown = keel("show", session, cwd=root)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "model." in line]
    assert len(lines) == 4
    assert "openai:fake-gpt" in lines[0] and "plan_draft.system@" in lines[0]
    assert "plan_draft.feedback@" in lines[2]
    assert "12+7 tokens" in lines[1]


def script(root: Path, steps: list[Any]) -> str:
    path = root / "script.json"
    path.write_text(json.dumps(steps), encoding="utf-8")
    return f"script:{path}"


def test_no_valid_draft_exits_1_and_prints_the_last_errors(workdir: Path) -> None:
    root = workspace(workdir)
    bad = first_draft()
    worse = {**bad, "steps": [bad["steps"][0]]}
    spec = script(root, [{"json": bad}, {"json": worse}])
    done = keel("plan", "draft", TASK, "--model", spec, "--max-rounds", "2", "--out", "p.json",
                cwd=root)  # fmt: skip
    assert done.returncode == 1
    assert "no valid plan after 2 draft(s)" in done.stderr
    last = validate_plan(worse).errors
    for issue in last:
        assert issue.describe() in done.stderr
    assert not (root / "p.json").exists()


def test_default_is_three_rounds(workdir: Path) -> None:
    root = workspace(workdir)
    spec = script(root, [{"json": first_draft()}] * 4)
    done = keel("plan", "draft", TASK, "--model", spec, cwd=root)
    assert done.returncode == 1 and "no valid plan after 3 draft(s)" in done.stderr


def test_run_goes_on_to_run_the_plan_with_plan_run_exit_codes(workdir: Path) -> None:
    root = workspace(workdir)
    spec = script(root, ["```json\n" + json.dumps(good_draft()) + "\n```"])
    done = keel("plan", "draft", TASK, "--model", spec, "--run", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "database host: db.internal" in done.stdout
    asking = {"goal": "ask", "steps": [
        {"id": "q", "type": "ask", "question": "which host?", "output_to": "host"},
        {"id": "say", "type": "final_action",
         "action": {"function": "output.result", "args": ["host {{host}}"]}}]}  # fmt: skip
    spec = script(root, [{"json": asking}])
    done = keel("plan", "draft", TASK, "--model", spec, "--run", "--json", cwd=root)
    assert done.returncode == 3, done.stdout + done.stderr  # needs input, as `keel plan run`
    assert json.loads(done.stdout)["run"]["state"] == "needs_input"


def test_a_reply_with_no_plan_is_told_so(workdir: Path) -> None:
    model = ScriptedModel(["I think you should look at the config.", {"json": good_draft()}])
    from keel.models import ModelClient
    from keel.plan.draft import draft_plan

    client = ModelClient(model, session_id="s")
    result = draft_plan(TASK, client=client, config=KeelConfig(), workspace=workspace(workdir))
    assert result.ok and [r.source for r in result.rounds] == ["content", "content"]
    assert result.rounds[0].issues[0].code == "draft.no_plan"
    told = model.calls[1].messages[-1].content
    assert "keel could not read a plan in your reply" in told
    assert "plan_draft.unparsed" in [t.id for t in model.calls[1].templates]


@pytest.mark.parametrize(
    ("content", "found"),
    [
        ('{"goal": "g", "steps": []}', True),
        ('Here it is:\n```json\n{"goal": "g", "steps": []}\n```\nDone.', True),
        ("```json\n{}\n```\n```json\n{}\n```", False),
        ("no json here", False),
    ],
)
def test_the_plan_is_read_from_bare_json_or_one_fence(content: str, found: bool) -> None:
    from keel.models import ModelResponse

    source, plan, problem = extract_plan(ModelResponse(content))
    assert source == "content"
    assert (plan is not None) is found and (problem is None) is found


def test_the_workspace_listing_is_names_only_capped_and_ranked(workdir: Path) -> None:
    for n in range(LISTING_CAP + 20):
        (workdir / f"file{n:03}.txt").write_text("secret content", encoding="utf-8")
    (workdir / "deep" / "er").mkdir(parents=True)
    (workdir / "deep" / "er" / "settings.ini").write_text("x", encoding="utf-8")
    (workdir / ".git").mkdir()
    (workdir / ".git" / "HEAD").write_text("x", encoding="utf-8")
    names, total = workspace_listing(workdir, "fix the port in settings.ini")
    assert names[0] == "deep/er/settings.ini"  # named in the task: first, however deep
    assert len(names) == LISTING_CAP and total == LISTING_CAP + 20 + 3
    assert not any(n.startswith(".git") for n in names)
    assert "deep/" in names and "file000.txt" in names


def test_the_bounded_schema_admits_the_good_draft() -> None:
    """The schema sent for structured output accepts a valid plan (checked by jsonschema's
    rules as the validator's own schema reads them): enums of the registry's names."""
    schema = draft_schema()
    evidence = schema["$defs"]["evidence"]["properties"]["action"]["properties"]["function"]
    assert "fs.exists" in evidence["enum"] and "output.result" not in evidence["enum"]
    assert check_plan(good_draft(), config=KeelConfig(), workspace=None).ok


def test_a_budget_refusal_stops_the_draft_and_says_so(workdir: Path) -> None:
    root = workspace(workdir)
    (root / "keel.toml").write_text("[model]\nmax_calls = 1\n", encoding="utf-8")
    spec = script(root, [{"json": first_draft()}, {"json": good_draft()}])
    done = keel("plan", "draft", TASK, "--model", spec, cwd=root)
    assert done.returncode == 1
    assert "[model.budget]" in done.stderr and "max_calls is 1" in done.stderr
    session = done.stderr.split("(keel show ", 1)[1].split(")", 1)[0]
    with open_journal(root) as journal:
        events = list(journal.events(session_id=session, kinds=("model.request",)))
    requests = [e.payload.data for e in events]  # type: ignore[union-attr]
    assert [r["refused"] is None for r in requests] == [True, False]
