"""Mutation-testing survivors of the client dialects (issue 14, tests/MUTATION.md).

The exact text the model reads when keel refuses a call, and which guidance level each client
gets as context rather than as a block, were only checked loosely (``in``) before.
"""

from __future__ import annotations

import json

import pytest

from keel.adapters.dialects import deny_text, dialect_for
from keel.adapters.protocol import HookInput
from keel.decision import Decision, Guidance


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
