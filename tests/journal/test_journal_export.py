from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from journal_helpers import TRACE, fill, session_events

from keel.core.events import Event
from keel.journal import MemoryJournal
from keel.journal.export import export_jsonl, export_otlp, write_export

Cli = Callable[..., Any]


def _stored() -> list[Event]:
    journal = MemoryJournal()
    return [journal.append(e) for e in session_events()]


def _attrs(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr in item["attributes"]:
        ((kind, value),) = attr["value"].items()
        out[attr["key"]] = int(value) if kind == "intValue" else value
    return out


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    (resource,) = doc["resourceSpans"]
    assert _attrs(resource["resource"])["service.name"] == "keel"
    (scope,) = resource["scopeSpans"]
    assert scope["scope"]["name"] == "keel.journal"
    return scope["spans"]


def test_jsonl_lines_parse_back_into_equal_events() -> None:
    events = _stored()
    lines = list(export_jsonl(events))
    assert [Event.from_json(line) for line in lines] == events
    out = io.StringIO()
    assert write_export(events, "jsonl", out) == len(events)
    assert out.getvalue().splitlines() == lines


def test_otlp_structure_and_genai_attributes() -> None:
    doc = export_otlp(_stored())
    json.dumps(doc)  # plain JSON all the way down
    spans = _spans(doc)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
        assert span["traceId"] == TRACE
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
        assert re.fullmatch(r"\d+", span["startTimeUnixNano"])
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"])
        assert span["kind"] == 1
        assert "keel.journal.seq" in _attrs(span)
    assert sorted(by_name) == ["apply_guardrail keel", "execute_tool Bash", "invoke_agent claude"]

    (root,) = by_name["invoke_agent claude"]
    root_attrs = _attrs(root)
    assert root_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert root_attrs["gen_ai.conversation.id"] == "sess-1"
    assert root["spanId"] == f"{1:016x}" and "parentSpanId" not in root
    assert root["startTimeUnixNano"] == "1700000001250000000"
    assert root["endTimeUnixNano"] == "1700000013250000000"

    call1, call2 = by_name["execute_tool Bash"]
    for call, use_id, seq in ((call1, "t1", 2), (call2, "t2", 6)):
        attrs = _attrs(call)
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["gen_ai.tool.name"] == "Bash"
        assert attrs["gen_ai.tool.call.id"] == use_id
        assert attrs["keel.journal.seq"] == seq
        assert call["parentSpanId"] == root["spanId"]
        assert "gen_ai.tool.call.arguments" not in attrs
    # The failed tool result ends and marks its call; a deny never does.
    assert call1["endTimeUnixNano"] == "1700000005250000000"
    assert call1["status"]["code"] == 2 and _attrs(call1)["error.type"] == "tool_error"
    assert "status" not in call2

    allow, deny = by_name["apply_guardrail keel"]
    assert allow["parentSpanId"] == call1["spanId"]
    assert deny["parentSpanId"] == call2["spanId"]
    assert _attrs(allow) == {
        "gen_ai.operation.name": "apply_guardrail",
        "gen_ai.guardian.name": "keel",
        "gen_ai.security.decision.type": "allow",
        "gen_ai.security.target.type": "tool_call",
        "gen_ai.security.target.id": "t1",
        "gen_ai.security.policy.id": "preset.developer.allow",
        "gen_ai.security.decision.reason": "tests are fine",
        "langfuse.observation.type": "guardrail",
        "keel.decision": "allow",
        "keel.decision.rule": "preset.developer.allow",
        "keel.decision.reason": "tests are fine",
        "keel.decision.subject": "pytest -q",
        "keel.journal.seq": 3,
    }
    deny_attrs = _attrs(deny)
    assert deny_attrs["gen_ai.security.decision.type"] == "deny"
    assert deny_attrs["gen_ai.security.policy.id"] == "risk.rm_recursive"
    assert deny_attrs["gen_ai.security.decision.reason"] == "recursive delete"
    assert deny_attrs["keel.decision.suggestion"] == "delete single files"
    assert "status" not in deny

    root_events = {e["name"]: _attrs(e) for e in root.get("events", [])}
    finding = root_events["gen_ai.security.finding"]
    assert finding["keel.diagnostic.kind"] == "repeated_failure"
    assert finding["keel.guidance.level"] == "correct"
    assert finding["keel.journal.seq"] == 8
    assert {"keel.probe", "keel.gate", "keel.stop", "keel.prompt"} <= set(root_events)
    assert "fix the tests" not in json.dumps(doc)  # prompts are not exported

    guidance = {e["name"]: _attrs(e) for e in call2.get("events", [])}["keel.guidance"]
    assert guidance["keel.guidance.level"] == "correct"
    assert guidance["keel.diagnostic.kind"] == "repeated_failure"
    checkpoint = {e["name"]: _attrs(e) for e in call1.get("events", [])}["keel.checkpoint"]
    assert checkpoint["keel.checkpoint.id"] == "cp-abc123"


def test_otlp_root_without_session_start_and_arguments_opt_in() -> None:
    events = _stored()[1:3]
    doc = export_otlp(events, include_arguments=True)
    spans = {s["name"]: s for s in _spans(doc)}
    root = spans["invoke_agent claude"]
    assert re.fullmatch(r"[0-9a-f]{16}", root["spanId"])
    assert spans["execute_tool Bash"]["parentSpanId"] == root["spanId"]
    args = json.loads(_attrs(spans["execute_tool Bash"])["gen_ai.tool.call.arguments"])
    assert args["command"] == "pytest -q"


def test_otlp_one_root_per_session() -> None:
    journal = MemoryJournal()
    for a, b in zip(session_events("a"), session_events("b", agent="codex"), strict=True):
        journal.append(a)
        journal.append(b)
    spans = _spans(export_otlp(journal.events()))
    roots = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert sorted(_attrs(s)["gen_ai.conversation.id"] for s in roots) == ["a", "b"]


def test_cli_export_to_file_and_stdout(root: Path, cli: Cli, tmp_path: Path) -> None:
    stored = fill(root, 26)
    out = tmp_path / "out.jsonl"
    result = cli("export", "--format", "jsonl", "--output", str(out), "-w", str(root))
    assert result.exit_code == 0, result.output
    assert [Event.from_json(line) for line in out.read_text().splitlines()] == stored

    result = cli("export", "--format", "otlp-json", "--session", "sess-2", "-w", str(root))
    assert result.exit_code == 0, result.output
    spans = _spans(json.loads(result.stdout))
    assert {_attrs(s)["keel.journal.seq"] for s in spans} <= set(range(14, 27))

    bad = cli("export", "--format", "csv", "-w", str(root))
    assert bad.exit_code == 2
