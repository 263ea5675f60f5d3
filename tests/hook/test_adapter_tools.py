from __future__ import annotations

import json

import pytest

from keel.core.errors import PayloadError
from keel.hook.protocol import parse_hook_input
from keel.hook.tools import patch_paths, to_tool_call, to_tool_result, tool_kind

CWD = "/w/proj"


def _call(agent: str, event: str, tool: str, tool_input: dict, **extra: object):
    payload = {
        "session_id": "s",
        "cwd": CWD,
        "hook_event_name": event,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "t1",
        **extra,
    }
    return to_tool_call(parse_hook_input(agent, event, json.dumps(payload)))


@pytest.mark.parametrize(
    ("agent", "event", "tool", "tool_input", "kind", "command", "paths"),
    [
        ("claude", "PreToolUse", "Bash", {"command": "ls -la"}, "exec", "ls -la", ()),
        (
            "codex",
            "PreToolUse",
            "Bash",
            {"command": "echo hi > out.txt"},
            "exec",
            "echo hi > out.txt",
            (),
        ),
        ("codex", "PreToolUse", "exec_command", {"cmd": "make test"}, "exec", "make test", ()),
        (
            "codex",
            "PreToolUse",
            "shell",
            {"command": ["bash", "-lc", "ls a b"]},
            "exec",
            "bash -lc 'ls a b'",
            (),
        ),
        (
            "gemini",
            "BeforeTool",
            "run_shell_command",
            {"command": "pytest -q"},
            "exec",
            "pytest -q",
            (),
        ),
        (
            "claude",
            "PreToolUse",
            "Write",
            {"file_path": "/w/proj/a.py", "content": "x"},
            "write",
            None,
            ("/w/proj/a.py",),
        ),
        (
            "claude",
            "PreToolUse",
            "Edit",
            {"file_path": "a.py", "old_string": "1", "new_string": "2"},
            "edit",
            None,
            ("/w/proj/a.py",),
        ),
        (
            "claude",
            "PreToolUse",
            "MultiEdit",
            {"file_path": "/w/proj/b.py", "edits": []},
            "edit",
            None,
            ("/w/proj/b.py",),
        ),
        (
            "claude",
            "PreToolUse",
            "Read",
            {"file_path": "/etc/passwd"},
            "read",
            None,
            ("/etc/passwd",),
        ),
        ("claude", "PreToolUse", "Glob", {"pattern": "**/*.py"}, "read", None, (CWD,)),
        (
            "claude",
            "PreToolUse",
            "Grep",
            {"pattern": "x", "path": "src"},
            "read",
            None,
            ("/w/proj/src",),
        ),
        (
            "gemini",
            "BeforeTool",
            "write_file",
            {"file_path": "out.txt", "content": "x"},
            "write",
            None,
            ("/w/proj/out.txt",),
        ),
        (
            "gemini",
            "BeforeTool",
            "replace",
            {"file_path": "/w/proj/a.py", "old_string": "a", "new_string": "b"},
            "edit",
            None,
            ("/w/proj/a.py",),
        ),
        (
            "gemini",
            "BeforeTool",
            "read_file",
            {"file_path": "../secret"},
            "read",
            None,
            ("/w/secret",),
        ),
        ("claude", "PreToolUse", "mcp__github__create_issue", {"title": "x"}, "mcp", None, ()),
        ("gemini", "BeforeTool", "mcp_demo_add", {"a": 1}, "mcp", None, ()),
        ("claude", "PreToolUse", "TodoWrite", {"todos": []}, "other", None, ()),
        ("codex", "PreToolUse", "brand_new_tool", {}, "other", None, ()),
    ],
)
def test_every_tool_shape_maps_to_a_canonical_call(
    agent, event, tool, tool_input, kind, command, paths
) -> None:
    call = _call(agent, event, tool, tool_input)
    assert call.kind == kind
    assert call.command == command
    assert call.paths == paths
    assert call.tool == tool and call.agent == agent and call.session_id == "s"
    assert call.args == tool_input


