"""Issue 24 item 11, through the real Claude Code: both registration forms are the guard.

- ``keel init --agent claude`` (per-user): Claude Code runs keel's hooks from
  ``.claude/settings.local.json``; a call keel denies does not run.
- ``keel init --agent claude --shared``: Claude Code runs the committed
  ``.claude/settings.json``, which finds keel on ``PATH``. With keel there, the same call is
  denied by keel; without it (a teammate who has not installed keel), even a harmless call is
  blocked, and the model is told how to install keel.

Checked by effect: the file the call would write is not there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import Turn, make_base, new_project, run_client

from _support import KEEL, keel

pytestmark = [pytest.mark.clients, pytest.mark.slow]

KEEL_TOML = '[policy]\npreset = "developer"\n'
DENIED = "touch made.txt; git push --force origin main"
"""A call keel's developer preset denies (the force push); run, it would write made.txt."""


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _bash(command: str) -> Turn:
    return Turn(tool="Bash", input={"command": command, "description": "run it"})


def _path(with_keel: bool) -> str:
    """The caller's ``PATH`` without any directory holding a ``keel``; with ours first."""
    kept = [
        d for d in os.environ.get("PATH", "").split(":") if d and not os.path.exists(f"{d}/keel")
    ]
    return ":".join([str(Path(KEEL).parent)] * with_keel + kept)


def test_claude_code_runs_the_per_user_registration(base: Path) -> None:
    project = new_project(base, KEEL_TOML)
    init = keel("init", "--agent", "claude", cwd=project)
    assert init.returncode == 0, init.stderr
    assert (project / ".claude" / "settings.local.json").is_file()
    assert not (project / ".claude" / "settings.json").exists()
    run = run_client("claude", project, [_bash(DENIED)], install=False)
    assert not (project / "made.txt").exists(), run.diagnose()
    assert "keel denied" in run.told_model, run.diagnose()


def test_claude_code_runs_the_shared_registration_with_and_without_keel(base: Path) -> None:
    project = new_project(base, KEEL_TOML)
    init = keel("init", "--agent", "claude", "--shared", cwd=project, env={"PATH": _path(True)})
    assert init.returncode == 0, init.stderr
    assert not (project / ".claude" / "settings.local.json").exists()

    run = run_client("claude", project, [_bash(DENIED)], install=False, env={"PATH": _path(True)})
    assert not (project / "made.txt").exists(), run.diagnose()
    assert "keel denied" in run.told_model, run.diagnose()

    harmless = [_bash("touch made.txt")]
    run = run_client("claude", project, harmless, install=False, env={"PATH": _path(False)})
    assert not (project / "made.txt").exists(), run.diagnose()
    assert "pipx install keel-guard" in run.told_model, run.diagnose()
