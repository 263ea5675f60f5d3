"""Traces pushed to a real OTLP receiver (Arize Phoenix) and read back through its API.

``keel hookd`` pushes the hook calls it answers, ``keel run`` its own run, ``keel export
--otlp`` a recorded session: Phoenix gets ``invoke_agent`` -> ``execute_tool`` ->
``apply_guardrail`` with the journal's ids, and ``chat`` spans under the session. An endpoint
nobody listens on changes no answer, and the failure is journaled. Waits are bounded polls,
never timed assertions.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _support import hook as hook_call
from _support import keel, make_workspace, verdict
from _support.phoenix import Phoenix, free_port, wait_for
from keel.core.events import Event, trace_id_for
from keel.journal import read_journal

Hookd = Callable[[Path, dict[str, str]], None]
RECEIVED = 120.0
"""Seconds to wait for spans to reach Phoenix (a bound, not a measurement)."""


def workspace(root: Path, endpoint: str | None, *, timeout: float = 10) -> Path:
    toml = '[policy]\npreset = "developer"\n'
    if endpoint is not None:
        toml += f'\n[export]\notlp_endpoint = "{endpoint}"\ntimeout_seconds = {timeout}\n'
    make_workspace(root, keel_toml=toml, files={"calc.py": "def add(a, b):\n    return a + b\n"},
                   git=True)  # fmt: skip
    done = keel("init", "--agent", "claude", workspace=root)
    assert done.returncode == 0, done.stderr
    return root


class ClaudeSession:
    """One Claude Code session's hook calls, as the client makes them, through keel hookd."""

    def __init__(self, root: Path, session: str) -> None:
        self.root, self.session, self.n = root, session, 0
        self.answers: list[tuple[int, str]] = []

    def hook(self, event: str, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        done = hook_call(event, body, workspace=self.root, session=self.session, hookd=True)
        self.answers.append((done.returncode, done.stdout.replace(str(self.root), "<root>")))
        return done

    def call(self, tool: str, tool_input: dict[str, Any]) -> str:
        self.n += 1
        body = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": f"toolu_{self.n}"}
        return verdict(self.hook("PreToolUse", body))

    def result(self, tool: str, tool_input: dict[str, Any], output: str) -> None:
        body = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": f"toolu_{self.n}",
                "tool_response": {"content": output}}  # fmt: skip
        assert self.hook("PostToolUse", body).returncode == 0

    def everyday_work(self) -> None:
        """A start, a prompt, one file read 3 times (a hint), a dangerous command, the end."""
        assert self.hook("SessionStart", {"source": "startup"}).returncode == 0
        assert self.hook("UserPromptSubmit", {"prompt": "fix calc.py"}).returncode == 0
        read = {"file_path": str(self.root / "calc.py")}
        for _ in range(3):
            assert self.call("Read", read) == "allow"
            self.result("Read", read, (self.root / "calc.py").read_text())
        assert self.call("Bash", {"command": "rm -rf /"}) == "deny"
        assert self.hook("SessionEnd", {"reason": "exit"}).returncode == 0


def journaled(root: Path, session: str) -> list[Event]:
    with read_journal(root) as journal:
        return list(journal.events(session_id=session))


def received(phoenix: Phoenix, session: str, names: list[str]) -> list[dict[str, Any]]:
    """The session's spans in Phoenix, once it holds at least ``names`` (a multiset)."""

    def complete() -> list[dict[str, Any]] | None:
        spans = phoenix.spans(trace_id_for(session))
        got = [s["name"] for s in spans]
        return spans if all(got.count(n) >= names.count(n) for n in names) else None

    try:
        return wait_for(f"the spans of {session} in Phoenix", complete, RECEIVED)
    except AssertionError as exc:
        got = sorted(s["name"] for s in phoenix.spans(trace_id_for(session)))
        raise AssertionError(f"{exc}: wanted {sorted(names)}, it has {got}") from None