def test_apply_patch_paths_are_relative_to_cwd_and_the_patch_is_kept() -> None:
    patch = (
        "*** Begin Patch\n*** Add File: hello.py\n+print('hi')\n"
        "*** Update File: src/app.py\n*** Move to: src/main.py\n@@\n-a\n+b\n"
        "*** Delete File: /abs/old.txt\n*** End Patch\n"
    )
    call = _call("codex", "PreToolUse", "apply_patch", {"command": patch})
    assert call.kind == "edit"
    assert call.patch == patch
    assert call.paths == (
        "/w/proj/hello.py",
        "/w/proj/src/app.py",
        "/w/proj/src/main.py",
        "/abs/old.txt",
    )
    assert patch_paths(patch)[0] == "hello.py"


def test_web_fetch_is_network_with_its_url() -> None:
    call = _call(
        "claude", "PreToolUse", "WebFetch", {"url": "https://example.com/x", "prompt": "p"}
    )
    assert (call.kind, call.url) == ("network", "https://example.com/x")
    call = _call(
        "gemini", "BeforeTool", "web_fetch", {"prompt": "summarise https://a.example/b please"}
    )
    assert (call.kind, call.url) == ("network", "https://a.example/b")


@pytest.mark.parametrize(
    ("tool", "tool_input", "code"),
    [
        ("Bash", {}, "payload.tool_command"),
        ("Bash", {"command": "   "}, "payload.tool_command"),
        ("Write", {"content": "x"}, "payload.tool_path"),
        ("apply_patch", {}, "payload.tool_patch"),
    ],
)
def test_a_known_tool_without_its_arguments_is_a_payload_error(tool, tool_input, code) -> None:
    with pytest.raises(PayloadError) as err:
        _call("claude", "PreToolUse", tool, tool_input)
    assert err.value.code == code


def _result(agent: str, event: str, tool: str, tool_input: dict, response: object, **extra: object):
    payload = {
        "session_id": "s",
        "cwd": CWD,
        "hook_event_name": event,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_response": response,
        "tool_use_id": "t1",
        **extra,
    }
    return to_tool_result(parse_hook_input(agent, event, json.dumps(payload)))


def test_results_from_each_clients_response_shape() -> None:
    r = _result(
        "claude",
        "PostToolUse",
        "Bash",
        {"command": "ls"},
        {"stdout": "a\n", "stderr": "warn", "interrupted": False},
    )
    assert r.ok and r.output == "a\n\nwarn" and r.kind == "exec" and r.tool_use_id == "t1"
    r = _result(
        "codex",
        "PostToolUse",
        "apply_patch",
        {"command": "*** Begin Patch\n*** End Patch\n"},
        "Exit code: 1\nWall time: 0 seconds\nOutput:\nfailed\n",
    )
    assert not r.ok and r.exit_code == 1
    r = _result("codex", "PostToolUse", "Bash", {"command": "true"}, "")
    assert r.ok and r.exit_code is None
    r = _result(
        "gemini",
        "AfterTool",
        "run_shell_command",
        {"command": "false"},
        {"llmContent": "Output: (empty)\nExit Code: 1\n", "returnDisplay": ""},
    )
    assert not r.ok and r.exit_code == 1
    r = _result(
        "gemini",
        "AfterTool",
        "read_file",
        {"file_path": "a"},
        {"llmContent": "the exit code: 3 is in the file", "returnDisplay": ""},
    )
    assert r.ok and r.exit_code is None
    r = _result(
        "gemini",
        "AfterTool",
        "read_file",
        {"file_path": "a"},
        {"llmContent": "", "error": {"message": "no such file"}},
    )
    assert not r.ok and "no such file" in (r.error or "")
    r = _result(
        "claude",
        "PostToolUseFailure",
        "Bash",
        {"command": "false"},
        None,
        error="Exit code 2\nboom",
    )
    assert not r.ok and r.exit_code == 2 and "boom" in (r.error or "")
    r = _result("claude", "PostToolUse", "mcp__demo__add", {"a": 2, "b": 3}, '{"result":5}')
    assert r.ok and r.kind == "mcp" and r.output == '{"result":5}'


def test_tool_kind_defaults_to_other() -> None:
    assert tool_kind("Bash") == "exec"
    assert tool_kind("SomethingNew") == "other"
