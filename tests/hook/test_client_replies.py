"""The exact reply each client gets from keel (``keel.hook.dialects``).

The text the model reads when keel refuses or asks about a call; which guidance level each
client gets as context and which as a block; the contained command in each client's own
contract; each client's silence; blocked finishes, context and fail-closed exits.
"""

from __future__ import annotations

import json

import pytest

from keel.core.decision import Decision, Guidance
from keel.hook.dialects import deny_text, dialect_for
from keel.hook.protocol import HookInput


def _inp(agent: str, event: str, tool: str | None = "Bash") -> HookInput:
    return HookInput(
        agent=agent,  # pyright: ignore[reportArgumentType]
        event=event,
        phase="post_tool",
        session_id="s",
        tool_name=tool,
        tool_input={"command": "ls"},
    )


def test_deny_text_is_exact_for_deny_and_ask() -> None:
    deny = Decision("deny", "path.protected", "writes .env", "edit another file")
    assert deny_text(deny, "Write") == (
        "keel denied this Write call [path.protected]: writes .env. Instead: edit another file"
    )
    ask = Decision("ask", "command.unknown", "unknown command")
    assert deny_text(ask, None) == (
        "keel needs a person's approval for this call [command.unknown]: unknown command"
    )
    assert deny_text(Decision("deny", "r", "why"), "") == "keel denied this call [r]: why"


@pytest.mark.parametrize("end", [".", "!", "?"])
def test_deny_text_adds_no_second_full_stop(end: str) -> None:
    decision = Decision("deny", "r", f"no{end}", "do this")
    assert (
        deny_text(decision, "Bash") == f"keel denied this Bash call [r]: no{end} Instead: do this"
    )


def test_claude_asks_and_the_others_deny_with_the_tool_named() -> None:
    ask = Decision("ask", "r", "why")
    claude = json.loads(dialect_for("claude").pre_tool(_inp("claude", "PreToolUse"), ask).stdout)
    out = claude["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask"
    assert (
        out["permissionDecisionReason"]
        == "keel needs a person's approval for this Bash call [r]: why"
    )
    deny = Decision("deny", "r", "why")
    claude = json.loads(dialect_for("claude").pre_tool(_inp("claude", "PreToolUse"), deny).stdout)
    assert claude["hookSpecificOutput"]["permissionDecisionReason"] == (
        "keel denied this Bash call [r]: why"
    )
    for agent in ("codex", "gemini"):
        reply = dialect_for(agent).pre_tool(_inp(agent, "PreToolUse"), ask)
        assert "keel needs a person's approval for this Bash call [r]: why" in reply.stdout


def test_replies_keep_non_ascii_text_as_is() -> None:
    reply = dialect_for("claude").pre_tool(
        _inp("claude", "PreToolUse"), Decision("deny", "r", "écrit « .env »")
    )
    assert "écrit « .env »" in reply.stdout and "\\u00e9" not in reply.stdout


@pytest.mark.parametrize("agent", ["codex", "gemini"])
@pytest.mark.parametrize("level", ["hint", "correct"])
def test_codex_and_gemini_get_hint_and_correct_as_context(agent: str, level: str) -> None:
    guidance = Guidance(level, "look again", "loop")  # pyright: ignore[reportArgumentType]
    reply = dialect_for(agent).post_tool(_inp(agent, "PostToolUse"), guidance)
    out = json.loads(reply.stdout)
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": f"keel guidance ({level}, loop): look again",
        }
    }


@pytest.mark.parametrize(("agent", "verdict"), [("codex", "block"), ("gemini", "deny")])
def test_codex_and_gemini_block_from_replan(agent: str, verdict: str) -> None:
    guidance = Guidance("replan", "stop and plan", "loop")
    out = json.loads(dialect_for(agent).post_tool(_inp(agent, "PostToolUse"), guidance).stdout)
    assert out == {"decision": verdict, "reason": "keel guidance (replan, loop): stop and plan"}


def test_an_unknown_agent_gets_claudes_dialect() -> None:
    assert dialect_for("nope") is dialect_for("claude")


def test_a_block_reason_ends_with_exactly_one_newline() -> None:
    claude = dialect_for("claude")
    assert claude.blocked(None, "  no\n\n").stderr == "  no\n"
    stop = HookInput(agent="claude", event="Stop", phase="stop", session_id="s",
                     stop_hook_active=True)  # fmt: skip
    reply = claude.blocked(stop, "  gates failed \n")
    assert (reply.exit_code, reply.stdout, reply.stderr) == (0, "", "  gates failed\n")
    gemini = dialect_for("gemini")
    reply = gemini.blocked(HookInput(agent="gemini", event="AfterAgent", phase="stop",
                                     session_id="s", stop_hook_active=True), "x")  # fmt: skip
    assert (reply.exit_code, reply.stdout) == (0, "{}")