def by_name(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def test_hookd_pushes_the_calls_it_answers_with_their_structure(
    workdir: Path, phoenix: Phoenix, hookd: Hookd
) -> None:
    root = workspace(workdir, phoenix.traces_endpoint)
    hookd(root, {"OTEL_EXPORTER_OTLP_HEADERS": "x-keel-test=hookd"})
    ClaudeSession(root, "otel-hookd").everyday_work()

    names = ["invoke_agent claude", *["execute_tool Read"] * 3, "execute_tool Bash",
             *["apply_guardrail keel"] * 4]  # fmt: skip
    spans = received(phoenix, "otel-hookd", names)
    assert sorted(s["name"] for s in spans) == sorted(names)  # each span once
    events = journaled(root, "otel-hookd")

    (root_span,) = by_name(spans, "invoke_agent claude")
    assert root_span["parent_id"] is None
    assert root_span["context"]["span_id"] == events[0].span_id  # the session.start event
    assert root_span["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root_span["attributes"]["gen_ai.conversation.id"] == "otel-hookd"
    on_root = [e["name"] for e in root_span["events"]]
    assert on_root.count("keel.session.end") == 1 and on_root.count("keel.prompt") == 1
    (finding,) = [e for e in root_span["events"] if e["name"] == "gen_ai.security.finding"]
    assert finding["attributes"]["keel.diagnostic.kind"] == "repeat"
    assert "fix calc.py" not in json.dumps(spans)  # prompts are never sent

    calls = {e.span_id: e for e in events if e.kind == "tool.call"}
    decisions = {e.span_id: e for e in events if e.kind == "decision"}
    tools = [s for s in spans if s["name"].startswith("execute_tool")]
    assert {s["context"]["span_id"] for s in tools} == set(calls)  # the journal's ids
    for span in tools:
        assert span["parent_id"] == root_span["context"]["span_id"]
        assert span["attributes"]["gen_ai.operation.name"] == "execute_tool"
        call = calls[span["context"]["span_id"]].payload
        assert span["attributes"]["gen_ai.tool.call.id"] == call.tool_use_id  # pyright: ignore[reportAttributeAccessIssue]
        assert span["attributes"]["gen_ai.tool.name"] == span["name"].split()[1]
    guards = by_name(spans, "apply_guardrail keel")
    assert {s["context"]["span_id"] for s in guards} == set(decisions)
    tool_ids = {s["context"]["span_id"]: s for s in tools}
    for span in guards:
        parent = tool_ids[span["parent_id"]]  # every decision under the call it judged
        decision = decisions[span["context"]["span_id"]].payload
        attrs = span["attributes"]
        assert attrs["keel.decision"] == decision.decision  # pyright: ignore[reportAttributeAccessIssue]
        assert attrs["keel.decision.rule"] == decision.rule  # pyright: ignore[reportAttributeAccessIssue]
        assert attrs["gen_ai.security.target.id"] == parent["attributes"]["gen_ai.tool.call.id"]
        assert span["status_code"] == "UNSET"  # a deny is no error
    (deny,) = [s for s in guards if s["attributes"]["keel.decision"] == "deny"]
    assert deny["attributes"]["gen_ai.security.decision.type"] == "deny"
    assert deny["attributes"]["keel.decision.rule"] == "risk.rm_recursive"
    assert tool_ids[deny["parent_id"]]["name"] == "execute_tool Bash"
    guided = [s for s in tools if any(e["name"] == "keel.guidance" for e in s["events"])]
    assert [s["attributes"]["gen_ai.tool.call.id"] for s in guided] == ["toolu_3"]
    (guidance,) = [e for e in guided[0]["events"] if e["name"] == "keel.guidance"]
    assert guidance["attributes"]["keel.guidance.level"] == "hint"


def test_keel_run_pushes_its_model_calls_and_tool_calls(workdir: Path, phoenix: Phoenix) -> None:
    root = workspace(workdir / "repo", phoenix.traces_endpoint)
    script = workdir / "script.json"
    usage = {"input_tokens": 120, "output_tokens": 30}
    script.write_text(json.dumps([
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}], "usage": usage},
        {"tool_calls": [{"name": "run", "arguments": {"command": "rm -rf /"}}], "usage": usage},
        {"tool_calls": [{"name": "finish", "arguments": {"summary": "read it"}}], "usage": usage},
    ]))  # fmt: skip
    done = keel("run", "read calc.py", "--model", f"script:{script}", "--non-interactive",
                "--max-steps", "3", "--json", workspace=root)  # fmt: skip
    session = json.loads(done.stdout)["session_id"]
    events = journaled(root, session)
    requests = [e for e in events if e.kind == "model.request"]
    assert len(requests) == 3, done.stdout + done.stderr
    model = requests[0].payload.data["model"]  # pyright: ignore[reportAttributeAccessIssue]

    names = ["invoke_agent keel", *[f"chat {model}"] * 3, "execute_tool read_file",
             "execute_tool run", "apply_guardrail keel"]  # fmt: skip
    spans = received(phoenix, session, names)
    (root_span,) = by_name(spans, "invoke_agent keel")
    assert root_span["context"]["span_id"] in {events[0].span_id, _root_id(session)}
    chats = by_name(spans, f"chat {model}")
    assert {c["context"]["span_id"] for c in chats} == {e.span_id for e in requests}
    for chat in chats:
        attrs = chat["attributes"]
        assert chat["parent_id"] == root_span["context"]["span_id"]
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == model
        assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (
            120,
            30,
        )
    (run,) = by_name(spans, "execute_tool run")
    denied = [s for s in by_name(spans, "apply_guardrail keel") if s["parent_id"] ==
              run["context"]["span_id"]]  # fmt: skip
    assert [d["attributes"]["keel.decision"] for d in denied] == ["deny"]
    (read,) = by_name(spans, "execute_tool read_file")
    assert read["parent_id"] == root_span["context"]["span_id"]


