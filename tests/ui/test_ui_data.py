"""What the pages are built from, read from real journals filled by the real hook.

The sessions' statuses (ended, stopped by the monitor and cleared from the page, the
emergency stop), and the live stream's folding of a decision into the call it answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_support import Server, Workspace, empty_workspace, request

from _support import hook
from keel.core.events import DecisionPayload, Event, ToolCallPayload
from keel.journal import open_journal
from keel.ui._workspace import LiveTimeline


@pytest.fixture
def workspace(workdir: Path) -> Workspace:
    return empty_workspace(workdir / "ws", workdir / "state")


@pytest.fixture
def served(workspace: Workspace, workdir: Path) -> Iterator[Server]:
    running = Server(workspace, workdir / "ui.log")
    yield running
    running.stop()


def _statuses(server: Server) -> dict[str, str]:
    answer = request(f"{server.base}/api/sessions", headers={"X-Keel-Token": server.token})
    return {s["session_id"]: s["status"] for s in answer.json()["sessions"]}


def _post(server: Server, path: str, data: dict[str, object]) -> dict[str, object]:
    token = {"X-Keel-Token": server.token}
    csrf = request(f"{server.base}/api/meta", headers=token).json()["csrf"]
    headers = {**token, "Origin": server.base, "X-Keel-CSRF": csrf}
    answer = request(f"{server.base}{path}", method="POST", headers=headers, data=data)
    assert answer.status == 200, answer.body
    return answer.json()


def test_sessions_are_running_ended_monitor_stopped_or_stopped(
    served: Server, workspace: Workspace
) -> None:
    assert workspace.bash("ls", session="done-1") == "allow"
    end = {"session_id": "done-1", "cwd": str(workspace.root), "hook_event_name": "SessionEnd",
           "reason": "exit"}  # fmt: skip
    assert hook("SessionEnd", end, workspace=workspace.root, via="keel",
                env=workspace.env).returncode == 0  # fmt: skip
    for _ in range(5):  # the same call over and over: the monitor escalates to a stop
        workspace.pre("Bash", {"command": "ls"}, session="loop-1")
        workspace.post("Bash", {"command": "ls"}, session="loop-1")
    assert workspace.bash("pwd", session="free-1") == "allow"
    assert _statuses(served) == {"done-1": "ended", "loop-1": "monitor-stopped",
                                 "free-1": "running"}  # fmt: skip

    assert _post(served, "/api/resume", {"session": "loop-1"})["session"]
    assert _statuses(served)["loop-1"] == "running"
    assert workspace.bash("git status", session="loop-1") == "allow"

    _post(served, "/api/stop", {})
    after = _statuses(served)
    assert [after[s] for s in ("done-1", "loop-1", "free-1")] == ["ended", "stopped", "stopped"]


def test_a_decision_journaled_later_updates_its_call_in_the_live_stream(workdir: Path) -> None:
    call = Event("tool.call", "s-1", ToolCallPayload("Bash", "exec", command="make"))
    with open_journal(workdir) as journal:
        placed = journal.append(call)
    live = LiveTimeline(workdir, "s-1", after=placed.seq)
    assert live.poll() == []
    decision = DecisionPayload("deny", "rule.x", "not now", "later")
    with open_journal(workdir) as journal:
        journal.append(Event("decision", "s-1", decision, parent_span_id=call.span_id))
    (item,) = live.poll()
    assert (item.id, item.kind, item.decision) == (placed.seq, "tool.call", "deny")
    assert item.text == "Bash (exec): make"
    assert ("rule", "rule.x") in item.fields and ("suggestion", "later") in item.fields
