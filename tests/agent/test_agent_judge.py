"""The judge inside ``keel run``: asked beside the loop, delivered with the next call, replayed.

The agent's model is a fake Chat Completions server (``--base-url``); the judge's model is the
real openai SDK against another fake server (``OPENAI_BASE_URL``). A rule finding (two equal
reads, ``repeat_hint = 2``) asks the judge; its gaming verdict denies the agent's next call,
so the file it meant to write is untouched. ``keel replay`` then runs the session again with
both servers down: the judgement is served from the recording, at the same step.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_helpers import REPORT, data_of, sales_workspace, session_events
from fake_chat import FakeChat, tool_texts

from _support import keel
from models.model_servers import FakeModelServer, chat_reply

TASK = "report.py must print the total of the sales column of data/sales.csv"
JUDGE_TOML = """
[agent]
require_plan = false

[monitor]
repeat_hint = 2

[judge]
model = "openai:judge-mini"
timeout_seconds = 20

[judge.when]
on_finding = "hint"
on_finish = false
"""
VERDICT = {
    "verdict": "problem", "category": "gaming", "confidence": 0.9, "evidence": [2],
    "suggestion": "Read data/sales.csv instead of hard-coding the total.",
}  # fmt: skip


def test_a_judgement_in_keel_run_denies_the_next_call_and_replays_without_a_model(
    workdir: Path,
) -> None:
    root = sales_workspace(workdir, gates=False)
    (root / "keel.toml").write_text(JUDGE_TOML)
    turns = [
        [("read_file", {"path": "report.py"})],
        [("read_file", {"path": "report.py"})],  # the repeat rule's hint: the judge is asked
        [("write_file", {"path": "report.py", "content": "print(15.0)\n"})],
        [("finish", {"summary": "report.py prints the total"})],
    ]
    judge = FakeModelServer().__enter__()
    judge.queue(chat_reply(json.dumps(VERDICT)))
    env = {"OPENAI_BASE_URL": f"{judge.url}/v1", "OPENAI_API_KEY": "zq-judge"}
    with FakeChat(turns) as fake:
        done = keel("run", TASK, "--model", "openai:fake", "--base-url", fake.url,
                    "--non-interactive", "--json", workspace=root, env=env)  # fmt: skip
    judge.__exit__(None, None, None)
    result = json.loads(done.stdout)
    assert (root / "report.py").read_text() == REPORT  # the write was denied
    refusal = tool_texts(fake.requests[3])[-1]
    assert "monitor.judge" in refusal and "hard-coding the total" in refusal
    session = result["session_id"]
    judged = [data_of(e) for e in session_events(root, session, "judgement")]
    assert [(j["status"], j["step"]) for j in judged] == [("deliverable", 2)]
    assert len(judge.requests) == 1 and len(fake.requests) == 4
    assert TASK in json.dumps(judge.requests[0].body)  # the window names the run's task

    replayed = keel("replay", session, workspace=root, env=env)  # both servers are down
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.strip() == "identical: 4 model calls, 3 tool calls"
    assert len(judge.requests) == 1
