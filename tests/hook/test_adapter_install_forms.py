"""Issue 24 item 11: hook registrations that a teammate can pull, and that survive a reinstall.

- The default (per-user) registration is never offered for a commit: Claude Code's
  ``settings.local.json``, or the project file of Codex and Gemini CLI, listed once in
  ``.git/info/exclude`` (never ``.gitignore``); ``keel init --remove`` takes the line out.
  A project file that git tracks already is reported, pointing at ``--shared``.
- ``--shared`` registers a command that finds keel on ``PATH`` when it runs: a teammate's clone
  without keel gets every tool call blocked with the command that installs keel; with keel on
  ``PATH`` (another venv) the call is judged by keel. A ``keel`` the agent planted in the
  project (an activated ``.venv/bin``) is never what runs.
- The per-user command names no path a reinstall of keel moves: a force-reinstall into the same
  venv and a venv rebuilt on another Python minor version both leave the hook working.

Every hook is run as the clients run it (``/bin/sh -c`` with a Claude Code payload), and
judged by what it answers: exit 2 or a deny blocks the call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _support import KEEL, TIMEOUT, keel, keel_env, make_workspace, registered_command, verdict
from _support.venvs import venv_with_installed_keel, venv_with_keel
from keel.core.isolated import LAUNCHER
from keel.hook.install import (
    HOOK_PROGRAM,
    INSTALL_KEEL,
    MISSING_MESSAGE,
    USER_SETTINGS,
    registered_hooks,
    root_template,
    stable_interpreter,
)

KEEL_TOML = '[policy]\npreset = "developer"\n'
NO_KEEL_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A ``PATH`` with the system's tools and no keel (asserted where it matters)."""
AGENTS = ["claude", "codex", "gemini"]
MAJOR, MINOR = sys.version_info[:2]


def _git(cwd: Path, *args: str) -> str:
    identity = ["-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=cwd, check=True, capture_output=True, text=True
    )
    return done.stdout


def _status(repo: Path) -> str:
    return _git(repo, "status", "--porcelain", "--untracked-files=all")


def _exclude_lines(repo: Path) -> list[str]:
    path = repo / ".git" / "info" / "exclude"
    return path.read_text().splitlines() if path.exists() else []


def _call(
    command: str,
    project: Path,
    call: str,
    env: dict[str, str],
    event: str = "PreToolUse",
) -> subprocess.CompletedProcess[str]:
    """``command`` run as Claude Code runs a hook, for a Bash call of ``call``."""
    payload = {
        "session_id": f"forms-{abs(hash(call))}",
        "cwd": str(project),
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": call},
        "tool_use_id": "toolu_forms",
        "permission_mode": "default",
    }
    return subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=project,
        env={**env, "CLAUDE_PROJECT_DIR": str(project)},
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


# -- per-user: never committed ---------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_the_default_registration_is_kept_out_of_git_and_remove_takes_it_out(
    workdir: Path, agent: str
) -> None:
    repo = make_workspace(workdir / "repo", keel_toml=KEEL_TOML, commit=True)
    rel = USER_SETTINGS[agent]  # type: ignore[index]
    exclude = (repo / ".git" / "info" / "exclude").read_bytes()
    for _ in range(2):  # again: the line is not added twice
        init = keel("init", "--agent", agent, cwd=repo)
        assert init.returncode == 0, init.stderr
        assert (repo / rel).is_file()
        assert rel.split("/")[0] not in _status(repo)
        assert _exclude_lines(repo).count(f"/{rel}") == 1
    assert "kept out of git" in init.stdout
    assert rel not in (repo / ".gitignore").read_text()  # the team's file: only .keel/ added
    if agent != "gemini":  # Claude Code's dialect and payload (Codex shares them)
        command = registered_command(repo, "PreToolUse", agent)
        assert verdict(_call(command, repo, "rm -rf ~/", keel_env())) == "deny"

    removed = keel("init", "--agent", agent, "--remove", cwd=repo)
    assert removed.returncode == 0, removed.stderr
    assert f"removed /{rel} from" in removed.stdout
    assert (repo / ".git" / "info" / "exclude").read_bytes() == exclude
    assert not (repo / rel).exists()


def test_a_workspace_in_a_subdirectory_or_a_worktree_lists_its_own_file(workdir: Path) -> None:
    top = make_workspace(workdir / "top", files={"README": "x\n"}, commit=True)
    sub = make_workspace(top / "sub", keel_toml=KEEL_TOML)
    assert keel("init", "--agent", "gemini", cwd=sub).returncode == 0
    assert "/sub/.gemini/settings.json" in _exclude_lines(top)
    assert ".gemini" not in _status(top)

    _git(top, "worktree", "add", "-q", str(workdir / "wt"))
    tree = workdir / "wt"
    assert keel("init", "--agent", "codex", cwd=tree).returncode == 0
    assert "/.codex/hooks.json" in _exclude_lines(top)  # the exclude file every worktree shares
    assert ".codex" not in _status(tree)
    assert keel("init", "--agent", "codex", "--remove", cwd=tree).returncode == 0
    assert "/.codex/hooks.json" not in _exclude_lines(top)


