"""The real Claude Code, Codex and Gemini CLIs, driven offline by a fake model, guarded by keel.

Each test installs keel's hooks with ``install_hooks`` into a fresh project, runs the real
client once with its own HOME against a scripted model on 127.0.0.1, and checks what happened
on disk and what the model was told. Skipped when a client is not installed (see
scripts/install-clients.sh), failing instead when KEEL_REQUIRE_ALL=1.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import Turn, make_base, new_project, run_client

from _support import keel

pytestmark = [pytest.mark.clients, pytest.mark.slow]

AGENTS = ["claude", "codex", "gemini"]
KEEL_TOML = """
[policy]
preset = "developer"
protected = ["secrets/**"]

[monitor]
repeat_consecutive = 3
"""
GATED_TOML = (
    KEEL_TOML
    + """
[gates]
required = ["ls app.py"]
max_blocks = 3
"""
)
FILES = {"data/keep.txt": "keep me\n", "secrets/token.txt": "s3cret\n", "notes.txt": "original\n"}


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def shell(agent: str, command: str) -> Turn:
    match agent:
        case "claude":
            return Turn(tool="Bash", input={"command": command, "description": "run it"})
        case "codex":
            return Turn(tool="exec_command", input={"cmd": command})
        case _:
            return Turn(
                tool="run_shell_command", input={"command": command, "description": "run it"}
            )


def write(agent: str, project: Path, rel: str, content: str) -> Turn:
    match agent:
        case "claude":
            return Turn(tool="Write", input={"file_path": str(project / rel), "content": content})
        case "codex":
            body = "".join(f"+{line}\n" for line in content.splitlines())
            return Turn(
                tool="apply_patch",
                custom=True,
                input={"input": f"*** Begin Patch\n*** Add File: {rel}\n{body}*** End Patch\n"},
            )
        case _:
            return Turn(
                tool="write_file", input={"file_path": str(project / rel), "content": content}
            )


def edit(agent: str, project: Path, rel: str, old: str, new: str) -> Turn:
    match agent:
        case "claude":
            return Turn(
                tool="Edit",
                input={"file_path": str(project / rel), "old_string": old, "new_string": new},
            )
        case "codex":
            patch = f"*** Begin Patch\n*** Update File: {rel}\n@@\n-{old}\n+{new}\n*** End Patch\n"
            return Turn(tool="apply_patch", custom=True, input={"input": patch})
        case _:
            return Turn(
                tool="replace",
                input={
                    "file_path": str(project / rel),
                    "old_string": old,
                    "new_string": new,
                    "instruction": "change it",
                },
            )


def _codex_patch_args(agent: str) -> list[str]:
    # Codex offers apply_patch (a freeform tool) only to models it knows.
    return ["-m", "gpt-5.5"] if agent == "codex" else []


def _journal_sessions(project: Path) -> list[str]:
    """The agents' sessions (keel exec's own records, ``keel-exec``, left out)."""
    from keel.core.events import is_own_session
    from keel.journal import open_journal

    with open_journal(project) as journal:
        return [s.session_id for s in journal.sessions() if not is_own_session(s.session_id)]


@pytest.mark.parametrize("agent", AGENTS)
def test_dangerous_command_is_denied_and_the_model_gets_the_reason(agent: str, base: Path) -> None:
    project = new_project(base, KEEL_TOML, FILES)
    (project / "notes.txt").write_text("uncommitted work\n")
    run = run_client(agent, project, [shell(agent, "git reset --hard")])
    assert (project / "notes.txt").read_text() == "uncommitted work\n", run.diagnose()
    assert "keel denied this" in run.told_model, run.diagnose()
    assert "risk.git_reset_hard" in run.told_model
    assert len(run.model.requests) >= 2


@pytest.mark.parametrize("agent", AGENTS)
def test_protected_path_edit_is_denied(agent: str, base: Path) -> None:
    project = new_project(base, KEEL_TOML, FILES)
    turns = [edit(agent, project, "secrets/token.txt", "s3cret", "leaked")]
    run = run_client(agent, project, turns, extra_args=_codex_patch_args(agent))
    assert (project / "secrets" / "token.txt").read_text() == "s3cret\n"
    assert "keel denied this" in run.told_model, run.diagnose()


@pytest.mark.parametrize("agent", AGENTS)
def test_allowed_command_runs(agent: str, base: Path) -> None:
    project = new_project(base, KEEL_TOML, FILES)
    run = run_client(agent, project, [shell(agent, "touch made.txt")])
    assert (project / "made.txt").exists(), run.diagnose()
    assert "keel denied" not in run.told_model
    assert _journal_sessions(project), "the hook calls were journaled"


@pytest.mark.parametrize("agent", AGENTS)
def test_a_loop_of_identical_calls_is_stopped_with_guidance(agent: str, base: Path) -> None:
    project = new_project(base, KEEL_TOML, FILES)
    run = run_client(agent, project, [shell(agent, "ls data")] * 6)
    assert "[monitor." in run.told_model, run.diagnose()


@pytest.mark.parametrize("agent", AGENTS)
def test_finishing_is_blocked_until_the_gate_passes(agent: str, base: Path) -> None:
    project = new_project(base, GATED_TOML, FILES)
    turns = [
        write(agent, project, "app.py", "print('hi')\n"),
        Turn(text="Finished."),
        shell(agent, "ls app.py"),
        Turn(text="Finished, checked."),
    ]
    run = run_client(agent, project, turns, extra_args=_codex_patch_args(agent))
    assert (project / "app.py").exists(), run.diagnose()
    told = [json.dumps(r) for r in run.model.requests]
    blocked_at = [i for i, text in enumerate(told) if "do not finish yet" in text]
    assert blocked_at, run.diagnose()
    # after the block the model ran the gate and finished; no further block followed
    assert len(run.model.requests) == 4, [t[-300:] for t in told]


@pytest.mark.parametrize("agent", AGENTS)
def test_emergency_stop_denies_the_next_call(agent: str, base: Path) -> None:
    from keel.core.stop import set_stop

    project = new_project(base, KEEL_TOML, FILES)

    def stop_before_second_call(index: int) -> None:
        if index == 1:
            set_stop(project, "stopped by the test")

    turns = [shell(agent, "touch first.txt"), shell(agent, "touch second.txt")]
    run = run_client(agent, project, turns, before_turn=stop_before_second_call)
    assert (project / "first.txt").exists(), run.diagnose()
    assert not (project / "second.txt").exists()
    assert "emergency stop" in run.told_model


@pytest.mark.parametrize("agent", AGENTS)
def test_an_injected_fault_inside_keel_still_blocks(agent: str, base: Path) -> None:
    project = new_project(base, KEEL_TOML, FILES)

    def break_keel(index: int) -> None:
        if index == 0:
            (project / "keel.toml").write_text("[policy\nthis is not toml")

    run = run_client(agent, project, [shell(agent, "touch made.txt")], before_turn=break_keel)
    assert not (project / "made.txt").exists(), run.diagnose()
    assert "keel could not check" in run.told_model, run.diagnose()


@pytest.mark.parametrize("agent", AGENTS)
def test_rollback_restores_what_a_shell_command_changed(agent: str, base: Path) -> None:
    project = new_project(base, KEEL_TOML, FILES)
    run = run_client(agent, project, [shell(agent, "echo changed > notes.txt")])
    assert (project / "notes.txt").read_text() == "changed\n", run.diagnose()
    (session,) = _journal_sessions(project)
    proc = keel("rollback", "--session", session, "--workspace", str(project))
    assert proc.returncode == 0, proc.stderr
    assert (project / "notes.txt").read_text() == "original\n"


@pytest.mark.parametrize("agent", AGENTS)
def test_a_failing_gate_keeps_finishing_blocked(agent: str, base: Path) -> None:
    project = new_project(base, GATED_TOML.replace("ls app.py", "ls missing.txt"), FILES)
    turns = [
        write(agent, project, "app.py", "print('hi')\n"),
        Turn(text="Finished."),
        shell(agent, "ls missing.txt"),
        Turn(text="Finished, the gate ran."),
    ]
    run = run_client(agent, project, turns, extra_args=_codex_patch_args(agent))
    told = [json.dumps(r) for r in run.model.requests]
    after_gate = told[4:]  # the requests after the model ran the (failing) gate and finished
    assert after_gate and "do not finish yet" in after_gate[0], run.diagnose()
    assert "missing.txt" in after_gate[0]


@pytest.mark.parametrize("agent", AGENTS)
def test_keel_show_reads_like_the_run_with_decisions_guidance_and_checkpoints(
    agent: str, base: Path
) -> None:
    project = new_project(base, KEEL_TOML, FILES)
    turns = [
        shell(agent, "git reset --hard"),
        shell(agent, "touch made.txt"),
        *[shell(agent, "ls data")] * 4,
    ]
    run = run_client(agent, project, turns)
    (session,) = _journal_sessions(project)
    show = keel("show", session, "--workspace", str(project))
    assert show.returncode == 0, show.stderr
    timeline = show.stdout
    assert "DENY [risk.git_reset_hard]" in timeline, run.diagnose()
    assert "touch made.txt" in timeline and "ALLOW" in timeline
    assert "checkpoint" in timeline
    assert "guidance" in timeline and "monitor" in timeline.lower(), timeline
    verify = keel("verify", "--workspace", str(project))
    assert verify.returncode == 0, verify.stdout
