"""keel wrap, by effect: hooks run inside the sandbox, their decisions are made outside it."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from exec_helpers import KEEL, SECRET, Box

from keel.hook.install import default_keel_command, hook_command
from keel.journal import open_journal

pytestmark = pytest.mark.usefixtures("bwrap_box")


def _hook(event: str, payload: dict[str, object], env: str = "") -> str:
    """A shell line that feeds ``payload`` to keel's registered hook command, as a client does."""
    command = hook_command(default_keel_command(), "claude", event)
    data = shlex.quote(json.dumps(payload))
    return f"printf '%s' {data} | {env} {command}; echo rc=$?"


def _bash(box: Box, command: str, session: str = "wrap-s1") -> dict[str, object]:
    return {
        "session_id": session,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": f"toolu_{abs(hash(command)) % 10**8}",
        "cwd": str(box.ws),
    }


def _wrap_sh(box: Box, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            KEEL,
            "wrap",
            "--workspace",
            str(box.ws),
            "--client",
            "claude",
            "--",
            "/bin/sh",
            "-c",
            script,
        ],
        cwd=box.ws,
        env=box.env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _journal(root: Path) -> list[tuple[str, str]]:
    with open_journal(root) as journal:
        return [(e.kind, json.dumps(e.to_dict(), default=str)) for e in journal.events()]


@pytest.fixture
def ws(bwrap_box: Box) -> Box:
    bwrap_box.config('[policy]\npreset = "developer"\n')
    return bwrap_box


def test_a_hook_inside_is_decided_outside_and_journaled_there(ws: Box) -> None:
    allowed = _hook("PreToolUse", _bash(ws, "ls"))
    denied = _hook("PreToolUse", _bash(ws, "cat ~/.ssh/id_rsa"))
    done = _wrap_sh(ws, f"{allowed}; echo ---; {denied}; ls -a .keel")
    first, second = done.stdout.split("---")
    assert "rc=0" in first and "keel exec" not in first  # contained already: never rewritten
    assert "rc=2" in second or '"deny"' in second, done.stdout + done.stderr
    assert "secret" in second and SECRET not in done.stdout
    assert "journal.db" not in done.stdout
    events = _journal(ws.ws)
    calls = [p for k, p in events if k == "tool.call"]
    assert any('"ls"' in p for p in calls) and any("id_rsa" in p for p in calls), events
    assert any(k == "decision" and "deny" in p for k, p in events)


def test_a_process_inside_cannot_point_keel_at_another_state_directory(ws: Box) -> None:
    evil = ws.ws / "evil-state"
    line = _hook("PreToolUse", _bash(ws, "ls"), env=f"KEEL_STATE_DIR={evil} XDG_STATE_HOME={evil}")
    done = _wrap_sh(ws, line)
    assert "rc=0" in done.stdout, done.stdout + done.stderr
    assert not evil.exists()
    assert any(k == "decision" for k, _ in _journal(ws.ws))


def test_a_hook_that_cannot_reach_keel_outside_blocks(ws: Box) -> None:
    line = _hook("PreToolUse", _bash(ws, "ls"))
    kill = "kill -9 $(cut -d' ' -f1 .keel/hookd.pid); sleep 0.2"
    done = _wrap_sh(ws, f"{line}; echo ---; {kill}; {line}")
    first, second = done.stdout.split("---")
    assert "rc=0" in first, done.stdout + done.stderr
    assert "rc=2" in second  # the relay is gone and .keel/ is read-only: fail closed


def test_a_process_inside_cannot_take_over_the_hook_socket(ws: Box) -> None:
    bind = "import socket; socket.socket(socket.AF_UNIX).bind('.keel/x.sock')"
    script = (
        "rm -f .keel/hookd.sock; echo 1 1 > .keel/hookd.pid; "
        f"{sys.executable} -c {shlex.quote(bind)}; ls .keel"
    )
    done = _wrap_sh(ws, script)
    assert done.stdout.split() == ["hookd.pid", "hookd.sock"], done.stderr
    assert "Read-only file system" in done.stderr
