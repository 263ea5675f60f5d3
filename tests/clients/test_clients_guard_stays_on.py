"""A guard that cannot be silently off, through the real clients (issue 11).

- Codex runs no hook of a project it does not trust. ``keel doctor`` says so (exit 1) until
  ``keel init --agent codex --trust`` records the trust; after that, the write outside the
  workspace that went through before is blocked.
- After ``keel init --agent X``, keel's interpreter goes away (a moved or deleted venv). The
  registered command then blocks the shell call (exit 2, the message reaching the model)
  instead of letting Claude Code, Codex or Gemini CLI run it, and ``keel doctor`` names the
  missing interpreter. Without the fallback, Claude Code and Codex take the shell's 127 for
  "go on" and run the call (measured with the pinned clients).

Both are checked by effect: the marker file the call would write is not there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import Turn, codex_home, make_base, new_project, run_client

from _support import keel
from keel.hook.install import SETTINGS, USER_SETTINGS

pytestmark = [pytest.mark.clients, pytest.mark.slow]

KEEL_TOML = '[policy]\npreset = "developer"\n'


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_codex_doctor_fails_until_trust_then_the_outside_write_is_blocked(base: Path) -> None:
    project = new_project(base, KEEL_TOML)
    precious = base / "precious"
    precious.mkdir()
    marker = precious / "data.txt"
    write_outside = _shell("codex", f"echo pwned > {marker}")
    env = {"CODEX_HOME": str(codex_home(project))}

    init = keel("init", "--agent", "codex", cwd=project, env=env)
    assert init.returncode == 0, init.stderr
    assert "Codex does not trust" in init.stderr and "--trust" in init.stderr
    doctor = keel("doctor", "--agent", "codex", cwd=project, env=env, hookd=True)
    assert doctor.returncode == 1, doctor.stdout
    assert "NOT guarded" in doctor.stdout and "does not trust" in doctor.stdout

    # what doctor reports is real: untrusted, Codex never runs keel's hooks
    run = run_client("codex", project, [write_outside], install=False, codex_trusted=False)
    assert marker.read_text() == "pwned\n", run.diagnose()
    marker.unlink()

    trust = keel("init", "--agent", "codex", "--trust", cwd=project, env=env)
    assert trust.returncode == 0, trust.stderr
    assert "recorded trust" in trust.stdout
    config = (codex_home(project) / "config.toml").read_text()
    assert 'sandbox_mode = "danger-full-access"' in config  # the user's own setting stays
    doctor = keel("doctor", "--agent", "codex", cwd=project, env=env, hookd=True)
    assert doctor.returncode == 0, doctor.stdout

    run = run_client("codex", project, [write_outside], install=False, codex_trusted=False)
    assert not marker.exists(), run.diagnose()
    assert "keel" in run.told_model, run.diagnose()


def test_gemini_with_hooks_switched_off_is_not_guarded_and_doctor_says_so(base: Path) -> None:
    project = new_project(base, KEEL_TOML)
    precious = base / "precious"
    precious.mkdir()
    marker = precious / "data.txt"
    write_outside = _shell("gemini", f"echo pwned > {marker}")
    assert keel("init", "--agent", "gemini", cwd=project).returncode == 0
    settings = project / SETTINGS["gemini"]
    registered = json.loads(settings.read_text())
    settings.write_text(json.dumps({**registered, "hooksConfig": {"enabled": False}}))

    doctor = keel("doctor", "--agent", "gemini", cwd=project, hookd=True)
    assert doctor.returncode == 1 and "hooksConfig.enabled" in doctor.stdout, doctor.stdout
    # what doctor reports is real: with the switch off, Gemini CLI runs no hook at all
    run = run_client("gemini", project, [write_outside], install=False)
    assert marker.read_text() == "pwned\n", run.diagnose()
    marker.unlink()

    settings.write_text(json.dumps(registered))
    doctor = keel("doctor", "--agent", "gemini", cwd=project, hookd=True)
    assert doctor.returncode == 0, doctor.stdout
    run = run_client("gemini", project, [write_outside], install=False)
    assert not marker.exists(), run.diagnose()


def _venv_with_keel(path: Path) -> Path:
    """A new virtualenv whose Python runs this keel (through a .pth naming our site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "keel-under-test.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_shell_call_is_blocked_once_keels_interpreter_is_gone(agent: str, base: Path) -> None:
    project = new_project(base, KEEL_TOML)
    python = _venv_with_keel(base / "venv")
    init = subprocess.run(
        [str(python), "-m", "keel.cli._entry", "init", "--agent", agent],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    assert str(python) in (project / USER_SETTINGS[agent]).read_text()

    (base / "venv").rename(base / "venv-moved")

    run = run_client(agent, project, [_shell(agent, "touch made.txt")], install=False)
    assert not (project / "made.txt").exists(), run.diagnose()
    assert "keel: the hook could not run (exit 127)" in run.told_model, run.diagnose()
    doctor = keel("doctor", "--agent", agent, cwd=project, hookd=True)
    assert doctor.returncode == 1, doctor.stdout
    assert f"{python} does not exist" in doctor.stdout


def _shell(agent: str, command: str) -> Turn:
    match agent:
        case "claude":
            return Turn(tool="Bash", input={"command": command, "description": "run it"})
        case "codex":
            return Turn(tool="exec_command", input={"cmd": command})
        case _:
            return Turn(
                tool="run_shell_command", input={"command": command, "description": "run it"}
            )
