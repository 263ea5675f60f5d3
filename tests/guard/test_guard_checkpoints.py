"""Checkpoints around a change: before the call, after its result, each once.

Which calls get one (a command is read-only where it runs); a checkpoint that fails denies (or
is journaled, after the call); a stale git lock is journaled; both checkpoints give up at the
caller's deadline while another process holds the store.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from guard_helpers import RETRY, SESSION, events_of, open_guard

from keel.core.calls import ToolCall, ToolResult
from keel.guard import Guard


def test_a_change_gets_a_before_and_an_after_checkpoint(workdir: Path) -> None:
    g = open_guard(workdir, checkpoints=True)
    try:
        path = str(workdir / "a.txt")
        assert g.decide(ToolCall("Write", "write", paths=(path,), tool_use_id="w1")).allowed
        assert list(g.state.open_calls) == ["w1"]
        Path(path).write_text("new\n")
        g.observe(ToolResult("Write", "write", True, tool_use_id="w1"))
        assert g.state.open_calls == {}
        g.observe(ToolResult("Write", "write", True, tool_use_id="w1"))  # only once
    finally:
        g.close()
    events = events_of(workdir)
    kinds = [e.kind for e in events]
    assert kinds == [
        "tool.call",
        "checkpoint",
        "decision",
        "tool.result",
        "checkpoint",
        "tool.result",
    ]
    before: Any = events[1].payload
    after: Any = events[4].payload
    assert (before.tool_use_id, before.label) == ("w1", "Write")
    assert before.detail["kind"] == "before" and after.detail["kind"] == "after"
    assert after.tool_use_id == "w1"


@pytest.mark.parametrize(
    ("call", "checkpointed"),
    [
        (ToolCall("Bash", "exec", command="touch x", tool_use_id="c"), True),
        (ToolCall("Edit", "edit", paths=("a.txt",), tool_use_id="c"), True),
        (ToolCall("Bash", "exec", command="ls", tool_use_id="c"), False),
        (ToolCall("Read", "read", paths=("a.txt",), tool_use_id="c"), False),
        (ToolCall("Bash", "exec", command="git push --force origin main", tool_use_id="c"), False),
    ],
    ids=["exec", "edit", "read-only-exec", "read", "denied"],
)
def test_what_gets_a_checkpoint(workdir: Path, call: ToolCall, checkpointed: bool) -> None:
    g = open_guard(workdir, checkpoints=True)
    try:
        g.decide(call)
        assert ("c" in g.state.open_calls) is checkpointed
    finally:
        g.close()
    kinds = [e.kind for e in events_of(workdir)]
    assert kinds == (
        ["tool.call", "checkpoint", "decision"] if checkpointed else ["tool.call", "decision"]
    )


def test_a_command_is_read_only_where_it_runs(workdir: Path) -> None:
    from keel.policy import Policy

    opened = open_guard(workdir, journal=False)
    at_root = Guard("/", opened.config, Policy.from_config(opened.config, "/"), "sid")
    to_null = ToolCall("Bash", "exec", command="ls > ~+/null", cwd="/dev")  # /dev/null
    assert not at_root.needs_checkpoint(to_null)
    assert at_root.needs_checkpoint(to_null.replace(cwd="/"))  # /null: a file
    assert not opened.needs_checkpoint(ToolCall("Bash", "exec", tool_use_id="c"))  # no command


def test_without_checkpoints_nothing_is_snapshot(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w"))
    guard.observe(ToolResult("Write", "write", True, tool_use_id="w"))
    assert guard.checkpoints is None and guard.state.open_calls == {}
    guard.close()
    assert [e.kind for e in events_of(workdir)] == ["tool.call", "decision", "tool.result"]


def test_without_checkpoints_an_open_call_gets_no_after_checkpoint(
    guard: Guard, workdir: Path
) -> None:
    guard.state.open_calls["w"] = time.time()  # left by a process that took checkpoints
    guard.observe(ToolResult("Write", "write", True, tool_use_id="w"))
    guard.observe(ToolResult("Bash", "exec", True, tool_use_id="w"))
    assert guard.checkpoints is None and "w" in guard.state.open_calls
    guard.close()
    assert [e.kind for e in events_of(workdir)] == ["tool.result", "tool.result"]


def test_a_call_without_an_id_gets_its_after_checkpoint(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    g = open_guard(workdir, checkpoints=True)
    try:
        path = str(workdir / "a.txt")
        assert g.decide(ToolCall("Write", "write", paths=(path,))).allowed
        assert list(g.state.open_calls) == [""]
        Path(path).write_text("new\n")
        g.observe(ToolResult("Write", "write", True))
        assert g.state.open_calls == {}
    finally:
        g.close()
    assert [e.kind for e in events_of(workdir)] == [
        "tool.call",
        "checkpoint",
        "decision",
        "tool.result",
        "checkpoint",
    ]
    taken = Checkpoints(workdir).history()
    assert [(cp.kind, cp.session_id) for cp in taken] == [("before", SESSION), ("after", SESSION)]


class _BrokenStore:
    def create(self, **_: object) -> object:
        raise OSError("no space")

    def after_call(self, **_: object) -> object:
        raise OSError("no space")


def test_a_checkpoint_that_fails_is_an_exact_deny(guard: Guard, workdir: Path) -> None:
    guard.checkpoints = _BrokenStore()  # type: ignore[assignment]
    got = guard.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "internal_error",
        "reason": "keel could not take a checkpoint before this call (OSError: no space); "
        "denied to be safe",
        "suggestion": RETRY,
    }
    assert guard.state.open_calls == {}


def test_an_after_checkpoint_that_fails_is_journaled(guard: Guard, workdir: Path) -> None:
    guard.state.open_calls["w"] = time.time()
    guard.checkpoints = _BrokenStore()  # type: ignore[assignment]
    guard.observe(ToolResult("Write", "write", True, tool_use_id="w"))
    guard.close()
    result, error = events_of(workdir)
    assert result.kind == "tool.result" and error.kind == "error"
    assert asdict(error.payload) == {
        "data": {"event": "checkpoint.after_failed", "detail": "OSError: no space"}
    }


def test_a_stale_git_lock_found_by_the_guard_is_journaled(workdir: Path) -> None:
    g = open_guard(workdir, checkpoints=True)
    try:
        assert g.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w1")).allowed
        (workdir / ".keel" / "checkpoints" / "keel-index.lock").write_text("")  # a killed git
        assert g.decide(ToolCall("Write", "write", paths=("b.txt",), tool_use_id="w2")).allowed
    finally:
        g.close()
    errors = [e for e in events_of(workdir) if e.kind == "error"]
    assert [(e.session_id, e.payload.data["event"]) for e in errors] == [  # pyright: ignore[reportAttributeAccessIssue]
        (SESSION, "checkpoint.lock_recovered")
    ]


def _while_the_store_is_held(workdir: Path, act: Any) -> Any:
    """``act()`` while another keel process holds the checkpoint store.

    The store is let go only after ``act`` returned, or (if it waits for the store instead of
    giving up at its deadline) after a long grace: then ``act`` finishes late, and its answer
    shows that it waited.
    """
    import threading

    from keel.workspace import Checkpoints, _lock

    store = Checkpoints(workdir)
    store.create()
    fd = _lock.acquire(store.git_dir / _lock.LOCK_NAME)
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(act()))
    try:
        worker.start()
        worker.join(timeout=10)
    finally:
        _lock.release(fd)
    worker.join()
    return got[0]


def test_the_before_checkpoint_gives_up_at_the_callers_deadline(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    g = open_guard(workdir, journal=False, checkpoints=True)
    past = time.monotonic() - 1
    call = ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w")
    got = _while_the_store_is_held(workdir, lambda: g.decide(call, commit_by=past))
    assert (got.decision, got.rule) == ("deny", "internal_error")
    assert got.reason.startswith(
        "keel could not take a checkpoint before this call (WorkspaceError: "
    )
    assert g.state.open_calls == {}
    assert [cp.kind for cp in Checkpoints(workdir).history()] == ["manual"]


def test_the_after_checkpoint_gives_up_at_the_callers_deadline(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    g = open_guard(workdir, journal=False, checkpoints=True)
    g.state.open_calls["w"] = time.time()
    past = time.monotonic() - 1
    result = ToolResult("Write", "write", True, tool_use_id="w")
    assert _while_the_store_is_held(workdir, lambda: g.observe(result, commit_by=past)) is None
    assert g.state.open_calls == {}
    assert [cp.kind for cp in Checkpoints(workdir).history()] == ["manual"]
