"""The protected-path table: one answer, whether read as globs or walked name by name."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from keel.core.protected import (
    ENTRIES,
    GIT_DIR,
    match,
    own_installation,
    policy_globs,
    prompt_paths,
)
from keel.policy._paths import GlobSet
from keel.sandbox.exec._control import ControlRules, scan_controls

NAMES = (
    ".envrc", ".yarnrc.yaml", "src", ".vscode", "x.json", ".git", "config", "hooks", "modules",
    "objects", "info", "alternates", ".cargo", "config.toml", "AGENTS.md", ".github", "workflows",
    "copilot-instructions.md", "keel.toml", ".cursor", "rules", "HEAD", "worktrees", ".ENVRC",
    ".Husky", "commondir",
)  # fmt: skip


@pytest.mark.parametrize("protect_ci", [True, False])
def test_the_name_walk_gives_the_verdict_of_the_globs(protect_ci: bool) -> None:
    """``match`` (no regular expressions, for the hook path) agrees with ``policy_globs``.

    Inside the workspace's own ``.git`` only the git-directory entries count, as in the
    sandbox's walk (the file tools' default ``[policy] protected`` covers all of ``.git``).
    """
    deny = GlobSet(policy_globs("deny", protect_ci), ignore_case=True)
    ask = GlobSet(policy_globs("ask", protect_ci), ignore_case=True)
    wrong: list[tuple[str, str | None, str | None]] = []
    for size in (1, 2, 3):
        for parts in itertools.product(NAMES, repeat=size):
            rel = "/".join(parts)
            if rel.lower().startswith(".git/") and match(rel, protect_ci) is None:
                continue
            want = "deny" if deny.match(rel) else "ask" if ask.match(rel) else None
            found = match(rel, protect_ci)
            got = found[0].verdict if found else None
            if got != want:
                wrong.append((rel, want, got))
    assert wrong == []


def test_every_entry_has_a_reason_and_a_closed_verdict() -> None:
    for entry in (*ENTRIES, *GIT_DIR):
        assert entry.verdict in ("deny", "ask")
        assert len(entry.reason) > 20, entry
        assert entry.path == entry.path.strip("/") and entry.path.count("/") <= 2


def test_deny_wins_over_ask_on_one_path() -> None:
    found = match("docs/AGENTS.md/.envrc")
    assert found is not None and found[0].verdict == "deny"
    assert prompt_paths(["AGENTS.md", "src/app.py", "a/CLAUDE.md", ".claude/CLAUDE.md"]) == [
        "AGENTS.md",
        "a/CLAUDE.md",
    ]


def test_every_entry_is_found_by_the_sandbox_walk(workdir: Path) -> None:
    """What the table names at any depth, the walk of ``keel exec`` finds (or fingerprints)."""
    for entry in ENTRIES:
        path = workdir / "a" / "b" / entry.path.replace("*", "")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    (workdir / "sub" / ".git").mkdir(parents=True)
    (workdir / ".git" / "objects" / "info").mkdir(parents=True)
    for entry in GIT_DIR:
        (workdir / ".git" / entry.path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / ".git" / entry.path).write_text("x\n")
    scan = scan_controls(str(workdir), ControlRules(1, True))
    for entry in ENTRIES:
        rel = f"a/b/{entry.path.replace('*', '')}"
        if entry.verdict == "deny":
            assert rel in scan.controls and rel in scan.deep, rel
        else:
            assert rel in scan.prompts, rel
    assert {f".git/{e.path}" for e in GIT_DIR} <= set(scan.controls)
    assert "sub/.git" in scan.controls


def test_keel_installed_inside_the_workspace_is_protected(workdir: Path) -> None:
    import sys

    prefix = Path(sys.prefix).resolve()
    globs = own_installation(str(prefix.parent))  # a project holding keel's venv
    assert globs[:2] == (prefix.name, f"{prefix.name}/**")
    assert own_installation(str(workdir)) == ()


def test_no_other_module_keeps_a_table_of_protected_paths() -> None:
    """``keel.core.protected.ENTRIES`` is the one table: policy, ``keel exec`` and diff read it.

    A literal collection elsewhere that names protected paths is a second copy that would
    drift; the two that remain hold a different fact under the same names, each named here.
    """
    import ast

    src = Path(__file__).resolve().parents[2] / "src" / "keel"
    protected = {entry.path for entry in ENTRIES}
    other_facts = {
        "sandbox/exec/_view.py": "HOME's secrets, hidden in the sandbox's HOME",
        "sandbox/wrap/_clients.py": "the files of a client's own state that keel wrap keeps",
    }
    found: set[str] = set()
    for path in src.rglob("*.py"):
        where = path.relative_to(src).as_posix()
        if where == "core/protected.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                names = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if len(names & protected) >= 2:
                    found.add(where)
    assert found == set(other_facts)
