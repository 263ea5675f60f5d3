"""Issue 24 item 14: ``[scope]`` holds for contained commands too.

A shell command runs contained (``keel exec``) with the workspace writable, so a command the
policy cannot read (``python3 -c ...``) may change a file outside ``[scope]``. After it ran,
the PostToolUse hook finds the files it changed outside the scope: they are journaled (a
``scope.outside`` event naming the paths and the command), the monitor's scope detector tells
the agent in the hook's answer, and ``keel diff`` shows them. Nothing is reverted.

Each test makes the real call sequence of a client: PreToolUse for the Bash call through the
hook ``keel init`` registered, the ``keel exec`` line it answered with run by ``bash -c``,
then PostToolUse with that line and its result.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from guard_helpers import SESSION as GUARD_SESSION
from guard_helpers import events_of, open_guard

from _support import hook, hook_json, keel, make_workspace, skip_or_fail
from keel.core.calls import ToolCall, ToolResult
from keel.core.events import DataPayload

SESSION = "scope-contained"
TOML = '[policy]\npreset = "developer"\n\n[scope]\ninclude = ["src/**", "tests/**"]\n'


@pytest.fixture
def ws(workdir: Path) -> Path:
    """A guarded workspace (``keel init --agent claude``) whose scope is src/ and tests/."""
    from keel.sandbox.exec.contain import exec_backend

    backend, reason = exec_backend("auto")
    if backend is None:
        skip_or_fail(f"no sandbox: {reason}")
    files = {"README.md": "# the user's readme\n", "src/x.py": "x = 1\n"}
    root = make_workspace(workdir / "proj", keel_toml=TOML, files=files, commit=True)
    keel("init", "--agent", "claude", cwd=root, check=True)
    return root


def _run_as_client(root: Path, command: str, tool_use_id: str) -> dict[str, Any]:
    """PreToolUse, the rewritten line, PostToolUse: the PostToolUse answer (``{}`` if none)."""
    call = {"tool_name": "Bash", "tool_use_id": tool_use_id, "tool_input": {"command": command}}
    answer = hook_json(hook("PreToolUse", call, workspace=root, session=SESSION))
    spec = answer["hookSpecificOutput"]
    assert spec["permissionDecision"] == "allow", spec
    line = spec["updatedInput"]["command"]
    assert "exec" in line and line != command  # it runs contained
    ran = subprocess.run(
        ["bash", "-c", line], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )
    assert ran.returncode == 0, ran.stderr
    result = {
        **call,
        "tool_input": {"command": line},
        "tool_response": {"stdout": ran.stdout, "stderr": ran.stderr, "interrupted": False},
    }
    return hook_json(hook("PostToolUse", result, workspace=root, session=SESSION))


def _events(root: Path, kind: str) -> list[dict[str, Any]]:
    done = keel("log", "--session", SESSION, "--json", cwd=root, check=True)
    return [e["payload"] for e in json.loads(done.stdout)["events"] if e["kind"] == kind]


@pytest.mark.sandbox
def test_a_contained_write_outside_scope_is_journaled_told_and_shown_in_keel_diff(
    ws: Path,
) -> None:
    command = "python3 -c \"open('README.md','w').write('x')\""
    answer = _run_as_client(ws, command, "t-readme")
    assert (ws / "README.md").read_text() == "x"  # it ran, and keel did not revert it
    [event] = _events(ws, "scope.outside")
    assert event["data"]["paths"] == ["README.md"]
    assert event["data"]["command"] == command and event["data"]["tool_use_id"] == "t-readme"
    # Claude's PostToolUse answer: a block's reason goes back to the model (the tool ran)
    assert answer["decision"] == "block"
    assert "README.md" in answer["reason"] and "outside the task's scope" in answer["reason"]
    scope_findings = [d for d in _events(ws, "diagnostic") if d["detector"] == "scope"]
    assert [d["evidence"]["paths"] for d in scope_findings] == [["README.md"]]
    diff = keel("diff", "--session", SESSION, "--json", cwd=ws, check=True)
    assert json.loads(diff.stdout)["outside_scope"] == ["README.md"]
    shown = keel("diff", "--session", SESSION, "--stat", cwd=ws, check=True)
    assert "outside [scope]: README.md" in shown.stderr


@pytest.mark.sandbox
def test_a_contained_write_inside_scope_is_not_reported(ws: Path) -> None:
    command = "python3 -c \"open('src/x.py','w').write('x = 2')\""
    answer = _run_as_client(ws, command, "t-src")
    assert (ws / "src" / "x.py").read_text() == "x = 2"
    assert _events(ws, "scope.outside") == []
    assert "outside the task's scope" not in json.dumps(answer)
    assert [d for d in _events(ws, "diagnostic") if d["detector"] == "scope"] == []
    diff = keel("diff", "--session", SESSION, "--json", cwd=ws, check=True)
    changed = [c["path"] for c in json.loads(diff.stdout)["changes"]]
    assert changed == ["src/x.py"] and json.loads(diff.stdout)["outside_scope"] == []


def test_the_event_is_journaled_with_the_monitor_off(workdir: Path) -> None:
    """The guard's own record: it does not depend on the monitor (``[monitor] enabled``)."""
    root = make_workspace(workdir / "proj", keel_toml=TOML, files={"README.md": "a\n"})
    guard = open_guard(root, checkpoints=True, monitor=False)
    try:
        call = ToolCall("Bash", "exec", command="python3 w.py", tool_use_id="b1", cwd=str(root))
        assert guard.decide(call).allowed
        (root / "README.md").write_text("x")  # what the command did as it ran
        (root / "src").mkdir()
        (root / "src" / "x.py").write_text("x = 2\n")
        assert guard.observe(ToolResult("Bash", "exec", True, tool_use_id="b1", call=call)) is None
    finally:
        guard.close()
    [event] = [e.payload for e in events_of(root, GUARD_SESSION) if e.kind == "scope.outside"]
    assert isinstance(event, DataPayload)
    assert event.data["paths"] == ["README.md"] and event.data["command"] == "python3 w.py"


def test_monitor_scan_reads_the_event_back_as_the_scope_detectors_finding(workdir: Path) -> None:
    """Recorded with the monitor off, the journal still tells a scan what went outside."""
    root = make_workspace(workdir / "proj", keel_toml=TOML, files={"README.md": "a\n"})
    guard = open_guard(root, checkpoints=True, monitor=False)
    try:
        call = ToolCall("Bash", "exec", command="python3 w.py", tool_use_id="b1", cwd=str(root))
        assert guard.decide(call).allowed
        (root / "README.md").write_text("x")  # what the command did as it ran
        assert guard.observe(ToolResult("Bash", "exec", True, tool_use_id="b1", call=call)) is None
    finally:
        guard.close()
    journal = root / ".keel" / "journal.db"
    scan = keel("monitor", "scan", str(journal), "--session", GUARD_SESSION, "--json", cwd=root)
    assert scan.returncode == 0, scan.stderr
    [run] = json.loads(scan.stdout)["runs"]
    [finding] = [d for d in run["diagnostics"] if d["detector"] == "scope"]
    assert finding["evidence"] == {"paths": ["README.md"], "tool_use_id": "b1"}
    assert finding["level"] == "correct" and finding["step"] == 1
    gate = keel(
        "monitor",
        "scan",
        str(journal),
        "--session",
        GUARD_SESSION,
        "--fail-on",
        "correct",
        cwd=root,
    )
    assert gate.returncode == 3, gate.stdout
