"""A write or read is judged by where its symlinks lead, not by the path as written (issue 14).

A link to ``.git/config``, into ``.git/hooks`` or through a directory linked to ``.git`` is a
control file; ``notes.txt -> .env`` is a secret. Decisions are checked through the in-process
``Policy`` for both presets in both modes; the hook path by effect: the real ``keel hook``
decides, a stand-in client does what an allowed call would do (writes the file, reads it), and
the test checks the file on disk or the text the agent got.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from policy_helpers import COMBOS, GIT_CONFIG, SECRET, allowed, hook, linked_workspace, policy_for


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linked_workspace(tmp_path_factory.mktemp("links"))


@pytest.fixture
def fresh_ws(workdir: Path) -> Path:
    return linked_workspace(workdir)


LINKED_CONTROL = [
    "cfg",
    "./cfg",
    "abs_cfg",
    "src/../cfg",
    "hooks/pre-commit",
    "hooks/post-checkout",
    "gitdir/config",
    "gitdir/hooks/pre-commit",
    "src/up/cfg",
    "src/up/gitdir/hooks/pre-push",
]


@pytest.mark.parametrize("path", LINKED_CONTROL)
@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_a_write_through_a_symlink_to_a_control_file_is_denied(
    ws: Path, path: str, preset: str, contained: bool
) -> None:
    policy = policy_for(ws, preset, contained)
    for spelling in (path, str(ws / path)):
        for op in ("write", "edit"):
            decision = policy.check_path(spelling, op)  # type: ignore[arg-type]
            assert (decision.decision, decision.rule) == ("deny", "path.control"), (
                spelling,
                op,
                decision,
            )


@pytest.mark.parametrize(
    "line",
    [
        "echo x > cfg",
        "echo x >> abs_cfg",
        "printf '[core]\\n' | tee gitdir/config",
        "sed -i s/false/true/ cfg",
        "cp src/app.py hooks/pre-commit",
        "cp src/app.py gitdir/hooks/pre-commit",
        "mv src/app.py hooks/post-checkout",
        "touch src/up/hooks/pre-push",
        "cd src && echo x > up/cfg",
        "ln -f src/app.py hooks/pre-commit",
    ],
)
@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_a_shell_write_through_a_symlink_to_a_control_file_is_denied(
    ws: Path, line: str, preset: str, contained: bool
) -> None:
    decision = policy_for(ws, preset, contained).check_command(line)
    assert decision.decision == "deny", (line, decision)
    if preset == "developer":  # strict denies writes anyway; developer must say why
        assert decision.rule == "path.control", (line, decision)


@pytest.mark.parametrize("path", ["notes.txt", "abs_notes.txt", "./notes.txt", "src/up/notes.txt"])
@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_a_read_through_a_symlink_to_a_secret_is_denied(
    ws: Path, path: str, preset: str, contained: bool
) -> None:
    policy = policy_for(ws, preset, contained)
    for spelling in (path, str(ws / path)):
        decision = policy.check_path(spelling, "read")
        assert (decision.decision, decision.rule) == ("deny", "risk.secret_read"), decision
    for line in (
        f"cat {path}",
        f"head -n 1 {path}",
        f"grep KEY {path}",
        f"cat < {path}",
        f"base64 {path}",
        f"cd src && cat ../{path}",
        # found by tests/policy/test_hypothesis_shell.py: a flag of one reader was taken for
        # another's value option, and the file after it was never checked
        f"cat -n {path}",
        f"less -S {path}",
        f"od -c {path}",
        f"uniq -c {path}",
        f"wc -c {path} && cat -A {path}",
    ):
        decision = policy.check_command(line)
        assert (decision.decision, decision.rule) == ("deny", "risk.secret_read"), (line, decision)


@pytest.mark.parametrize("path", ["cfg", "abs_cfg", "gitdir/config", "src/up/cfg"])
def test_the_hook_keeps_a_write_through_a_link_off_git_config(fresh_ws: Path, path: str) -> None:
    target = str(fresh_ws / path)
    reply = hook(fresh_ws, "Write", {"file_path": target, "content": "[core]\n\thooksPath=x\n"})
    if allowed(reply):  # what Claude Code would then do
        Path(target).write_text("[core]\n\thooksPath=x\n")
    assert (fresh_ws / ".git" / "config").read_text() == GIT_CONFIG, reply
    assert "path.control" in reply.get("permissionDecisionReason", ""), reply


@pytest.mark.parametrize("path", ["hooks/pre-commit", "gitdir/hooks/pre-commit"])
def test_the_hook_keeps_a_write_through_a_link_out_of_git_hooks(fresh_ws: Path, path: str) -> None:
    target = fresh_ws / path
    reply = hook(fresh_ws, "Write", {"file_path": str(target), "content": "#!/bin/sh\n"})
    if allowed(reply):
        target.write_text("#!/bin/sh\n")
    assert list((fresh_ws / ".git" / "hooks").iterdir()) == [], reply
    assert "path.control" in reply.get("permissionDecisionReason", ""), reply


@pytest.mark.parametrize("path", ["notes.txt", "abs_notes.txt"])
def test_the_hook_keeps_a_secret_behind_a_link_from_the_agent(fresh_ws: Path, path: str) -> None:
    target = fresh_ws / path
    reply = hook(fresh_ws, "Read", {"file_path": str(target)})
    seen = target.read_text() if allowed(reply) else reply.get("permissionDecisionReason", "")
    assert SECRET not in seen, reply
    assert "risk.secret_read" in seen, reply
