"""Issue 22, family 2: keel's own git runs nothing the agent left in the workspace.

The workspace is planted the way an agent could leave it: programs named by ``.git/config``
(``core.fsmonitor``, filter, textconv, external diff, pager, ssh, through ``include.path`` too),
a full set of ``.git/hooks``, ``.gitattributes`` naming those drivers, ``.gitmodules`` asking for
submodules to be entered, nested repositories with their own such config at depth 1 and 8
(registered as gitlinks in the user's index, and not), a ``git`` on ``PATH`` inside the
workspace, and the indirections (``commondir``, ``objects/info/alternates``, a ``.git`` file).
Each planted program creates a marker outside the workspace; then every keel operation that
runs git runs for real (the CLI, the checkpoint service, the git probes in process, unsandboxed
and in bubblewrap) and no marker may appear, while the operation still gives the right answer
or refuses with a structured error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _support import hook as call_hook
from _support import hook_json, keel
from keel.config import SandboxConfig
from keel.core.errors import SandboxError, WorkspaceError
from keel.plan import InProcessRunner, ProbeRunner, SandboxedRunner
from keel.workspace import Checkpoints

REAL_GIT = shutil.which("git") or "/usr/bin/git"
NESTED = ("sub", "n1/n2/n3/n4/n5/n6/n7/deep", "loose", "u1/u2/u3/u4/u5/u6/u7/stray")
REGISTERED = NESTED[:2]
STRAY = NESTED[3] + "/"
HOOKS = (
    "post-checkout",
    "post-index-change",
    "pre-commit",
    "post-commit",
    "reference-transaction",
    "pre-auto-gc",
    "post-rewrite",
    "fsmonitor-watchman",
)
PROBES: tuple[tuple[str, list[str]], ...] = (
    ("git.branch", []),
    ("git.is_clean", []),
    ("git.changed_files", []),
    ("git.tracked", ["a.txt"]),
)


@dataclass(frozen=True)
class Planted:
    ws: Path
    outside: Path

    def hits(self) -> list[str]:
        """The markers planted programs left: each one is a program that ran."""
        return sorted(p.name for p in self.outside.glob("hit-*"))

    def path(self) -> dict[str, str]:
        """``PATH`` with the workspace's venv first, and an empty entry: the cwd, the workspace."""
        return {"PATH": f"{self.ws / '.venv' / 'bin'}::{os.environ.get('PATH', os.defpath)}"}


