"""The five bugs that once survived the whole suite (issue 14), each pinned by effect.

Each test here fails when its bug is put back by hand:

1. a write judged by the path as written, not by its symlink target (a link to ``.git/config``,
   into ``.git/hooks``, or through a directory linked to ``.git``);
2. the secret check made on the path as written only (``cat notes.txt``, notes.txt -> .env);
3. ``rm -R`` (capital) not taken as recursive;
4. the workspace root deleted by its absolute path, through its parent or as ``"$PWD"``.

(5, a final action whose condition is unknown, is in tests/plan/test_plan_unknown_condition.py.)

Decisions are checked through the in-process ``Policy`` for both presets in both modes; the
hook path is checked by effect: the real ``keel hook`` decides, a stand-in client does what an
allowed call would do (writes the file, reads it, runs the rewritten command), and the test
checks the file on disk, the text the agent got, or the workspace still being there.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from keel.policy import Policy

KEEL = Path(sys.executable).with_name("keel")
PRESETS = ("developer", "strict")
COMBOS = [(p, c) for p in PRESETS for c in (False, True)]
SECRET = "KEY=s3cret-issue-14"
GIT_CONFIG = "[core]\n\tbare = false\n"


def _workspace(parent: Path) -> Path:
    """A workspace named ``ws`` with control files, a secret and symlinks to all of them."""
    parent.chmod(0o755)
    ws = parent / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("x = 1\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text(GIT_CONFIG)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".env").write_text(SECRET + "\n")
    (ws / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    links = {
        "cfg": ".git/config",
        "hooks": ".git/hooks",
        "gitdir": ".git",
        "notes.txt": ".env",
        "abs_cfg": str(ws / ".git" / "config"),
        "abs_notes.txt": str(ws / ".env"),
        "src/up": "..",  # a directory link back to the root: src/up/.git is .git
    }
    for name, target in links.items():
        (ws / name).symlink_to(target)
    return ws


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _workspace(tmp_path_factory.mktemp("survivors"))


@pytest.fixture
def fresh_ws(workdir: Path) -> Path:
    return _workspace(workdir)


def _policy(ws: Path, preset: str, contained: bool) -> Policy:
    return Policy.for_preset(preset, ws, contained=contained)


# -- 1. writes are judged by their symlink target -----------------------------------------

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
    policy = _policy(ws, preset, contained)
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
    decision = _policy(ws, preset, contained).check_command(line)
    assert decision.decision == "deny", (line, decision)
    if preset == "developer":  # strict denies writes anyway; developer must say why
        assert decision.rule == "path.control", (line, decision)


# -- 2. the secret check follows the symlink ------------------------------------------------


@pytest.mark.parametrize("path", ["notes.txt", "abs_notes.txt", "./notes.txt", "src/up/notes.txt"])
@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_a_read_through_a_symlink_to_a_secret_is_denied(
    ws: Path, path: str, preset: str, contained: bool
) -> None:
    policy = _policy(ws, preset, contained)
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


# -- 3 and 4. recursive deletes of the workspace, in every spelling ------------------------

ROOT_DELETES = [
    "rm -R .",
    "rm -R ./",
    "rm -Rf .",
    "rm -fR .",
    "rm -R -f .",
    "rm --recursive --force .",
    "rm -rf {ws}",
    "rm -rf {ws}/",
    "rm -rf {ws}/.",
    "rm -rf {ws}/src/..",
    "rm -R {ws}",
    "rm -Rf {ws}",
    "rm -rf ../ws",
    "rm -R ../ws",
    "rm -rf ../ws/",
    "rm -rf src/..",
    'rm -rf "$PWD"',
    "rm -rf $PWD",
    "rm -rf ${{PWD}}",
    'rm -rf "$PWD/"',
    'rm -R "$PWD"',
    "rm -rf ~+",
    "cd src && rm -rf ..",
    "cd src && rm -rf ../../ws",
    'cd src && rm -Rf "$PWD/.."',
    "rm -rf src/up",  # a link to the root: rm removes only the link, still denied to be safe
    "rm -rf src/up/",  # with the slash, rm follows the link and empties the root
    "rm -Rf -- {ws}",
    "rm -rf {parent}",
    "rm -R ..",
]


def _line(template: str, ws: Path) -> str:
    return template.format(ws=ws, parent=ws.parent)


@pytest.mark.parametrize("template", ROOT_DELETES)
@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_a_recursive_delete_of_the_workspace_is_denied(
    ws: Path, template: str, preset: str, contained: bool
) -> None:
    line = _line(template, ws)
    decision = _policy(ws, preset, contained).check_command(line)
    assert (decision.decision, decision.rule) == ("deny", "risk.rm_recursive"), (line, decision)


@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_rm_capital_r_is_recursive_like_its_other_spellings(
    ws: Path, preset: str, contained: bool
) -> None:
    policy = _policy(ws, preset, contained)
    for target in ("src", "."):
        decisions = {
            flags: policy.check_command(f"rm {flags} {target}").decision
            for flags in ("-r", "-R", "--recursive", "-rf", "-Rf", "-fR", "-f -R", "-R -f")
        }
        assert len(set(decisions.values())) == 1, (target, decisions)


# -- the hook path, by effect -------------------------------------------------------------


def _hook(ws: Path, tool: str, tool_input: dict[str, Any], cwd: Path | None = None) -> dict:
    """The real ``keel hook`` (Claude Code's dialect, no daemon) for one PreToolUse call."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}
    env["KEEL_STATE_DIR"] = os.environ["KEEL_STATE_DIR"]
    env["KEEL_HOOKD"] = "0"
    payload = {
        "session_id": "survivors",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "cwd": str(cwd or ws),
    }
    proc = subprocess.run(
        [str(KEEL), "hook", "PreToolUse", "--agent", "claude", "--workspace", str(ws)],
        input=json.dumps(payload).encode(),
        cwd=cwd or ws,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert b"Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        return {"permissionDecision": "deny", "permissionDecisionReason": proc.stderr.decode()}
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return {"permissionDecision": "allow"}  # silence: the client's own permissions apply
    return json.loads(proc.stdout)["hookSpecificOutput"]


def _allowed(reply: dict) -> bool:
    return reply.get("permissionDecision") == "allow"


@pytest.mark.parametrize("path", ["cfg", "abs_cfg", "gitdir/config", "src/up/cfg"])
def test_the_hook_keeps_a_write_through_a_link_off_git_config(fresh_ws: Path, path: str) -> None:
    target = str(fresh_ws / path)
    reply = _hook(fresh_ws, "Write", {"file_path": target, "content": "[core]\n\thooksPath=x\n"})
    if _allowed(reply):  # what Claude Code would then do
        Path(target).write_text("[core]\n\thooksPath=x\n")
    assert (fresh_ws / ".git" / "config").read_text() == GIT_CONFIG, reply
    assert "path.control" in reply.get("permissionDecisionReason", ""), reply


@pytest.mark.parametrize("path", ["hooks/pre-commit", "gitdir/hooks/pre-commit"])
def test_the_hook_keeps_a_write_through_a_link_out_of_git_hooks(fresh_ws: Path, path: str) -> None:
    target = fresh_ws / path
    reply = _hook(fresh_ws, "Write", {"file_path": str(target), "content": "#!/bin/sh\n"})
    if _allowed(reply):
        target.write_text("#!/bin/sh\n")
    assert list((fresh_ws / ".git" / "hooks").iterdir()) == [], reply
    assert "path.control" in reply.get("permissionDecisionReason", ""), reply


@pytest.mark.parametrize("path", ["notes.txt", "abs_notes.txt"])
def test_the_hook_keeps_a_secret_behind_a_link_from_the_agent(fresh_ws: Path, path: str) -> None:
    target = fresh_ws / path
    reply = _hook(fresh_ws, "Read", {"file_path": str(target)})
    seen = target.read_text() if _allowed(reply) else reply.get("permissionDecisionReason", "")
    assert SECRET not in seen, reply
    assert "risk.secret_read" in seen, reply


def _run_as_client(reply: dict, command: str, cwd: Path) -> None:
    """Run what Claude Code would run for an allowed Bash call: the rewritten command, if any."""
    if not _allowed(reply):
        return
    line = reply.get("updatedInput", {}).get("command", command)
    subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("template", "where"),
    [
        ("rm -R .", "."),
        ("rm -Rf {ws}", "."),
        ("rm -rf ../ws", "."),
        ('rm -rf "$PWD"', "."),
        ("rm -rf ..", "src"),
    ],
)
def test_the_hook_keeps_the_workspace_when_asked_to_delete_it(
    fresh_ws: Path, template: str, where: str
) -> None:
    line = _line(template, fresh_ws)
    cwd = fresh_ws / where
    reply = _hook(fresh_ws, "Bash", {"command": line}, cwd=cwd)
    _run_as_client(reply, line, cwd)
    assert (fresh_ws / "src" / "app.py").read_text() == "x = 1\n", reply
    assert "risk.rm_recursive" in reply.get("permissionDecisionReason", ""), reply


def test_the_stand_in_client_does_run_what_the_hook_allows(fresh_ws: Path) -> None:
    """The effect checks above can fail: an allowed delete of one file does delete it."""
    (fresh_ws / "src" / "junk.txt").write_text("junk\n")
    line = "rm -f src/junk.txt"
    reply = _hook(fresh_ws, "Bash", {"command": line})
    assert _allowed(reply), reply
    _run_as_client(reply, line, fresh_ws)
    assert not (fresh_ws / "src" / "junk.txt").exists()
    assert shlex.split(reply.get("updatedInput", {}).get("command", line))


@pytest.mark.parametrize(
    "line",
    [
        "cat <<EOF > f | rm -rf src\nx\nEOF",  # the rest of the line hid in the redirect
        "cat <<EOF >> f ; rm -rf src\nx\nEOF",
    ],
)
def test_the_hook_keeps_src_from_lines_the_parser_once_misread(fresh_ws: Path, line: str) -> None:
    # (contained, ``rm -rf src`` itself is allowed: the workspace is the agent's to change)
    reply = _hook(fresh_ws, "Bash", {"command": line})
    _run_as_client(reply, line, fresh_ws)
    assert (fresh_ws / "src" / "app.py").read_text() == "x = 1\n", reply
    assert "parse.unparseable" in reply.get("permissionDecisionReason", ""), reply


@pytest.mark.parametrize("line", ["cat > leak.txt .env", "cat <<EOF .env > leak.txt\nx\nEOF"])
def test_the_hook_keeps_a_secret_from_words_after_a_redirect(fresh_ws: Path, line: str) -> None:
    reply = _hook(fresh_ws, "Bash", {"command": line})
    _run_as_client(reply, line, fresh_ws)
    leaked = fresh_ws / "leak.txt"
    assert not leaked.exists() or SECRET not in leaked.read_text(), reply
    assert not _allowed(reply), reply
