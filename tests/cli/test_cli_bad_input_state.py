"""A corrupt ``.keel/``: a clear error naming it, the emergency stop still works, hooks block.

An unreadable journal database is the exception: the next writer moves it aside and starts a
new chain whose first event records the break (``keel.journal``), so decisions go on; the
read-only journal commands still report it as a clear error and change nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
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

PATCH = "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hi\n+ho\n"
PLAN = {"goal": "look", "steps": [{"id": "a", "probe": "fs.exists", "args": {"path": "README"}}]}


def _base(root: Path) -> Path:
    (root / ".git").mkdir()
    (root / "README").write_text("hi\n")
    (root / "p.diff").write_text(PATCH)
    (root / "plan.json").write_text(json.dumps(PLAN))
    return root


def _garbage(root: Path) -> None:
    (root / ".keel").mkdir()
    (root / ".keel" / "journal.db").write_bytes(os.urandom(4096))


def _truncated(root: Path) -> None:
    assert keel(["stop"], root).rc == 0
    assert keel(["resume"], root).rc == 0
    db = root / ".keel" / "journal.db"
    db.write_bytes(db.read_bytes()[:100])


def _directory(root: Path) -> None:
    (root / ".keel" / "journal.db").mkdir(parents=True)


BROKEN_JOURNALS: dict[str, Callable[[Path], None]] = {
    "garbage": _garbage,
    "truncated": _truncated,
    "directory": _directory,
}

RECOVERED = ("garbage", "truncated")  # unreadable databases: moved aside by the next writer
READERS = {"log", "log-session", "verify", "export", "export-otlp", "show"}

JOURNAL_COMMANDS: dict[str, list[str]] = {
    "log": ["log"],
    "log-session": ["log", "-s", "x"],
    "verify": ["verify"],
    "export": ["export"],
    "export-otlp": ["export", "-f", "otlp-json"],
    "show": ["show", "x"],
    "checkpoint-create": ["checkpoint", "create"],
    "rollback": ["rollback", "--last"],
    "patch-apply": ["patch", "apply", "{patch}"],
    "plan-run": ["plan", "run", "{plan}"],
}


CLEAR_ERRORS = sorted(
    (journal, command)
    for journal in BROKEN_JOURNALS
    for command in JOURNAL_COMMANDS
    if journal not in RECOVERED or command in READERS
)


def _assert_moved_aside_and_reported(root: Path) -> None:
    assert len(list((root / ".keel").glob("journal.broken-*.db"))) == 1
    verify = keel(["verify"], root)
    assert verify.rc == 1 and "journal.break" in verify.out, verify


@pytest.mark.parametrize(("journal", "command"), CLEAR_ERRORS)
def test_broken_journal_is_a_clear_error(workdir: Path, journal: str, command: str) -> None:
    root = _base(workdir)
    BROKEN_JOURNALS[journal](root)
    argv = [
        a.format(patch=root / "p.diff", plan=root / "plan.json") for a in JOURNAL_COMMANDS[command]
    ]
    before = snapshot(root)
    line = assert_error(keel(argv, root), 1, "journal.")
    assert "journal.db" in line
    assert snapshot(root) == before


@pytest.mark.parametrize("journal", sorted(BROKEN_JOURNALS))
def test_status_reports_a_broken_journal_and_changes_nothing(workdir: Path, journal: str) -> None:
    root = _base(workdir)
    BROKEN_JOURNALS[journal](root)
    before = snapshot(root)
    run = keel(["status"], root)
    assert run.rc == 0 and "Traceback" not in run.err, run.err
    assert "JOURNAL" in run.out or "unreadable" in run.out, run.out
    assert snapshot(root) == before


@pytest.mark.parametrize("command", sorted(set(JOURNAL_COMMANDS) - READERS))
@pytest.mark.parametrize("journal", RECOVERED)
def test_an_unreadable_journal_is_moved_aside_by_a_writer(
    workdir: Path, journal: str, command: str
) -> None:
    root = _base(workdir)
    BROKEN_JOURNALS[journal](root)
    argv = [
        a.format(patch=root / "p.diff", plan=root / "plan.json") for a in JOURNAL_COMMANDS[command]
    ]
    run = keel(argv, root)
    assert "Traceback" not in run.err + run.out, run.err
    assert "[journal." not in run.err, run.err
    _assert_moved_aside_and_reported(root)


@pytest.mark.parametrize("journal", sorted(BROKEN_JOURNALS))
def test_emergency_stop_is_set_even_when_the_journal_is_broken(workdir: Path, journal: str) -> None:
    root = _base(workdir)
    BROKEN_JOURNALS[journal](root)
    run = keel(["stop", "--reason", "halt"], root)
    if journal in RECOVERED:
        assert run.rc == 0, run.err
        _assert_moved_aside_and_reported(root)
    else:
        assert "IS set" in assert_error(run, 1, "journal.")
    assert (root / ".keel" / "STOP").is_file()
    run = keel(["policy", "check", "--json", "ls"], root)
    assert run.rc == 0 and json.loads(run.out)["decision"] == "deny"


@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
@pytest.mark.parametrize("journal", sorted(set(BROKEN_JOURNALS) - set(RECOVERED)))
def test_broken_journal_blocks_every_hook(workdir: Path, journal: str, agent: str) -> None:
    root = _base(workdir)
    BROKEN_JOURNALS[journal](root)
    run = keel(["hook", HOOK_EVENTS[agent], "--agent", agent], root, hook_payload(agent, root))
    assert_hook_blocked(run)


@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
@pytest.mark.parametrize("journal", RECOVERED)
def test_an_unreadable_journal_does_not_block_hooks(
    workdir: Path, journal: str, agent: str
) -> None:
    root = _base(workdir)
    BROKEN_JOURNALS[journal](root)
    run = keel(["hook", HOOK_EVENTS[agent], "--agent", agent], root, hook_payload(agent, root))
    assert "Traceback" not in run.err + run.out, run.err
    assert "journal." not in run.err + run.out, run
    _assert_moved_aside_and_reported(root)
    from keel.journal import open_journal

    with open_journal(root) as journal_:
        assert [e.kind for e in journal_.events(session_id="s-bad-input")][:1] == ["tool.call"]


KEEL_IS_A_FILE: dict[str, tuple[list[str], int, str]] = {
    "stop": (["stop"], 1, "workspace.stop_flag"),
    "resume": (["resume"], 1, "workspace.stop_flag"),
    "init": (["init"], 1, "workspace.init"),
    "plan-run": (["plan", "run", "{plan}"], 1, "journal.open"),
    "checkpoint-create": (["checkpoint", "create"], 1, "journal.open"),
    "patch-apply": (["patch", "apply", "{patch}"], 1, "journal.open"),
}


@pytest.mark.parametrize("command", sorted(KEEL_IS_A_FILE))
def test_keel_dir_that_is_a_file(workdir: Path, command: str) -> None:
    root = _base(workdir)
    (root / ".keel").write_text("not a directory")
    argv, rc, code = KEEL_IS_A_FILE[command]
    argv = [a.format(patch=root / "p.diff", plan=root / "plan.json") for a in argv]
    before = snapshot(root)
    assert_error(keel(argv, root), rc, code)
    assert snapshot(root) == before
    assert (root / ".keel").read_text() == "not a directory"


def test_keel_dir_that_is_a_file_hookd_stop(workdir: Path) -> None:
    root = _base(workdir)
    (root / ".keel").write_text("x")
    run = keel(["hookd", "stop"], root)
    assert run.rc == 0 and "not running" in run.out, run.err


@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
def test_keel_dir_that_is_a_file_blocks_hooks(workdir: Path, agent: str) -> None:
    root = _base(workdir)
    (root / ".keel").write_text("x")
    run = keel(["hook", HOOK_EVENTS[agent], "--agent", agent], root, hook_payload(agent, root))
    assert_hook_blocked(run)


def test_stop_flag_that_is_a_directory(workdir: Path) -> None:
    root = _base(workdir)
    (root / ".keel" / "STOP").mkdir(parents=True)
    assert_error(keel(["stop"], root), 1, "workspace.stop_flag")
    assert_error(keel(["resume"], root), 1, "workspace.stop_flag")
    run = keel(["policy", "check", "--json", "ls"], root)
    assert json.loads(run.out)["decision"] == "deny"
    for agent in HOOK_EVENTS:
        payload = hook_payload(agent, root)
        assert_hook_denied(keel(["hook", HOOK_EVENTS[agent], "--agent", agent], root, payload))


def _corrupt_row(root: Path) -> None:
    for _ in range(3):
        assert keel(["checkpoint", "create"], root).rc == 0
    with sqlite3.connect(root / ".keel" / "journal.db") as db:
        db.execute("UPDATE events SET payload = '{bad' WHERE seq = 2")


@pytest.mark.parametrize("argv", [["log", "-s", "manual"], ["show", "manual"], ["export"]])
def test_corrupt_row_is_a_clear_error(workdir: Path, argv: list[str]) -> None:
    root = _base(workdir)
    _corrupt_row(root)
    assert_error(keel(argv, root), 1, "journal.corrupt_row")


def test_failed_export_leaves_the_output_file_alone(workdir: Path) -> None:
    root = _base(workdir)
    _corrupt_row(root)
    fresh, old = root / "fresh.jsonl", root / "old.jsonl"
    old.write_text("previous export\n")
    assert_error(keel(["export", "-o", str(fresh)], root), 1, "journal.corrupt_row")
    assert_error(keel(["export", "-o", str(old)], root), 1, "journal.corrupt_row")
    assert not fresh.exists()
    assert old.read_text() == "previous export\n"
    assert sorted(p.name for p in root.iterdir() if p.name.endswith(".tmp")) == []


def test_undecodable_file_names_are_journaled_not_lost(workdir: Path) -> None:
    root = _base(workdir)
    odd = root / os.fsdecode(b"odd-\xff-name")
    odd.write_text("one\n")
    assert keel(["checkpoint", "create"], root).rc == 0
    odd.write_text("two\n")
    run = keel(["rollback", "--last", "--force"], root)  # your own edit: only --force undoes it
    assert run.rc == 0 and "Traceback" not in run.err, run.err
    verify = keel(["verify"], root)
    assert verify.rc == 0, verify.out
    assert "odd-\\\\udcff-name" in keel(["export"], root).out
