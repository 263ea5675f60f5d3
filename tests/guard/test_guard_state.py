"""The session's state record (``SessionState``) and the guard's bookkeeping of it.

Every field round-trips; a record from another format starts afresh; the state is stored with
each transaction and reloaded by the next hook process; calls without a tool-use id (Gemini's)
are numbered and their results matched in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from guard_helpers import SESSION, events_of, open_guard

from keel.core.calls import ToolCall, ToolResult
from keel.core.stop import set_stop
from keel.guard import OPEN_CALL_TTL, STATE_FORMAT, Guard, SessionState

FULL_STATE: dict[str, Any] = {
    "format": STATE_FORMAT,
    "monitor": {"step": 4},
    "stop_blocks": 2,
    "calls": 7,
    "pending": {"derived-a": ["derived-a-1", "derived-a-2"]},
    "open_calls": {"t1": 1.0e12},
    "containment_broken": "curl evil",
    "frozen": {"t2": 5.5},
    "frozen_pids": [[11, 22], [33, 44]],
    "judge_due": ["finding"],
}


def test_a_new_state_is_empty() -> None:
    assert SessionState().to_dict() == {
        "format": 1,
        "monitor": None,
        "stop_blocks": 0,
        "calls": 0,
        "pending": {},
        "open_calls": {},
        "containment_broken": None,
        "frozen": {},
        "frozen_pids": [],
        "judge_due": [],
    }


def test_the_state_record_round_trips_every_field() -> None:
    state = SessionState.from_dict(FULL_STATE)
    assert state.to_dict() == FULL_STATE
    assert isinstance(state.stop_blocks, int) and isinstance(state.calls, int)


def test_a_record_with_strings_is_read_as_numbers() -> None:
    data = {
        **FULL_STATE,
        "stop_blocks": "2",
        "calls": "7",
        "open_calls": {"t1": "1e12"},
        "frozen": {"t2": "5.5"},
        "frozen_pids": [["11", "22"], ["33", "44"]],
        "containment_broken": 42,
    }
    got = SessionState.from_dict(data).to_dict()
    assert got == {**FULL_STATE, "containment_broken": "42"}


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {**FULL_STATE, "format": 2},
        {k: v for k, v in FULL_STATE.items() if k != "format"},
    ],
    ids=["none", "empty", "other-format", "no-format"],
)
def test_an_unknown_record_starts_afresh(data: dict[str, Any] | None) -> None:
    assert SessionState.from_dict(data).to_dict() == SessionState().to_dict()


def test_missing_fields_of_a_record_take_their_defaults() -> None:
    got = SessionState.from_dict({"format": STATE_FORMAT}).to_dict()
    assert got == SessionState().to_dict()


def test_an_empty_broken_command_is_no_broken_containment() -> None:
    state = SessionState.from_dict({"format": STATE_FORMAT, "containment_broken": ""})
    assert state.containment_broken is None


def test_stale_open_calls_and_empty_queues_are_not_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    import keel.guard.session as session_module

    now = 1_000_000.0

    class Clock:
        @staticmethod
        def time() -> float:
            return now

    monkeypatch.setattr(session_module, "time", Clock)
    state = SessionState()
    cutoff = now - OPEN_CALL_TTL
    state.open_calls = {"old": cutoff - 1, "edge": cutoff, "new": now}
    state.pending = {"derived-a": [], "derived-b": ["derived-b-1"]}
    got = state.to_dict()
    assert got["open_calls"] == {"edge": cutoff, "new": now}
    assert got["pending"] == {"derived-b": ["derived-b-1"]}


def test_a_guard_keeps_the_state_it_is_given(workdir: Path) -> None:
    opened = open_guard(workdir, journal=False)
    state = SessionState.from_dict(FULL_STATE)
    g = Guard(workdir, opened.config, opened.policy, "sid", state=state, state_version=9)
    assert g.state is state and g.state_version == 9


def test_the_session_state_is_stored_with_each_transaction(workdir: Path) -> None:
    g = open_guard(workdir, monitor=True)
    try:
        assert g.state_version == 0 and g.is_current()
        g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
        assert g.state_version == 1 and g.is_current()
        assert g.journal is not None and g.monitor is not None
        stored = g.journal.session_state(SESSION)
        assert stored is not None and stored == (1, g.state.to_dict())
        assert stored[1]["monitor"] == g.monitor.state.to_dict() and stored[1]["monitor"]
        other = open_guard(workdir, monitor=True)
        try:
            assert other.state_version == 1 and other.state.to_dict() == g.state.to_dict()
            assert other.monitor is not None
            assert other.monitor.state.to_dict() == g.monitor.state.to_dict()
            other.decide(ToolCall("Bash", "exec", command="pwd", tool_use_id="t2"))
            assert not g.is_current()
            g.reload_state()
            assert g.is_current() and g.state_version == 2
            assert g.monitor.state.to_dict() == other.monitor.state.to_dict()
            assert g.state.to_dict() == other.state.to_dict()
        finally:
            other.close()
    finally:
        g.close()


def test_reloading_keeps_no_monitor_when_there_is_none(guard: Guard) -> None:
    guard.reload_state()
    assert guard.monitor is None and guard.state_version == 0
    Guard(guard.root, guard.config, guard.policy, "x").reload_state()  # no journal: nothing


def test_each_commit_moves_the_state_version_by_one(guard: Guard) -> None:
    for n in (1, 2, 3):
        guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id=f"t{n}"))
        assert guard.state_version == n and guard.is_current()


def test_calls_without_an_id_are_numbered_and_matched_in_order(guard: Guard, workdir: Path) -> None:
    call = ToolCall("run_shell_command", "exec", command="ls", tool_use_id="derived-q")
    assert guard.decide(call).allowed and guard.decide(call).allowed
    assert guard.state.pending == {"derived-q": ["derived-q-1", "derived-q-2"]}
    set_stop(workdir, "x")
    assert not guard.decide(call).allowed  # denied: nothing to match a result to
    assert guard.state.pending == {"derived-q": ["derived-q-1", "derived-q-2"]}
    for _ in range(3):
        guard.observe(ToolResult("run_shell_command", "exec", True, tool_use_id="derived-q"))
    assert guard.state.pending == {} and guard.state.calls == 3
    guard.close()
    events = events_of(workdir)
    calls = [e.payload.tool_use_id for e in events if e.kind == "tool.call"]  # pyright: ignore[reportAttributeAccessIssue]
    results = [e for e in events if e.kind == "tool.result"]
    assert calls == ["derived-q-1", "derived-q-2", "derived-q-3"]
    assert [e.payload.tool_use_id for e in results] == ["derived-q-1", "derived-q-2", "derived-q"]  # pyright: ignore[reportAttributeAccessIssue]
    spans = {e.payload.tool_use_id: e.span_id for e in events if e.kind == "tool.call"}  # pyright: ignore[reportAttributeAccessIssue]
    assert [r.parent_span_id for r in results[:2]] == [spans["derived-q-1"], spans["derived-q-2"]]


def test_calls_with_an_id_are_not_numbered(guard: Guard) -> None:
    guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="toolu-1"))
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert guard.state.calls == 0 and guard.state.pending == {}
    guard.observe(ToolResult("Bash", "exec", True, tool_use_id="derived-none"))
    assert guard.state.pending == {}


def test_an_id_with_dashes_is_not_a_numbered_id(guard: Guard) -> None:
    call = ToolCall("Bash", "exec", command="ls", tool_use_id="call-0001-0002")
    assert guard.decide(call).allowed
    assert guard.state.pending == {} and guard.state.calls == 0


def test_a_repeated_result_request_matches_no_second_call(guard: Guard, workdir: Path) -> None:
    call = ToolCall("run_shell_command", "exec", command="ls", tool_use_id="derived-z")
    guard.decide(call)
    guard.decide(call)
    result = ToolResult("run_shell_command", "exec", True, tool_use_id="derived-z")
    guard.observe(result, request_id="o")
    guard.observe(result, request_id="o")
    assert guard.state.pending == {"derived-z": ["derived-z-2"]}
