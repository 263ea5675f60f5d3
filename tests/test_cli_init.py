from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

KEEL = str(Path(sys.executable).with_name("keel"))


def keel(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KEEL, *args], cwd=cwd, capture_output=True, text=True)


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
    out = keel(tmp_path, "init", "--agent", "claude", "--scope", "src/**,tests/**")
    assert out.returncode == 0, out.stderr
    data = json.loads(settings.read_text())
    commands = [h["command"] for g in data["hooks"]["PreToolUse"] for h in g["hooks"]]
    assert "./mine.sh" in commands
    assert any(c.endswith("hook PreToolUse --agent claude") for c in commands)
    assert 'include = ["src/**", "tests/**"]' in (tmp_path / "keel.toml").read_text()
    assert keel(tmp_path, "init", "--agent", "claude").returncode == 0  # idempotent
    data = json.loads(settings.read_text())
    assert (
        sum(
            "hook PreToolUse" in h["command"]
            for g in data["hooks"]["PreToolUse"]
            for h in g["hooks"]
        )
        == 1
    )
    assert keel(tmp_path, "init", "--agent", "claude", "--remove").returncode == 0
    assert json.loads(settings.read_text()) == mine


def test_init_rejects_unknown_preset_and_agent(tmp_path: Path) -> None:
    out = keel(tmp_path, "init", "--preset", "yolo")
    assert out.returncode == 2 and "yolo" in out.stderr
    assert not (tmp_path / "keel.toml").exists()
    bad = keel(tmp_path, "init", "--agent", "cursor")
    assert bad.returncode == 2 and "cursor" in bad.stderr
    assert not (tmp_path / "keel.toml").exists()


def test_remove_needs_agent(tmp_path: Path) -> None:
    out = keel(tmp_path, "init", "--remove")
    assert out.returncode == 2 and "--agent" in out.stderr
