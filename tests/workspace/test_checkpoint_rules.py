"""The checkpoint store's rules, as pure functions: the refusal's words, restored modes, the
escaping of large-file names, reading git's diff-tree output and commit messages, who owns each
interval of the history, errors and journal payloads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_helpers import mk

from keel.workspace import Checkpoint, checkpoint_event, checkpoint_payload
from keel.workspace.checkpoints import (
    FileChange,
    _agent_intervals,
    _change,
    _Entry,
    _escape,
    _io_error,
    _parse_commit,
    _parse_diff_tree,
    _refusal,
    _restore_mode,
    _unescape,
)


@pytest.fixture
def umask027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_the_refusal_names_twenty_files_and_counts_the_rest() -> None:
    one = _refusal(["a.txt"])
    assert one == (
        "refusing to roll back: 1 file(s) the agent changed were also changed by someone "
        "else (you, or another session) after the checkpoint, and rolling back would lose "
        "those changes: a.txt. Save your work elsewhere, or pass --force to overwrite."
    )
    twenty = [f"f{i:02}" for i in range(20)]
    assert ": " + ", ".join(twenty) + ". Save" in _refusal(twenty)
    assert "more" not in _refusal(twenty)
    shown = _refusal([*twenty, "f20"])
    assert shown.startswith("refusing to roll back: 21 file(s)")
    assert ": " + ", ".join(twenty) + " and 1 more. Save" in shown


@pytest.mark.parametrize(
    ("current", "git_mode", "expected"),
    [
        (0o640, "100755", 0o750),  # x added where r is
        (0o604, "100755", 0o705),
        (0o755, "100644", 0o644),
        (0o777, "100644", 0o666),
        (None, "100755", 0o750),  # a new file: the umask decides
        (None, "100644", 0o640),
    ],
)
def test_restored_modes(
    workdir: Path, umask027: None, current: int | None, git_mode: str, expected: int
) -> None:
    path = workdir / "f"
    if current is not None:
        path.write_text("x")
        path.chmod(current)
    assert _restore_mode(path, git_mode) == expected
    assert os.umask(0o027) == 0o027  # the umask is left as it was


def test_a_new_file_mode_under_the_usual_umask(workdir: Path) -> None:
    old = os.umask(0o022)
    try:
        assert _restore_mode(workdir / "new", "100644") == 0o644
        assert _restore_mode(workdir / "new", "100755") == 0o755
    finally:
        os.umask(old)


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("Xmas plain.bin", "Xmas plain.bin"),
        ("big *.bin", "big \\*.bin"),
        ("a?[1]\\b", "a\\?\\[1]\\\\b"),
        ("trailing ", "trailing\\ "),
        ("two  ", "two \\ "),
    ],
)
def test_large_file_names_are_escaped_for_git_and_read_back(name: str, escaped: str) -> None:
    assert _escape(name) == escaped
    assert _unescape("/" + escaped) == name


def test_unescape_of_a_dangling_backslash() -> None:
    assert _unescape("/ab\\") == "ab"


DIFF_TREE = (
    b":100644 100644 " + b"a" * 40 + b" " + b"b" * 40 + b" M\0src/app.py\0"
    b":100755 000000 " + b"c" * 40 + b" " + b"0" * 40 + b" D\0run.sh\0"
    b":100644 100644 " + b"d" * 40 + b" " + b"e" * 40 + b" R087\0old name\0new name\0"
    b":000000 100644 " + b"0" * 40 + b" " + b"f" * 40 + b" A\0added\0"
    b":100644 120000 " + b"1" * 40 + b" " + b"2" * 40 + b" T\0link\0"
)


def test_diff_tree_output_is_parsed_to_the_old_side() -> None:
    assert _parse_diff_tree(DIFF_TREE) == [
        _Entry("src/app.py", "M", "100644", "a" * 40, "100644"),
        _Entry("run.sh", "D", "100755", "c" * 40, "000000"),
        _Entry("new name", "R", "100644", "d" * 40, "100644", "old name"),
        _Entry("added", "A", "000000", "0" * 40, "100644"),
        _Entry("link", "T", "100644", "1" * 40, "120000"),
    ]
    assert [(c.path, c.status, c.old_path) for c in map(_change, _parse_diff_tree(DIFF_TREE))] == [
        ("src/app.py", "modified", None),
        ("run.sh", "deleted", None),
        ("new name", "renamed", "old name"),
        ("added", "added", None),
        ("link", "type_changed", None),
    ]
    assert _parse_diff_tree(b"") == []


def test_a_copy_in_a_diff_is_reported_as_a_rename_from_its_source() -> None:
    copy = _Entry("copy.txt", "C", "100644", "a" * 40, "100644", "src.txt")
    assert _change(copy) == FileChange("copy.txt", "renamed", "src.txt")


def chunk(meta: object, parent: str = "", body: str | None = None) -> str:
    text = body if body is not None else f"keel checkpoint: x\n\n{json.dumps(meta)}\n"
    return f"\n{'1' * 40}\x1f{'2' * 40}\x1f{parent}\x1f{text}"


def test_commit_messages_are_parsed_with_defaults() -> None:
    full = {
        "v": 1,
        "kind": "before",
        "ts": 12.5,
        "session_id": "s",
        "tool_use_id": "t",
        "label": "l",
        "files": ["a", "b"],
        "files_total": 7,
        "skipped": ["big"],
    }
    cp = _parse_commit(chunk(full, parent=f"{'3' * 40} {'4' * 40}"))
    assert cp == Checkpoint(
        "1" * 40, "2" * 40, "before", 12.5, "s", "t", "l", ("a", "b"), 7, ("big",), "3" * 40
    )
    bare = _parse_commit(chunk({"kind": "manual"}, parent="3" * 40))
    assert bare == Checkpoint("1" * 40, "2" * 40, "manual", 0.0, parent="3" * 40, reused=True)
    first = _parse_commit(chunk({"kind": "manual"}))
    assert first is not None and first.parent is None and not first.reused
    counted = _parse_commit(chunk({"kind": "after", "files": ["a", "b"]}, parent="3" * 40))
    assert counted is not None and counted.files_total == 2 and not counted.reused


@pytest.mark.parametrize(
    "text",
    [
        chunk({"kind": "nonsense"}),
        chunk(["kind", "manual"]),
        chunk(None, body="keel checkpoint: x\n\nnot json\n"),
        chunk(None, body="a user's commit with no body"),
        "1" * 40 + "\x1f" + "2" * 40,
    ],
)
def test_commits_that_are_not_checkpoints_are_skipped(text: str) -> None:
    assert _parse_commit(text) is None


def intervals(chain: list[Checkpoint], session: str | None, running: bool = False) -> str:
    """One letter per interval: A agent's only, O others' only, B both."""
    out = _agent_intervals(chain, session, running=running)
    assert len(out) == len(chain) + 1
    return "".join({(True, False): "A", (False, True): "O", (True, True): "B"}[x] for x in out)


def test_who_owns_each_interval() -> None:
    s1, a1 = mk("before", "s", "t1", 1), mk("after", "s", "t1", 2)
    assert intervals([s1, a1], "s") == "OAO"
    assert intervals([s1, a1], None) == "OAO"
    assert intervals([s1, a1], "other") == "OOO"
    # a agent_call with no after ends at the next checkpoint, or stays open while a command runs
    assert intervals([s1, mk("manual", n=3)], "s") == "OAO"
    assert intervals([s1, mk("manual", n=3)], "s", running=True) == "OAA"
    assert intervals([s1], "s") == "OA"  # the newest checkpoint stays open until now
    assert intervals([s1, a1], "s", running=True) == "OAO"  # an after closes it all the same
    # an after of an earlier agent_call with the same ids does not close a later agent_call
    again = mk("before", "s", "t1", 3)
    assert intervals([s1, a1, again, mk("manual", n=4)], "s") == "OAOAO"
    # an after of another agent_call or another session does not close the agent_call
    assert intervals([s1, mk("after", "s", "t2", 3), mk("manual", n=4)], "s") == "OAOO"
    assert intervals([s1, mk("after", "x", "t1", 3), mk("manual", n=4)], "s") == "OAOO"
    assert intervals([s1, mk("manual", n=3), mk("after", "x", "t1", 4)], "s") == "OAOO"
    assert intervals([s1, mk("manual", n=3), a1], "s") == "OAAO"
    # another session's agent_call open at the same time: both
    o1, o2 = mk("before", "o", "u", 5), mk("after", "o", "u", 6)
    assert intervals([o1, s1, o2, a1], "s") == "OOBAO"
    assert intervals([o1, s1, o2, a1], None) == "OAAAO"
    # a rollback is keel's own work until its restored checkpoint
    rb, rs = mk("rollback", n=7), mk("restored", n=8)
    assert intervals([rb, rs, mk("manual", n=9)], "s") == "OAOO"
    assert intervals([rb], "s") == "OO"
    assert intervals([rb, mk("manual", n=9)], "s") == "OOO"
    assert intervals([mk("manual", n=9), rb, rs], "s") == "OOAO"


def test_io_errors_become_workspace_io() -> None:
    err = _io_error(OSError(13, "Permission denied", "/x/y"))
    assert (err.code, err.message) == (
        "workspace.io",
        "checkpoint storage failed: Permission denied (/x/y)",
    )
    assert err.context == {"path": "/x/y"}
    bare = _io_error(OSError("disk on fire"))
    assert bare.message == "checkpoint storage failed: disk on fire (no file)"
    assert bare.context == {"path": None}


def test_checkpoint_journal_payload() -> None:
    cp = Checkpoint("a" * 40, "b" * 40, "before", 1.0, "s", "t", None, ("x",), 3, ("big",))
    payload = checkpoint_payload(cp)
    assert (payload.checkpoint_id, payload.label, payload.tool_use_id) == ("a" * 12, "before", "t")
    assert payload.files == ["x"]
    assert payload.detail == {
        "kind": "before",
        "id": "a" * 40,
        "tree": "b" * 40,
        "reused": False,
        "files_total": 3,
        "skipped": ["big"],
    }
    event = checkpoint_event(cp)
    assert (event.kind, event.session_id, event.payload) == ("checkpoint", "s", payload)
    manual = Checkpoint("c" * 40, "b" * 40, "manual", 1.0, label="mine")
    assert checkpoint_event(manual).session_id == "manual"
    assert checkpoint_payload(manual).label == "mine"
