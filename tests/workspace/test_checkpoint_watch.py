"""The quick no-change check (directory watch + git diff-files) never misses a change."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpoint_helpers import Counting

from _support import make_workspace
from keel.workspace import Checkpoints
from keel.workspace._watch import RACY_NS

SETTLE = RACY_NS / 1e9 * 2.5  # let file times fall out of the racy window


def settled(cps: Checkpoints) -> None:
    """Checkpoints until the watch is recorded outside the racy window of the files."""
    for _ in range(2):
        cps.create()
        time.sleep(SETTLE)


@pytest.fixture
def ws(workdir: Path) -> Path:
    files = {
        "src/pkg/mod.py": "x = 1\n",
        "README.md": "readme\n",
        ".gitignore": "build/\n*.log\n",
        "build/out.bin": "ignored\n",
    }
    return make_workspace(workdir / "ws", files=files)


def test_no_change_uses_only_diff_files(ws: Path) -> None:
    cps = Checkpoints(ws)
    settled(cps)
    counting = Counting(cps)
    cp = cps.create()
    assert cp.reused
    assert counting.commands == ["diff-files"]


CHANGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "new file in root": (lambda r: (r / "new.txt").write_text("n\n"), "new.txt"),
    "new file in subdir": (
        lambda r: (r / "src" / "pkg" / "b.py").write_text("b\n"),
        "src/pkg/b.py",
    ),
    "same-size edit": (lambda r: (r / "README.md").write_text("README\n"), "README.md"),
    "delete": (lambda r: (r / "README.md").unlink(), "README.md"),
    "deep new dirs": (
        lambda r: (r / "a" / "b" / "c").mkdir(parents=True) or (r / "a/b/c/f.txt").write_text("f"),
        "a/b/c/f.txt",
    ),
    "rename dir": (lambda r: (r / "src" / "pkg").rename(r / "src" / "lib"), "src/lib/mod.py"),
    "dir to symlink": (
        lambda r: (
            __import__("shutil").rmtree(r / "src" / "pkg")
            or (r / "src" / "pkg").symlink_to("../build")
        ),
        "src/pkg",
    ),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_each_change_is_seen_after_a_quiet_checkpoint(ws: Path, name: str) -> None:
    change, expected = CHANGES[name]
    cps = Checkpoints(ws)
    settled(cps)
    assert cps.create().reused
    change(ws)
    cp = cps.create()
    assert expected in cp.files


def test_files_in_a_new_empty_dir_are_seen_later(ws: Path) -> None:
    cps = Checkpoints(ws)
    settled(cps)
    (ws / "empty" / "deeper").mkdir(parents=True)
    assert cps.create().reused  # empty directories are not content
    time.sleep(SETTLE)
    assert cps.create().reused
    (ws / "empty" / "deeper" / "late.txt").write_text("late\n")
    assert "empty/deeper/late.txt" in cps.create().files


def test_ignored_dirs_are_not_watched_and_unignoring_is_seen(ws: Path) -> None:
    cps = Checkpoints(ws)
    settled(cps)
    counting = Counting(cps)
    (ws / "build" / "more.bin").write_text("still ignored\n")
    cp = cps.create()
    assert cp.reused and counting.commands == ["diff-files"]
    (ws / ".gitignore").write_text("*.log\n")
    cp = cps.create()
    assert {"build/out.bin", "build/more.bin", ".gitignore"} <= set(cp.files)
    time.sleep(SETTLE)
    cps.create()
    time.sleep(SETTLE)
    (ws / "build" / "third.bin").write_text("now watched\n")
    assert "build/third.bin" in cps.create().files


def test_large_file_shrinking_is_seen(ws: Path) -> None:
    (ws / "big.dat").write_bytes(b"x" * 500)
    cps = Checkpoints(ws, max_file_bytes=100)
    settled(cps)
    assert cps.create().skipped == ("big.dat",)
    (ws / "big.dat").write_bytes(b"small")
    assert "big.dat" in cps.create().files


def test_watch_can_be_switched_off(ws: Path) -> None:
    cps = Checkpoints(ws, watch=False)
    settled(cps)
    counting = Counting(cps)
    cps.create()
    assert counting.commands == ["status"]
    assert not (ws / ".keel" / "checkpoints" / "keel-watch").exists()


def test_corrupt_watch_falls_back(ws: Path) -> None:
    cps = Checkpoints(ws)
    settled(cps)
    (ws / ".keel" / "checkpoints" / "keel-watch").write_bytes(b"\x00garbage")
    (ws / "new.txt").write_text("n\n")
    assert "new.txt" in cps.create().files


def test_nested_repo_turning_into_a_plain_dir(ws: Path, user_git: Callable[..., str]) -> None:
    nested = ws / "vendor" / "lib"
    nested.mkdir(parents=True)
    (nested / "a.txt").write_text("a\n")
    user_git(nested, "init", "-q")
    cps = Checkpoints(ws)
    settled(cps)
    __import__("shutil").rmtree(nested / ".git")
    cps.create()
    time.sleep(SETTLE)
    cps.create()
    time.sleep(SETTLE)
    (nested / "later.txt").write_text("later\n")
    assert "vendor/lib/later.txt" in cps.create().files


@pytest.mark.slow
def test_random_operations_never_fool_the_quick_check(ws: Path) -> None:
    import random
    import shutil

    rng = random.Random(1234)
    cps = Checkpoints(ws)
    settled(cps)

    def truth_tree(step: int) -> str:
        """The tree a full scan takes, on a copy of the work tree and its shadow repository."""
        copy = ws.parent / f"copy{step}"
        shutil.copytree(ws, copy, symlinks=True)
        return Checkpoints(copy, watch=False).create().tree

    quick_hits = 0

    def dirs() -> list[Path]:
        return [p for p in ws.rglob("*") if p.is_dir() and ".keel" not in p.parts]

    def files() -> list[Path]:
        return [p for p in ws.rglob("*") if p.is_file() and ".keel" not in p.parts]

    for step in range(30):
        choice = rng.choice(["new", "edit", "delete", "mkdir", "rmtree", "rename", "ignore"])
        target_dir = rng.choice([ws, *dirs()])
        if choice == "new":
            (target_dir / f"f{step}.txt").write_text(f"{step}\n")
        elif choice == "edit" and files():
            rng.choice(files()).write_text(f"edit {step}\n")
        elif choice == "delete" and files():
            rng.choice(files()).unlink()
        elif choice == "mkdir":
            (target_dir / f"d{step}" / "e").mkdir(parents=True, exist_ok=True)
        elif choice == "rmtree" and target_dir != ws:
            shutil.rmtree(target_dir)
        elif choice == "rename" and target_dir != ws:
            target_dir.rename(target_dir.with_name(target_dir.name + "-r"))
        elif choice == "ignore":
            (ws / ".gitignore").write_text(rng.choice(["build/\n", "*.txt\n", "d*/\n", ""]))
        if step % 3 == 0:
            time.sleep(SETTLE)
        counting = Counting(cps)
        quick = cps.create()
        quick_hits += counting.commands[:1] == ["diff-files"]
        assert truth_tree(step) == quick.tree, (step, choice)
    assert quick_hits >= 1  # the quick check was exercised, not just the full scan
