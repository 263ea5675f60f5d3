"""keel's hook dialects inside the real clients, with a scripted guard (fakes/stub_hook.py).

These pin down the adapter layer on its own: that each client really blocks on keel's deny,
hands keel's reasons, guidance and stop feedback to the model, re-injects pinned context,
and blocks when keel fails inside. The full guard is exercised in test_clients_real.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import Turn, make_base, new_project, run_client
from test_clients_real import FILES, shell

pytestmark = [pytest.mark.clients, pytest.mark.slow]

AGENTS = ["claude", "codex", "gemini"]
STUB = [sys.executable, str(Path(__file__).resolve().parent / "fakes" / "stub_hook.py")]


@pytest.fixture
def project() -> Iterator[Path]:
    base = make_base()
    try:
        yield new_project(base, "", FILES)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _stub_log(project: Path) -> list[dict]:
    path = project / "stub-calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("agent", AGENTS)
def test_deny_blocks_and_reaches_the_model(agent: str, project: Path) -> None:
    run = run_client(agent, project, [shell(agent, "rm -rf data")], hook_cmd=STUB)
    assert (project / "data" / "keep.txt").exists()
    assert "keel denied this" in run.told_model and "risk.rm_recursive" in run.told_model, (
        run.proc.stderr
    )
    decided = [e for e in _stub_log(project) if e["what"] == "decide"]
    assert (
        decided
        and decided[0]["call"]["kind"] == "exec"
        and decided[0]["call"]["command"] == "rm -rf data"
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_ask_never_runs_the_command(agent: str, project: Path) -> None:
    run = run_client(agent, project, [shell(agent, "git push > pushed.txt")], hook_cmd=STUB)
    assert not (project / "pushed.txt").exists(), run.diagnose()
    if agent != "claude":
        assert "needs a person" in run.told_model


@pytest.mark.parametrize("agent", AGENTS)
def test_allow_runs_and_the_result_is_observed(agent: str, project: Path) -> None:
    run = run_client(agent, project, [shell(agent, "touch made.txt")], hook_cmd=STUB)
    assert (project / "made.txt").exists(), run.diagnose()
    whats = [e["what"] for e in _stub_log(project)]
    assert "decide" in whats and "observe" in whats


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize(
    ("marker", "expect"), [("HINTME", "HINT-GUIDANCE"), ("REPLANME", "REPLAN-GUIDANCE")]
)
def test_guidance_after_a_tool_reaches_the_model(
    agent: str, project: Path, marker: str, expect: str
) -> None:
    run = run_client(agent, project, [shell(agent, f"echo {marker}")], hook_cmd=STUB)
    assert expect in run.told_model, run.diagnose()


@pytest.mark.parametrize("agent", AGENTS)
def test_stop_is_blocked_until_the_gate_then_allowed(agent: str, project: Path) -> None:
    (project / ".gate_required").write_text("")
    turns = [
        Turn(text="Finished."),
        shell(agent, "touch .gate_ok"),
        Turn(text="Finished, gate ran."),
    ]
    run = run_client(agent, project, turns, hook_cmd=STUB)
    told = [json.dumps(r) for r in run.model.requests]
    assert len(told) == 3, run.diagnose()
    assert "GATE-REASON" in told[1] and "GATE-REASON" not in told[0]
    assert (project / ".gate_ok").exists()


@pytest.mark.parametrize("agent", AGENTS)
def test_pinned_context_is_injected(agent: str, project: Path) -> None:
    run = run_client(agent, project, [], hook_cmd=STUB)
    assert run.model.requests, run.diagnose()
    assert "PINNED-CONSTRAINT" in json.dumps(run.model.requests[0])


@pytest.mark.parametrize("agent", AGENTS)
def test_a_fault_inside_keel_blocks_the_call(agent: str, project: Path) -> None:
    run = run_client(agent, project, [shell(agent, "echo FAULTME > fault.txt")], hook_cmd=STUB)
    assert not (project / "fault.txt").exists(), run.diagnose()
    assert "keel could not check" in run.told_model and "injected fault" in run.told_model
