from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from keel.core.errors import ConfigError, UsageError
from keel.hook.install import (
    HOOKS,
    SETTINGS,
    USER_SETTINGS,
    default_keel_command,
    fail_closed_command,
    hook_command,
    install_hooks,
    is_fail_closed,
    is_keel_hook,
    is_shared,
    registered_command,
    registered_hooks,
    remove_hooks,
)

KEEL = ["/opt/venv/bin/keel"]
USER_HOOK = {"type": "command", "command": "./scripts/lint.sh"}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_install_into_an_empty_project_and_remove_leaves_nothing(workdir: Path, agent: str) -> None:
    written = install_hooks(workdir, agent, keel_command=KEEL)
    path = workdir / USER_SETTINGS[agent]  # type: ignore[index]
    assert written == [path]
    data = json.loads(path.read_text())
    assert set(data["hooks"]) == {e for e, _ in HOOKS[agent]}  # type: ignore[index]
    for event, matcher in HOOKS[agent]:  # type: ignore[index]
        (group,) = data["hooks"][event]
        assert group.get("matcher") == matcher
        (hook,) = group["hooks"]
        assert hook["command"] == fail_closed_command(
            f"/opt/venv/bin/keel hook {event} --agent {agent}", event
        )
        assert hook["timeout"] == (30000 if agent == "gemini" else 30)
    remove_hooks(workdir, agent)
    assert not path.exists() and not path.parent.exists()


def test_install_merges_with_user_hooks_and_settings_and_remove_restores_them(
    workdir: Path,
) -> None:
    path = workdir / ".claude" / "settings.local.json"
    path.parent.mkdir()
    original = {
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [USER_HOOK]}],
            "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
        },
    }
    path.write_text(json.dumps(original, indent=2))
    install_hooks(workdir, "claude", keel_command=KEEL)
    data = json.loads(path.read_text())
    assert data["permissions"] == original["permissions"]
    assert data["hooks"]["PreToolUse"][0] == {"matcher": "Bash", "hooks": [USER_HOOK]}
    assert is_keel_hook(
        data["hooks"]["PreToolUse"][1]["hooks"][0]["command"], "claude", "PreToolUse"
    )
    assert data["hooks"]["Notification"] == original["hooks"]["Notification"]
    remove_hooks(workdir, "claude")
    assert json.loads(path.read_text()) == original


def test_install_twice_replaces_instead_of_duplicating(workdir: Path) -> None:
    install_hooks(workdir, "gemini", keel_command=KEEL)
    install_hooks(
        workdir,
        "gemini",
        keel_command=["/new/python", "-m", "keel.cli._entry"],
        extra_args=["--fail-open"],
    )
    data = json.loads((workdir / ".gemini" / "settings.json").read_text())
    (group,) = data["hooks"]["BeforeTool"]
    (hook,) = group["hooks"]
    assert hook["command"] == fail_closed_command(
        "/new/python -m keel.cli._entry hook BeforeTool --agent gemini --fail-open",
        "BeforeTool",
        fail_open=True,
    )
    assert hook["name"] == "keel"
    remove_hooks(workdir, "gemini")
    assert not (workdir / ".gemini").exists()


def test_a_keel_hook_sharing_a_group_with_a_user_hook_is_taken_out_alone(workdir: Path) -> None:
    install_hooks(workdir, "codex", keel_command=KEEL)
    path = workdir / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    data["hooks"]["Stop"][0]["hooks"].append(USER_HOOK)
    path.write_text(json.dumps(data))
    remove_hooks(workdir, "codex")
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [USER_HOOK]}]}}


def test_agents_do_not_touch_each_other(workdir: Path) -> None:
    install_hooks(workdir, "claude", keel_command=KEEL)
    install_hooks(workdir, "codex", keel_command=KEEL)
    remove_hooks(workdir, "codex")
    assert (workdir / ".claude" / "settings.local.json").is_file()
    assert not (workdir / ".codex").exists()


@pytest.mark.parametrize("shared", [False, True])
def test_bad_settings_are_never_clobbered(workdir: Path, shared: bool) -> None:
    path = workdir / (SETTINGS if shared else USER_SETTINGS)["claude"]
    path.parent.mkdir()
    path.write_text("{ not json")
    with pytest.raises(ConfigError) as err:
        install_hooks(workdir, "claude", keel_command=KEEL, shared=shared)
    assert err.value.code == "config.hooks_json"
    assert path.read_text() == "{ not json"
    path.write_text('{"hooks": []}')
    with pytest.raises(ConfigError):
        install_hooks(workdir, "claude", keel_command=KEEL, shared=shared)