def _call(agent: str, event: str, phase: str) -> HookInput:
    return HookInput(
        agent=agent,  # pyright: ignore[reportArgumentType]
        event=event,
        phase=phase,  # pyright: ignore[reportArgumentType]
        session_id="s",
        tool_name="Bash",
        tool_input={"command": "make", "timeout": 5, "description": "build"},
    )


ALLOW = Decision("allow", "r.allow", "fine")
ASK = Decision("ask", "r.ask", "unsure")
LINE = "python -S launch.py exec --workspace /w -- bash -c make"


@pytest.mark.parametrize(
    ("agent", "decision", "reply"),
    [
        ("claude", ALLOW, {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "keel: runs contained (keel exec)",
            "updatedInput": {"command": LINE, "timeout": 5, "description": "build"}}}),
        ("claude", ASK, {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "ask",
            "permissionDecisionReason":
                "keel needs a person's approval for this Bash call [r.ask]: unsure "
                "(it will run contained)",
            "updatedInput": {"command": LINE, "timeout": 5, "description": "build"}}}),
        ("codex", ALLOW, {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "allow",
            "updatedInput": {"command": LINE}}}),
        ("codex", ASK, {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason":
                "keel needs a person's approval for this Bash call [r.ask]: unsure"}}),
        ("gemini", ALLOW, {"hookSpecificOutput": {
            "tool_input": {"command": LINE, "timeout": 5, "description": "build"}}}),
        ("gemini", ASK, {"decision": "deny",
            "reason": "keel needs a person's approval for this Bash call [r.ask]: unsure"}),
    ],
)  # fmt: skip
def test_each_client_gets_the_contained_command_in_its_own_contract(
    agent: str, decision: Decision, reply: dict[str, object]
) -> None:
    out = dialect_for(agent).contained(_call(agent, "PreToolUse", "pre_tool"), decision, LINE)
    assert (out.exit_code, out.stderr) == (0, "")
    assert json.loads(out.stdout) == reply


@pytest.mark.parametrize(
    ("agent", "level", "reply"),
    [
        ("claude", "hint", {"hookSpecificOutput": {
            "hookEventName": "PostToolUse", "additionalContext": "keel guidance (hint, d): m"}}),
        ("claude", "correct", {"decision": "block", "reason": "keel guidance (correct, d): m"}),
        ("claude", "replan", {"decision": "block", "reason": "keel guidance (replan, d): m"}),
    ],
)  # fmt: skip
def test_claude_gets_only_a_hint_as_context(
    agent: str, level: str, reply: dict[str, object]
) -> None:
    guidance = Guidance(level, "m", "d")  # pyright: ignore[reportArgumentType]
    out = dialect_for(agent).post_tool(_call(agent, "PostToolUse", "post_tool"), guidance)
    assert json.loads(out.stdout) == reply


@pytest.mark.parametrize(("agent", "silence"), [("claude", ""), ("codex", ""), ("gemini", "{}")])
def test_nothing_to_say_is_each_clients_silence(agent: str, silence: str) -> None:
    dialect = dialect_for(agent)
    call = _call(agent, "PreToolUse", "pre_tool")
    for reply in (
        dialect.pre_tool(call, ALLOW),
        dialect.post_tool(_call(agent, "PostToolUse", "post_tool"), None),
        dialect.stop(_call(agent, "Stop", "stop"), None),
        dialect.context(_call(agent, "SessionStart", "session_start"), ""),
        dialect.context(_call(agent, "PreCompact", "compact"), "pinned"),
    ):
        assert (reply.exit_code, reply.stdout, reply.stderr) == (0, silence, "")


@pytest.mark.parametrize(
    ("agent", "verdict"), [("claude", "block"), ("codex", "block"), ("gemini", "deny")]
)
def test_a_blocked_finish_carries_the_reason(agent: str, verdict: str) -> None:
    out = dialect_for(agent).stop(_call(agent, "Stop", "stop"), "gates failed")
    assert (out.exit_code, json.loads(out.stdout)) == (
        0,
        {"decision": verdict, "reason": "gates failed"},
    )


@pytest.mark.parametrize("phase", ["session_start", "prompt"])
@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_context_goes_back_on_session_start_and_prompt(agent: str, phase: str) -> None:
    out = dialect_for(agent).context(_call(agent, "Ev", phase), "pinned")
    assert json.loads(out.stdout) == {
        "hookSpecificOutput": {"hookEventName": "Ev", "additionalContext": "pinned"}
    }


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_fail_closed_is_exit_2_unless_a_stop_is_already_continuing(agent: str) -> None:
    dialect = dialect_for(agent)
    reply = dialect.blocked(_call(agent, "PreToolUse", "pre_tool"), "why\n")
    assert (reply.exit_code, reply.stdout, reply.stderr) == (2, "", "why\n")
    stop = HookInput(agent=agent, event="Stop", phase="stop", session_id="s")  # pyright: ignore[reportArgumentType]
    assert dialect.blocked(stop, "why").exit_code == 2  # not continuing yet: blocked