def test_keel_export_otlp_sends_a_recorded_session(workdir: Path, phoenix: Phoenix) -> None:
    root = workspace(workdir, None)  # recorded with no push configured, decided in process
    for event, body in (
        ("SessionStart", {"source": "startup"}),
        ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"},
                        "tool_use_id": "toolu_1"}),
    ):  # fmt: skip
        assert hook_call(event, body, workspace=root, session="otel-export").returncode == 0

    sent = keel("export", "--otlp", phoenix.traces_endpoint, "otel-export", workspace=root)
    assert sent.returncode == 0, sent.stderr
    assert re.fullmatch(r"sent 3 spans of 1 session\(s\) to http://127\.0\.0\.1:\d+/v1/traces\n",
                        sent.stdout)  # fmt: skip
    spans = received(phoenix, "otel-export", ["invoke_agent claude", "execute_tool Bash",
                                               "apply_guardrail keel"])  # fmt: skip
    (call,) = by_name(spans, "execute_tool Bash")
    (guard,) = by_name(spans, "apply_guardrail keel")
    assert guard["parent_id"] == call["context"]["span_id"]
    assert guard["attributes"]["keel.decision.rule"] == "risk.rm_recursive"
    again = keel("export", "--otlp", phoenix.traces_endpoint, "otel-export", workspace=root)
    assert again.returncode == 0, again.stderr
    assert len(phoenix.spans(trace_id_for("otel-export"))) == 3  # the same ids: no copies


def test_an_unreachable_endpoint_changes_no_answer_and_is_journaled(
    workdir: Path, hookd: Hookd
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1/traces"  # nothing listens there
    plain = workspace(workdir / "plain", None)
    pushing = workspace(workdir / "pushing", dead, timeout=1)
    answers = []
    for root in (plain, pushing):
        hookd(root, {})
        session = ClaudeSession(root, "otel-dead")
        session.everyday_work()
        answers.append(session.answers)
    assert answers[0] == answers[1]  # every exit code and every byte answered

    def failure() -> Event | None:
        found = [
            e for e in journaled(pushing, "otel-dead")
            if e.kind == "error" and e.payload.data.get("event") == "export.failed"  # pyright: ignore[reportAttributeAccessIssue]
        ]  # fmt: skip
        return found[0] if found else None

    error = wait_for("the journaled export failure", failure, RECEIVED)
    data = error.payload.data  # pyright: ignore[reportAttributeAccessIssue]
    assert data["endpoint"] == dead and data["spans"] >= 1
    assert "Connection refused" in data["message"]
    assert not [e for e in journaled(plain, "otel-dead") if e.kind == "error"
                and e.payload.data.get("event") == "export.failed"]  # pyright: ignore[reportAttributeAccessIssue]  # fmt: skip


def _root_id(session: str) -> str:
    from keel.journal.export import root_span_id

    return root_span_id(session)


@pytest.fixture(autouse=True)
def _no_stray_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                 "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