def _git(cwd: Path, *args: str) -> str:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "user",
        "GIT_AUTHOR_EMAIL": "user@example.com",
        "GIT_COMMITTER_NAME": "user",
        "GIT_COMMITTER_EMAIL": "user@example.com",
    }
    done = subprocess.run(
        [REAL_GIT, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _program(outside: Path, name: str, then: str = "cat") -> str:
    """A program that leaves ``outside/hit-NAME`` (then passes its input through)."""
    path = outside / f"bin-{name}"
    path.write_text(f"#!/bin/sh\ntouch '{outside}/hit-{name}'\n{then}\n")
    path.chmod(0o755)
    return str(path)


def _arm(repo: Path, outside: Path, tag: str) -> None:
    """Make every program git could run for ``repo`` one of ours."""
    for key, what in (
        ("core.fsmonitor", "fsmonitor"),
        ("filter.evil.clean", "clean"),
        ("filter.evil.smudge", "smudge"),
        ("diff.evil.textconv", "textconv"),
        ("diff.external", "external-diff"),
        ("core.pager", "pager"),
        ("core.sshCommand", "ssh"),
        ("core.editor", "editor"),
    ):
        _git(repo, "config", key, _program(outside, f"{tag}-{what}"))
    _git(repo, "config", "filter.evil.required", "true")
    included = repo / ".git" / "more.gitconfig"  # include.path: one more file it would read
    included.write_text(f"[core]\n\tfsmonitor = {_program(outside, f'{tag}-included')}\n")
    _git(repo, "config", "include.path", str(included))
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in HOOKS:
        shutil.copy(_program(outside, f"{tag}-hook-{hook}"), hooks / hook)


def _dirty(repo: Path) -> None:
    """A changed file, and one whose content is the same but whose stat data is not: git
    must read it through the filter to know it is unchanged."""
    with (repo / "a.txt").open("a") as f:
        f.write("changed\n")
    os.utime(repo / "same.txt", (978307200, 978307200))


def _files(repo: Path) -> None:
    (repo / "a.txt").write_text("hello\n")
    (repo / "same.txt").write_text("same\n")
    (repo / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")


@pytest.fixture
def planted(workdir: Path) -> Planted:
    ws, outside = workdir / "ws", workdir / "outside"
    ws.mkdir()
    outside.mkdir()
    _git(ws, "init", "-q", "-b", "main")
    _files(ws)
    modules = ""
    for rel in NESTED:
        repo = ws / rel
        repo.mkdir(parents=True)
        _git(repo, "init", "-q", "-b", "main")
        _files(repo)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "nested")
        if rel in REGISTERED:
            head = _git(repo, "rev-parse", "HEAD")
            _git(ws, "update-index", "--add", "--cacheinfo", f"160000,{head},{rel}")
            modules += f'[submodule "{rel}"]\n\tpath = {rel}\n\turl = ./{rel}\n\tignore = none\n'
    (ws / ".gitmodules").write_text(modules)
    _git(ws, "add", "a.txt", "same.txt", ".gitattributes", ".gitmodules")
    _git(ws, "commit", "-q", "-m", "user")
    for repo, tag in ((ws, "top"), *((ws / rel, rel.rsplit("/", 1)[-1]) for rel in NESTED)):
        _arm(repo, outside, tag)
        _dirty(repo)
    (ws / "b.txt").write_text("new\n")
    # a git on PATH inside the workspace: in a venv the user activated, and in the cwd
    venv_bin = ws / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    for where, name in ((venv_bin, "venv-git"), (ws, "cwd-git")):
        shutil.copy(_program(outside, name, f'exec {REAL_GIT} "$@"'), where / "git")
    result = Planted(ws, outside)
    assert result.hits() == []  # planting ran none of it
    return result


def test_keel_cli_runs_no_program_the_workspace_planted(planted: Planted) -> None:
    created = keel("checkpoint", "create", workspace=planted.ws, env=planted.path())
    assert created.returncode == 0, created.stderr
    assert planted.hits() == []
    listed = keel("checkpoint", "list", "--json", workspace=planted.ws, env=planted.path())
    [cp] = json.loads(listed.stdout)["checkpoints"]
    (planted.ws / "a.txt").write_text("agent\n")
    diff = keel("diff", workspace=planted.ws, env=planted.path())
    assert diff.returncode == 0 and "+agent" in diff.stdout, diff.stdout + diff.stderr
    assert planted.hits() == []
    rollback = keel("rollback", cp["short"], "--force", workspace=planted.ws, env=planted.path())
    assert rollback.returncode == 0, rollback.stdout + rollback.stderr
    assert (planted.ws / "a.txt").read_text() == "hello\nchanged\n"
    assert (planted.ws / "same.txt").read_text() == "same\n"
    for command in (("status",), ("doctor",), ("checkpoint", "list")):
        done = keel(*command, workspace=planted.ws, env=planted.path())
        assert done.returncode in (0, 1), done.stderr  # doctor: 1, no client has hooks here
    assert planted.hits() == []


def _tamper_shadow(planted: Planted) -> None:
    """What the shadow repository's own config could say, were ``.keel/`` ever written."""
    hooks = planted.outside / "hooks"
    hooks.mkdir()
    for hook in HOOKS:
        shutil.copy(_program(planted.outside, f"shadow-hook-{hook}"), hooks / hook)
    programs = {
        what: _program(planted.outside, f"shadow-{what}")
        for what in ("fsmonitor", "clean", "textconv", "external-diff", "signature")
    }
    with (planted.ws / ".keel" / "checkpoints" / "config").open("a") as f:
        f.write(
            f"[core]\n\tfsmonitor = {programs['fsmonitor']}\n\thooksPath = {hooks}\n"
            f'[filter "evil"]\n\tclean = {programs["clean"]}\n\trequired = true\n'
            f'[diff "evil"]\n\ttextconv = {programs["textconv"]}\n'
            f"[diff]\n\texternal = {programs['external-diff']}\n"
            f"[gpg]\n\tprogram = {programs['signature']}\n[log]\n\tshowSignature = true\n"
        )


def test_the_shadow_repository_config_turns_no_program_on(planted: Planted) -> None:
    cps = Checkpoints(planted.ws)
    first = cps.create()
    _tamper_shadow(planted)
    (planted.ws / "a.txt").write_text("agent\n")
    os.utime(planted.ws / "same.txt", (1000000000, 1000000000))
    second = Checkpoints(planted.ws).create()
    assert second.id != first.id
    diff = Checkpoints(planted.ws).diff(first)
    assert [c.path for c in diff.changes] == ["a.txt"] and "+agent" in diff.patch
    Checkpoints(planted.ws).rollback(first, force=True)
    assert (planted.ws / "a.txt").read_text() == "hello\nchanged\n"
    assert len(Checkpoints(planted.ws).history()) >= 2
    assert planted.hits() == []


def _point_elsewhere(planted: Planted, kind: str) -> None:
    shadow = planted.ws / ".keel" / "checkpoints"
    elsewhere = planted.outside / "shadow-copy"
    shutil.copytree(shadow, elsewhere)
    with (elsewhere / "config").open("a") as f:
        f.write(f"[core]\n\tfsmonitor = {_program(planted.outside, 'copy-fsmonitor')}\n")
    if kind == "commondir":
        (shadow / "commondir").write_text(f"{elsewhere}\n")
    elif kind == "alternates":
        (shadow / "objects" / "info" / "alternates").write_text(f"{elsewhere / 'objects'}\n")
    else:
        shutil.rmtree(shadow)
        shadow.symlink_to(elsewhere)


@pytest.mark.parametrize("kind", ["commondir", "alternates", "symlink"])
def test_a_shadow_repository_that_points_elsewhere_is_refused(planted: Planted, kind: str) -> None:
    Checkpoints(planted.ws).create()
    _point_elsewhere(planted, kind)
    (planted.ws / "a.txt").write_text("agent\n")
    with pytest.raises(WorkspaceError) as caught:
        Checkpoints(planted.ws).create()
    assert caught.value.code == "workspace.git_indirect"
    with pytest.raises(WorkspaceError) as listed:
        Checkpoints(planted.ws).history()
    assert listed.value.code == "workspace.git_indirect"
    cli = keel("checkpoint", "create", workspace=planted.ws, env=planted.path())
    assert cli.returncode != 0 and "workspace.git_indirect" in cli.stdout + cli.stderr
    assert planted.hits() == []


def test_gitattributes_do_not_change_the_bytes_a_checkpoint_keeps(workdir: Path) -> None:
    original = {
        "crlf.txt": b"one\r\ntwo\r\n",
        "ident.c": b"/* $Id: 1234 $ */\n",
        "lf.txt": b"plain\n",
    }
    for name, data in original.items():
        (workdir / name).write_bytes(data)
    (workdir / ".gitattributes").write_text("*.txt text eol=lf\n*.c ident text\n")
    cps = Checkpoints(workdir)
    first = cps.create()
    for name in original:
        (workdir / name).write_bytes(b"agent\n")
    assert {c.path for c in cps.diff(first).changes} == set(original)
    cps.rollback(first, force=True)
    assert {name: (workdir / name).read_bytes() for name in original} == original
    assert cps.diff(cps.create()).changes == ()


@pytest.fixture(params=["in-process", "none-unsafe", "sandbox"])
def runner(request: pytest.FixtureRequest) -> ProbeRunner:
    from keel.sandbox import get_sandbox

    if request.param == "in-process":
        return InProcessRunner()
    try:
        if request.param == "none-unsafe":
            return SandboxedRunner(get_sandbox(SandboxConfig(), backend="none-unsafe", unsafe=True))
        return SandboxedRunner(get_sandbox(SandboxConfig()))
    except SandboxError as exc:
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(f"required in CI: no sandbox: {exc.message}")
        pytest.skip(f"no sandbox: {exc.message}")


def _probe_all(runner: ProbeRunner, ws: Path) -> dict[str, Any]:
    requests = [{"function": f, "args": a, "timeout": 20} for f, a in PROBES]
    assert isinstance(runner, InProcessRunner | SandboxedRunner)
    results = runner.run_many(requests, workspace=ws, timeout=20)
    return {
        f: (r.value if r.ok else r.error.code if r.error else None)
        for (f, _), r in zip(PROBES, results, strict=True)
    }


@pytest.fixture
def venv_on_path(planted: Planted, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The workspace's venv first on PATH, as in a shell that activated it."""
    monkeypatch.setenv("PATH", f"{planted.ws / '.venv' / 'bin'}:{os.environ['PATH']}")
    yield


@pytest.mark.usefixtures("venv_on_path")
def test_git_probes_run_no_program_the_workspace_planted(
    planted: Planted, runner: ProbeRunner
) -> None:
    found = _probe_all(runner, planted.ws)
    assert planted.hits() == []
    assert found == {
        "git.branch": "main",
        "git.is_clean": False,
        "git.changed_files": [".venv/bin/git", "a.txt", "b.txt", "git", "loose/", STRAY],
        "git.tracked": True,
    }  # a registered submodule is listed only when its commit moved: no git runs inside it


def _indirect(planted: Planted, kind: str) -> None:
    dot_git = planted.ws / ".git"
    elsewhere = planted.outside / "elsewhere.git"
    shutil.copytree(dot_git, elsewhere, symlinks=True)
    if kind == "gitfile":
        shutil.rmtree(dot_git)
        dot_git.write_text(f"gitdir: {elsewhere}\n")
    elif kind == "commondir":
        (dot_git / "commondir").write_text(f"{elsewhere}\n")
    elif kind == "alternates":  # the repository needs the object that only elsewhere has
        blob = _git(planted.ws, "rev-parse", "HEAD:a.txt")
        (dot_git / "objects" / blob[:2] / blob[2:]).unlink()
        (dot_git / "objects" / "info" / "alternates").write_text(f"{elsewhere / 'objects'}\n")
    else:
        shutil.rmtree(dot_git / "objects")
        (dot_git / "objects").symlink_to(elsewhere / "objects")


@pytest.mark.usefixtures("venv_on_path")
@pytest.mark.parametrize("kind", ["gitfile", "commondir", "alternates", "objects-symlink"])
def test_git_probes_refuse_a_repository_reached_indirectly(
    planted: Planted, runner: ProbeRunner, kind: str
) -> None:
    _indirect(planted, kind)
    found = _probe_all(runner, planted.ws)
    assert planted.hits() == []
    assert found == {f: "git.indirect" for f, _ in PROBES}


def _registered_hook(planted: Planted, event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One call of the exact hook ``keel init`` registered, with the workspace's git on PATH."""
    done = call_hook(event, payload, workspace=planted.ws, session="git-internals",
                     env=planted.path(), hookd=True)  # fmt: skip
    return hook_json(done)


@pytest.mark.sandbox
def test_the_registered_hook_and_keel_exec_run_no_program_the_workspace_planted(
    planted: Planted,
) -> None:
    """Tool calls through the hook checkpoint the workspace (keel's git) before and after."""
    init = keel("init", "--agent", "claude", workspace=planted.ws, env=planted.path())
    assert init.returncode == 0, init.stderr
    write = {
        "tool_name": "Write",
        "tool_use_id": "t-write",
        "tool_input": {"file_path": str(planted.ws / "c.txt"), "content": "written\n"},
    }
    assert _registered_hook(planted, "PreToolUse", write) == {}  # allowed, checkpointed
    (planted.ws / "c.txt").write_text("written\n")
    _registered_hook(planted, "PostToolUse", {**write, "tool_response": {"type": "create"}})
    shell = {"tool_name": "Bash", "tool_use_id": "t-sh", "tool_input": {"command": "touch d.txt"}}
    answer = _registered_hook(planted, "PreToolUse", shell)["hookSpecificOutput"]
    line = answer["updatedInput"]["command"]
    ran = subprocess.run(["bash", "-c", line], cwd=planted.ws, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    done = {**shell, "tool_input": {"command": line}, "tool_response": {"stdout": ""}}
    _registered_hook(planted, "PostToolUse", done)
    assert (planted.ws / "d.txt").exists()
    assert planted.hits() == []
    listed = keel("checkpoint", "list", "--json", workspace=planted.ws, env=planted.path())
    assert len(json.loads(listed.stdout)["checkpoints"]) >= 3, listed.stderr
