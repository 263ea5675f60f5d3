"""The judge in live hooks: scheduled off the hook's path, delivered with the next call.

Real hook processes (the command ``keel init`` registers) answer Claude Code's calls through a
real ``keel hookd``; the judge's model is the real ``openai`` or ``anthropic`` SDK talking to a
fake API server on 127.0.0.1. The effects checked: a verdict asked for by a rule finding denies
the session's next call with the judge's correction; below ``min_confidence`` it is journaled
and nothing is delivered; over ``max_calls`` the call is refused before anything is sent; the
same window twice costs one call; with the judge's model hung, every hook still answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_live_helpers import journal_of, judge_toml, landed, verdict_json, wait_for

from _support import hook, keel, keel_env, make_workspace, verdict
from keel.hook import relay
from keel.hook.server import stop_daemon
from models.model_servers import HANG, FakeModelServer, chat_reply, messages_reply

KEY = "zq-judge-test-key"
TASK = "Make tests/test_calc.py pass by fixing calc.add."


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


class Session:
    """One Claude Code session's hook calls against ``root``, through ``keel hookd``."""

    def __init__(self, root: Path, env: dict[str, str], *, hookd: bool) -> None:
        self.root, self.env, self.hookd, self.n = root, env, hookd, 0

    def prompt(self, text: str = TASK) -> None:
        done = hook("UserPromptSubmit", {"prompt": text}, **self._kw())
        assert done.returncode == 0, done.stderr

    def call(self, tool: str, tool_input: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        self.n += 1
        body = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": f"toolu_{self.n}"}
        return hook("PreToolUse", body, **self._kw())

    def result(self, tool: str, tool_input: dict[str, Any], output: str) -> None:
        body = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": f"toolu_{self.n}",
                "tool_response": {"content": output}}  # fmt: skip
        done = hook("PostToolUse", body, **self._kw())
        assert done.returncode == 0, done.stderr

    def read(self, path: str) -> str:
        tool_input = {"file_path": str(self.root / path)}
        answer = verdict(self.call("Read", tool_input))
        if answer == "allow":
            self.result("Read", tool_input, (self.root / path).read_text())
        return answer

    def _kw(self) -> dict[str, Any]:
        return {"workspace": self.root, "session": "live", "env": self.env, "hookd": self.hookd}


def workspace(root: Path, toml: str) -> Path:
    files = {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": (
            "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n"
        ),
    }
    make_workspace(root, keel_toml=toml, files=files, git=True)
    done = keel("init", "--agent", "claude", workspace=root)
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def daemon_env() -> Iterator[Callable[[Path, dict[str, str]], dict[str, str]]]:
    started: list[tuple[Path, subprocess.Popen[bytes]]] = []

    def start(root: Path, env: dict[str, str]) -> dict[str, str]:
        full = keel_env({**env, "KEEL_HOOKD_IDLE": "120"}, hookd=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "keel.hook.server", str(root)], env=full,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        started.append((root, proc))
        wait_for("keel hookd", lambda: relay.read_record(str(root / ".keel")))
        return env

    yield start
    for root, proc in started:
        stop_daemon(root)
        proc.terminate()
        proc.wait(timeout=30)