def test_a_project_file_git_tracks_is_reported_and_points_at_shared(workdir: Path) -> None:
    team = {"general": {"enableAutoUpdate": False}}
    repo = make_workspace(
        workdir / "repo",
        keel_toml=KEEL_TOML,
        files={".gemini/settings.json": json.dumps(team)},
        commit=True,
    )
    init = keel("init", "--agent", "gemini", cwd=repo)
    assert init.returncode == 0, init.stderr
    assert "git tracks .gemini/settings.json" in init.stderr
    assert "keel init --agent gemini --shared" in init.stderr
    doctor = keel("doctor", "--agent", "gemini", "--json", cwd=repo)
    (client,) = json.loads(doctor.stdout)["clients"]
    (git,) = [c for c in client["checks"] if c["name"] == "git"]
    assert git["status"] == "warn" and "--shared" in git["fix"]

    shared = keel("init", "--agent", "gemini", "--shared", cwd=repo)
    assert shared.returncode == 0 and "git tracks" not in shared.stderr
    assert "/.gemini/settings.json" not in _exclude_lines(repo)
    doctor = keel("doctor", "--agent", "gemini", "--json", cwd=repo, env={"PATH": _with_keel()})
    (client,) = json.loads(doctor.stdout)["clients"]
    assert "git" not in {c["name"] for c in client["checks"]}
    hooks = next(c for c in client["checks"] if c["name"] == "hooks")
    assert "shared" in hooks["detail"]


# -- shared: a teammate's clone --------------------------------------------------------------


def _with_keel() -> str:
    """``PATH`` with this test environment's ``keel`` first."""
    return f"{Path(KEEL).parent}:{NO_KEEL_PATH}"


def _teammate(workdir: Path) -> tuple[Path, dict[str, str]]:
    """A clone of a repository with keel's ``--shared`` Claude hooks committed; its env."""
    repo = make_workspace(workdir / "repo", keel_toml=KEEL_TOML, commit=True)
    init = keel("init", "--agent", "claude", "--shared", cwd=repo, env={"PATH": _with_keel()})
    assert init.returncode == 0, init.stderr
    assert "no keel on PATH" not in init.stderr
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "keel's hooks for the team")
    clone = workdir / "clone"
    _git(workdir, "clone", "-q", str(repo), str(clone))
    clone.chmod(0o755)
    home = workdir / "teammate-home"
    home.mkdir()
    assert shutil.which("keel", path=NO_KEEL_PATH) is None
    return clone, keel_env({"HOME": str(home), "PATH": NO_KEEL_PATH})


def test_a_teammate_without_keel_is_blocked_with_the_install_hint(workdir: Path) -> None:
    clone, env = _teammate(workdir)
    assert not (clone / ".claude" / "settings.local.json").exists()
    command = registered_command(clone)
    done = _call(command, clone, "touch made.txt", env)
    assert done.returncode == 2, done.stderr  # blocked: even a harmless call
    assert INSTALL_KEEL in done.stderr and "pipx install keel-guard" in done.stderr
    # a finish is not blocked (that would keep the agent going), the hint is still said
    stop = _call(registered_command(clone, "Stop"), clone, "", env, event="Stop")
    assert stop.returncode == 0 and MISSING_MESSAGE in stop.stderr

    # with keel on PATH (a venv of their own), keel judges the call
    python = venv_with_keel(workdir / "teammate-venv")
    _console_script(python)
    env["PATH"] = f"{python.parent}:{NO_KEEL_PATH}"
    assert verdict(_call(command, clone, "rm -rf ~/", env)) == "deny"
    allowed = _call(command, clone, "touch made.txt", env)
    assert verdict(allowed) == "allow", allowed.stderr
    answer = json.loads(allowed.stdout)["hookSpecificOutput"]
    assert "keel" in answer["updatedInput"]["command"]  # rewritten into keel exec by keel


def _console_script(python: Path) -> Path:
    """``bin/keel`` next to ``python``, as pip writes the console script."""
    script = python.parent / "keel"
    script.write_text(
        f"#!{python}\nimport sys\nfrom keel.cli._entry import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def test_init_in_a_teammate_s_clone_keeps_the_team_s_shared_registration(workdir: Path) -> None:
    clone, _ = _teammate(workdir)
    shared = (clone / ".claude" / "settings.json").read_bytes()
    init = keel("init", "--agent", "claude", cwd=clone, env={"PATH": _with_keel()})
    assert init.returncode == 0, init.stderr
    assert "registered for the team" in init.stdout
    assert (clone / ".claude" / "settings.json").read_bytes() == shared
    assert not (clone / ".claude" / "settings.local.json").exists()  # never run twice
    assert _status(clone).split() == [], _status(clone)


def test_a_keel_planted_in_the_project_is_never_run_by_the_shared_hook(workdir: Path) -> None:
    clone, env = _teammate(workdir)
    marker = workdir / "planted-ran"
    planted = clone / ".venv" / "bin" / "keel"
    planted.parent.mkdir(parents=True)
    planted.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{}}'\n")
    planted.chmod(0o755)
    env["PATH"] = f"{planted.parent}:.venv/bin:{NO_KEEL_PATH}"  # activated, and relative
    for cwd in (clone, clone / ".venv"):
        done = _call(registered_command(clone), cwd, "touch made.txt", env)
        assert done.returncode == 2 and "pipx install keel-guard" in done.stderr
    assert not marker.exists()


