"""``keel install EXTRA``: the extra into keel's own environment, keel left as it is (issue 24
items 9 and 10).

The dry runs are real virtualenvs that run this keel (through a .pth), made where pipx or uv
would have made them. The real install is a throwaway venv holding keel-guard installed from
a wheel, offline: the extra's package is a tiny wheel of the same name in a local directory.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from _support import TIMEOUT, keel
from _support.venvs import install_record, tiny_wheel, venv_with_installed_keel, venv_with_keel
from keel.core.installed import extras

OPENAI = "'openai>=1.40'"


def _dry_run(python: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [str(python), "-m", "keel.cli._entry", "install", "--dry-run", "openai"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT)


@pytest.mark.parametrize("kind", ["pipx", "uv", "pip"])
def test_a_dry_run_prints_the_command_for_how_keel_was_installed(workdir: Path, kind: str) -> None:
    home = workdir / "home"
    venv = {
        "pipx": home / ".local/share/pipx/venvs/keel-guard",
        "uv": home / ".local/share/uv/tools/keel-guard",
        "pip": home / ".local/share/keel",
    }[kind]
    python = venv_with_keel(venv)
    marker = workdir / "ran"
    env = {"HOME": str(home), "PATH": f"{_tool_dir(workdir, marker)}:/usr/bin:/bin"}
    done = _dry_run(python, env)
    assert done.returncode == 0, done.stderr
    command = {
        "pipx": f"pipx inject keel-guard {OPENAI}",
        "uv": f"uv pip install --python {python} {OPENAI}",
        "pip": f"{python} -m pip install {OPENAI}",
    }[kind]
    assert done.stdout.splitlines()[0] == (
        f"keel-guard[openai] (openai>=1.40) into {venv} (installed with {kind})"
    )
    assert f"\n  {command}\n" in done.stdout
    assert not marker.exists(), "a dry run ran an installer"


def _tool_dir(workdir: Path, marker: Path) -> Path:
    """pipx and uv stand-ins that only leave ``marker``: a dry run must never run them."""
    tools = workdir / "tools"
    tools.mkdir()
    for name in ("pipx", "uv"):
        (tools / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (tools / name).chmod(0o755)
    return tools


def test_an_unknown_extra_is_a_usage_error_listing_the_extras(workdir: Path) -> None:
    done = keel("install", "--dry-run", "openia", cwd=workdir)
    assert done.returncode == 2, done.stderr
    listed = ", ".join(extras())  # every extra a user can add, sorted
    assert f"unknown extra 'openia': choose one of {listed}" in done.stderr
    assert "anthropic, local" in listed and "postgres" in listed
    assert "[usage.extra]" in done.stderr


def test_the_help_names_every_extra(workdir: Path) -> None:
    done = keel("install", "-h", cwd=workdir, env={"COLUMNS": "200"})
    assert done.returncode == 0
    assert all(extra in done.stdout for extra in extras())


@pytest.mark.slow
def test_keel_install_adds_the_extra_and_leaves_keel_as_it_was(workdir: Path) -> None:
    python = venv_with_installed_keel(workdir / "env")
    before = install_record(python, "keel-guard")
    assert before["direct_url"] is not None and '"editable": true' not in str(before["direct_url"])
    wheels = workdir / "wheels"
    tiny_wheel(wheels, "openai", "99.0")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels), PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run(
        [str(python.with_name("keel")), "install", "openai"],
        capture_output=True, text=True, env=env, timeout=TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{python} -m pip install {OPENAI}" in done.stdout
    mark = subprocess.run(
        [str(python), "-c", "import openai; print(openai.MARK, openai.__file__)"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert mark.startswith("openai 99.0 (tiny) " + str(workdir / "env"))
    assert install_record(python, "keel-guard") == before
