"""Contained commands are frozen (SIGSTOP) while a client file tool acts, and thawed after.

Until the tool's result (or its time-to-live, or the end of the turn); never for a denied
call, a shell call, or where nothing runs contained.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision
from keel.core.stop import set_stop
from keel.guard import Guard


def _proc_state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


@pytest.fixture
def contained(workdir: Path) -> Iterator[int]:
    """A process registered as a running contained command of the workspace."""
    from keel.core.daemon import process_start
    from keel.sandbox.os._registry import dumps

    proc = subprocess.Popen(["sleep", "60"])
    try:
        start = process_start(proc.pid)
        folder = workdir / ".keel" / "exec"
        folder.mkdir(parents=True, exist_ok=True)
        record = {"pid": proc.pid, "start": start, "processes": [[proc.pid, start]]}
        (folder / f"{proc.pid}.json").write_text(dumps(record))
        yield proc.pid
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()


def _read(guard: Guard, tid: str) -> Decision:
    return guard.decide(ToolCall("Read", "read", paths=("a.txt",), tool_use_id=tid))


def test_a_file_tool_freezes_contained_commands_until_its_result(
    guard: Guard, contained: int
) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed and _read(guard, "r2").allowed
    assert _proc_state(contained) == "T"
    assert set(guard.state.frozen) == {"r1", "r2"}
    assert len(guard.state.frozen_pids) == 1 and guard.state.frozen_pids[0][0] == contained
    guard.observe(ToolResult("Read", "read", True, tool_use_id="r1"))
    assert _proc_state(contained) == "T"  # r2 is still in flight
    guard.observe(ToolResult("Read", "read", True, tool_use_id="other"))
    assert _proc_state(contained) == "T"
    guard.observe(ToolResult("Read", "read", True, tool_use_id="r2"))
    assert _proc_state(contained) != "T" and guard.state.frozen_pids == []


def test_a_file_tool_without_an_id_is_frozen_until_its_result(guard: Guard, contained: int) -> None:
    guard.contain = True
    assert guard.decide(ToolCall("Read", "read", paths=("a.txt",))).allowed
    assert guard.state.frozen.keys() == {""} and _proc_state(contained) == "T"
    guard.observe(ToolResult("Read", "read", True))
    assert guard.state.frozen == {} and _proc_state(contained) != "T"


def test_a_denied_file_tool_leaves_nothing_frozen(
    guard: Guard, workdir: Path, contained: int
) -> None:
    guard.contain = True
    set_stop(workdir, "x")
    assert not _read(guard, "r1").allowed
    assert _proc_state(contained) != "T" and guard.state.frozen == {}


@pytest.mark.parametrize(
    ("contain", "inside", "call"),
    [
        (False, False, ToolCall("Read", "read", paths=("a.txt",), tool_use_id="r")),
        (True, True, ToolCall("Read", "read", paths=("a.txt",), tool_use_id="r")),
        (True, False, ToolCall("Bash", "exec", command="ls", tool_use_id="r")),
    ],
    ids=["not-contained", "inside-wrap", "shell"],
)
def test_what_does_not_freeze(
    guard: Guard, contained: int, contain: bool, inside: bool, call: ToolCall
) -> None:
    guard.contain, guard.inside_sandbox = contain, inside
    assert guard.decide(call).allowed
    assert _proc_state(contained) != "T" and guard.state.frozen == {}


def test_a_freeze_whose_result_never_came_ends(guard: Guard, contained: int) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed and _proc_state(contained) == "T"
    guard.state.frozen["r1"] -= 31  # FREEZE_TTL passed
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert guard.state.frozen == {} and _proc_state(contained) != "T"


def test_a_recent_freeze_is_kept(guard: Guard, contained: int) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed
    guard.state.frozen["r1"] -= 25
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert "r1" in guard.state.frozen and _proc_state(contained) == "T"


@pytest.mark.parametrize("end", ["finish", "note"])
def test_the_end_of_a_turn_thaws_everything(guard: Guard, contained: int, end: str) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed and _proc_state(contained) == "T"
    if end == "finish":
        guard.gate_finish()
    else:
        guard.note("prompt", {"text": "next"})
    assert guard.state.frozen == {} and guard.state.frozen_pids == []
    assert _proc_state(contained) != "T"


def test_a_repeated_note_leaves_the_file_tools_in_flight_frozen(guard: Guard) -> None:
    guard.note("prompt", {"text": "hi"}, request_id="n")
    guard.state.frozen["r1"] = time.time()  # a file tool is in flight now
    guard.note("prompt", {"text": "hi"}, request_id="n")  # answered already: changes nothing
    assert list(guard.state.frozen) == ["r1"]