def openai_env(server: FakeModelServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": KEY}


def repeat_finding(session: Session) -> None:
    """Two equal reads: the repeat detector's hint, a finding at ``on_finding``."""
    session.prompt()
    assert session.read("calc.py") == "allow"
    assert session.read("calc.py") == "allow"  # a hint: the call still runs


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_finding_schedules_a_judgement_that_denies_the_next_call(
    workdir: Path, server: FakeModelServer, daemon_env: Any, provider: str
) -> None:
    if provider == "openai":
        spec, env = "openai:judge-mini", openai_env(server)
        server.queue(chat_reply(verdict_json()))
    else:
        spec = "anthropic:claude-judge"
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY}
        server.queue(messages_reply(verdict_json()))
    root = workspace(workdir / "ws", judge_toml(spec))
    session = Session(root, daemon_env(root, env), hookd=True)
    repeat_finding(session)
    judged = wait_for("the judgement", lambda: landed(root))
    assert judged[0]["status"] == "deliverable" and judged[0]["triggers"] == ["finding"]
    write = {"file_path": str(root / "calc.py"), "content": "def add(a, b):\n    return 4\n"}
    denied = session.call("Write", write)
    assert verdict(denied) == "deny"
    reason = json.loads(denied.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "gaming the check" in reason and "Put the assertion back" in reason
    assert "explain to the user why its finding is wrong" in reason
    path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    assert [r.path for r in server.requests] == [path]
    sent = json.dumps(server.requests[0].body)
    assert "calc.py" in sent and TASK in sent  # the window: the task and the steps
    agents = {e["agent"] for e in journal_of(root, "model.response")}
    assert agents == {"keel.judge"}
    guidance = journal_of(root, "guidance")
    assert any(g["payload"].detector == "judge" for g in guidance)
    shown = keel("show", "live", workspace=root).stdout
    assert "judgement" in shown and "gaming 0.90 deliverable after step 2 (finding)" in shown
    assert "model.request" in shown and "model.response" in shown


def test_a_verdict_below_min_confidence_is_journaled_not_delivered(
    workdir: Path, server: FakeModelServer, daemon_env: Any
) -> None:
    server.queue(chat_reply(verdict_json(confidence=0.4)))
    root = workspace(workdir / "ws", judge_toml("openai:judge-mini"))
    session = Session(root, daemon_env(root, openai_env(server)), hookd=True)
    repeat_finding(session)
    judged = wait_for("the judgement", lambda: landed(root))
    assert judged[0]["status"] == "below_threshold" and "judged" not in judged[0]
    assert judged[0]["verdict"]["confidence"] == 0.4
    assert verdict(session.call("Write", {"file_path": str(root / "notes.md"),
                                          "content": "x"})) == "allow"  # fmt: skip
    assert not [g for g in journal_of(root, "guidance") if g["payload"].detector == "judge"]


def test_over_budget_a_judgement_is_refused_and_journaled_with_nothing_sent(
    workdir: Path, server: FakeModelServer, daemon_env: Any
) -> None:
    server.queue(chat_reply(json.dumps({"verdict": "ok", "category": "none", "confidence": 0.9,
                                        "evidence": [], "suggestion": ""})))  # fmt: skip
    toml = judge_toml("openai:judge-mini", max_calls=1).replace(
        'on_finding = "hint"', 'on_finding = "off"\nevery_n_steps = 1'
    )
    root = workspace(workdir / "ws", toml)
    session = Session(root, daemon_env(root, openai_env(server)), hookd=True)
    session.prompt()
    assert session.read("calc.py") == "allow"
    wait_for("the first judgement", lambda: journal_of(root, "judgement"))
    assert session.read("tests/test_calc.py") == "allow"
    judged = wait_for("the second judgement", lambda: journal_of(root, "judgement")[1:])
    assert judged[0]["status"] == "error" and judged[0]["error"] == "model.budget"
    assert len(server.requests) == 1
    refused = [r for r in journal_of(root, "model.request") if r.get("refused")]
    assert len(refused) == 1 and refused[0]["agent"] == "keel.judge"


def test_the_same_window_twice_costs_one_model_call(
    workdir: Path, server: FakeModelServer, daemon_env: Any
) -> None:
    server.queue(chat_reply(verdict_json()))
    root = workspace(workdir / "ws", judge_toml("openai:judge-mini"))
    env = daemon_env(root, openai_env(server))
    for name in ("live", "again"):  # two sessions doing the very same thing
        session = Session(root, env, hookd=True)
        session._kw = lambda s=session, n=name: {  # type: ignore[method-assign]
            "workspace": s.root, "session": n, "env": s.env, "hookd": True}  # fmt: skip
        repeat_finding(session)
        wait_for("the judgement", lambda n=name: landed(root, n))
    first, second = (
        journal_of(root, "judgement", "live")[0],
        journal_of(root, "judgement", "again")[0],
    )
    assert first["window_hash"] == second["window_hash"]
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["cost_usd"] == 0.0 and len(server.requests) == 1


def test_with_the_judges_model_hung_every_hook_still_answers(
    workdir: Path, server: FakeModelServer, daemon_env: Any
) -> None:
    server.queue(HANG)
    root = workspace(workdir / "ws", judge_toml("openai:judge-mini", timeout_seconds=2))
    session = Session(root, daemon_env(root, openai_env(server)), hookd=True)
    repeat_finding(session)
    wait_for("the judge's request", lambda: server.requests)
    for _ in range(3):  # the judgement is still out: the calls are answered meanwhile
        assert session.read("calc.py") in ("allow", "deny")
    judged = wait_for("the failed judgement", lambda: journal_of(root, "judgement"))
    assert judged[0]["status"] == "error"


def test_without_the_daemon_the_judgement_runs_at_the_next_result(
    workdir: Path, server: FakeModelServer
) -> None:
    server.queue(chat_reply(verdict_json()))
    root = workspace(workdir / "ws", judge_toml("openai:judge-mini"))
    session = Session(root, openai_env(server), hookd=False)
    repeat_finding(session)  # the finding at the second read; its result ran the judge
    judged = journal_of(root, "judgement")
    assert [j["status"] for j in judged] == ["deliverable"]
    write = {"file_path": str(root / "calc.py"), "content": "def add(a, b):\n    return 4\n"}
    assert verdict(session.call("Write", write)) == "deny"


def test_without_the_daemon_a_hung_judge_is_skipped_within_the_hooks_deadline(
    workdir: Path, server: FakeModelServer
) -> None:
    server.queue(HANG)
    root = workspace(workdir / "ws", judge_toml("openai:judge-mini", timeout_seconds=60))
    session = Session(root, openai_env(server), hookd=False)
    repeat_finding(session)
    skipped = [j for j in journal_of(root, "judgement") if j["status"] == "skipped"]
    assert len(skipped) == 1 and "did not answer within" in skipped[0]["reason"]
    assert verdict(session.call("Write", {"file_path": str(root / "notes.md"),
                                          "content": "x"})) == "allow"  # fmt: skip


def test_at_the_finish_a_false_success_verdict_refuses_the_stop_once(
    workdir: Path, server: FakeModelServer, daemon_env: Any
) -> None:
    server.queue(chat_reply(verdict_json("false_success", step=1)))
    toml = judge_toml("openai:judge-mini").replace(
        'on_finding = "hint"\non_finish = false', 'on_finding = "off"\non_finish = true'
    )
    root = workspace(workdir / "ws", toml)
    session = Session(root, daemon_env(root, openai_env(server)), hookd=True)
    session.prompt()
    assert session.read("calc.py") == "allow"
    stop = {"stop_hook_active": False}
    blocked = hook("Stop", stop, **session._kw())
    answer = json.loads(blocked.stdout)
    assert answer["decision"] == "block" and "claim of success" in answer["reason"]
    judged = journal_of(root, "judgement")
    assert [(j["status"], j["triggers"], j["finish"]) for j in judged] == [
        ("deliverable", ["finish"], True)
    ]
    server.queue(chat_reply(verdict_json("false_success", step=1)))  # not asked: cached
    again = hook("Stop", {"stop_hook_active": True}, **session._kw())
    assert again.returncode == 0 and not again.stdout.strip()  # the same window: cached, once
