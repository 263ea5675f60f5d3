"""Fixtures for the workspace tests: reading a whole tree, a git-backed user repository."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

TreeReader = Callable[[Path], dict[str, bytes | str]]


def read_tree(root: Path) -> dict[str, bytes | str]:
    """Every file under root (symlinks as targets) by relative path, without .keel and .git."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in (".keel", ".git"):
            continue
        if path.is_symlink():
            out[rel] = "-> " + str(path.readlink())
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


@pytest.fixture
def tree() -> TreeReader:
    """The tree reader as a fixture."""
    return read_tree


def git(root: Path, *args: str) -> str:
    """Run the user's git (their own config-less identity) in root."""
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "user",
        "GIT_AUTHOR_EMAIL": "user@example.com",
        "GIT_COMMITTER_NAME": "user",
        "GIT_COMMITTER_EMAIL": "user@example.com",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    proc = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout


@pytest.fixture
def user_git() -> Callable[..., str]:
    """``git(root, *args)`` as the user would run it."""
    return git
