from __future__ import annotations

import subprocess
from pathlib import Path

from keel.core.root import find_root


def test_nearest_keel_toml_wins(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inner = tmp_path / "pkg"
    (inner / "a" / "b").mkdir(parents=True)
    (inner / "keel.toml").write_text("")
    assert find_root(inner / "a" / "b") == str(inner.resolve())


def test_git_root_when_no_keel_toml(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "x" / "y").mkdir(parents=True)
    assert find_root(tmp_path / "x" / "y") == str(tmp_path.resolve())


def test_current_directory_otherwise(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert find_root(tmp_path / "plain") == str((tmp_path / "plain").resolve())


def test_override_wins(tmp_path: Path) -> None:
    (tmp_path / "keel.toml").write_text("")
    other = tmp_path / "other"
    other.mkdir()
    assert find_root(tmp_path, override=str(other)) == str(other.resolve())
