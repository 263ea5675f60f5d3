"""The monitor in the guard: a repeated call is hinted, corrected, then denied.

A policy deny never reaches the monitor; guidance comes with the result (also to a request
answered by another process); the monitor judges scope as the policy does.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from guard_helpers import SESSION, Forgetful, events_of, open_guard

from keel.core.calls import ToolCall, ToolResult


def test_the_monitor_denies_a_call_repeated_too_often(workdir: Path) -> None:
    g = open_guard(workdir, monitor=True)
    try:
        for n in range(4):
            assert g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id=f"t{n}")).allowed
            g.observe(ToolResult("Bash", "exec", True, output="x", tool_use_id=f"t{n}"))
        got = g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t4"))
        assert (got.decision, got.rule) == ("deny", "monitor.repeat")
        assert "`ls` was called 5 times in a row" in got.reason
        assert got.suggestion == "Change your approach instead of repeating the same call."
    finally:
        g.close()
    events = events_of(workdir)
    call, result = ["tool.call", "decision"], ["tool.result"]
    assert [e.kind for e in events] == [
        *call, *result, *call, *result,
        "tool.call", "diagnostic", "decision", *result, "guidance",  # a hint on the 3rd
        *call, *result, "diagnostic", "guidance",  # correct after the 4th
        "tool.call", "guidance", "decision",  # the 5th is denied
    ]  # fmt: skip
    diag, guidance = events[7], events[-2]
    assert asdict(guidance.payload) == {
        "level": "correct",
        "message": got.reason,
        "detector": "repeat",
        "tool_use_id": "t4",
    }
    assert diag.payload.detector == "repeat" and diag.payload.level == "hint"  # pyright: ignore[reportAttributeAccessIssue]
    assert (diag.session_id, diag.agent) == (SESSION, "tester")


def test_a_policy_deny_is_not_handed_to_the_monitor(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[scope]\ninclude = ["src/**"]\n')
    g = open_guard(workdir, monitor=True)
    try:
        got = g.decide(ToolCall("Write", "write", paths=("/etc/passwd",), tool_use_id="w1"))
        assert got.decision == "deny" and not got.rule.startswith("monitor.")
        assert g.monitor is not None and g.monitor.state.step == 0
    finally:
        g.close()
    assert [e.kind for e in events_of(workdir)] == ["tool.call", "decision"]


def test_a_hint_allows_the_call_and_comes_with_its_result(workdir: Path) -> None:
    call = ToolCall("Bash", "exec", command="ls", tool_use_id="t")
    for n in (1, 2):  # two hook processes: the streak is in the session's state
        g = open_guard(workdir, monitor=True)
        assert g.decide(call.replace(tool_use_id=f"t{n}")).allowed
        assert g.observe(ToolResult("Bash", "exec", True, output="x", tool_use_id=f"t{n}")) is None
        g.close()
    g = open_guard(workdir, monitor=True)
    try:
        assert g.decide(call.replace(tool_use_id="t3")).allowed
        guidance = g.observe(
            ToolResult("Bash", "exec", True, output="x", tool_use_id="t3"), request_id="o3"
        )
        assert guidance is not None and guidance.level == "hint"
        assert guidance.detector == "repeat" and "3 times in a row" in guidance.message
        assert g.journal is not None
        assert g.journal.answered("o3") == {"guidance": guidance.to_dict()}
        again = g.observe(ToolResult("Bash", "exec", True, tool_use_id="t3"), request_id="o3")
        assert again == guidance
    finally:
        g.close()
    last = [e for e in events_of(workdir) if e.kind == "guidance"]
    assert [asdict(e.payload) for e in last] == [
        {"level": "hint", "message": guidance.message, "detector": "repeat", "tool_use_id": "t3"}
    ]


def test_a_result_answered_by_another_process_gets_that_guidance(workdir: Path) -> None:
    call = ToolCall("Bash", "exec", command="ls", tool_use_id="t")
    first = open_guard(workdir, monitor=True)
    try:
        for n in (1, 2, 3):
            assert first.decide(call.replace(tool_use_id=f"t{n}")).allowed
            guidance = first.observe(
                ToolResult("Bash", "exec", True, output="x", tool_use_id=f"t{n}"),
                request_id=f"o{n}",
            )
    finally:
        first.close()
    assert guidance is not None and guidance.level == "hint"
    second = open_guard(workdir, monitor=True)
    assert second.journal is not None
    second.journal = Forgetful(second.journal)  # type: ignore[assignment]
    try:  # the commit finds the request answered: the answer is the committed guidance
        again = second.observe(
            ToolResult("Bash", "exec", True, output="x", tool_use_id="t3"), request_id="o3"
        )
    finally:
        second.close()
    assert again == guidance


def test_the_monitor_judges_scope_as_the_policy_does(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[scope]\ninclude = ["src/**"]\n')
    (workdir / "src").mkdir()
    g = open_guard(workdir, monitor=True)
    try:
        inside = str(workdir / "src" / "a.py")
        assert g.decide(ToolCall("Write", "write", paths=(inside,), tool_use_id="w1")).allowed
        touch = ToolCall("Bash", "exec", command="touch src/b.py", cwd=str(workdir))
        assert g.decide(touch).allowed
        assert g.decide(ToolCall("Bash", "exec", command="touch src/c.py")).allowed
    finally:
        g.close()
