"""Calls that never got an ``after`` checkpoint (rejected or interrupted) across sessions."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from _support import KEEL, keel
from keel.cli.workspace import register
from keel.core.errors import WorkspaceError
from keel.hook.runner import HookOptions, run_hook
from keel.init import init_workspace
from keel.workspace import Checkpoints
from keel.workspace.checkpoints import Checkpoint, _agent_intervals

Invoke = Callable[..., Any]


def seed(root: Path) -> None:
    (root / "shared.txt").write_text("shared\n")
    (root / "notes.txt").write_text("notes\n")


@pytest.fixture
def cli(workdir: Path) -> Invoke:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = {"workspace": workdir}

    register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def _cp(i: int, kind: str, session: str | None, call: str | None = None) -> Checkpoint:
    return Checkpoint(
        id=f"{i:040x}", tree=f"{i:040x}", kind=kind, ts=float(i),  # type: ignore[arg-type]
        session_id=session, tool_use_id=call,
    )  # fmt: skip


def _hook(root: Path, event: str, session: str, call: str, path: Path, text: str) -> None:
    """One Claude Code hook call of a Write, through keel's real guard and checkpoints."""
    payload: dict[str, Any] = {
        "session_id": session,
        "hook_event_name": event,
        "cwd": str(root),
        "tool_name": "Write",
        "tool_input": {"file_path": str(path), "content": text},
        "tool_use_id": call,
    }
    if event == "PostToolUse":
        payload["tool_response"] = {"type": "create", "filePath": str(path), "content": text}
    reply = run_hook(
        "claude", event, json.dumps(payload), root, options=HookOptions(time.monotonic() + 60)
    )
    assert reply.exit_code == 0, reply.stderr
    assert "deny" not in reply.stdout, reply.stdout


