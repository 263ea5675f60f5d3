"""`keel doctor` and `keel status`: is every client that should be guarded actually guarded?

Each failure is made real (an interpreter that is gone, a command that answers "allow", an
untrusted Codex project, a broken keel.toml) and doctor must exit 1 naming it; the probe goes
through the exact registered command, so a hook that answers but does not block is caught.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from _support import keel, make_workspace
from keel.hook.install import install_hooks, registered_hooks


def doctor_json(cwd: Path, *args: str, **env: str) -> tuple[int, dict]:
    out = keel("doctor", "--json", *args, cwd=cwd, env=env)
    return out.returncode, json.loads(out.stdout)


def checks(report: dict, agent: str) -> dict[str, str]:
    (client,) = [c for c in report["clients"] if c["agent"] == agent]
    return {c["name"]: c["status"] for c in client["checks"]}


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_workspace(workdir, git=True)


@pytest.mark.parametrize("agent", ["claude", "gemini"])
def test_a_fresh_init_is_guarded_end_to_end(project: Path, agent: str) -> None:
    assert keel("init", "--agent", agent, cwd=project).returncode == 0
    rc, report = doctor_json(project)
    assert rc == 0 and report["ok"], report
    assert checks(report, agent) == {"hooks": "ok", "command": "ok", "probe": "ok"}
    text = keel("doctor", cwd=project)
    assert text.returncode == 0 and "every client is guarded" in text.stdout
    assert "rm -rf /" in text.stdout and "blocked" in text.stdout


def test_no_hooks_is_not_guarded(project: Path) -> None:
    assert keel("init", cwd=project).returncode == 0
    rc, report = doctor_json(project)
    assert rc == 1 and report["clients"] == [] and not report["ok"]
    rc, report = doctor_json(project, "--agent", "gemini")
    assert rc == 1 and checks(report, "gemini") == {"hooks": "fail"}
    assert keel("doctor", "--agent", "cursor", cwd=project).returncode == 2


def test_a_missing_interpreter_fails_the_command_and_the_probe(project: Path) -> None:
    keel("init", cwd=project)
    gone = ["/gone/venv/bin/python", "-I", "-S", "/gone/src/keel/_launch.py"]
    install_hooks(project, "claude", keel_command=gone)
    rc, report = doctor_json(project)
    assert rc == 1
    assert checks(report, "claude") == {"hooks": "ok", "command": "fail", "probe": "ok"}
    # the probe still comes back blocked: the fallback answers 2 for the missing interpreter
    status = keel("status", cwd=project)
    assert "claude NOT guarded" in status.stdout and "/gone/venv/bin/python" in status.stdout


def test_a_hook_that_answers_but_does_not_block_fails_the_probe(project: Path) -> None:
    keel("init", cwd=project)
    allow_all = [sys.executable, "-I", "-c", "print('{}')"]  # isolated like keel, decides nothing
    install_hooks(project, "claude", keel_command=allow_all)
    assert registered_hooks(project, "claude")
    rc, report = doctor_json(project, "--agent", "claude")
    assert rc == 1
    assert checks(report, "claude")["probe"] == "fail"
    (client,) = report["clients"]
    (probe,) = [c for c in client["checks"] if c["name"] == "probe"]
    assert "NOT blocked" in probe["detail"]


def test_an_invalid_keel_toml_is_reported(project: Path) -> None:
    keel("init", "--agent", "claude", cwd=project)
    (project / "keel.toml").write_text("[policy\n")
    rc, report = doctor_json(project)
    assert rc == 1
    assert {c["name"]: c["status"] for c in report["workspace"]}["config"] == "fail"


def test_a_sandbox_that_cannot_start_is_reported(project: Path) -> None:
    keel("init", "--agent", "claude", cwd=project)
    with (project / "keel.toml").open("a") as fh:
        fh.write("\n[sandbox]\nexec_memory_mb = 1\n")  # bwrap cannot even start
    rc, report = doctor_json(project)
    assert rc == 1
    (sandbox,) = [c for c in report["workspace"] if c["name"] == "sandbox"]
    assert sandbox["status"] == "fail" and "keel exec cannot run" in sandbox["detail"]


def test_disable_all_hooks_is_not_guarded(project: Path) -> None:
    keel("init", "--agent", "claude", "--local", cwd=project)
    shared = project / ".claude" / "settings.json"
    shared.write_text(json.dumps({"disableAllHooks": True}))
    rc, report = doctor_json(project)
    assert rc == 1 and checks(report, "claude")["settings"] == "fail"


def test_codex_is_not_guarded_until_the_project_is_trusted(project: Path, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('sandbox_mode = "workspace-write"\n')
    env = {"CODEX_HOME": str(codex_home)}
    init = keel("init", "--agent", "codex", cwd=project, env=env)
    assert init.returncode == 0
    assert "Codex does not trust" in init.stderr and "--trust" in init.stderr
    rc, report = doctor_json(project, **env)
    assert rc == 1 and checks(report, "codex")["trust"] == "fail"
    assert checks(report, "codex")["probe"] == "ok"  # the hook works; Codex would not run it
    status = keel("status", cwd=project, env=env)
    assert "codex NOT guarded" in status.stdout and "does not trust" in status.stdout
    trust = keel("init", "--agent", "codex", "--trust", cwd=project, env=env)
    assert trust.returncode == 0, trust.stderr
    assert "left Codex's own sandbox_mode as it was: workspace-write" in trust.stdout
    assert (codex_home / "config.toml").read_text().startswith('sandbox_mode = "workspace-write"\n')
    rc, report = doctor_json(project, **env)
    assert rc == 0, report
    assert checks(report, "codex")["review"] == "warn"  # codex exec needs the bypass flag
    assert "codex guarded" in keel("status", cwd=project, env=env).stdout


def _gemini_settings(path: Path, hooks_config: dict) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    data["hooksConfig"] = hooks_config
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_gemini_hooks_switched_off_in_its_settings_are_not_guarded(
    project: Path, tmp_path: Path
) -> None:
    """Gemini CLI merges system defaults, user, project, then system settings (a later
    ``hooksConfig.enabled`` wins; ``disabled`` names are a union): doctor reads them the same."""
    keel("init", "--agent", "gemini", cwd=project)
    home = tmp_path / "home"
    system = tmp_path / "etc" / "settings.json"
    env = {"HOME": str(home), "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(system)}
    project_file = project / ".gemini" / "settings.json"
    user_file = home / ".gemini" / "settings.json"

    _gemini_settings(project_file, {"enabled": False})
    rc, report = doctor_json(project, "--agent", "gemini", **env)
    assert rc == 1 and checks(report, "gemini")["settings"] == "fail"
    assert "hooksConfig.enabled" in json.dumps(report)

    _gemini_settings(project_file, {})
    _gemini_settings(user_file, {"enabled": False})  # the user's switch, the project silent
    rc, report = doctor_json(project, "--agent", "gemini", **env)
    assert rc == 1 and checks(report, "gemini")["settings"] == "fail"

    _gemini_settings(project_file, {"enabled": True})  # the project's wins over the user's
    rc, report = doctor_json(project, "--agent", "gemini", **env)
    assert rc == 0 and "settings" not in checks(report, "gemini"), report

    _gemini_settings(system, {"enabled": False})  # system settings win over everything
    rc, report = doctor_json(project, "--agent", "gemini", **env)
    assert rc == 1 and checks(report, "gemini")["settings"] == "fail"
    system.unlink()

    _gemini_settings(user_file, {"disabled": ["keel"]})  # keel's hooks by their name
    rc, report = doctor_json(project, "--agent", "gemini", **env)
    assert rc == 1 and checks(report, "gemini")["settings"] == "fail"
    assert "hooksConfig.disabled" in json.dumps(report)
    _gemini_settings(user_file, {"disabled": ["someone-else"]})
    rc, report = doctor_json(project, "--agent", "gemini", **env)
    assert rc == 0, report


def test_doctors_probe_session_stays_out_of_monitor_scans(project: Path) -> None:
    keel("init", "--agent", "claude", cwd=project)
    rc, report = doctor_json(project)
    assert rc == 0, report  # the probe journaled a synthetic `rm -rf /`, denied
    journal = project / ".keel" / "journal.db"
    scan = keel("monitor", "scan", str(journal), "--fail-on", "hint", "--json", cwd=project)
    assert scan.returncode == 0, scan.stdout + scan.stderr
    assert json.loads(scan.stdout)["runs"] == []
    sessions = keel("log", "--json", cwd=project)
    (probe,) = [
        s["session_id"]
        for s in json.loads(sessions.stdout)["sessions"]
        if s["session_id"].startswith("keel-doctor-")
    ]
    named = keel("monitor", "scan", str(journal), "--session", probe, "--json", cwd=project)
    assert named.returncode == 0 and len(json.loads(named.stdout)["runs"]) == 1
