from __future__ import annotations

from pathlib import Path

import pytest

from keel.config import KeelConfig, config_for, load_config, parse_config
from keel.core.errors import ConfigError
from keel.init import init_workspace, render_config


def test_defaults_validate() -> None:
    config = parse_config('[policy]\npreset = "developer"\n')
    assert config == KeelConfig()
    assert config.policy.preset == "developer"
    assert config.limits.plan_max_steps == 10 and config.limits.plan_max_depth == 3


def test_full_config_parses() -> None:
    config = parse_config(
        """
[policy]
preset = "strict"
allow = ["docker compose ps"]
network_allow = ["*.example.com"]

[scope]
include = ["src/**", "tests/**"]

[[constraints]]
id = "no-migrations"
text = "Never edit migrations"
protect = ["**/migrations/**"]
forbid = ["alembic downgrade"]

[gates]
required = ["pytest -q"]
"""
    )
    assert config.policy.preset == "strict"
    assert config.constraints[0].protect == ["**/migrations/**"]
    assert config.gates.required == ["pytest -q"]


@pytest.mark.parametrize(
    ("text", "line", "key", "code"),
    [
        ('[policy]\npreset = "developer"\nalow = []\n', 3, "policy.alow", "config.schema"),
        ('[policy]\n\npreset = "yolo"\n', 3, "policy.preset", "config.schema"),
        ("[limits]\nmax_steps = 0\n", 2, "limits.max_steps", "config.schema"),
        ('[scope]\ninclude = ["src/[a"]\n', 2, "scope.include", "config.schema"),
        (
            '[[constraints]]\ntext = "a"\n[[constraints]]\nprotect = ["x"]\n',
            3,
            "constraints.1.text",
            "config.schema",
        ),
        ("[policy\npreset = 1\n", 1, None, "config.toml"),
        ('[policy]\npreset = "strict"\npreset = "developer"\n', 3, None, "config.toml"),
    ],
)
def test_errors_name_file_line_and_key(text: str, line: int, key: str | None, code: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "keel.toml")
    assert err.value.code == code
    assert err.value.file == "keel.toml"
    assert err.value.line == line, err.value.message
    assert err.value.key == key
    assert f"keel.toml:{line}" in err.value.message


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "keel.toml"
    path.write_bytes(b'[policy]\npreset = "\xff"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.code == "config.encoding" and err.value.line == 2


def test_config_for_without_file_uses_embedded_defaults(tmp_path: Path) -> None:
    assert config_for(tmp_path).policy.preset == "developer"
    assert config_for(tmp_path, "strict").policy.preset == "strict"


@pytest.mark.parametrize("preset", ["developer", "strict", "readonly"])
def test_rendered_templates_validate_and_keep_preset(preset: str) -> None:
    text = render_config(preset)  # type: ignore[arg-type]
    assert parse_config(text).policy.preset == preset
    assert text.count("#") > 10  # commented for review


def test_init_writes_config_state_and_gitignore(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules/")
    result = init_workspace(tmp_path, "strict")
    assert result.wrote_config and result.updated_gitignore
    assert (tmp_path / ".keel").is_dir()
    assert (tmp_path / ".gitignore").read_text() == "node_modules/\n.keel/\n"
    assert load_config(tmp_path / "keel.toml").policy.preset == "strict"
    again = init_workspace(tmp_path, "developer")
    assert not again.wrote_config and not again.updated_gitignore
    assert load_config(tmp_path / "keel.toml").policy.preset == "strict"
