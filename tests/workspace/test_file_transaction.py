"""The atomic file transaction (``keel.workspace._atomic.FileTransaction``).

A commit writes, links and deletes exactly (bytes, modes, where temporaries and deleted files
wait, which directories are pruned), or it changes nothing: a failure at any step puts back
every file, directory and symlink it had replaced, and a rollback step that itself fails does
not stop the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from keel.core.errors import WorkspaceError
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


def _all(root: Path) -> dict[str, tuple[str, bytes | str, int]]:
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        mode = p.lstat().st_mode & 0o7777
        if p.is_symlink():
            out[rel] = ("link", str(p.readlink()), 0)
        elif p.is_dir():
            out[rel] = ("dir", "", mode)
        else:
            out[rel] = ("file", p.read_bytes(), mode)
    return out


# -- what a commit leaves: bytes, modes, links, no temporaries -------------------------------------


def test_a_commit_writes_links_and_deletes_exactly(workdir: Path) -> None:
    import os

    (workdir / "keep.txt").write_bytes(b"keep")
    (workdir / "old.txt").write_bytes(b"old")
    (workdir / "old.txt").chmod(0o640)
    (workdir / "gone").mkdir()
    (workdir / "gone" / "g.txt").write_bytes(b"g")
    (workdir / "ln").symlink_to("keep.txt")
    big = os.urandom(300_000)
    tx = FileTransaction(workdir)
    tx.write(workdir / "old.txt", b"new")  # keeps 0640
    tx.write(workdir / "x" / "y" / "big.bin", big, 0o600)
    tx.write(workdir / "mode.sh", b"#!", 0o751)
    tx.symlink(workdir / "x" / "link", "../keep.txt")
    tx.symlink(workdir / "ln", "old.txt")
    tx.delete(workdir / "gone" / "g.txt")
    tx.delete(workdir / "never-there")
    tx.commit(prune_dirs=True)
    assert _all(workdir) == {
        "keep.txt": ("file", b"keep", 0o644),
        "ln": ("link", "old.txt", 0),
        "mode.sh": ("file", b"#!", 0o751),
        "old.txt": ("file", b"new", 0o640),
        "x": ("dir", "", 0o755),
        "x/link": ("link", "../keep.txt", 0),
        "x/y": ("dir", "", 0o755),
        "x/y/big.bin": ("file", big, 0o600),
    }


def test_a_new_file_gets_the_umask_mode(workdir: Path) -> None:
    import os

    old = os.umask(0o027)
    try:
        tx = FileTransaction(workdir)
        tx.write(workdir / "n.txt", b"n")
        tx.write(workdir / "sub" / "m.txt", b"m")
        tx.commit()
    finally:
        os.umask(old)
    assert (workdir / "n.txt").stat().st_mode & 0o7777 == 0o640
    assert (workdir / "sub" / "m.txt").stat().st_mode & 0o7777 == 0o640
    assert os.umask(old) == old  # the umask is back as it was


def test_a_file_replaces_a_file_deleted_in_the_same_commit_under_a_new_directory(
    workdir: Path,
) -> None:
    (workdir / "p").write_text("was a file")
    tx = FileTransaction(workdir)
    tx.write(workdir / "p" / "child", b"c")  # its parent is created once "p" is gone
    tx.delete(workdir / "p")
    tx.commit()
    assert _all(workdir) == {"p": ("dir", "", 0o755), "p/child": ("file", b"c", 0o644)}


def test_without_pruning_an_emptied_directory_stays(workdir: Path) -> None:
    (workdir / "d").mkdir()
    (workdir / "d" / "f").write_text("x")
    tx = FileTransaction(workdir)
    tx.delete(workdir / "d" / "f")
    tx.commit()
    assert _all(workdir) == {"d": ("dir", "", 0o755)}


def test_pruning_removes_only_directories_left_empty(workdir: Path) -> None:
    (workdir / "a" / "b" / "c").mkdir(parents=True)
    (workdir / "a" / "b" / "c" / "f").write_text("x")
    (workdir / "a" / "keep").write_text("k")
    tx = FileTransaction(workdir)
    tx.delete(workdir / "a" / "b" / "c" / "f")
    tx.commit(prune_dirs=True)
    assert _all(workdir) == {"a": ("dir", "", 0o755), "a/keep": ("file", b"k", 0o644)}


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


def test_temporaries_are_named_beside_their_target(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    made: list[tuple[Path, bytes, int]] = []
    real = _atomic._write_temp

    def spy(path: Path, data: bytes, mode: int) -> None:
        made.append((path, data, mode))
        real(path, data, mode)

    monkeypatch.setattr(_atomic, "_write_temp", spy)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"A", 0o600)
    tx.write(workdir / "b.txt", b"B", 0o644)
    tx.commit()
    [(a, _, ma), (b, _, mb)] = made
    assert (ma, mb) == (0o600, 0o644)
    pid = os.getpid()
    assert a.parent == workdir and a.name.startswith(f".a.txt.keel-tmp-{pid}-1-")
    assert b.name.startswith(f".b.txt.keel-tmp-{pid}-2-") and len(b.name.split("-")[-1]) == 6


def test_a_temporary_is_private_until_its_mode_is_set(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    seen: list[int] = []
    real = os.fchmod

    def spy(fd: int, mode: int) -> None:
        seen.append(os.fstat(fd).st_mode & 0o7777)  # the content is already written
        real(fd, mode)

    monkeypatch.setattr(os, "fchmod", spy)
    old = os.umask(0)
    try:
        tx = FileTransaction(workdir)
        tx.write(workdir / "secret.txt", b"s3cret", 0o644)
        tx.commit()
    finally:
        os.umask(old)
    assert seen == [0o600]
    assert (workdir / "secret.txt").stat().st_mode & 0o7777 == 0o644


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


def test_a_deletion_across_devices_is_kept_beside_the_file(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    (workdir / "d").mkdir()
    (workdir / "d" / "f").write_text("f")
    real = _atomic._replace
    seen: list[tuple[Path, Path]] = []

    def cross(src: Path, dst: Path) -> None:
        seen.append((src, dst))
        if len(seen) == 1:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real(src, dst)

    monkeypatch.setattr(_atomic, "_replace", cross)
    tx = FileTransaction(workdir)
    tx.delete(workdir / "d" / "f")
    tx.commit()
    assert [s for s, _ in seen] == [workdir / "d" / "f"] * 2
    second = seen[1][1]
    assert second.parent == workdir / "d" and second.name.startswith(".f.keel-bak-")
    assert _all(workdir) == {"d": ("dir", "", 0o755)}


def test_a_commits_files_in_flight_are_the_ones_checkpoints_ignore(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fnmatch import fnmatchcase

    from keel.workspace._git import EXCLUDES

    ignored = [ln for ln in EXCLUDES.splitlines() if ln.startswith(".*")]
    (workdir / "a.txt").write_text("old")
    real = _atomic._replace
    seen: list[str] = []

    def replace(src: Path, dst: Path) -> None:
        seen.extend(p.name for p in workdir.iterdir() if p.name not in ("a.txt", "b.txt"))
        real(src, dst)

    monkeypatch.setattr(_atomic, "_replace", replace)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"new")  # the old one is kept aside until the commit ends
    tx.write(workdir / "b.txt", b"b")
    tx.commit()
    assert any(".keel-bak-" in name for name in seen)
    assert [n for n in seen if not any(fnmatchcase(n, p) for p in ignored)] == []


def test_a_backup_already_gone_does_not_fail_the_commit(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "a.txt").write_text("a")
    real = _atomic._replace

    def replace_and_drop_backups(src: Path, dst: Path) -> None:
        real(src, dst)
        for backup in workdir.glob(".*.keel-bak-*"):
            backup.unlink()  # someone else cleaned up

    monkeypatch.setattr(_atomic, "_replace", replace_and_drop_backups)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"A")
    tx.commit()
    assert _all(workdir) == {"a.txt": ("file", b"A", 0o644)}


def test_a_stash_already_gone_does_not_fail_the_commit(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    (workdir / "gone.txt").write_text("g")
    real = _atomic._replace

    def replace_and_drop_the_stash(src: Path, dst: Path) -> None:
        real(src, dst)
        if dst.parent.name.startswith(".keel-txn-"):
            shutil.rmtree(dst.parent)  # someone else cleaned up

    monkeypatch.setattr(_atomic, "_replace", replace_and_drop_the_stash)
    tx = FileTransaction(workdir)
    tx.delete(workdir / "gone.txt")
    tx.commit()
    assert _all(workdir) == {}


# -- a failed commit: refused or undone, the tree as it was ----------------------------------------


def test_writing_through_a_symlinked_directory_is_refused(workdir: Path) -> None:
    (workdir / "real").mkdir()
    (workdir / "via").symlink_to("real")
    (workdir / "a.txt").write_text("a")
    before = _all(workdir)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"A")
    tx.write(workdir / "via" / "f", b"f")
    with pytest.raises(WorkspaceError) as err:
        tx.commit()
    assert (err.value.code, err.value.message, err.value.context) == (
        "workspace.symlink",
        f"refusing to write {str(workdir / 'via' / 'f')!r}: a directory on its path is a symlink",
        {"path": str(workdir / "via" / "f")},
    )
    assert _all(workdir) == before


def test_every_new_content_is_written_before_any_file_changes(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "a.txt").write_text("a")
    (workdir / "b.txt").write_text("b")
    before = _tree(workdir)
    renames = _fail_at(monkeypatch, 0)  # records every rename, fails none
    real = _atomic._write_temp

    def full(path: Path, data: bytes, mode: int) -> None:
        if data == b"B":
            raise OSError(28, "No space left on device", str(path))
        real(path, data, mode)

    monkeypatch.setattr(_atomic, "_write_temp", full)
    tx = FileTransaction(workdir)
    tx.delete(workdir / "a.txt")
    tx.write(workdir / "new" / "x.txt", b"x")  # its directory is made at swap time
    tx.write(workdir / "b.txt", b"B")
    with pytest.raises(WorkspaceError) as err:
        tx.commit()
    assert err.value.code == "workspace.write_failed"
    assert renames == []  # the disk filled up before anything in the workspace moved
    assert _tree(workdir) == before


@pytest.mark.parametrize(
    ("exc", "message", "path"),
    [
        (
            OSError(28, "No space left on device", "/x/f"),
            "could not write /x/f: No space left on device; no file was changed",
            "/x/f",
        ),
        (
            OSError(28, "No space left on device"),
            "could not write a file: No space left on device; no file was changed",
            None,
        ),
        (OSError("odd"), "could not write a file: odd; no file was changed", None),
    ],
)
def test_an_os_error_becomes_a_workspace_error_and_undoes_everything(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, exc: OSError, message: str, path: str | None
) -> None:
    (workdir / "a.txt").write_text("a")
    before = _all(workdir)
    calls: list[Path] = []
    real = _atomic._replace

    def failing(src: Path, dst: Path) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise exc
        real(src, dst)

    monkeypatch.setattr(_atomic, "_replace", failing)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"A")
    tx.write(workdir / "b.txt", b"B")
    with pytest.raises(WorkspaceError) as err:
        tx.commit()
    assert (err.value.code, err.value.message) == ("workspace.write_failed", message)
    assert err.value.context == {"path": path} and err.value.__cause__ is exc
    assert _all(workdir) == before


def test_any_other_failure_undoes_everything_and_propagates(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "a.txt").write_text("a")
    (workdir / "d.txt").write_text("d")
    before = _all(workdir)
    real = _atomic._replace
    calls: list[Path] = []

    def failing(src: Path, dst: Path) -> None:
        calls.append(dst)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(_atomic, "_replace", failing)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"A")
    tx.delete(workdir / "d.txt")
    tx.write(workdir / "n" / "b.txt", b"B")
    with pytest.raises(KeyboardInterrupt):
        tx.commit(prune_dirs=True)
    assert _all(workdir) == before


def test_a_workspace_error_propagates_unchanged(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = WorkspaceError("mine", code="workspace.mine")

    def failing(path: Path, data: bytes, mode: int) -> None:
        raise own

    monkeypatch.setattr(_atomic, "_write_temp", failing)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"A")
    with pytest.raises(WorkspaceError) as err:
        tx.commit()
    assert err.value is own and list(workdir.iterdir()) == []


def test_a_failed_deletion_other_than_across_devices_undoes_everything(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    (workdir / "a.txt").write_text("a")
    (workdir / "f").write_text("f")
    before = _all(workdir)

    def denied(src: Path, dst: Path) -> None:
        raise OSError(errno.EACCES, "Permission denied", str(src))

    monkeypatch.setattr(_atomic, "_replace", denied)
    tx = FileTransaction(workdir)
    tx.write(workdir / "a.txt", b"A")
    tx.delete(workdir / "f")
    with pytest.raises(WorkspaceError) as err:
        tx.commit()
    assert (
        err.value.message
        == f"could not write {workdir / 'f'}: Permission denied; no file was changed"
    )
    assert _all(workdir) == before


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


def test_a_symlink_a_failed_commit_replaced_is_a_symlink_again(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "target.txt").write_text("t")
    (workdir / "ln").symlink_to("target.txt")
    before = _all(workdir)
    _fail_at(monkeypatch, 2)
    tx = FileTransaction(workdir)
    tx.write(workdir / "ln", b"now a file")
    tx.write(workdir / "other.txt", b"o")
    with pytest.raises(WorkspaceError):
        tx.commit()
    assert _all(workdir) == before and (workdir / "ln").is_symlink()


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


def test_cleaning_up_a_failed_commit_goes_on_past_what_it_cannot_remove(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    (workdir / "gone.txt").write_text("g")
    stash: list[Path] = []

    def strays() -> None:  # two files nobody can account for land in the stash
        [found] = [p for p in workdir.iterdir() if p.name.startswith(".keel-txn-")]
        stash.append(found)
        (found / "p").write_text("p")
        (found / "q").write_text("q")

    _fail_at(monkeypatch, 2, before=strays)
    real_unlink = os.unlink
    refused: list[str] = []

    def unlink(path: Any, *, dir_fd: int | None = None) -> None:
        if dir_fd is not None and not refused:  # the first file removed from the stash
            refused.append(str(path))
            raise PermissionError(1, "Operation not permitted", str(path))
        real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    tx = FileTransaction(workdir)
    tx.delete(workdir / "gone.txt")
    tx.write(workdir / "new.txt", b"n")
    with pytest.raises(WorkspaceError):
        tx.commit()
    monkeypatch.undo()
    assert (workdir / "gone.txt").read_text() == "g" and not (workdir / "new.txt").exists()
    assert sorted(p.name for p in stash[0].iterdir()) == refused  # only what could not go
