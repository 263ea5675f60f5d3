"""Allowed shell calls come back rewritten to run inside `keel exec`, per client contract."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from adapter_helpers import StubGuard, factory_for

from keel.core.decision import Decision
from keel.hook.runner import HookOptions, run_hook
from keel.sandbox.exec.contain import LAUNCHER
from keel.sandbox.exec.line import command_of, encode

CLAUDE = {
    "session_id": "s",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "pytest -q", "description": "tests", "timeout": 30000},
    "tool_use_id": "t1",
}
CODEX = {**CLAUDE, "tool_input": {"command": "pytest -q"}}
GEMINI = {
    "session_id": "g",
    "hook_event_name": "BeforeTool",
    "tool_name": "run_shell_command",
    "tool_input": {"command": "pytest -q", "description": "tests", "dir_path": "sub"},
}


def _reply(agent: str, payload: dict, guard: StubGuard, root: Path) -> dict:
    event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    reply = run_hook(
        agent,
        event,
        json.dumps(payload),
        root,
        options=HookOptions(time.monotonic() + 20),
        guard_factory=factory_for(guard),
    )
    assert reply.exit_code == 0, reply.stderr
    return json.loads(reply.stdout)


def _original(line: str) -> str:
    words = shlex.split(line)
    assert words[1:5] == ["-I", "-S", LAUNCHER, "exec"]
    assert words[words.index("--workspace") + 1] == "/ws"
    return words[-1]


def test_claude_gets_the_whole_input_back_with_the_command_wrapped(workdir: Path) -> None:
    out = _reply("claude", CLAUDE, StubGuard(root="/ws", rewrite=True), workdir)
    spec = out["hookSpecificOutput"]
    assert (spec["hookEventName"], spec["permissionDecision"]) == ("PreToolUse", "allow")
    updated = spec["updatedInput"]
    assert updated["description"] == "tests" and updated["timeout"] == 30000  # replaced whole
    assert _original(updated["command"]) == "pytest -q"
    assert "--timeout" in updated["command"] and " 30 " in f" {updated['command']} "


def test_codex_gets_only_the_command_with_the_allow(workdir: Path) -> None:
    out = _reply("codex", CODEX, StubGuard(root="/ws", rewrite=True), workdir)
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "permissionDecision", "updatedInput"}
    assert out["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert _original(out["hookSpecificOutput"]["updatedInput"]["command"]) == "pytest -q"


def test_gemini_gets_every_argument_back(workdir: Path) -> None:
    out = _reply("gemini", GEMINI, StubGuard(root="/ws", rewrite=True), workdir)
    args = out["hookSpecificOutput"]["tool_input"]
    assert args["dir_path"] == "sub" and args["description"] == "tests"
    assert _original(args["command"]) == "pytest -q"


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_deny_is_never_rewritten(workdir: Path, agent: str) -> None:
    payload = {**(GEMINI if agent == "gemini" else CLAUDE)}
    payload["tool_input"] = {**payload["tool_input"], "command": "rm -rf /"}
    out = _reply(agent, payload, StubGuard(root="/ws", rewrite=True), workdir)
    text = json.dumps(out)
    assert "updatedInput" not in text and "tool_input" not in text and "deny" in text


def test_an_ask_is_wrapped_for_claude_and_denied_where_there_is_no_ask(workdir: Path) -> None:
    ask = {"Bash": Decision.ask("policy.ask", "pushes need approval")}
    claude = _reply("claude", CLAUDE, StubGuard(decisions=ask, root="/ws", rewrite=True), workdir)
    spec = claude["hookSpecificOutput"]
    assert spec["permissionDecision"] == "ask"
    assert command_of(spec["updatedInput"]["command"]) is not None
    codex = _reply("codex", CODEX, StubGuard(decisions=ask, root="/ws", rewrite=True), workdir)
    assert codex["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "updatedInput" not in codex["hookSpecificOutput"]


def test_without_containment_an_allow_stays_silent(workdir: Path) -> None:
    reply = run_hook(
        "claude",
        "PreToolUse",
        json.dumps(CLAUDE),
        workdir,
        options=HookOptions(time.monotonic() + 20),
        guard_factory=factory_for(StubGuard(root="/ws", rewrite=False)),
    )
    assert reply.stdout == ""


@pytest.mark.parametrize(
    "command", ["ls", "echo 'a b' \"$HOME\" > x && cat x | wc -l", "printf '%s\\n' \"it's\"", ""]
)
def test_a_contained_line_gives_back_exactly_the_original(command: str) -> None:
    line = encode("/ws", command, timeout=5)
    assert command_of(line) == command
    assert command_of(command) is None and command_of("bash -c ls") is None