def test_doctor_understands_the_shared_form(workdir: Path) -> None:
    clone, env = _teammate(workdir)
    rc, report = _doctor(clone, env)
    assert rc == 1
    command = _check(report, "command")
    assert command["status"] == "fail" and command["fix"] == INSTALL_KEEL
    assert _check(report, "probe")["status"] == "ok"  # blocked, if for want of keel
    rc, report = _doctor(clone, {**env, "PATH": _with_keel()})
    assert rc == 0, report
    assert "shared" in _check(report, "hooks")["detail"]
    assert _check(report, "command")["status"] == "ok"


def _doctor(root: Path, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [KEEL, "doctor", "--agent", "claude", "--json"],
        cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def _check(report: dict[str, object], name: str) -> dict[str, str]:
    (client,) = report["clients"]  # type: ignore[misc]
    return next(c for c in client["checks"] if c["name"] == name)


# -- a reinstall of keel ---------------------------------------------------------------------


def test_the_per_user_command_names_the_venv_s_python_by_its_unversioned_name(
    workdir: Path,
) -> None:
    python = venv_with_keel(workdir / "venv")
    versioned = python.with_name(f"python{MAJOR}.{MINOR}")
    assert versioned.exists()
    assert stable_interpreter(str(versioned)) == str(python)
    assert stable_interpreter("/nonexistent/bin/python3.11") == "/nonexistent/bin/python3.11"


def test_a_per_user_hook_survives_a_venv_rebuilt_on_another_python_minor_version(
    workdir: Path,
) -> None:
    """Registered when the venv ran Python 3.(N-1); the venv is rebuilt on this Python 3.N."""
    ws = make_workspace(workdir / "ws", keel_toml=KEEL_TOML)
    venv = workdir / "venv"
    old_site = venv / "lib" / f"python{MAJOR}.{MINOR - 1}" / "site-packages"
    new_site = venv / "lib" / f"python{MAJOR}.{MINOR}" / "site-packages"
    ours = Path(LAUNCHER).parent  # this keel's package directory
    old_site.mkdir(parents=True)
    (old_site / "keel").symlink_to(ours)
    root = root_template(str(old_site), (MAJOR, MINOR - 1))
    assert root == str(venv / "lib" / "python{X.Y}" / "site-packages")
    now = [sys.executable, "-I", "-S", "-c", HOOK_PROGRAM, root]
    before = [sys.executable, "-I", "-S", str(old_site / "keel" / "_launch.py")]

    shutil.rmtree(venv / "lib")  # pipx reinstall / uv tool upgrade on the new Python
    new_site.mkdir(parents=True)
    (new_site / "keel").symlink_to(ours)

    from keel.hook.install import registered_command as command_for

    env = keel_env()
    registered = {e: command_for(now, "claude", e) for e in ("PreToolUse", "Stop")}
    old = {e: command_for(before, "claude", e) for e in ("PreToolUse", "Stop")}
    assert verdict(_call(registered["PreToolUse"], ws, "rm -rf ~/", env)) == "deny"
    assert verdict(_call(registered["PreToolUse"], ws, "ls", env)) == "allow"
    assert _call(registered["Stop"], ws, "", env, event="Stop").returncode == 0
    # the control: the launcher's old path is gone; Python's "can't open file" exits 2,
    # which blocks a harmless call and a finish (the agent would never stop)
    stale = _call(old["PreToolUse"], ws, "ls", env)
    assert stale.returncode == 2 and "can't open file" in stale.stderr
    assert _call(old["Stop"], ws, "", env, event="Stop").returncode == 2


@pytest.mark.slow
def test_a_force_reinstall_of_keel_into_its_venv_keeps_the_per_user_hook(workdir: Path) -> None:
    python = venv_with_installed_keel(workdir / "venv")
    ws = make_workspace(workdir / "ws", keel_toml=KEEL_TOML, git=True)
    init = subprocess.run(
        [str(python.parent / "keel"), "init", "--agent", "claude"],
        cwd=ws, env=keel_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    command = registered_command(ws)
    assert command.startswith(f"{python} -I -S -c ")  # bin/python: a rebuilt venv has it too
    assert f"/python{MAJOR}.{MINOR}/" not in command and "_launch.py" not in command
    (wheel,) = (workdir / "venv.dist").glob("*.whl")
    offline = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--force-reinstall", str(wheel)],
        check=True, timeout=TIMEOUT, env={**offline, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    env = keel_env()
    assert verdict(_call(command, ws, "rm -rf ~/", env)) == "deny"
    assert verdict(_call(command, ws, "ls", env)) == "allow"
    assert [c for _, e, c in registered_hooks(ws, "claude") if e == "PreToolUse"] == [command]
