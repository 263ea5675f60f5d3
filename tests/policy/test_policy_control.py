"""keel's control files are protected at any depth, through every spelling of their path.

The file tools (Write, Edit, apply_patch), shell writes, git's own writes and plan actions all
meet the same control set: ``keel.toml``, ``.keel/``, ``.claude/``, ``.codex/``, ``.gemini/``,
every ``.git/hooks``, ``.git/config`` and ``.git`` pointer, CI and pre-commit configuration and
``[sandbox] read_only``. A write through a path created earlier in the same line is asked about.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from keel.config import KeelConfig, parse_config
from keel.core.calls import ToolCall
from keel.guard import Guard
from keel.plan._actions import resolve_action
from keel.plan._commit import Committer
from keel.policy import Policy

CONTROL = [
    "keel.toml", "sub/keel.toml", "a/b/c/d/e/f/g/keel.toml", ".keel/journal.db", "sub/.keel/x",
    ".claude/settings.json", "deep/er/.claude/settings.local.json", ".codex/hooks.json",
    "x/.codex/config.toml", ".gemini/settings.json", ".git/hooks/pre-commit",
    "sub/.git/hooks/post-checkout", ".git/config", "sub/.git/config", "sub/.git/config.worktree",
    ".git/modules/lib/hooks/pre-push", ".git/modules/lib/config", "sub/.git",
    ".github/workflows/ci.yml", "pkg/.github/workflows/x.yml", ".pre-commit-config.yaml",
    "sub/.pre-commit-config.yaml", ".husky/pre-commit", "web/.husky/_/husky.sh",
]  # fmt: skip
SPELLINGS = [
    "./keel.toml", "src/../keel.toml", "sub/../.git/hooks/x", "KEEL.toml", ".Claude/x.json",
    ".GIT/HOOKS/x", "%2ekeel/x", ".gi%74/config", "src\\..\\.codex\\hooks.json",
    "keel.toml;x", "src/./../.gemini/settings.json",
]  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / ".git" / "hooks").mkdir(parents=True)
    return ws


@pytest.fixture(params=[False, True], ids=["uncontained", "contained"])
def dev(root: Path, request: pytest.FixtureRequest) -> Policy:
    return Policy.for_preset("developer", root, contained=request.param)


@pytest.mark.parametrize("path", CONTROL + SPELLINGS)
def test_control_files_are_never_written(dev: Policy, path: str) -> None:
    for op in ("write", "edit"):
        decision = dev.check_path(path, op)
        assert (decision.decision, decision.rule) == ("deny", "path.control"), (op, decision)
    assert dev.check_path(path, "read").decision != "deny" or "%" in path or ";" in path


def test_absolute_and_symlinked_spellings(dev: Policy, root: Path) -> None:
    assert dev.check_path(str(root / ".keel" / "x"), "write").rule == "path.control"
    (root / "alias").symlink_to(root / ".git")
    assert dev.check_path("alias/hooks/pre-commit", "write").rule == "path.control"
    (root / "cfg").symlink_to(root / ".claude")
    assert dev.check_path("cfg/settings.json", "write").rule == "path.control"
    home = os.path.expanduser("~")
    assert dev.check_path(f"{home}/.claude/settings.json", "write").decision == "deny"


@pytest.mark.parametrize(
    "line",
    ["echo x > ~+/.git/hooks/pre-commit", 'echo x > "$PWD/.keel/x"', "cd sub && touch keel.toml",
     "git mv new.toml keel.toml", "mv x sub/.claude", "cp -r evil/. .codex/",
     "ln -s /tmp/x .gemini", "git checkout -- keel.toml", "git restore .git/hooks/x",
     "git stash --all", "git stash push -a -m x", "git clean -fdx", "git clean -xf",
     "git config core.hooksPath x", "git -C sub config --local core.pager x",
     "git config --worktree core.pager x", "git rm -r --cached .keel", "rm -f .keel/journal.db",
     "sed -i 's/ask/allow/' keel.toml", "patch keel.toml < x.diff",
     "cat > .claude/settings.json <<'EOF'\n{}\nEOF", "tee -a .husky/pre-commit < x",
     "env -C .git/hooks touch pre-commit", "cp {x,.git/hooks/pre-commit}"],
)  # fmt: skip
def test_shell_writes_to_control_files_are_denied(dev: Policy, line: str) -> None:
    assert dev.check_command(line).decision == "deny", line


def test_patches_are_read_for_their_targets(dev: Policy, root: Path) -> None:
    (root / "evil.diff").write_text("--- a/keel.toml\n+++ b/keel.toml\n@@ -1 +1 @@\n-a\n+b\n")
    (root / "ok.diff").write_text("--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    for line in ("patch -p1 < evil.diff", "patch -p1 -i evil.diff", "git apply evil.diff"):
        assert dev.check_command(line).rule == "path.control", line
    assert dev.check_command("patch -p1 < ok.diff").decision == (
        "allow" if dev.contained else "ask"
    )
    unknown = dev.check_command("patch -p1 < missing.diff")  # contained: the sandbox decides
    assert unknown.decision == ("allow" if dev.contained else "ask"), unknown


def test_sandbox_read_only_globs_join_the_control_set(root: Path) -> None:
    config = parse_config('[sandbox]\nread_only = ["config/**", "Makefile", "/setup.py"]\n')
    policy = Policy.from_config(config, root)  # the globs read as keel exec reads them
    assert policy.check_path("config/prod.yml", "write").rule == "path.control"
    assert policy.check_path("Makefile", "write").rule == "path.control"
    assert policy.check_path("src/Makefile", "write").rule == "path.control"
    assert policy.check_command("echo x >> Makefile").rule == "path.control"
    assert policy.check_path("setup.py", "write").rule == "path.control"
    assert policy.check_path("src/setup.py", "write").decision == "allow"
    assert "config/**" in policy.explain()["paths"]["control"]


def test_ci_files_follow_protect_ci(root: Path) -> None:
    off = Policy.from_config(parse_config("[sandbox]\nprotect_ci = false\n"), root)
    assert off.check_path(".pre-commit-config.yaml", "write").decision == "allow"
    assert off.check_path("keel.toml", "write").rule == "path.control"


def test_custom_protected_globs_cannot_drop_the_control_set(root: Path) -> None:
    policy = Policy.from_config(parse_config('[policy]\nprotected = ["docs/**"]\n'), root)
    assert policy.check_path(".claude/settings.json", "write").rule == "path.control"
    assert policy.check_path("docs/x.md", "write").rule == "path.protected"


@pytest.mark.parametrize(
    "line",
    ["ln -s /etc x && echo y > x/passwd", "ln -s .git/hooks h && echo x > h/pre-commit",
     "ln -sf .claude/settings.json s; cat x > s", "ln -s /etc x; cd x && echo y > passwd",
     "cp -P link x && echo y > x", "mv link d && echo y > d/a", "tar -xf a.tar && echo y > d/x",
     "unzip a.zip && echo y > d/x", "git mv a b && echo x > b/c",
     "install -d x && echo y > x/z", "rsync -a l/ d/ && echo y > d/x"],
)  # fmt: skip
def test_a_write_through_a_path_made_in_the_same_line_is_asked(dev: Policy, line: str) -> None:
    assert dev.check_command(line).decision != "allow", line


def test_writes_not_through_new_paths_are_unaffected(dev: Policy, root: Path) -> None:
    assert dev.check_command("mkdir -p build && echo y > build/out.txt").decision == "allow"
    assert dev.check_command("ln -s src/a.py b.py && echo y > c.txt").decision != "deny"
    assert dev.check_command("cp a.py b.py && echo y > c.txt").decision == "allow"
    decided = dev.check_command("git checkout -b x && echo y > a.txt")
    assert decided.decision == ("allow" if dev.contained else "ask"), decided


@pytest.mark.parametrize(
    ("action", "args"),
    [
        ("file.write", [".claude/settings.json", "{}"]),
        ("file.write", ["sub/.git/hooks/pre-commit", "id"]),
        ("file.write", ["sub/keel.toml", "[policy]"]),
        ("file.append", [".git/config", "[core]\npager = id\n"]),
        ("file.write", [".keel/stop", ""]),
        ("patch.apply", ["--- a/.codex/hooks.json\n+++ b/.codex/hooks.json\n@@ -0,0 +1 @@\n+x\n"]),
    ],
)
def test_plan_actions_cannot_write_control_files(root: Path, action: str, args: list[str]) -> None:
    policy = Policy.for_root(root)
    guard = Guard(root, KeelConfig(), policy, "plan", "keel")
    decisions: list[str] = []
    committer = Committer(
        workspace=root,
        decide=guard.decide,
        policy=policy,
        exec_sandbox=None,
        config=KeelConfig(),
        on_decision=lambda d, _: decisions.append(d.rule),
    )
    spec = resolve_action(action)
    assert spec is not None
    names = [p.name for p in spec.params]
    record = committer.commit("s", spec, dict(zip(names, args, strict=False)), ())
    assert record.status == "refused" and "path.control" in (record.reason or ""), record
    assert decisions and decisions[-1] == "path.control"
    target = args[0].split("\n")[0].removeprefix("--- a/")
    assert not (root / target).exists() or (root / target).is_dir()


def test_file_tool_calls_are_judged_the_same(dev: Policy) -> None:
    for tool, kind in (("Write", "write"), ("Edit", "edit"), ("replace", "edit")):
        call = ToolCall(tool, kind, paths=("sub/.gemini/settings.json",))  # type: ignore[arg-type]
        assert dev.check_call(call).rule == "path.control"
    patch = "*** Begin Patch\n*** Add File: lib/.git/hooks/x\n+id\n*** End Patch\n"
    assert dev.check_call(ToolCall("apply_patch", "edit", patch=patch)).rule == "path.control"
