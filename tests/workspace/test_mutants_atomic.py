"""Mutation-testing survivors of the atomic file transaction (issue 14, tests/MUTATION.md).

The undo of a file that replaced a directory, a rollback step that itself fails, where a
deleted file is kept until commit, and pruning that must stop at the root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.errors import WorkspaceError
from keel.workspace import _atomic
from keel.workspace._atomic import FileTransaction


def _fail_at(monkeypatch: pytest.MonkeyPatch, n: int, before=None) -> list[tuple[Path, Path]]:
    """Make the ``n``th rename fail (after ``before()``); return every rename asked for."""
    real = _atomic._replace
    seen: list[tuple[Path, Path]] = []

    def replace(src: Path, dst: Path) -> None:
        seen.append((src, dst))
        if len(seen) == n:
            if before is not None:
                before()
            raise OSError(5, "injected", str(dst))
        real(src, dst)

    monkeypatch.setattr(_atomic, "_replace", replace)
    return seen


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): ("dir" if p.is_dir() else p.read_text())
        for p in sorted(root.rglob("*"))
    }


def test_a_directory_a_file_replaced_is_back_after_a_failure(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "d").mkdir()
    (workdir / "a.txt").write_text("old")
    before = _tree(workdir)
    _fail_at(monkeypatch, 2)
    tx = FileTransaction(workdir)
    tx.write(workdir / "d", b"now a file")
    tx.write(workdir / "a.txt", b"new")
    with pytest.raises(WorkspaceError) as err:
        tx.commit()
    assert err.value.code == "workspace.write_failed"
    assert _tree(workdir) == before and (workdir / "d").is_dir()


def test_a_rollback_step_that_fails_does_not_stop_the_others(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "a.txt").write_text("old")

    def stray() -> None:  # someone drops a file into the directory the commit created
        (workdir / "new" / "stray").write_text("x")

    _fail_at(monkeypatch, 3, before=stray)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"new")
    tx.write(workdir / "new" / "b.txt", b"b")
    tx.write(workdir / "c.txt", b"c")
    with pytest.raises(WorkspaceError):
        tx.commit()
    assert (workdir / "a.txt").read_text() == "old"
    assert not (workdir / "c.txt").exists() and not (workdir / "new" / "b.txt").exists()
    assert (workdir / "new" / "stray").exists()  # the directory could not go, and that is all


def test_a_deleted_file_waits_inside_the_root_until_commit(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "sub").mkdir()
    (workdir / "sub" / "gone.txt").write_text("bye")
    seen = _fail_at(monkeypatch, 0)
    tx = FileTransaction(workdir)
    tx.delete(workdir / "sub" / "gone.txt")
    tx.commit()
    [(src, dst)] = seen
    assert src == workdir / "sub" / "gone.txt"
    assert dst.parent.parent == workdir and dst.parent.name.startswith(".keel-txn-")
    assert sorted(p.name for p in workdir.iterdir()) == ["sub"]


def test_pruning_empty_directories_stops_at_the_root(workdir: Path) -> None:
    root = workdir / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    outside = workdir / "outside" / "deep"
    outside.mkdir(parents=True)
    (outside / "g").write_text("y")
    tx = FileTransaction(root)
    tx.delete(root / "a" / "b" / "f")
    tx.delete(outside / "g")
    tx.commit(prune_dirs=True)
    assert root.is_dir() and list(root.iterdir()) == []
    assert outside.is_dir()