def test_unknown_agent_is_a_usage_error(workdir: Path) -> None:
    with pytest.raises(UsageError):
        install_hooks(workdir, "cursor", keel_command=KEEL)
    assert remove_hooks(workdir, "claude") == []


def test_hook_commands_quote_paths_and_are_recognised() -> None:
    cmd = hook_command(["/path with space/python", "-m", "keel.cli._entry"], "claude", "Stop")
    assert cmd == "'/path with space/python' -m keel.cli._entry hook Stop --agent claude"
    assert is_keel_hook(cmd, "claude", "Stop") and not is_keel_hook(cmd, "codex")
    assert not is_keel_hook("python3 hook.py PreToolUse", "claude")


def test_default_command_uses_the_real_interpreter_not_a_shim() -> None:
    cmd = default_keel_command()
    assert "shims" not in cmd[0]
    assert Path(cmd[0]).parent == Path(sys.executable).parent


def _run_registered(command: str) -> subprocess.CompletedProcess[str]:
    """Run a registered hook command the way the clients do: through a POSIX shell."""
    return subprocess.run(
        ["/bin/sh", "-c", command], input="{}", capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("event", "expected"),
    [("PreToolUse", 2), ("PostToolUse", 2), ("BeforeTool", 2), ("Stop", 0), ("SessionStart", 0)],
)
def test_a_hook_whose_interpreter_is_gone_blocks_tool_events(event: str, expected: int) -> None:
    command = registered_command(["/nonexistent/venv/bin/python", "-S", "-c", "x"], "claude", event)
    proc = _run_registered(command)
    assert proc.returncode == expected  # 127 from the shell would be "go on" for every client
    assert "keel: the hook could not run (exit 127)" in proc.stderr
    assert "keel doctor" in proc.stderr


@pytest.mark.parametrize("status", [0, 2])
def test_keel_s_own_answers_pass_through_the_fallback(status: int) -> None:
    python = [sys.executable, "-c", f"import sys; print('answer'); sys.exit({status})"]
    proc = _run_registered(registered_command(python, "claude", "PreToolUse"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (status, "answer\n", "")


def test_a_crashing_keel_blocks_and_fail_open_is_kept_when_chosen() -> None:
    crash = [sys.executable, "-c", "raise SystemExit(1)"]
    assert _run_registered(registered_command(crash, "codex", "PreToolUse")).returncode == 2
    chosen = registered_command(crash, "codex", "PreToolUse", ["--fail-open"])
    assert _run_registered(chosen).returncode == 0


def test_reinstall_upgrades_a_hook_registered_without_the_fallback(workdir: Path) -> None:
    path = workdir / ".claude" / "settings.local.json"
    path.parent.mkdir()
    old = hook_command(KEEL, "claude", "PreToolUse")
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [{"command": old}]}]}}))
    install_hooks(workdir, "claude", keel_command=KEEL)
    (group,) = json.loads(path.read_text())["hooks"]["PreToolUse"]
    (hook,) = group["hooks"]
    assert is_fail_closed(hook["command"]) and is_keel_hook(hook["command"], "claude")


def test_per_user_and_shared_move_the_hooks_and_never_register_twice(workdir: Path) -> None:
    shared = workdir / ".claude" / "settings.json"
    local = workdir / ".claude" / "settings.local.json"
    install_hooks(workdir, "claude", shared=True)
    install_hooks(workdir, "claude", keel_command=KEEL)
    assert not shared.exists()  # keel created it, and its hooks moved: never registered twice
    events = {event for _, event, _ in registered_hooks(workdir, "claude")}
    assert events == {event for event, _ in HOOKS["claude"]}
    assert {path for path, _, _ in registered_hooks(workdir, "claude")} == {local}
    install_hooks(workdir, "claude", shared=True)
    assert shared.exists() and not local.exists()
    assert all(is_shared(c) for _, _, c in registered_hooks(workdir, "claude"))
    assert remove_hooks(workdir, "claude") == [shared]
    assert remove_hooks(workdir, "claude") == []
