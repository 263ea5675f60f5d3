"""Codex project trust: read, and recorded with a minimal edit of the user's config."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from keel.core.errors import ConfigError
from keel.hook.codex_config import (
    codex_config_path,
    project_trust,
    trust_project,
)

USER_CONFIG = """\
# my codex settings
model = "gpt-5.5"
sandbox_mode = "workspace-write"  # keep mine

[projects."/somewhere/else"]
trust_level = "trusted"
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {"CODEX_HOME": str(tmp_path / "codex"), "HOME": str(tmp_path / "home")}


def test_codex_home_is_honoured_and_home_is_the_default(tmp_path: Path) -> None:
    assert codex_config_path(_env(tmp_path)) == tmp_path / "codex" / "config.toml"
    assert codex_config_path({"HOME": "/h"}) == Path("/h/.codex/config.toml")


def test_trust_appends_the_project_and_changes_nothing_else(tmp_path: Path) -> None:
    env = _env(tmp_path)
    config = codex_config_path(env)
    config.parent.mkdir()
    config.write_text(USER_CONFIG)
    project = tmp_path / "proj"
    project.mkdir()
    assert project_trust(project, env) is None
    done = trust_project(project, env)
    assert done.changed and done.previous is None
    assert done.sandbox_mode == "workspace-write"
    text = config.read_text()
    assert text.startswith(USER_CONFIG)  # comments, sandbox_mode, other projects: all kept
    assert tomllib.loads(text)["projects"][str(project)] == {"trust_level": "trusted"}
    assert project_trust(project, env) == "trusted"
    again = trust_project(project, env)
    assert not again.changed and config.read_text() == text


def test_trust_replaces_an_untrusted_entry_in_place(tmp_path: Path) -> None:
    env = _env(tmp_path)
    project = tmp_path / "proj"
    project.mkdir()
    config = codex_config_path(env)
    config.parent.mkdir()
    entry = f'[projects."{project}"]\ntrust_level = "untrusted"\nnote = "x"\n'
    config.write_text(USER_CONFIG + "\n" + entry)
    done = trust_project(project, env)
    assert done.previous == "untrusted"
    data = tomllib.loads(config.read_text())
    assert data["projects"][str(project)] == {"trust_level": "trusted", "note": "x"}
    assert config.read_text().count(f'[projects."{project}"]') == 1


def test_a_missing_config_is_created_private(tmp_path: Path) -> None:
    env = _env(tmp_path)
    trust_project(tmp_path, env)
    config = codex_config_path(env)
    assert project_trust(tmp_path, env) == "trusted"
    assert config.stat().st_mode & 0o777 == 0o600


def test_an_entry_keel_cannot_edit_safely_is_left_alone(tmp_path: Path) -> None:
    env = _env(tmp_path)
    config = codex_config_path(env)
    config.parent.mkdir()
    original = f'projects = {{ "{tmp_path}" = {{ trust_level = "untrusted" }} }}\n'
    config.write_text(original)
    with pytest.raises(ConfigError, match="trust_level") as err:
        trust_project(tmp_path, env)
    assert err.value.code == "config.codex_trust"
    assert config.read_text() == original


def test_a_symlinked_config_stays_a_symlink(tmp_path: Path) -> None:
    env = _env(tmp_path)
    dotfiles = tmp_path / "dotfiles" / "codex.toml"
    dotfiles.parent.mkdir()
    dotfiles.write_text(USER_CONFIG)
    config = codex_config_path(env)
    config.parent.mkdir()
    config.symlink_to(dotfiles)
    trust_project(tmp_path, env)
    assert config.is_symlink()
    assert project_trust(tmp_path, env) == "trusted"


def test_invalid_toml_is_an_error_not_a_rewrite(tmp_path: Path) -> None:
    env = _env(tmp_path)
    config = codex_config_path(env)
    config.parent.mkdir()
    config.write_text("[projects\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        project_trust(tmp_path, env)
    with pytest.raises(ConfigError):
        trust_project(tmp_path, env)
    assert config.read_text() == "[projects\n"
