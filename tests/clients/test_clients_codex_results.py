"""The real Codex CLI: keel learns each shell command's exit code from Codex's rollout.

Codex's PostToolUse hook carries a command's output but no exit code; keel reads the call's
record from the rollout named by ``transcript_path``. These runs drive the real client offline
(see client_harness) and check what keel journaled and told the model. Skipped when Codex is
not installed, failing instead when KEEL_REQUIRE_ALL=1.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import Turn, make_base, new_project, run_client

from _support import keel
from keel.core.events import DiagnosticPayload, Event, ToolCallPayload, ToolResultPayload

pytestmark = [pytest.mark.clients, pytest.mark.slow]

KEEL_TOML = """
[policy]
preset = "developer"

[monitor]
failure_repeats = 3
"""


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def shell(command: str) -> Turn:
    return Turn(tool="exec_command", input={"cmd": command})


def journal_events(project: Path) -> list[Event]:
    from keel.journal import open_journal

    with open_journal(project) as journal:
        return list(journal.events())


def results_by_command(events: list[Event]) -> list[tuple[str, ToolResultPayload]]:
    commands = {
        e.payload.tool_use_id: e.payload.command
        for e in events
        if isinstance(e.payload, ToolCallPayload)
    }
    return [
        (str(commands.get(e.payload.tool_use_id, "")), e.payload)
        for e in events
        if e.kind == "tool.result" and isinstance(e.payload, ToolResultPayload)
    ]


def test_a_failing_codex_command_is_journaled_with_its_exit_code(base: Path) -> None:
    project = new_project(base, KEEL_TOML)
    turns = [shell("ls does-not-exist"), shell("false"), shell("echo fine"), shell("true")]
    run = run_client("codex", project, turns)
    results = dict(results_by_command(journal_events(project)))
    assert set(results) == {"ls does-not-exist", "false", "echo fine", "true"}, run.diagnose()
    failed = results["ls does-not-exist"]
    assert (failed.ok, failed.exit_code) == (False, 2), run.diagnose()
    assert "No such file or directory" in failed.output
    silent = results["false"]  # prints nothing: Codex's tool_response is ""
    assert (silent.ok, silent.exit_code, silent.output) == (False, 1, "")
    assert (results["echo fine"].ok, results["echo fine"].exit_code) == (True, 0)
    assert (results["true"].ok, results["true"].exit_code) == (True, 0)


def test_a_repeatedly_failing_codex_command_gets_the_failure_guidance(base: Path) -> None:
    project = new_project(base, KEEL_TOML)
    run = run_client("codex", project, [shell("ls does-not-exist")] * 4)
    events = journal_events(project)
    detectors = [
        e.payload.detector
        for e in events
        if e.kind == "diagnostic" and isinstance(e.payload, DiagnosticPayload)
    ]
    assert "failure" in detectors, run.diagnose()
    assert "failed 3 times in a row" in run.told_model, run.diagnose()
    assert "No such file or directory" in run.told_model
    (session,) = {e.session_id for e in events if e.kind == "tool.result"}
    show = keel("show", session, "--workspace", str(project))
    assert show.returncode == 0, show.stderr
    assert "failure: `ls does-not-exist` failed 3 times in a row" in show.stdout, show.stdout
