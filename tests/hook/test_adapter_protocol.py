from __future__ import annotations

import json

import pytest

from keel.core.errors import PayloadError
from keel.hook.protocol import EVENTS, parse_hook_input, phase_for


def test_events_map_to_phases_per_client() -> None:
    assert phase_for("claude", "PreToolUse") == "pre_tool"
    assert phase_for("codex", "Stop") == "stop"
    assert phase_for("gemini", "BeforeTool") == "pre_tool"
    assert phase_for("gemini", "AfterAgent") == "stop"
    assert phase_for("gemini", "BeforeAgent") == "prompt"
    assert set(EVENTS) == {"claude", "codex", "gemini"}


@pytest.mark.parametrize(
    ("agent", "event", "data", "code"),
    [
        ("cursor", "PreToolUse", "{}", "payload.agent"),
        ("claude", "BeforeTool", "{}", "payload.hook_event"),
        ("gemini", "PreToolUse", "{}", "payload.hook_event"),
        ("claude", "Stop", "", "payload.empty"),
        ("claude", "Stop", "{not json", "payload.json"),
        ("claude", "Stop", b"\xff\xfe", "payload.json"),
        ("claude", "Stop", "[1, 2]", "payload.shape"),
        ("claude", "PreToolUse", '{"tool_input": {}}', "payload.tool_name"),
        ("claude", "PreToolUse", '{"tool_name": "Bash", "tool_input": "ls"}', "payload.tool_input"),
        ("claude", "PreToolUse", '{"hook_event_name": "Stop"}', "payload.hook_event_mismatch"),
    ],
)
def test_bad_input_is_a_payload_error_with_a_code(agent, event, data, code) -> None:
    with pytest.raises(PayloadError) as err:
        parse_hook_input(agent, event, data)
    assert err.value.code == code


def test_ids_come_from_each_clients_fields() -> None:
    claude = parse_hook_input(
        "claude",
        "PreToolUse",
        json.dumps(
            {
                "session_id": "s1",
                "prompt_id": "p1",
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "tool_use_id": "toolu_1",
            }
        ),
    )
    assert claude.ids() == {"client_session_id": "s1", "turn_id": "p1", "tool_use_id": "toolu_1"}
    codex = parse_hook_input(
        "codex", "Stop", json.dumps({"session_id": "s2", "turn_id": "t2", "stop_hook_active": True})
    )
    assert codex.turn_id == "t2" and codex.stop_hook_active
    before = {"session_id": "g", "tool_name": "run_shell_command", "tool_input": {"command": "ls"}}
    pre = parse_hook_input("gemini", "BeforeTool", json.dumps(before))
    post = parse_hook_input("gemini", "AfterTool", json.dumps({**before, "tool_response": {}}))
    assert pre.tool_use_id and pre.tool_use_id == post.tool_use_id


def test_missing_session_id_gets_a_placeholder() -> None:
    inp = parse_hook_input("codex", "SessionStart", "{}")
    assert inp.session_id == "codex-unknown-session"


def test_deeply_nested_input_is_a_json_error() -> None:
    deep = '{"session_id": "s", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(PayloadError) as err:
        parse_hook_input("claude", "UserPromptSubmit", deep)
    assert err.value.code == "payload.json"


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("session_id", 1, "payload.field_type"),
        ("session_id", "a\x00b", "payload.field_value"),
        ("session_id", "a\nb", "payload.field_value"),
        ("session_id", "x" * 100_000, "payload.field_value"),
        ("prompt_id", ["p"], "payload.field_type"),
        ("cwd", "/tmp/a\x00b", "payload.field_value"),
    ],
)
def test_bad_id_fields_are_refused(field: str, value: object, code: str) -> None:
    payload = {
        "session_id": "s",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hi",
        field: value,
    }
    with pytest.raises(PayloadError) as err:
        parse_hook_input("claude", "UserPromptSubmit", json.dumps(payload))
    assert err.value.code == code
