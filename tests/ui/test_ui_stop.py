"""The page's only writes: the emergency stop and its resume, and who may send them.

Checked by effect, as ``keel stop`` is: the STOP file, ``keel status``, the journal's
``stop`` and ``resume`` events, and the hook's own answer to the next call. A request
without the token, from another origin, or without the page's write token changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_support import Server, Tab, Workspace, empty_workspace, request

from keel.core.stop import stop_path

REASON = "stopped from keel ui's test"


@pytest.fixture
def workspace(workdir: Path) -> Workspace:
    ws = empty_workspace(workdir / "ws", workdir / "state")
    assert ws.bash("ls", session="agent-1") == "allow"
    return ws


@pytest.fixture
def served(workspace: Workspace, workdir: Path) -> Iterator[Server]:
    running = Server(workspace, workdir / "ui.log")
    yield running
    running.stop()


def _status(ws: Workspace) -> dict[str, object]:
    done = ws.keel("status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["stop"]


def _admin_events(ws: Workspace) -> list[tuple[str, str]]:
    """The ``stop`` and ``resume`` events of the journal: (kind, reason)."""
    done = ws.keel("log", "--session", "keel-admin", "--json")
    if done.returncode != 0:
        return []
    return [(e["kind"], e["payload"]["reason"]) for e in json.loads(done.stdout)["events"]]


def test_the_stop_button_stops_the_workspace_and_resume_clears_it(
    tab: Tab, served: Server, workspace: Workspace
) -> None:
    tab.page.goto(served.url)
    tab.page.wait_for_selector("#sessions")
    tab.page.fill("#stop-reason", REASON)
    tab.page.click("#stop-button")
    tab.page.locator("#stop-state", has_text="STOPPED").wait_for()
    tab.shot("stopped")
    assert Path(stop_path(workspace.root)).is_file()
    status = _status(workspace)
    assert status["active"] is True and status["reason"] == REASON
    assert _admin_events(workspace) == [("stop", REASON)]
    assert workspace.bash("ls", session="agent-1") == "deny"
    assert tab.page.locator('#sessions tr[data-session="agent-1"] .badge').inner_text() == (
        "stopped"
    )

    tab.page.click("#resume-button")
    tab.page.locator("#stop-state", has_text="no emergency stop").wait_for()
    assert not Path(stop_path(workspace.root)).exists()
    assert _status(workspace)["active"] is False
    assert [kind for kind, _ in _admin_events(workspace)] == ["stop", "resume"]
    assert workspace.bash("pwd", session="agent-1") == "allow"
    assert tab.errors == []


def test_a_stop_without_the_token_from_another_origin_or_without_the_page_token_is_refused(
    served: Server, workspace: Workspace
) -> None:
    token = {"X-Keel-Token": served.token}
    csrf = request(f"{served.base}/api/meta", headers=token).json()["csrf"]
    ours = {"Origin": served.base, "X-Keel-CSRF": csrf}
    attempts = {
        "ui.token": ours,
        "ui.origin": {**token, **ours, "Origin": "http://evil.example"},
        "ui.csrf": {**token, "Origin": served.base},
        "ui.host": {**token, **ours, "Host": "evil.example"},
    }
    for code, headers in attempts.items():
        for path in ("/api/stop", "/api/resume"):
            answer = request(f"{served.base}{path}", method="POST", headers=headers, data={})
            assert answer.status == 403, (code, path)
            assert answer.json()["error"]["code"] == code
    assert not Path(stop_path(workspace.root)).exists()
    assert _admin_events(workspace) == []

    done = request(f"{served.base}/api/stop", method="POST", headers={**token, **ours},
                   data={"reason": REASON})  # fmt: skip
    assert done.status == 200 and done.json()["stop"]["reason"] == REASON
    assert Path(stop_path(workspace.root)).is_file()
