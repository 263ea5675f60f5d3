from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from keel.adapters.install import (
    HOOKS,
    SETTINGS,
    default_keel_command,
    hook_command,
    install_hooks,
    is_keel_hook,
    remove_hooks,
)
from keel.errors import ConfigError, UsageError

KEEL = ["/opt/venv/bin/keel"]
USER_HOOK = {"type": "command", "command": "./scripts/lint.sh"}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_install_into_an_empty_project_and_remove_leaves_nothing(workdir: Path, agent: str) -> None:
    written = install_hooks(workdir, agent, keel_command=KEEL)
    path = workdir / SETTINGS[agent]  # type: ignore[index]
    assert written == [path]
    data = json.loads(path.read_text())
    assert set(data["hooks"]) == {e for e, _ in HOOKS[agent]}  # type: ignore[index]
    for event, matcher in HOOKS[agent]:  # type: ignore[index]
        (group,) = data["hooks"][event]
        assert group.get("matcher") == matcher
        (hook,) = group["hooks"]
        assert hook["command"] == f"/opt/venv/bin/keel hook {event} --agent {agent}"
        assert hook["timeout"] == (30000 if agent == "gemini" else 30)
    remove_hooks(workdir, agent)
    assert not path.exists() and not path.parent.exists()


def test_install_merges_with_user_hooks_and_settings_and_remove_restores_them(
    workdir: Path,
) -> None:
    path = workdir / ".claude" / "settings.json"
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
    assert (
        hook["command"]
        == "/new/python -m keel.cli._entry hook BeforeTool --agent gemini --fail-open"
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
    assert (workdir / ".claude" / "settings.json").is_file()
    assert not (workdir / ".codex").exists()


def test_bad_settings_are_never_clobbered(workdir: Path) -> None:
    path = workdir / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{ not json")
    with pytest.raises(ConfigError) as err:
        install_hooks(workdir, "claude", keel_command=KEEL)
    assert err.value.code == "config.hooks_json"
    assert path.read_text() == "{ not json"
    path.write_text('{"hooks": []}')
    with pytest.raises(ConfigError):
        install_hooks(workdir, "claude", keel_command=KEEL)


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
