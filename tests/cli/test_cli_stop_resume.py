"""`keel stop`, `keel resume` and `keel status` that cannot be misread (issue 11).

- A stop outside a workspace is an error naming the workspaces below; it sets nothing there,
  and the agent's workspace keeps deciding as before.
- `keel stop --all` reaches every workspace `keel init` registered, from anywhere.
- A session the monitor stopped is shown by `keel status`, cleared (and journaled) by
  `keel resume --session`, after which its calls are decided again.

Checked by effect: the hook's own answer to a call in the workspace.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _support import hook, keel

MONITOR_TOML = """
[policy]
preset = "developer"
[sandbox]
contain = "off"
[monitor]
repeat_consecutive = 2
repeat_hint = 2
cooldown_steps = 0
"""


def decide(root: Path, command: str, session: str = "s-1", n: int = 0) -> str:
    """keel's answer to Claude Code's pre-tool hook for ``command``: allow, deny or ask."""
    payload = {
        "session_id": session,
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": f"t{n}",
    }
    out = hook("PreToolUse", payload, workspace=root, via="keel")
    assert out.returncode in (0, 2), out.stderr
    if out.returncode == 2:
        return "deny"
    answer = json.loads(out.stdout) if out.stdout.strip() else {}
    return answer.get("hookSpecificOutput", {}).get("permissionDecision", "allow")


def ran(root: Path, command: str, session: str = "s-1", n: int = 0) -> None:
    payload = {
        "session_id": session,
        "cwd": str(root),
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": False},
        "tool_use_id": f"t{n}",
    }
    hook("PostToolUse", payload, workspace=root, via="keel")


@pytest.fixture
def parent(workdir: Path) -> Path:
    """A directory that is no workspace, holding two workspaces keel was initialised in."""
    for name in ("app", "lib"):
        (workdir / name).mkdir()
        init = keel("init", "--agent", "claude", cwd=workdir / name)
        assert init.returncode == 0, init.stderr
    return workdir


def test_stop_outside_a_workspace_is_an_error_naming_the_workspaces(parent: Path) -> None:
    out = keel("stop", cwd=parent)
    assert out.returncode == 2
    assert "is not a keel workspace" in out.stderr and "app/, lib/" in out.stderr
    assert "[usage.no_workspace]" in out.stderr
    assert not (parent / ".keel").exists()
    assert decide(parent / "app", "ls") == "allow"


def test_stop_all_stops_every_registered_workspace_from_anywhere(
    parent: Path, tmp_path: Path
) -> None:
    out = keel("stop", "--all", "--reason", "incident 7", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for name in ("app", "lib"):
        assert f"emergency stop SET in {parent / name}" in out.stdout
        assert decide(parent / name, "ls") == "deny"
        assert "incident 7" in keel("status", cwd=parent / name).stdout
    back = keel("resume", "--all", cwd=tmp_path)
    assert back.returncode == 0 and back.stdout.count("emergency stop cleared") == 2
    assert decide(parent / "app", "ls") == "allow"


def test_stop_all_without_a_registered_workspace_is_an_error(tmp_path: Path) -> None:
    out = keel("stop", "--all", cwd=tmp_path)
    assert out.returncode == 2 and "no workspace is registered" in out.stderr


def test_a_monitor_stopped_session_is_shown_and_cleared_by_resume_session(
    workdir: Path,
) -> None:
    (workdir / "keel.toml").write_text(MONITOR_TOML)
    for n in range(5):
        decide(workdir, "ls", n=n)
        ran(workdir, "ls", n=n)
    assert decide(workdir, "ls -la", n=9) == "deny"  # the session is stopped: a new call too
    status = keel("status", cwd=workdir)
    assert "stop       not set" not in status.stdout  # what it said while every call was denied
    assert "STOP       1 session stopped by the monitor" in status.stdout
    assert "SESSION    s-1 stopped: keel has stopped this session" in status.stdout
    assert "keel resume --session s-1" in status.stdout
    data = json.loads(keel("status", "--json", cwd=workdir).stdout)
    assert [s["session"] for s in data["monitor_stopped"]] == ["s-1"]

    plain = keel("resume", cwd=workdir)
    assert "emergency stop was not set" in plain.stdout
    assert "session s-1 is stopped by the monitor" in plain.stdout

    out = keel("resume", "--session", "s-", cwd=workdir)  # a unique prefix
    assert out.returncode == 0, out.stderr
    assert "cleared the monitor's hold on session s-1" in out.stdout
    assert decide(workdir, "pwd", n=10) == "allow"
    assert "SESSION" not in keel("status", cwd=workdir).stdout
    show = keel("show", "s-1", cwd=workdir)
    assert "cleared the monitor's hold" in show.stdout, show.stdout
    again = keel("resume", "--session", "s-1", cwd=workdir)
    assert "is not stopped or held by the monitor" in again.stdout
    unknown = keel("resume", "--session", "nope", cwd=workdir)
    assert unknown.returncode == 1 and "no session matches" in unknown.stderr
