"""Finishing a turn: the gates block it at most ``max_blocks`` times; each request once."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from guard_helpers import Forgetful, events_of, open_guard

from keel.core.calls import ToolCall, ToolResult
from keel.core.events import Event
from keel.guard import Guard


def _gates(events: list[Event]) -> list[tuple[str, Any]]:
    return [(e.kind, asdict(e.payload)) for e in events if e.kind in ("gate", "error")]


def test_without_a_monitor_the_session_may_finish(guard: Guard, workdir: Path) -> None:
    guard.state.stop_blocks = 2
    assert guard.gate_finish(request_id="f1") is None
    assert guard.state.stop_blocks == 0
    assert guard.may_finish() == (True, "the gates allow finishing")
    guard.close()
    gate = {"command": "finish", "passed": True, "exit_code": None, "detail": "no monitor"}
    assert _gates(events_of(workdir)) == [("gate", gate), ("gate", gate)]


def test_gate_failures_block_finishing_at_most_max_blocks_times(
    guard: Guard, workdir: Path
) -> None:
    why = "the [gates] must pass: pytest -q failed; ruff failed"
    block = f"keel: do not finish yet: {why}"
    failures = ["pytest -q failed", "ruff failed"]
    assert guard.config.gates.max_blocks == 3
    got = [guard.gate_finish(failures) for _ in range(5)]
    assert got == [block, block, block, None, block]
    assert guard.state.stop_blocks == 1
    assert guard.may_finish() == (True, "the gates allow finishing")
    guard.close()
    failed = ("gate", {"command": "finish", "passed": False, "exit_code": None, "detail": why})
    gave_up = ("error", {"data": {"gate": "gave_up", "blocks": 3, "why": why}})
    assert _gates(events_of(workdir))[:6] == [failed, failed, failed, failed, gave_up, failed]


def test_a_finish_request_is_answered_once(guard: Guard, workdir: Path) -> None:
    block = guard.gate_finish(["x failed"], request_id="f")
    assert block is not None and guard.gate_finish(request_id="f") == block
    assert guard.journal is not None and guard.journal.answered("f") == {"block": block}
    assert guard.state.stop_blocks == 1
    guard.close()
    assert [e.kind for e in events_of(workdir)] == ["gate"]


def test_a_finish_answered_by_another_process_gets_that_answer(workdir: Path) -> None:
    first = open_guard(workdir)
    block = first.gate_finish(["x failed"], request_id="f")
    first.close()
    second = open_guard(workdir)
    assert second.journal is not None
    second.journal = Forgetful(second.journal)  # type: ignore[assignment]
    try:
        assert block is not None and second.gate_finish(request_id="f") == block
        second.note("prompt", {"text": "hi"}, request_id="f")  # answered: nothing written
    finally:
        second.close()
    assert [e.kind for e in events_of(workdir)] == ["gate"]


def test_the_monitor_blocks_finishing_until_the_gates_ran(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[gates]\nrequired = ["pytest -q"]\n')
    g = open_guard(workdir, monitor=True)
    try:
        g.decide(ToolCall("Write", "write", paths=(str(workdir / "a.py"),), tool_use_id="w"))
        g.observe(ToolResult("Write", "write", True, tool_use_id="w"))
        block = g.gate_finish()
        assert block is not None and block.startswith("keel: do not finish yet: ")
        assert "pytest -q" in block and g.state.stop_blocks == 1
    finally:
        g.close()
    kinds = [e.kind for e in events_of(workdir)]
    assert kinds[-2:] == ["diagnostic", "gate"]
