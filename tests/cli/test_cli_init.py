from __future__ import annotations

import json
from pathlib import Path

from _support import keel
from keel.hook.install import is_keel_hook


def test_init_with_agent_merges_and_remove_undoes_exactly(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {
        "model": "x",
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "./mine.sh"}]}
            ]
        },
    }
    settings.write_text(json.dumps(mine))
    out = keel("init", "--agent", "claude", "--shared", "--scope", "src/**,tests/**", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(settings.read_text())
    commands = [h["command"] for g in data["hooks"]["PreToolUse"] for h in g["hooks"]]
    assert "./mine.sh" in commands
    assert any(is_keel_hook(c, "claude", "PreToolUse") for c in commands)
    assert 'include = ["src/**", "tests/**"]' in (tmp_path / "keel.toml").read_text()
    assert keel("init", "--agent", "claude", "--shared", cwd=tmp_path).returncode == 0  # idempotent
    data = json.loads(settings.read_text())
    assert (
        sum(
            "hook PreToolUse" in h["command"]
            for g in data["hooks"]["PreToolUse"]
            for h in g["hooks"]
        )
        == 1
    )
    assert keel("init", "--agent", "claude", "--remove", cwd=tmp_path).returncode == 0
    assert json.loads(settings.read_text()) == mine


def test_init_rejects_unknown_preset_and_agent(tmp_path: Path) -> None:
    out = keel("init", "--preset", "yolo", cwd=tmp_path)
    assert out.returncode == 2 and "yolo" in out.stderr
    assert not (tmp_path / "keel.toml").exists()
    bad = keel("init", "--agent", "cursor", cwd=tmp_path)
    assert bad.returncode == 2 and "cursor" in bad.stderr
    assert not (tmp_path / "keel.toml").exists()


def test_remove_needs_agent(tmp_path: Path) -> None:
    out = keel("init", "--remove", cwd=tmp_path)
    assert out.returncode == 2 and "--agent" in out.stderr


def test_scope_on_an_existing_keel_toml_is_applied_not_ignored(tmp_path: Path) -> None:
    assert keel("init", cwd=tmp_path).returncode == 0
    config = tmp_path / "keel.toml"
    before = config.read_text()
    out = keel("init", "--scope", "src/**,tests/**", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert 'set [scope] include = ["src/**", "tests/**"] in it (was ["**"])' in out.stdout
    assert config.read_text() == before.replace(
        'include = ["**"]', 'include = ["src/**", "tests/**"]'
    )
    again = keel("init", "--scope", "src/**", "--scope", "tests/**", cwd=tmp_path)
    assert '[scope] include is ["src/**", "tests/**"] already' in again.stdout
    assert config.read_text().count("include =") == 1


def test_scope_is_added_to_a_keel_toml_without_one_and_refused_where_unsafe(
    tmp_path: Path,
) -> None:
    config = tmp_path / "keel.toml"
    config.write_text('[policy]\npreset = "strict"  # mine\n')
    assert keel("init", "--scope", "lib/**", cwd=tmp_path).returncode == 0
    assert (
        config.read_text()
        == '[policy]\npreset = "strict"  # mine\n\n[scope]\ninclude = ["lib/**"]\n'
    )
    config.write_text('scope.include = ["a/**"]\n')
    out = keel("init", "--scope", "lib/**", cwd=tmp_path)
    assert out.returncode == 1
    assert 'write it yourself under [scope]: include = ["lib/**"]' in out.stderr
    assert config.read_text() == 'scope.include = ["a/**"]\n'


def test_remove_twice_says_what_happened(tmp_path: Path) -> None:
    assert keel("init", "--agent", "gemini", cwd=tmp_path).returncode == 0
    first = keel("init", "--agent", "gemini", "--remove", cwd=tmp_path)
    assert first.returncode == 0 and "removed keel's gemini hooks from" in first.stdout
    second = keel("init", "--agent", "gemini", "--remove", cwd=tmp_path)
    assert second.returncode == 0
    assert "nothing to remove: keel's gemini hooks are not registered" in second.stdout


def test_per_user_is_the_default_and_local_is_kept_as_its_alias(tmp_path: Path) -> None:
    local = tmp_path / ".claude" / "settings.local.json"
    for flags in ([], ["--local"]):
        out = keel("init", "--agent", "claude", *flags, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert f"registered keel's claude hooks in {local} (per-user" in out.stdout
        assert not (tmp_path / ".claude" / "settings.json").exists()
    assert keel("init", "--agent", "codex", "--local", cwd=tmp_path).returncode == 0
    bad = keel("init", "--agent", "claude", "--local", "--shared", cwd=tmp_path)
    assert bad.returncode == 2 and "--shared and --local do not go together" in bad.stderr
    bad = keel("init", "--shared", cwd=tmp_path)
    assert bad.returncode == 2 and "--shared needs --agent" in bad.stderr


def test_init_registers_the_workspace_for_stop_all(tmp_path: Path) -> None:
    from keel.core.userstate import registered_workspaces

    assert keel("init", "--agent", "claude", cwd=tmp_path).returncode == 0
    assert registered_workspaces()[str(tmp_path)]["agents"] == ["claude"]
