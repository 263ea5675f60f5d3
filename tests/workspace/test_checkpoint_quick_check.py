"""When a checkpoint trusts the quick no-change check (the directory watch and ``git
diff-files``) and when it must ask ``git status``, counted command by command.

Directory times are moved into the past with ``os.utime`` instead of sleeping out the watch's
racy window. ``test_checkpoint_watch.py`` checks that the quick check never misses a change.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from checkpoint_helpers import PAST, Counting, age, settled, ws

from keel.workspace import Checkpoints, _watch


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
