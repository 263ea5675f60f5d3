"""Bad arguments, files and stdin: a one-line error with a code and the right exit code."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_bad_input_helpers import (
    HOOK_EVENTS,
    assert_error,
    assert_hook_blocked,
    assert_hook_denied,
    hook_payload,
    keel,
    snapshot,
)

from _support import KEEL, keel_env

PATCH = "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hi\n+ho\n"
PLAN = {"goal": "look", "steps": [{"id": "a", "probe": "fs.exists", "args": {"path": "README"}}]}
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


def _base(root: Path) -> Path:
    (root / ".git").mkdir()
    (root / "README").write_text("hi\n")
    (root / "p.diff").write_text(PATCH)
    (root / "plan.json").write_text(json.dumps(PLAN))
    (root / "a-file").write_text("x")
    (root / "loop").symlink_to(root / "loop")
    return root


WORKSPACE_COMMANDS: dict[str, list[str]] = {
    "status": ["status"],
    "stop": ["stop"],
    "resume": ["resume"],
    "log": ["log"],
    "verify": ["verify"],
    "export": ["export"],
    "show": ["show", "x"],
    "checkpoint-create": ["checkpoint", "create"],
    "checkpoint-list": ["checkpoint", "list"],
    "diff": ["diff"],
    "rollback": ["rollback", "--last"],
    "patch-apply": ["patch", "apply", "{patch}"],
    "plan-validate": ["plan", "validate", "{plan}"],
    "plan-run": ["plan", "run", "{plan}"],
    "sandbox-check": ["sandbox", "check"],
    "sandbox-run": ["sandbox", "run", "true"],
    "monitor-scan": ["monitor", "scan", "{plan}"],
    "policy-check": ["policy", "check", "ls"],
    "policy-check-json": ["policy", "check", "--json", "--write", "README"],
    "policy-explain": ["policy", "explain"],
    "hookd-status": ["hookd", "status"],
    "hookd-stop": ["hookd", "stop"],
    "hookd-run": ["hookd", "run", "--idle", "1"],
}
BAD_WORKSPACES = {"missing": "nope/deeper", "file": "a-file", "symlink-loop": "loop"}


@pytest.mark.parametrize("where", ["global", "local"])
@pytest.mark.parametrize("bad", sorted(BAD_WORKSPACES))
@pytest.mark.parametrize("command", sorted(WORKSPACE_COMMANDS))
def test_bad_workspace_is_a_usage_error(workdir: Path, command: str, bad: str, where: str) -> None:
    root = _base(workdir)
    target = str(root / BAD_WORKSPACES[bad])
    argv = [
        a.format(patch=root / "p.diff", plan=root / "plan.json")
        for a in WORKSPACE_COMMANDS[command]
    ]
    if where == "global":
        argv = ["--workspace", target, *argv]
    elif command.startswith("policy-check"):
        argv = [*argv[:2], "--workspace", target, *argv[2:]]  # options go before the command
    else:
        argv = [*argv, "--workspace", target]
    before = snapshot(root)
    run = keel(argv, root)
    if "--json" in argv:
        assert run.rc == 2 and json.loads(run.err)["error"]["code"] == "usage.workspace"
    else:
        line = assert_error(run, 2, "usage.workspace")
        assert BAD_WORKSPACES[bad] in line
    assert snapshot(root) == before
    assert not (root / "nope").exists()  # nothing created in a mistyped place


@pytest.mark.parametrize("bad", sorted(BAD_WORKSPACES))
@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
def test_hook_with_a_bad_workspace_blocks(workdir: Path, agent: str, bad: str) -> None:
    root = _base(workdir)
    target = str(root / BAD_WORKSPACES[bad])
    argv = ["hook", HOOK_EVENTS[agent], "--agent", agent, "--workspace", target]
    assert_hook_blocked(keel(argv, root, hook_payload(agent, root)))
    assert not (root / "nope").exists()


def test_init_on_a_file_is_an_error(workdir: Path) -> None:
    root = _base(workdir)
    assert_error(keel(["init", "--workspace", str(root / "a-file")], root), 1, "workspace.init")
    assert (root / "a-file").read_text() == "x"


def _bad_file(root: Path, kind: str) -> str:
    path = root / f"bad-{kind}"
    match kind:
        case "missing":
            pass
        case "directory":
            path.mkdir()
        case "not-utf8":
            path.write_bytes(b"\xff\xfe\x80 not text\n")
        case "binary":
            path.write_bytes(bytes(range(256)) * 4)
        case "empty":
            path.write_bytes(b"")
        case "deep-json":
            path.write_bytes(DEEP_JSON)
        case "huge":
            path.write_bytes(b"x" * (2 * 1024 * 1024))
        case "symlink-loop":
            path.symlink_to(path)
        case _:
            raise AssertionError(kind)
    return str(path)


FILE_KINDS = [
    "missing",
    "directory",
    "not-utf8",
    "binary",
    "empty",
    "deep-json",
    "huge",
    "symlink-loop",
]

# command -> (argv with {file}, {kind: (exit code, code)}); a missing kind uses "*".
FILE_COMMANDS: dict[str, tuple[list[str], dict[str, tuple[int, str]]]] = {
    "plan-validate": (
        ["plan", "validate", "{file}"],
        {"missing": (2, "plan.unreadable"), "directory": (2, "plan.unreadable"),
         "symlink-loop": (2, "plan.unreadable"), "huge": (2, "plan.unreadable"),
         "*": (2, "plan.json")},
    ),
    "plan-run": (
        ["plan", "run", "{file}"],
        {"missing": (2, "plan.unreadable"), "directory": (2, "plan.unreadable"),
         "symlink-loop": (2, "plan.unreadable"), "huge": (2, "plan.unreadable"),
         "*": (2, "plan.json")},
    ),
    "plan-answers": (["plan", "run", "--answers", "{file}", "{plan}"], {"*": (2, "usage.answers")}),
    "patch-apply": (
        ["patch", "apply", "{file}"],
        {"missing": (2, "usage.invalid"), "directory": (2, "usage.invalid"),
         "symlink-loop": (2, "usage.invalid"), "binary": (1, "patch.binary"),
         "*": (1, "patch.empty")},
    ),
    "monitor-scan": (
        ["monitor", "scan", "{file}"],
        {"missing": (1, "monitor.read"), "directory": (1, "monitor.read"),
         "symlink-loop": (1, "monitor.read"), "*": (1, "payload.scan_format")},
    ),
    "policy-config": (
        ["policy", "check", "--config", "{file}", "rm -rf /"],
        {"missing": (2, "config.read"), "directory": (2, "config.read"),
         "symlink-loop": (2, "config.read"), "not-utf8": (2, "config.encoding"),
         "binary": (2, "config.encoding"), "*": (2, "config.toml")},
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        (command, kind)
        for command in sorted(FILE_COMMANDS)
        for kind in FILE_KINDS
        if (command, kind) != ("policy-config", "empty")  # a valid keel.toml: all defaults
    ],
)
def test_bad_file_argument(workdir: Path, command: str, kind: str) -> None:
    root = _base(workdir)
    argv, expected = FILE_COMMANDS[command]
    file = _bad_file(root, kind)
    argv = [a.format(file=file, plan=root / "plan.json") for a in argv]
    before = snapshot(root)
    rc, code = expected.get(kind, expected["*"])
    run = keel(argv, root)
    assert_error(run, rc, code)
    assert snapshot(root) == before
    assert "allow" not in run.out


STDIN_CASES: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "patch.empty"),
    "garbage": (os.urandom(2048).replace(b"\x00", b"") + b"\x00", "patch.binary"),
    "text": (b"hello\n", "patch.empty"),
    "not-utf8": (b"\xff\xfe\x80\n", "patch.empty"),
    "deep-json": (DEEP_JSON, "patch.empty"),
    "bad-hunk": (b"--- a/README\n+++ b/README\n@@ -a,b +c,d @@\n-hi\n+ho\n", "patch.parse"),
    "escape": (b"--- a/../x\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n", "patch.path"),
    "half-applies": (
        PATCH.encode() + b"--- a/p.diff\n+++ b/p.diff\n@@ -1 +1 @@\n-nope\n+x\n",
        "patch.",
    ),
}


@pytest.mark.parametrize("case", sorted(STDIN_CASES))
def test_patch_apply_from_bad_stdin_writes_nothing(workdir: Path, case: str) -> None:
    root = _base(workdir)
    data, code = STDIN_CASES[case]
    before = snapshot(root)
    assert_error(keel(["patch", "apply", "-"], root, data), 1, code)
    assert snapshot(root) == before


HOOK_STDIN: dict[str, bytes] = {
    "empty": b"",
    "garbage": b"\x8f\x00garbage\xff",
    "text": b"hello\n",
    "list": b"[1, 2]",
    "null": b"null",
    "deep-json": DEEP_JSON,
    "no-tool": b'{"session_id": "s", "hook_event_name": "PreToolUse"}',
    "tool-input-list": b'{"session_id": "s", "tool_name": "Bash", "tool_input": [1]}',
    "big-int": b'{"session_id": "s", "tool_input": {"n": ' + b"9" * 5000 + b"}}",
}


@pytest.mark.parametrize("case", sorted(HOOK_STDIN))
@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
def test_hook_with_bad_stdin_blocks(workdir: Path, agent: str, case: str) -> None:
    root = _base(workdir)
    run = keel(["hook", HOOK_EVENTS[agent], "--agent", agent], root, HOOK_STDIN[case])
    assert_hook_blocked(run)


BAD_OPTIONS: dict[str, tuple[list[str], int, str]] = {
    "sandbox-timeout-nan": (["sandbox", "run", "--timeout", "nan", "true"], 2, "usage.invalid"),
    "sandbox-timeout-zero": (["sandbox", "run", "--timeout", "0", "true"], 2, "usage.invalid"),
    "sandbox-timeout-negative": (["sandbox", "run", "--timeout", "-1", "true"], 2, "usage.invalid"),
    "sandbox-mode": (["sandbox", "run", "--mode", "bogus", "true"], 2, "usage.invalid"),
    "sandbox-backend": (["sandbox", "run", "--backend", "bogus", "true"], 2, "usage.invalid"),
    "hookd-idle-nan": (["hookd", "run", "--idle", "nan"], 2, "usage.invalid"),
    "hookd-idle-negative": (["hookd", "run", "--idle", "-5"], 2, "usage.invalid"),
    "demo-section": (["demo", "--section", "bogus"], 2, "usage.invalid"),
    "init-remove-no-agent": (["init", "--remove"], 2, "usage.invalid"),
    "init-preset": (["init", "--preset", "bogus"], 2, "usage.invalid"),
    "init-agent": (["init", "--agent", "bogus"], 2, "usage.invalid"),
    "rollback-two-targets": (["rollback", "abcd", "--last"], 2, "usage.invalid"),
    "rollback-nothing": (["rollback"], 2, "usage.invalid"),
    "rollback-bad-id": (["rollback", "../../etc"], 1, "workspace.bad_checkpoint_id"),
    "rollback-unknown-id": (["rollback", "abcdef12"], 1, "workspace.unknown_checkpoint"),
    "diff-bad-id": (["diff", "HEAD~1"], 1, "workspace.bad_checkpoint_id"),
    "show-unknown": (["show", "nosuch"], 1, "journal.session_unknown"),
    "export-empty-session": (["export", "-s", ""], 2, "usage.session"),
    "show-empty-session": (["show", ""], 2, "usage.session"),
    "monitor-format": (["monitor", "scan", "-f", "bogus", "x"], 2, "usage.invalid"),
    "monitor-session": (
        ["monitor", "scan", "--session", "nosuch", "{run}"], 1, "monitor.session_unknown"
    ),
    "policy-two-targets": (["policy", "check", "--read", "a", "--write", "b"], 2, "usage.invalid"),
    "policy-nothing": (["policy", "check"], 2, "usage.invalid"),
    "policy-preset": (["policy", "check", "--preset", "bogus", "ls"], 2, "usage.preset"),
    "policy-unknown-option": (["policy", "check", "--bogus", "ls"], 2, "usage.invalid"),
    "explain-preset": (["policy", "explain", "--preset", "bogus"], 2, "usage.preset"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_bad_option_value(workdir: Path, case: str) -> None:
    root = _base(workdir)
    assert keel(["checkpoint", "create"], root).rc == 0
    run_file = root / "run.jsonl"
    run_file.write_text(keel(["export"], root).out)
    argv, rc, code = BAD_OPTIONS[case]
    argv = [a.format(run=run_file) for a in argv]
    before = snapshot(root)
    assert_error(keel(argv, root, timeout=60), rc, code)
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "args",
    [["--deadline", "inf"], ["--deadline", "nan"], ["--deadline", "0"], ["--deadline", "-1"],
     ["--bogus"], ["extra"], ["--agent"]],
)  # fmt: skip
@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
def test_hook_bad_arguments_block(workdir: Path, agent: str, args: list[str]) -> None:
    root = _base(workdir)
    argv = ["hook", HOOK_EVENTS[agent], "--agent", agent, *args]
    run = keel(argv, root, hook_payload(agent, root))
    assert_hook_blocked(run)
    assert "internal error" not in run.err


def test_session_ids_with_control_characters_stay_on_one_line(workdir: Path) -> None:
    root = _base(workdir)
    from keel.core.events import DataPayload, Event
    from keel.journal import open_journal

    for session in ("a\x1b[31mred\nline", "a\x00b", "a" * 10_000):
        payload = json.loads(hook_payload("claude", root))
        payload["session_id"] = session
        hook = keel(["hook", "PreToolUse", "--agent", "claude"], root, json.dumps(payload).encode())
        assert hook.rc == 2 and "payload.field_value" in hook.err  # hooks refuse such ids
        with open_journal(root) as journal:  # other writers may still journal them
            journal.append(Event(kind="prompt", session_id=session, payload=DataPayload({})))
    line = assert_error(keel(["show", "a"], root), 1, "journal.session_ambiguous")
    assert "\x1b" not in line and "\x00" not in line and len(line) < 2100
    table = keel(["log"], root)
    assert table.rc == 0 and "\x1b" not in table.out and "\x00" not in table.out
    with open_journal(root) as journal:
        sessions = len(journal.sessions())
    assert sessions >= 3
    assert len(table.out.splitlines()) == 1 + sessions  # the header and one line per session
    for prefix in ("a\x1b",):
        shown = keel(["show", prefix], root)
        assert shown.rc == 0 and "\x1b" not in shown.out and "\x00" not in shown.out


NOT_UTF8 = os.fsdecode(b"\xff\xfe")  # what Python makes of undecodable argv bytes


def test_non_utf8_arguments(workdir: Path) -> None:
    root = _base(workdir)
    run = keel(["stop", "--reason", NOT_UTF8], root)
    assert run.rc == 0 and "Traceback" not in run.err, run.err
    assert keel(["resume"], root).rc == 0
    assert keel(["checkpoint", "create", "--label", NOT_UTF8], root).rc == 0
    assert "\\xff" in keel(["checkpoint", "list"], root).out
    assert keel(["verify"], root).rc == 0  # every event made it into the chain
    assert_error(keel(["init", "--scope", NOT_UTF8], root), 2, "usage.invalid")
    assert not (root / "keel.toml").exists()
    assert_error(keel(["show", NOT_UTF8], root), 1, "journal.session_unknown")
    check = keel(["policy", "check", "--json", f"ls {NOT_UTF8}"], root)
    assert json.loads(check.out)["decision"] == "deny"


@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
def test_hook_with_lone_surrogates(workdir: Path, agent: str) -> None:
    root = _base(workdir)
    payload = json.loads(hook_payload(agent, root))
    payload["session_id"] = "\ud800"
    payload["tool_input"]["command"] = "rm -rf \udcff" if agent != "codex" else ["rm", "\udcff"]
    run = keel(["hook", HOOK_EVENTS[agent], "--agent", agent], root, json.dumps(payload).encode())
    assert_hook_denied(run)
    assert keel(["verify"], root).rc == 0  # the odd session id was journaled, escaped


@pytest.mark.parametrize(
    ("argv", "rc", "expect"),
    [
        (["hook", "PreToolUse", "--agent", "claude"], 2, "payload.empty"),
        (["hook", "BeforeTool", "--agent", "gemini"], 2, "payload.empty"),
        (["patch", "apply", "-"], 2, "[usage.invalid]"),
    ],
)
def test_closed_stdin(workdir: Path, argv: list[str], rc: int, expect: str) -> None:
    root = _base(workdir)
    line = " ".join(shlex.quote(a) for a in [KEEL, *argv])
    proc = subprocess.run(
        ["sh", "-c", f"{line} <&-"], cwd=root, capture_output=True, env=keel_env(), timeout=60
    )
    err = proc.stderr.decode()
    assert proc.returncode == rc and "Traceback" not in err and expect in err, err