def test_reported_sequence_through_the_hooks_and_the_keel_command(workdir: Path) -> None:
    """The issue's sequence as it happened: real hook calls, then `keel rollback --last`.

    C's Write is approved by keel, then the user rejects the prompt: no PostToolUse. D's
    Write is approved, runs and gets its PostToolUse. D's rollback must undo D's write and
    nothing else; before the fix it refused, naming D's own file.
    """
    init_workspace(workdir, "developer")
    seed(workdir)
    _hook(workdir, "PreToolUse", "C", "c-1", workdir / "notes.txt", "C never wrote this\n")
    _hook(workdir, "PreToolUse", "D", "d-1", workdir / "shared.txt", "D's edit\n")
    (workdir / "shared.txt").write_text("D's edit\n")  # what Claude Code's Write does
    _hook(workdir, "PostToolUse", "D", "d-1", workdir / "shared.txt", "D's edit\n")
    steps = [(c.kind, c.session_id, c.tool_use_id) for c in Checkpoints(workdir).history()]
    assert steps == [("before", "C", "c-1"), ("before", "D", "d-1"), ("after", "D", "d-1")]
    (workdir / "mine.txt").write_text("the user's own file\n")
    proc = _rollback_last(workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["target"]["session_id"] == "D"
    assert (data["restored"], data["kept"]) == (["shared.txt"], ["mine.txt"])
    assert (workdir / "shared.txt").read_text() == "shared\n"
    assert (workdir / "notes.txt").read_text() == "notes\n"
    assert (workdir / "mine.txt").read_text() == "the user's own file\n"


def _rollback_last(root: Path) -> subprocess.CompletedProcess[str]:
    return keel("rollback", "--last", "--json", "-w", str(root))


def test_while_a_contained_command_runs_an_open_call_may_still_be_running(workdir: Path) -> None:
    """A running `keel exec` may belong to C's call with no PostToolUse: D's rollback refuses
    on the file both could have written; once the command has ended, it goes through."""
    init_workspace(workdir, "developer")
    seed(workdir)
    _hook(workdir, "PreToolUse", "C", "c-1", workdir / "notes.txt", "C\n")
    _hook(workdir, "PreToolUse", "D", "d-1", workdir / "shared.txt", "D's edit\n")
    (workdir / "shared.txt").write_text("D's edit\n")
    _hook(workdir, "PostToolUse", "D", "d-1", workdir / "shared.txt", "D's edit\n")
    command = subprocess.Popen(
        [KEEL, "exec", "--workspace", str(workdir), "--", "sleep", "300"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        records = workdir / ".keel" / "exec"
        deadline = time.monotonic() + 60
        while not list(records.glob("*.json")) and command.poll() is None:
            assert time.monotonic() < deadline, "keel exec never registered"
            time.sleep(0.05)
        assert command.poll() is None, "keel exec ended early"
        refused = _rollback_last(workdir)
        assert refused.returncode != 0
        error = json.loads(refused.stderr)["error"]  # --json errors go to stderr
        assert (error["code"], error["files"]) == ("workspace.user_changes", ["shared.txt"])
        assert (workdir / "shared.txt").read_text() == "D's edit\n"
    finally:
        command.terminate()
        command.wait()
    done = _rollback_last(workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workdir / "shared.txt").read_text() == "shared\n"


def test_reported_sequence_rollback_last_restores_only_ds_files(workdir: Path, cli: Invoke) -> None:
    """C: before, no after. D: before, edit, after. D's `rollback --last` does not refuse."""
    seed(workdir)
    cps = Checkpoints(workdir)
    cps.create(session_id="C", tool_use_id="c-1")  # the user rejected C's prompt
    cps.create(session_id="D", tool_use_id="d-1")
    (workdir / "shared.txt").write_text("D's edit\n")
    (workdir / "d-new.txt").write_text("D made me\n")
    cps.after_call("D", "d-1")
    result = cli("rollback", "--last", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["restored"] == ["shared.txt"]
    assert data["deleted"] == ["d-new.txt"]
    assert data["kept"] == []
    assert (workdir / "shared.txt").read_text() == "shared\n"
    assert not (workdir / "d-new.txt").exists()
    assert (workdir / "notes.txt").read_text() == "notes\n"


def test_open_call_then_session_rollback(workdir: Path) -> None:
    """The same sequence through the library, by session, with a user edit kept."""
    seed(workdir)
    cps = Checkpoints(workdir)
    cps.create(session_id="C", tool_use_id="c-1")
    cps.create(session_id="D", tool_use_id="d-1")
    (workdir / "shared.txt").write_text("D's edit\n")
    cps.after_call("D", "d-1")
    (workdir / "notes.txt").write_text("the user's edit\n")
    result = cps.rollback(cps.resolve(session_id="D"))
    assert result.restored == ("shared.txt",)
    assert result.kept == ("notes.txt",)
    assert (workdir / "notes.txt").read_text() == "the user's edit\n"


def test_open_call_edits_before_another_session_are_not_ds(workdir: Path) -> None:
    """What C's open call changed before D's checkpoint stays C's: D does not undo it."""
    seed(workdir)
    cps = Checkpoints(workdir)
    cps.create(session_id="C", tool_use_id="c-1")
    (workdir / "notes.txt").write_text("C wrote this, then was interrupted\n")
    cps.create(session_id="D", tool_use_id="d-1")
    (workdir / "shared.txt").write_text("D's edit\n")
    cps.after_call("D", "d-1")
    result = cps.rollback(cps.resolve(last=True))
    assert result.restored == ("shared.txt",)
    assert (workdir / "notes.txt").read_text() == "C wrote this, then was interrupted\n"


def test_overlapping_call_with_an_after_still_refuses(workdir: Path) -> None:
    """A call of C that did get its ``after`` after D's call overlapped it: refuse, as before."""
    seed(workdir)
    cps = Checkpoints(workdir)
    cps.create(session_id="C", tool_use_id="c-1")
    cps.create(session_id="D", tool_use_id="d-1")
    (workdir / "shared.txt").write_text("C or D?\n")
    cps.after_call("D", "d-1")
    cps.after_call("C", "c-1")
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(cps.resolve(session_id="D"))
    assert info.value.code == "workspace.user_changes"
    assert info.value.context["files"] == ["shared.txt"]


def test_open_call_of_the_same_session_ends_at_its_next_checkpoint(workdir: Path) -> None:
    """An interrupted call of the session being rolled back: its edits are still the agent's."""
    seed(workdir)
    cps = Checkpoints(workdir)
    cps.create(session_id="D", tool_use_id="d-1")
    (workdir / "shared.txt").write_text("interrupted\n")
    cps.create(session_id="D", tool_use_id="d-2")
    (workdir / "notes.txt").write_text("D again\n")
    cps.after_call("D", "d-2")
    result = cps.rollback(cps.resolve(session_id="D"))
    assert result.restored == ("notes.txt", "shared.txt")


def test_intervals_of_an_open_call() -> None:
    """The attribution table itself: C's open call ends at D's ``before``."""
    chain = [
        _cp(0, "before", "C", "c-1"),
        _cp(1, "before", "D", "d-1"),
        _cp(2, "after", "D", "d-1"),
    ]
    # interval k is between chain[k-1] and chain[k]; k = 3 is now
    assert _agent_intervals(chain, "D") == [
        (False, True), (False, True), (True, False), (False, True),
    ]  # fmt: skip
    # without a session every session is the agent; C's open call is not open forever
    assert _agent_intervals(chain, None) == [
        (False, True), (True, False), (True, False), (False, True),
    ]  # fmt: skip
    # while a contained command runs, C's call may still be running: open until now
    assert _agent_intervals(chain, "D", running=True) == [
        (False, True), (False, True), (True, True), (False, True),
    ]  # fmt: skip
