"""Checkpoints and rollback, pinned where a one-line slip would go unnoticed (issue 14).

What users rely on: a checkpoint records exactly the workspace (new files in new directories,
one-letter names, odd names, files at the size cap, a change a killed keel process left
staged), a rollback restores it byte for byte (modes, symlinks, deletions), the journal and
the commit message carry every field, the errors carry their codes and words, and the quick
no-change check is used when (and only when) it is safe. Directory times are moved into the
past with ``os.utime`` instead of sleeping out the watch's racy window.
"""

from __future__ import annotations

import json
import locale
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from keel.core.errors import UserError, WorkspaceError
from keel.core.events import CheckpointPayload, Event
from keel.journal import MemoryJournal
from keel.sandbox.os._registry import Registration
from keel.workspace import (
    Checkpoint,
    Checkpoints,
    _lock,
    _watch,
    checkpoint_event,
    checkpoint_payload,
)
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

TreeReader = Callable[[Path], dict[str, bytes | str]]
PAST = time.time() - 3600


# -- helpers ----------------------------------------------------------------------------------


def age(root: Path, *, files: bool = True) -> None:
    """Move times under ``root`` (not .keel) an hour back: out of the watch's racy window."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".keel", ".git")]
        os.utime(dirpath, (PAST, PAST))
        if files:
            for name in filenames:
                os.utime(os.path.join(dirpath, name), (PAST, PAST), follow_symlinks=False)


def settled(cps: Checkpoints) -> None:
    """Two checkpoints with aged directories: the next one can use the quick check."""
    age(cps.root)
    cps.create()
    age(cps.root, files=False)  # creating .keel/ moved the root; files stay as indexed
    cps.create()


class Counting:
    """Records the git commands a Checkpoints instance runs."""

    def __init__(self, cps: Checkpoints) -> None:
        self.commands: list[str] = []
        real = cps.git.proc

        def proc(args: Any, **kw: Any) -> Any:
            self.commands.append(args[0])
            return real(args, **kw)

        cps.git.proc = proc  # type: ignore[method-assign]


def ws(workdir: Path) -> Path:
    root = workdir / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hello')\n")
    (root / "README.md").write_text("# project\n")
    (root / "notes.txt").write_text("keep\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    return root


def call(cps: Checkpoints, session: str, tool: str, change: Callable[[], object]) -> None:
    """What the guard does around one agent tool call."""
    cps.create(session_id=session, tool_use_id=tool)
    change()
    cps.after_call(session, tool)


def payload(event: Event) -> CheckpointPayload:
    assert isinstance(event.payload, CheckpointPayload)
    return event.payload


def message(cps: Checkpoints, cp: Checkpoint) -> str:
    raw = cps.git.run("cat-file", "commit", cp.id).decode()
    return raw.partition("\n\n")[2]


def mk(kind: str, session: str | None = None, tool: str | None = None, n: int = 0) -> Checkpoint:
    return Checkpoint(f"{n:040x}", "t" * 40, kind, 0.0, session, tool)  # type: ignore[arg-type]


# -- pure rules -------------------------------------------------------------------------------


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


@pytest.fixture
def umask027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


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
    # a call with no after ends at the next checkpoint, or stays open while a command runs
    assert intervals([s1, mk("manual", n=3)], "s") == "OAO"
    assert intervals([s1, mk("manual", n=3)], "s", running=True) == "OAA"
    assert intervals([s1], "s") == "OA"  # the newest checkpoint stays open until now
    assert intervals([s1, a1], "s", running=True) == "OAO"  # an after closes it all the same
    # an after of an earlier call with the same ids does not close a later call
    again = mk("before", "s", "t1", 3)
    assert intervals([s1, a1, again, mk("manual", n=4)], "s") == "OAOAO"
    # an after of another call or another session does not close the call
    assert intervals([s1, mk("after", "s", "t2", 3), mk("manual", n=4)], "s") == "OAOO"
    assert intervals([s1, mk("after", "x", "t1", 3), mk("manual", n=4)], "s") == "OAOO"
    assert intervals([s1, mk("manual", n=3), mk("after", "x", "t1", 4)], "s") == "OAOO"
    assert intervals([s1, mk("manual", n=3), a1], "s") == "OAAO"
    # another session's call open at the same time: both
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


# -- taking checkpoints -----------------------------------------------------------------------


def test_the_commit_message_carries_the_metadata(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    first = cps.create(label="first")
    assert (root / ".keel" / "checkpoints" / "HEAD").exists()
    (root / "README.md").write_text("changed\n")
    cp = cps.create(session_id="s", tool_use_id="t", label="x" * 300 + "\nsecond line")
    subject, _, rest = message(cps, cp).partition("\n\n")
    assert subject == ("keel checkpoint: before " + "x" * 300)[:200]
    meta = json.loads(rest)
    assert rest == json.dumps(meta, sort_keys=True) + "\n"
    assert meta == {
        "v": 1,
        "kind": "before",
        "ts": cp.ts,
        "session_id": "s",
        "tool_use_id": "t",
        "label": "x" * 300 + "\nsecond line",
        "files": ["README.md"],
        "files_total": 1,
        "skipped": [],
    }
    assert message(cps, first).startswith("keel checkpoint: manual first\n\n")
    assert message(cps, cps.create()).startswith("keel checkpoint: manual\n\n{")
    assert cp.parent == first.id and first.parent is None
    assert cps.history()[:2] == [first, cp]  # read back exactly as returned
    assert int(cps.git.run("log", "-1", "--format=%ct", cp.id)) == int(cp.ts)


def test_kinds_sessions_and_history(workdir: Path) -> None:
    root = ws(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    manual = cps.create()
    before = cps.create(session_id="s", tool_use_id="t1")
    after = cps.after_call("s", "t1")
    other = cps.create(session_id="o", tool_use_id="t1")
    quiet = cps.create(session_id="s", tool_use_id="t2", journal=False)
    assert [c.kind for c in (manual, before, after, other, quiet)] == [
        "manual",
        "before",
        "after",
        "before",
        "before",
    ]
    assert (after.session_id, after.tool_use_id) == ("s", "t1")
    assert [payload(e).checkpoint_id for e in journal.events()] == [
        c.short for c in (manual, before, after, other)
    ]
    assert cps.history("s") == [before, after, quiet]
    assert cps.history("o") == [other]
    assert cps.find("s", "t1") == before
    assert cps.find("o", "t1") == other
    assert cps.find("s", "t3") is None
    assert cps.after_call("s", "t9", journal=False).kind == "after"  # the caller journals it
    assert len(list(journal.events())) == 4
    assert Checkpoints(root, journal).after_call("s", "t2").kind == "after"
    assert payload(list(journal.events())[-1]).detail["kind"] == "after"


def test_get_and_resolve(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    with pytest.raises(UserError) as info:
        cps.resolve()
    assert info.value.code == "workspace.no_checkpoint"
    assert info.value.message == (
        "there are no checkpoints yet (keel takes one before each agent change; "
        "`keel checkpoint create` takes one by hand)"
    )
    manual = cps.create()
    b1 = cps.create(session_id="s", tool_use_id="1")
    cps.after_call("s", "1")
    b2 = cps.create(session_id="s", tool_use_id="2")
    cps.after_call("s", "2")
    cps.create(session_id="o", tool_use_id="3")
    assert cps.resolve(session_id="s") == b1
    assert cps.resolve(session_id="s", last=True) == b2
    assert cps.resolve(last=True).session_id == "o"
    assert cps.resolve() == cps.resolve(last=True)
    assert cps.resolve(manual.id[:8], session_id="s") == manual
    assert cps.get(f"  {manual.id[:4].upper()} ") == manual
    with pytest.raises(UserError) as info:
        cps.resolve(session_id="nobody")
    assert (info.value.code, info.value.message) == (
        "workspace.no_checkpoint",
        "session 'nobody' has no checkpoints",
    )
    with pytest.raises(UserError) as info:
        cps.resolve(session_id="nobody", last=True)
    assert info.value.code == "workspace.no_checkpoint"
    for bad in ("abc", "abcg", "xyz0"):
        with pytest.raises(UserError) as info:
            cps.get(bad)
        assert info.value.code == "workspace.bad_checkpoint_id"
        assert info.value.message == (
            f"{bad!r} is not a checkpoint id (use 4 or more hex digits from `keel checkpoint list`)"
        )
    unknown = "0000" if not manual.id.startswith("0000") else "ffff"
    with pytest.raises(UserError) as info:
        cps.get(unknown)
    assert (info.value.code, info.value.message) == (
        "workspace.unknown_checkpoint",
        f"no checkpoint {unknown!r}",
    )
    twins = [mk("manual", n=0xABCD1 << 140), mk("manual", n=0xABCD2 << 140)]
    monkeypatch.setattr(cps, "history", lambda session_id=None: twins)
    with pytest.raises(UserError) as info:
        cps.get("abcd")
    assert (info.value.code, info.value.message) == (
        "workspace.ambiguous_checkpoint",
        "checkpoint id 'abcd' is ambiguous; give more digits",
    )
    assert cps.get("abcd2") == twins[1]


def test_what_a_checkpoint_records(workdir: Path) -> None:
    root = ws(workdir)
    (root / ".gitignore").write_text("*.log\n")
    (root / "cap.bin").write_bytes(b"x" * 100)
    (root / "over.bin").write_bytes(b"x" * 101)
    odd = os.fsdecode(b"over\xff.bin")  # not UTF-8: kept in the list as its bytes
    (root / odd).write_bytes(b"x" * 101)
    cps = Checkpoints(root, max_file_bytes=100)
    first = cps.create()
    assert first.skipped == ("over.bin", odd)
    (root / "a").write_text("one letter\n")  # shortest status line
    (root / "zX").write_text("ends in X\n")
    (root / "sp ace ").write_text("ends in a space\n")
    (root / "-d").mkdir()  # an untracked directory whose name looks like an option
    (root / "-d" / "in.py").write_text("x\n")
    (root / "-d" / "noise.log").write_text("ignored\n")
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "m.py").write_text("m\n")
    (root / "notes.txt").unlink()
    (root / "run.sh").unlink()
    cp = cps.create()
    assert cp.files == ("-d/in.py", "a", "notes.txt", "pkg/sub/m.py", "run.sh", "sp ace ", "zX")
    assert cp.files_total == 7
    listed = cps.git.run("ls-tree", "-r", "--name-only", cp.tree).decode().split("\n")
    assert sorted(filter(None, listed)) == [
        "-d/in.py",
        ".gitignore",
        "README.md",
        "a",
        "cap.bin",
        "pkg/sub/m.py",
        "sp ace ",
        "src/app.py",
        "zX",
    ]
    assert cp.skipped == ("over.bin", odd)
    again = cps.create()
    assert again.reused and again.tree == cp.tree and again.files == ()
    assert again.skipped == ("over.bin", odd)
    (root / "cap.bin").write_bytes(b"x" * 101)  # grows over the cap: out of the tree
    grown = cps.create()
    assert grown.skipped == ("cap.bin", "over.bin", odd)
    assert grown.tree != again.tree and not grown.reused and grown.files == ()
    shutil.rmtree(root / "src")
    (root / "src").symlink_to("pkg")  # git must not follow it to src/app.py
    linked = cps.create()
    assert linked.files == ("src", "src/app.py")
    assert cps.git.run("cat-file", "-p", f"{linked.tree}:src") == b"pkg"


def test_a_change_a_killed_keel_left_staged_is_checkpointed(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    settled(cps)
    first = cps.create()
    (root / "README.md").write_text("# project, staged\n")
    os.utime(root / "README.md", (PAST, PAST))
    (root / "notes.txt").rename(root / "notes-moved.txt")
    cps.git.run("add", "-A")  # what a keel process killed before its commit leaves
    cp = cps.create()
    assert cp.files == ("README.md", "notes-moved.txt", "notes.txt") and not cp.reused
    blob = cps.git.run("cat-file", "-p", f"{cp.tree}:README.md")
    assert blob == b"# project, staged\n"
    assert cps.diff(first, patch=False).changes[0].path == "README.md"


def test_the_quick_check_is_used_only_when_safe(
    workdir: Path, user_git: Callable[..., str]
) -> None:
    root = ws(workdir)
    nested = root / "vendor" / "lib"
    nested.mkdir(parents=True)
    (nested / "a.txt").write_text("a\n")
    user_git(nested, "init", "-q")  # a nested repository stays out, and stays listed
    (root / ".gitignore").write_text("buildX/\n")
    (root / "buildX").mkdir()
    (root / "buildX" / "out.o").write_text("o\n")
    (root / "big.dat").write_bytes(b"x" * 500)
    cps = Checkpoints(root, max_file_bytes=100)
    settled(cps)
    assert (root / ".keel" / "checkpoints" / "keel-watch").is_file()
    counting = Counting(cps)
    cp = cps.create()
    assert cp.reused and counting.commands == ["diff-files"]
    assert cp.skipped == ("big.dat", "vendor/lib/")
    saved = _watch.load(cps.watch_file)  # the user's ignored dirs are not watched; keel's are
    assert saved is not None and "vendor/lib" in saved.dirs and "buildX" not in saved.dirs
    (root / "buildX" / "more.o").write_text("ignored dirs are not watched\n")
    counting.commands.clear()
    assert cps.create().reused and counting.commands == ["diff-files"]
    (root / "big.dat").write_bytes(b"small")  # back under the cap: no directory moved
    shrunk = cps.create()
    assert shrunk.files == ("big.dat",) and shrunk.skipped == ("vendor/lib/",)
    (root / "README.md").write_text("# PROJECT\n")  # same size, tracked: diff-files sees it
    counting.commands.clear()
    edited = cps.create()
    assert edited.files == ("README.md",)
    assert counting.commands == ["diff-files", "add", "write-tree"]  # no status, no diff-tree
    counting.commands.clear()
    assert cps.create().reused and counting.commands == ["diff-files"]  # the watch still holds
    (root / "new.txt").write_text("n\n")  # a new entry: the directory moved
    counting.commands.clear()
    added = cps.create()
    assert added.files == ("new.txt",)
    assert "status" in counting.commands


def test_a_full_survey_keeps_watching_a_nested_repository(
    workdir: Path, user_git: Callable[..., str]
) -> None:
    root = ws(workdir)
    nested = root / "vendor" / "lib"
    nested.mkdir(parents=True)
    (nested / "a.txt").write_text("a\n")
    user_git(nested, "init", "-q")
    cps = Checkpoints(root)
    settled(cps)  # vendor/lib/ is now on keel's own list of what it leaves out
    cps.watch_file.unlink()  # a lost watch: the next survey walks the whole tree
    assert cps.create().skipped == ("vendor/lib/",)
    saved = _watch.load(cps.watch_file)  # keel's list is not the user's ignore rules
    assert saved is not None and "vendor/lib" in saved.dirs


def test_an_ignore_file_edited_in_place_is_seen_in_full(workdir: Path) -> None:
    root = ws(workdir)
    (root / ".gitignore").write_text("*.log\n")
    (root / "x.log").write_text("log\n")
    cps = Checkpoints(root)
    settled(cps)
    counting = Counting(cps)
    (root / ".gitignore").write_text("*.tmp\n")  # in place: no directory moved
    cp = cps.create()
    assert cp.files == (".gitignore", "x.log")  # the file it no longer ignores too
    assert "status" in counting.commands


def test_a_fresh_gitignore_drops_the_watch(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    settled(cps)
    watch = root / ".keel" / "checkpoints" / "keel-watch"
    assert watch.is_file()
    counting = Counting(cps)  # no file was ever over the cap: nothing shrank
    assert cps.create().reused and counting.commands == ["diff-files"]
    (root / ".gitignore").write_text("*.log\n")
    (root / "-first.txt").write_text("sorts before .gitignore\n")
    cp = cps.create()
    assert cp.files == ("-first.txt", ".gitignore")
    assert not watch.exists()  # the survey may predate the new rules: a full one next time
    age(root)
    cps.create()
    assert watch.is_file()
    (root / ".gitignoreX").write_text("not an ignore file\n")
    (root / ".gitignore ").write_text("nor is this\n")
    assert cps.create().files == (".gitignore ", ".gitignoreX")
    assert watch.is_file()  # no ignore rule changed: the new survey is kept


def test_without_the_watch_every_checkpoint_asks_git_status(workdir: Path) -> None:
    root = ws(workdir)
    settled(Checkpoints(root))  # a watch a watching instance left must not be trusted
    cps = Checkpoints(root, watch=False)
    counting = Counting(cps)
    assert cps.create().reused
    assert counting.commands == ["status"]
    assert not (root / ".keel" / "checkpoints" / "keel-watch").exists()
    assert cps.create().reused and counting.commands == ["status", "status"]


def test_many_new_files_after_the_first_checkpoint(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    first = cps.create()
    (root / "gen").mkdir()
    for i in range(201):  # over the pathspec limit: one `git add -A`
        (root / "gen" / f"g{i}.txt").write_text(f"{i}\n")
    cp = cps.create()
    assert cp.files_total == 201
    listed = cps.git.run("ls-tree", "-r", "--name-only", cp.tree).decode().split()
    old = cps.git.run("ls-tree", "-r", "--name-only", first.tree).decode().split()
    assert sorted(listed) == sorted([*old, *(f"gen/g{i}.txt" for i in range(201))])


# -- diff ------------------------------------------------------------------------------------


def test_diff_lists_renames_type_changes_and_scope(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cp = cps.create()
    (root / "notes.txt").rename(root / "docs.txt")
    (root / "run.sh").unlink()
    (root / "run.sh").symlink_to("README.md")
    (root / "src" / "app.py").write_bytes(b"\xff\xfe not utf-8\n")
    result = cps.diff(cp, in_scope=lambda p: p != "notes.txt")
    assert [(c.path, c.status, c.old_path) for c in result.changes] == [
        ("docs.txt", "renamed", "notes.txt"),
        ("run.sh", "type_changed", None),
        ("src/app.py", "modified", None),
    ]
    assert result.outside_scope == ("notes.txt",)
    assert "rename from notes.txt" in result.patch
    assert "+\ufffd\ufffd not utf-8" in result.patch
    assert result.checkpoint == cp
    quiet = cps.diff(cp, patch=False)
    assert quiet.patch == "" and quiet.changes == result.changes and quiet.outside_scope == ()


# -- rollback --------------------------------------------------------------------------------


def test_rollback_restores_bytes_modes_links_and_journals_it(
    workdir: Path, tree: TreeReader
) -> None:
    root = ws(workdir)
    (root / "link").symlink_to("README.md")
    (root / "bin.dat").write_bytes(bytes(range(256)) * 3)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    progress: list[str] = []
    cps.on_progress = progress.append
    before = tree(root)
    modes = {p: stat.S_IMODE(os.lstat(root / p).st_mode) for p in ("run.sh", "README.md")}

    def change() -> None:
        (root / "run.sh").chmod(0o644)
        (root / "README.md").chmod(0o755)
        (root / "link").unlink()
        (root / "link").symlink_to("notes.txt")
        (root / "bin.dat").write_bytes(b"other\n")
        (root / "src" / "app.py").write_text("print('changed')\nsecond\n")
        (root / "notes.txt").unlink()
        (root / "new" / "deep").mkdir(parents=True)
        (root / "new" / "deep" / "n.txt").write_text("n\n")

    call(cps, "s", "t", change)
    (root / "mine.txt").write_text("the user's\n")
    target = cps.resolve(session_id="s")
    progress.clear()
    result = cps.rollback(target)
    assert progress == [
        "scanning the workspace",
        "adding 1 changed file(s) to the checkpoint",  # mine.txt, in the undo checkpoint
        "working out who changed what",
        "restoring 7 file(s)",
        "scanning the workspace",
        "adding 6 changed file(s) to the checkpoint",  # the deleted one is not added
    ]
    assert tree(root) == {**before, "mine.txt": b"the user's\n"}
    assert {p: stat.S_IMODE(os.lstat(root / p).st_mode) for p in modes} == modes
    assert not (root / "new").exists()
    assert result.restored == ("README.md", "bin.dat", "link", "notes.txt", "run.sh", "src/app.py")
    assert result.deleted == ("new/deep/n.txt",)
    assert result.kept == ("mine.txt",) and result.overwritten == ()
    assert result.target == target
    assert result.undo is not None and result.after is not None
    assert (result.undo.kind, result.undo.session_id, result.undo.label) == (
        "rollback",
        "s",
        f"before rollback to {target.short}",
    )
    assert (result.after.kind, result.after.session_id, result.after.label) == (
        "restored",
        "s",
        f"rolled back to {target.short}",
    )
    assert result.undo.tool_use_id is None and result.after.tool_use_id is None
    assert result.after.parent == result.undo.id
    assert cps.history()[-2:] == [result.undo, result.after]
    event = list(journal.events())[-1]
    assert (event.kind, event.session_id) == ("rollback", "s")
    assert payload(event).checkpoint_id == target.short
    assert payload(event).label == f"rollback to {target.short}"
    assert payload(event).tool_use_id == "t"
    assert payload(event).files == [*sorted([*result.restored, "new/deep/n.txt"])]
    assert payload(event).detail == {
        "undo": result.undo.short,
        "after": result.after.short,
        "restored": 6,
        "deleted": ["new/deep/n.txt"],
        "overwritten": [],
        "kept": ["mine.txt"],
    }


def test_a_rollback_can_be_rolled_back(workdir: Path, tree: TreeReader) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    call(cps, "s", "t", lambda: (root / "README.md").write_text("agent\n"))
    changed = tree(root)
    first = cps.rollback(cps.resolve(session_id="s"))
    assert first.undo is not None
    second = cps.rollback(first.undo)
    assert tree(root) == changed
    assert second.restored == ("README.md",)


def test_force_resets_everything_and_journals_the_overwrite(workdir: Path) -> None:
    root = ws(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    target = cps.create(label="by hand")
    (root / "scratch.txt").write_text("a note\n")  # the user's, gone again by the rollback
    call(cps, "s", "t", lambda: (root / "README.md").write_text("agent\n"))
    (root / "scratch.txt").unlink()
    (root / "README.md").write_text("user on top\n")
    (root / "notes.txt").write_text("user only\n")
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(target)
    assert info.value.code == "workspace.user_changes"
    assert info.value.message == _refusal(["README.md"])
    assert info.value.context == {"files": ["README.md"], "checkpoint": target.short}
    result = cps.rollback(target, force=True)
    assert result.overwritten == ("README.md", "notes.txt")
    assert result.kept == ()
    assert result.restored == ("README.md", "notes.txt")
    assert (root / "notes.txt").read_text() == "keep\n"
    event = list(journal.events())[-1]
    assert event.session_id == "manual"
    assert payload(event).tool_use_id is None
    assert payload(event).detail["overwritten"] == ["README.md", "notes.txt"]


def test_only_the_agents_files_are_restored(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    (root / "early.txt").write_text("user before\n")
    call(cps, "s", "t1", lambda: (root / "src" / "app.py").write_text("agent 1\n"))
    call(cps, "o", "u1", lambda: (root / "theirs.txt").write_text("another session\n"))
    (root / "between.txt").write_text("user between\n")
    call(cps, "s", "t2", lambda: (root / "README.md").write_text("agent 2\n"))
    (root / "after.txt").write_text("user after\n")
    result = cps.rollback(cps.resolve(session_id="s"))
    assert result.restored == ("README.md", "src/app.py")
    assert result.kept == ("after.txt", "between.txt", "theirs.txt")
    assert (root / "between.txt").exists() and (root / "early.txt").exists()


def test_a_call_without_an_after_is_open_until_the_next_checkpoint(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    target = cps.create(session_id="s", tool_use_id="t1")
    (root / "README.md").write_text("agent\n")  # the call's post-tool hook never ran
    cps.create(label="someone else's checkpoint")
    (root / "notes.txt").write_text("later\n")
    plan = cps.rollback(target, dry_run=True)
    assert (plan.restored, plan.kept) == (("README.md",), ("notes.txt",))
    (root / ".keel" / "exec").mkdir()
    running = Registration(str(root), {})  # a contained command: it may be that call's
    try:
        plan = cps.rollback(target, dry_run=True)
    finally:
        running.remove()
    assert (plan.restored, plan.kept) == (("README.md", "notes.txt"), ())


def test_a_file_over_the_cap_at_the_checkpoint_is_left_alone(workdir: Path) -> None:
    root = ws(workdir)
    (root / "big.bin").write_bytes(b"x" * 200)
    cps = Checkpoints(root, max_file_bytes=100)
    call(
        cps,
        "s",
        "t",
        lambda: (
            (root / "big.bin").write_bytes(b"small"),
            (root / "README.md").write_text("agent\n"),
        ),
    )
    result = cps.rollback(cps.resolve(session_id="s"))
    assert result.restored == ("README.md",)
    assert (root / "big.bin").read_bytes() == b"small"


def test_a_missing_object_is_workspace_corrupt(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    call(cps, "s", "t", lambda: (root / "README.md").write_text("agent\n"))
    sha = cps.git.run("rev-parse", f"{cps.history()[0].tree}:README.md").decode().strip()
    (cps.git_dir / "objects" / sha[:2] / sha[2:]).unlink()
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(cps.resolve(session_id="s"))
    assert (info.value.code, info.value.message) == (
        "workspace.corrupt",
        f"checkpoint object {sha} is missing",
    )
    assert (root / "README.md").read_text() == "agent\n"


def test_a_checkpoint_from_elsewhere_is_unknown(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cps.create()
    stranger = mk("before", "s", "t", 0xABC)
    with pytest.raises(UserError) as info:
        cps.rollback(stranger)
    assert (info.value.code, info.value.message) == (
        "workspace.unknown_checkpoint",
        f"checkpoint {stranger.short} is not in this workspace's history",
    )


def test_a_stale_git_lock_is_journaled_under_the_session(workdir: Path) -> None:
    root = ws(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    cps.create()
    lock = cps.git_dir / "keel-index.lock"
    lock.write_text("")  # left by a keel process killed in the middle of git add
    target = cps.create(session_id="s", tool_use_id="t")
    assert not lock.exists()
    assert [r.lock for r in cps.recovered] == ["keel-index.lock"]
    lock.write_text("")
    cps.rollback(target)
    errors = [e for e in journal.events() if e.kind == "error"]
    assert [e.session_id for e in errors] == ["s", "s"]


def test_a_held_store_bounds_the_wait(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root, lock_timeout=0)
    cps.create()
    fd = _lock.acquire(cps.git_dir / _lock.LOCK_NAME)
    try:
        with pytest.raises(WorkspaceError) as info:
            cps.create()
        assert info.value.code == "workspace.locked"
        other = Checkpoints(root)
        for attempt in (
            lambda: other.create(deadline=0.0),
            lambda: other.after_call("s", deadline=0.0),
            lambda: other.diff(cps.history()[0], deadline=0.0),
            lambda: other.rollback(cps.history()[0], deadline=0.0),
        ):
            with pytest.raises(WorkspaceError) as info:
                attempt()
            assert info.value.code == "workspace.locked"
    finally:
        _lock.release(fd)
    assert len(cps.history()) == 1


# -- session-4 survivors ------------------------------------------------------------------------


def test_a_copy_in_a_diff_is_reported_as_a_rename_from_its_source() -> None:
    copy = _Entry("copy.txt", "C", "100644", "a" * 40, "100644", "src.txt")
    assert _change(copy) == FileChange("copy.txt", "renamed", "src.txt")


def test_a_stale_git_lock_is_journaled_with_every_field(workdir: Path) -> None:
    root = ws(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    cps.create()
    lock = cps.git_dir / "keel-index.lock"
    lock.write_text("")
    os.utime(lock, (time.time() - 120, time.time() - 120))
    cps.create(session_id="s")
    (item,) = cps.recovered
    (event,) = [e for e in journal.events() if e.kind == "error"]
    assert event.session_id == "s"
    assert event.payload.data == {  # pyright: ignore[reportAttributeAccessIssue]
        "event": "checkpoint.lock_recovered",
        "message": "removed a stale git lock 'keel-index.lock' (120s old) left in the "
        "checkpoint store by a keel process that was killed",
        "repo": str(cps.git_dir),
        **item.to_dict(),
    }


def test_a_large_files_list_a_killed_writer_left_half_written_is_cleared(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cps.create()
    names = set(os.listdir(cps.git_dir))

    def killed(src: str, dst: str) -> None:  # the process dies before its rename
        raise OSError(5, "killed")

    monkeypatch.setattr(os, "replace", killed)
    monkeypatch.setattr(os, "unlink", lambda *a, **k: None)
    with pytest.raises(OSError):
        cps._set_large_files({"big.bin"})  # pyright: ignore[reportPrivateUsage]
    monkeypatch.undo()
    assert len(set(os.listdir(cps.git_dir)) - names) == 1  # its temporary file
    cps.create()  # the next keel process clears what the dead one left
    assert set(os.listdir(cps.git_dir)) - names <= {"keel-recovered.json"}


def test_a_dry_run_says_exactly_what_the_rollback_does(workdir: Path, tree: TreeReader) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)

    def agent() -> None:
        (root / "README.md").write_text("agent\n")
        (root / "new.txt").write_text("added by the agent\n")

    call(cps, "s", "t", agent)
    (root / "notes.txt").write_text("the user's\n")
    target = cps.resolve(session_id="s")
    before = tree(root)
    plan = cps.rollback(target, dry_run=True)
    assert tree(root) == before
    assert (plan.undo, plan.after, plan.dry_run) == (None, None, True)
    assert (plan.restored, plan.deleted, plan.overwritten, plan.kept) == (
        ("README.md",),
        ("new.txt",),
        (),
        ("notes.txt",),
    )
    (root / "README.md").write_text("the user's, on top\n")
    before = tree(root)
    forced = cps.rollback(target, force=True, dry_run=True)
    assert tree(root) == before and forced.dry_run
    assert (forced.restored, forced.deleted, forced.overwritten, forced.kept) == (
        ("README.md", "notes.txt"),
        ("new.txt",),
        ("README.md", "notes.txt"),
        (),
    )
    done = cps.rollback(target, force=True)
    assert not done.dry_run and done.undo is not None
    assert (done.restored, done.deleted, done.overwritten, done.kept) == (
        forced.restored,
        forced.deleted,
        forced.overwritten,
        forced.kept,
    )


# -- session 20 ----------------------------------------------------------------------------


def test_an_in_place_edit_a_killed_keel_left_staged_is_not_missed(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    settled(cps)
    (root / "README.md").write_text("# project, staged\n")  # in place: no directory moved
    cps.git.run("add", "-A")  # a keel killed before its commit: the index moved, not the head
    counting = Counting(cps)
    cp = cps.create()  # the watch's index is not this one: diff-files would see nothing
    assert cp.files == ("README.md",) and not cp.reused
    assert "status" in counting.commands
    assert cps.git.run("cat-file", "-p", f"{cp.tree}:README.md") == b"# project, staged\n"


def test_a_file_written_while_keel_adds_is_the_next_checkpoints_change(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cps.create()
    (root / "README.md").write_text("# edited\n")

    def late(what: str) -> None:  # after git status, before git add: only the listed paths
        if what.startswith("adding"):
            (root / "late.txt").write_text("written during the snapshot\n")

    cps.on_progress = late
    cp = cps.create()
    cps.on_progress = None
    assert cp.files == ("README.md",)  # the checkpoint holds exactly what it lists
    listed = cps.git.run("ls-tree", "-r", "--name-only", cp.tree).decode().split("\n")
    assert "late.txt" not in listed and "README.md" in listed
    assert cps.create().files == ("late.txt",)


def test_the_large_files_list_is_read_as_utf8_whatever_the_locale(workdir: Path) -> None:
    root = ws(workdir)
    name = "caf\u00e9.bin"
    (root / name).write_bytes(b"x" * 101)
    cps = Checkpoints(root, max_file_bytes=100)
    assert cps.create().skipped == (name,)
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # a host program's ASCII locale: keel wrote UTF-8
    try:
        cp = cps.create()
    finally:
        locale.setlocale(locale.LC_CTYPE, old)
    assert cp.skipped == (name,)
