"""Taking checkpoints with real git: what one records, exactly.

New files in new directories, one-letter and odd names, files at the size cap, symlinks, a file
written while keel adds; the commit message and its metadata, kinds and sessions, the history,
and how ``get`` and ``resolve`` find a checkpoint (or say why not).
"""

from __future__ import annotations

import json
import locale
import os
import shutil
from pathlib import Path

import pytest
from checkpoint_helpers import message, mk, payload, ws

from keel.core.errors import UserError
from keel.journal import MemoryJournal
from keel.workspace import Checkpoints


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
