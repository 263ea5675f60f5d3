"""One workspace root for every keel process (issue 23): the hook, the CLI and ``keel exec``.

Each layout is a tree with the directory an agent and its user work in, and the root keel
must find for it (``keel.core.root.find_root``: the nearest ``keel.toml``, else git's own view
of the nearest work tree, else the directory). Checked by effect, each process started as a
real subprocess from that directory: ``keel status`` names the root; the stop ``keel stop``
sets there holds for the hook (the command ``keel init`` registers) and for ``keel exec``;
after ``keel resume`` the hook's calls land in the root's journal and ``keel exec`` registers
in the root's ``.keel/exec``; no other ``.keel/`` appears anywhere in the tree.

Before the one ``find_root``, the hook took a dangling ``.git`` symlink for a repository and
the CLI and ``keel exec`` did not: the user's stop was set in one ``.keel/`` and the hook read
another.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from _support import hook, keel
from keel.journal import read_journal

SRC = Path(__file__).resolve().parents[2] / "src" / "keel"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, check=True
    )


def _repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", ".")
    return path


# -- the layouts: (the directory worked in, the root) ---------------------------------------------


def dangling_git_symlink(base: Path) -> tuple[Path, Path]:
    """A ``.git`` symlink to nothing inside a repository: git ignores it, so does keel."""
    outer = _repo(base / "outer")
    (outer / "inner" / "sub").mkdir(parents=True)
    (outer / "inner" / ".git").symlink_to(base / "gone")
    return outer / "inner" / "sub", outer


def git_file(base: Path) -> tuple[Path, Path]:
    """A linked worktree (its ``.git`` is a file naming the real git dir) inside its repo."""
    outer = _repo(base / "outer")
    _git(outer, "commit", "-q", "--allow-empty", "-m", "init")
    _git(outer, "worktree", "add", "-q", "wt")
    assert (outer / "wt" / ".git").is_file()
    (outer / "wt" / "src").mkdir()
    return outer / "wt" / "src", outer / "wt"


def nested_repos(base: Path) -> tuple[Path, Path]:
    """A repository inside a repository: the nearest one."""
    outer = _repo(base / "outer")
    inner = _repo(outer / "inner")
    (inner / "pkg").mkdir()
    return inner / "pkg", inner


def keel_toml_above_git(base: Path) -> tuple[Path, Path]:
    """A keel.toml above the git root: the keel.toml's directory, wherever the repository is."""
    project = base / "project"
    project.mkdir()
    (project / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    repo = _repo(project / "repo")
    (repo / "src").mkdir()
    return repo / "src", project


LAYOUTS: list[Callable[[Path], tuple[Path, Path]]] = [
    dangling_git_symlink,
    git_file,
    nested_repos,
    keel_toml_above_git,
]


# -- the three processes ------------------------------------------------------------------------


def pre_tool(cwd: Path, tool_use_id: str) -> tuple[int, str]:
    """Claude Code's pre-tool hook for ``ls``, as registered, in a client started in ``cwd``."""
    payload = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": tool_use_id}
    done = hook("PreToolUse", payload, workspace=cwd, session="s-root", via="launcher")
    assert done.returncode in (0, 2), done.stderr
    if done.returncode == 2 or not done.stdout.strip():
        return done.returncode, done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    return done.returncode, json.dumps(answer)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f.__name__)
def test_the_hook_the_cli_and_keel_exec_share_one_root(
    workdir: Path, layout: Callable[[Path], tuple[Path, Path]]
) -> None:
    start, root = layout(workdir)
    status = keel("status", "--json", cwd=start)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["root"] == str(root)

    stop = keel("stop", "--reason", "drill 23", cwd=start)
    assert stop.returncode == 0, stop.stderr
    assert (root / ".keel" / "STOP").is_file()
    _, answer = pre_tool(start, "t-stopped")
    assert '"deny"' in answer and "drill 23" in answer
    refused = keel("exec", "--", "pwd", cwd=start)
    assert refused.returncode == 126 and "drill 23" in refused.stderr
    assert keel("resume", cwd=start).returncode == 0

    _, answer = pre_tool(start, "t-resumed")
    assert '"allow"' in answer and f"--workspace {root} " in answer  # the rewrite names it too
    ran = keel("exec", "--", "pwd", cwd=start)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == str(start)
    assert (root / ".keel" / "exec").is_dir()
    with read_journal(root) as journal:
        decisions = journal.events(kinds=["decision"])
        decided = [getattr(e.payload, "tool_use_id", None) for e in decisions]
    assert decided == ["t-stopped", "t-resumed"]
    assert sorted(workdir.rglob(".keel")) == [root / ".keel"]


def test_the_root_and_the_stop_flag_are_defined_once() -> None:
    """``find_root`` and the names ``.keel``, ``keel.toml`` and ``STOP`` live in keel.core only.

    Every other module imports them (``STATE_DIR``, ``CONFIG_NAME``, ``STOP_FILE``,
    ``state_path``, ``stop_path``...), so no process can drift to a root or a flag of its own.
    """
    functions = {"find_root": "core/root.py", "hook_root": "core/root.py",
                 "stop_reason": "core/stop.py"}  # fmt: skip
    names = {".keel": "core/root.py", "keel.toml": "core/root.py", "STOP": "core/stop.py"}
    found: dict[str, set[str]] = {name: set() for name in [*functions, *names]}
    for path in SRC.rglob("*.py"):
        where = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in functions:
                found[node.name].add(where)
            elif isinstance(node, ast.Constant) and node.value in names:
                found[str(node.value)].add(where)
    assert found == {name: {home} for name, home in {**functions, **names}.items()}
