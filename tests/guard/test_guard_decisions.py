"""Every decision the guard makes itself, exactly, and each request answered once.

The emergency stop, an internal error and a journal that fails are exact denies (decision,
rule, reason, suggestion); the policy sees the call itself; a request asked again (by this
process or another) gets the committed answer; nothing is committed after the caller's
deadline.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from guard_helpers import RETRY, BrokenJournal, Forgetful, events_of, open_guard

from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision
from keel.core.stop import set_stop
from keel.guard import Guard


def test_the_emergency_stop_answers_exactly(guard: Guard, workdir: Path) -> None:
    set_stop(workdir, "incident 7")
    got = guard.decide(ToolCall("Read", "read", paths=("a.txt",), tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "stop.active",
        "reason": "emergency stop is set: incident 7",
        "suggestion": "Wait for the user to run `keel resume`.",
    }


def test_an_internal_error_is_an_exact_deny(guard: Guard) -> None:
    class Exploding:
        contained = False

        def check_call(self, call: ToolCall) -> Decision:
            raise RuntimeError("boom")

    guard.policy = Exploding()  # type: ignore[assignment]
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "internal_error",
        "reason": "keel could not decide this call (RuntimeError: boom); denied to be safe",
        "suggestion": RETRY,
    }


def test_the_policy_sees_the_call_itself(guard: Guard, workdir: Path) -> None:
    seen: list[ToolCall] = []
    real = guard.policy

    class Spy:
        contained = real.contained

        def check_call(self, call: ToolCall) -> Decision:
            seen.append(call)
            return real.check_call(call)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    guard.policy = Spy()  # type: ignore[assignment]
    call = ToolCall("Bash", "exec", command="git push --force origin main", tool_use_id="t1")
    got = guard.decide(call)
    assert seen == [call] and got == real.check_call(call) and got.decision == "deny"


@pytest.mark.parametrize(("tool", "what"), [("Bash", "this Bash call"), ("", "this call")])
def test_a_journal_that_fails_is_an_exact_deny(guard: Guard, tool: str, what: str) -> None:
    guard.journal = BrokenJournal()  # type: ignore[assignment]
    got = guard.decide(ToolCall(tool, "exec", command="ls", tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "internal_error",
        "reason": f"keel could not journal {what} (OSError: disk full); denied to be safe",
        "suggestion": RETRY,
    }


def test_a_request_is_answered_once(guard: Guard, workdir: Path) -> None:
    first = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r")
    set_stop(workdir, "later")  # the same request asked again gets the committed answer
    again = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r")
    assert first.allowed and again == first
    other = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t2"), request_id="q")
    assert other.rule == "stop.active"
    guard.close()
    assert [e.kind for e in events_of(workdir)] == ["tool.call", "decision"] * 2


def test_a_request_answered_by_another_process_gets_that_answer(workdir: Path) -> None:
    first = open_guard(workdir)
    committed = first.decide(
        ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r"
    )
    first.close()
    set_stop(workdir, "later")
    second = open_guard(workdir)
    assert second.journal is not None
    second.journal = Forgetful(second.journal)  # type: ignore[assignment]
    try:
        again = second.decide(
            ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r"
        )
        assert again == committed and again.allowed
        guidance = second.observe(
            ToolResult("Bash", "exec", True, tool_use_id="t1"), request_id="r"
        )
        assert guidance is None
    finally:
        second.close()
    assert [e.kind for e in events_of(workdir)] == ["tool.call", "decision"]


def test_a_repeated_request_changes_nothing_in_the_session(guard: Guard, workdir: Path) -> None:
    call = ToolCall("run_shell_command", "exec", command="ls", tool_use_id="derived-x")
    assert guard.decide(call, request_id="r").allowed
    assert guard.decide(call, request_id="r").allowed  # answered already: not numbered again
    guard.decide(call)
    guard.close()
    ids = [e.payload.tool_use_id for e in events_of(workdir) if e.kind == "tool.call"]  # pyright: ignore[reportAttributeAccessIssue]
    assert ids == ["derived-x-1", "derived-x-2"]


def test_nothing_is_committed_after_the_callers_deadline(guard: Guard, workdir: Path) -> None:
    from keel.core.errors import JournalError

    past = time.monotonic() - 1
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), commit_by=past)
    assert (got.decision, got.rule) == ("deny", "internal_error")
    assert got.reason.startswith("keel could not journal this Bash call (JournalError: ")
    with pytest.raises(JournalError):
        guard.observe(ToolResult("Bash", "exec", True, tool_use_id="t1"), commit_by=past)
    with pytest.raises(JournalError):
        guard.gate_finish(commit_by=past)
    with pytest.raises(JournalError):
        guard.note("prompt", {"text": "hi"}, commit_by=past)
    guard.close()
    assert events_of(workdir) == []
