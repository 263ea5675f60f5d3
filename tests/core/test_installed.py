"""Install hints name keel-guard and match how keel was installed (issue 24 item 9).

Each case is a real virtualenv that runs this keel (through a .pth), made where pipx or uv
would have made it or holding their marker file; its own Python answers.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from _support.venvs import venv_with_keel
from keel.core.errors import UsageError
from keel.core.installed import DISTRIBUTION, extras, requirements

REPO = Path(__file__).resolve().parents[2]
OPENAI = "'openai>=1.40'"


def _hint(python: Path, extra: str, env: dict[str, str] | None = None) -> str:
    code = f"from keel.core.installed import hint; print(hint({extra!r}))"
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()


def test_pyproject_names_the_distribution_keel_guard() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION == "keel-guard"
    assert project["scripts"]["keel"] == "keel.cli._entry:main"


def test_the_requirements_of_an_extra_are_pyprojects() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    optional = project["optional-dependencies"]
    assert sorted(extras()) == _user_extras()
    assert {"anthropic", "local", "openai", "postgres", "sandbox"} <= set(extras())
    for extra in extras():
        assert sorted(requirements(extra)) == sorted(optional[extra])


def test_an_unknown_extra_is_a_usage_error_naming_the_extras() -> None:
    with pytest.raises(UsageError) as caught:
        requirements("dev")
    assert caught.value.code == "usage.extra"
    assert ", ".join(_user_extras()) in caught.value.message


def _user_extras() -> list[str]:
    """pyproject.toml's extras a user can add: the non-empty ones, ``dev`` left out."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    optional = project["optional-dependencies"]
    return sorted(name for name, reqs in optional.items() if reqs and name != "dev")


def test_a_plain_venv_hint_is_its_own_pythons_pip(workdir: Path) -> None:
    python = venv_with_keel(workdir / "env")
    assert _hint(python, "openai") == f"keel install openai, or: {python} -m pip install {OPENAI}"


@pytest.mark.parametrize("where", ["marker", "PIPX_HOME", "default home"])
def test_a_pipx_venv_hint_is_pipx_inject_keel_guard(workdir: Path, where: str) -> None:
    env = {"HOME": str(workdir / "home"), "PATH": "/usr/bin:/bin"}
    if where == "marker":
        python = venv_with_keel(workdir / "elsewhere" / "keel-guard")
        (workdir / "elsewhere" / "keel-guard" / "pipx_metadata.json").write_text("{}")
    elif where == "PIPX_HOME":
        python = venv_with_keel(workdir / "pipx" / "venvs" / "keel-guard")
        env["PIPX_HOME"] = str(workdir / "pipx")
    else:
        python = venv_with_keel(workdir / "home/.local/share/pipx/venvs/keel-guard")
    assert (
        _hint(python, "openai", env) == f"keel install openai, or: pipx inject keel-guard {OPENAI}"
    )


@pytest.mark.parametrize("where", ["marker", "UV_TOOL_DIR", "default home"])
def test_a_uv_tool_hint_adds_to_its_venv_without_reinstalling_keel(
    workdir: Path, where: str
) -> None:
    env = {"HOME": str(workdir / "home"), "PATH": "/usr/bin:/bin"}
    if where == "marker":
        python = venv_with_keel(workdir / "elsewhere" / "keel-guard")
        (workdir / "elsewhere" / "keel-guard" / "uv-receipt.toml").write_text("[tool]\n")
    elif where == "UV_TOOL_DIR":
        python = venv_with_keel(workdir / "tools" / "keel-guard")
        env["UV_TOOL_DIR"] = str(workdir / "tools")
    else:
        python = venv_with_keel(workdir / "home/.local/share/uv/tools/keel-guard")
    expected = f"uv pip install --python {python} {OPENAI}"
    assert _hint(python, "openai", env) == f"keel install openai, or: {expected}"


def test_the_local_hint_is_keel_install_local(workdir: Path) -> None:
    python = venv_with_keel(workdir / "home/.local/share/pipx/venvs/keel-guard")
    hint = _hint(python, "local", {"HOME": str(workdir / "home")})
    assert hint.startswith("keel install local (it builds llama-cpp-python once, portably")
