"""All-or-nothing file changes: stage every write, then swap them in; any failure undoes all.

A ``FileTransaction`` collects writes, symlinks and deletions. ``commit()`` first writes every
new content to a temporary file next to its target (so the rename is on one filesystem and
atomic), then swaps the temporaries in one by one, keeping a hard-link backup of each file it
replaces or deletes. If anything fails at any point, every file already swapped is put back
from its backup and every directory created is removed: the tree is byte-identical to before.

``_write_temp`` and ``_replace`` are module functions so tests can inject a failure at the Nth
write or rename.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from keel.core.errors import WorkspaceError

OpKind = Literal["write", "symlink", "delete"]


@dataclass(frozen=True, slots=True)
class FileOp:
    """One staged change: write ``data`` (or a symlink to ``target``) at ``path``, or delete it."""

    kind: OpKind
    path: Path
    data: bytes = b""
    mode: int | None = None
    target: str = ""


def _write_temp(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(src: Path, dst: Path) -> None:
    os.replace(src, dst)


def _temp_name(path: Path, tag: str, n: int) -> Path:
    return path.parent / f".{path.name}.keel-{tag}-{os.getpid()}-{n}-{os.urandom(3).hex()}"


def _plain_dir(directory: Path) -> bool:
    """A real directory reached without following any symlink."""
    return directory.is_dir() and os.path.realpath(directory) == os.path.abspath(directory)


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


class FileTransaction:
    """Collects file changes under ``root`` and applies them all or none."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ops: list[FileOp] = []
        self._temps: dict[Path, Path] = {}
        self._undo: list[tuple[str, Path, Path | None]] = []
        self._backups: list[Path] = []
        self._stash: Path | None = None
        self._n = 0

    def write(self, path: Path, data: bytes, mode: int | None = None) -> None:
        """Stage writing ``data`` to ``path`` (mode kept from the old file unless given)."""
        self.ops.append(FileOp("write", path, data=data, mode=mode))

    def symlink(self, path: Path, target: str) -> None:
        """Stage making ``path`` a symlink to ``target``."""
        self.ops.append(FileOp("symlink", path, target=target))

    def delete(self, path: Path) -> None:
        """Stage deleting ``path``."""
        self.ops.append(FileOp("delete", path))

    def commit(self, *, prune_dirs: bool = False) -> None:
        """Apply every staged change, or none of them (raises ``WorkspaceError``)."""
        try:
            self._stage()
            for op in sorted(self.ops, key=lambda o: o.kind != "delete"):
                self._swap(op)
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, WorkspaceError):
                raise
            if isinstance(exc, OSError):
                raise WorkspaceError(
                    f"could not write {exc.filename or 'a file'}: {exc.strerror or exc}; "
                    "no file was changed",
                    code="workspace.write_failed",
                    path=str(exc.filename) if exc.filename else None,
                ) from exc
            raise
        self._finish(prune_dirs)

    def _next(self) -> int:
        self._n += 1
        return self._n

    def _stage(self) -> None:
        for op in self.ops:
            if op.kind == "delete":
                continue
            if not _plain_dir(op.path.parent):
                continue  # created at swap time, once deletions made room for it
            self._temps[op.path] = self._make_temp(op)

    def _make_temp(self, op: FileOp) -> Path:
        temp = _temp_name(op.path, "tmp", self._next())
        if op.kind == "symlink":
            os.symlink(op.target, temp)
        else:
            _write_temp(temp, op.data, self._mode_for(op))
        self._undo.append(("temp", temp, None))
        return temp

    def _mode_for(self, op: FileOp) -> int:
        if op.mode is not None:
            return op.mode
        try:
            return stat.S_IMODE(os.lstat(op.path).st_mode)
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            return 0o666 & ~umask

    def _swap(self, op: FileOp) -> None:
        path = op.path
        if op.kind == "delete":
            if not _exists(path):
                return
            backup = self._aside(path)
            self._undo.append(("restore", path, backup))
            self._backups.append(backup)
            return
        self._make_parents(path.parent)
        if not _plain_dir(path.parent):
            raise WorkspaceError(
                f"refusing to write {str(path)!r}: a directory on its path is a symlink",
                code="workspace.symlink",
                path=str(path),
            )
        if path.is_dir() and not path.is_symlink():
            path.rmdir()  # a file replaces an (empty) directory
            self._undo.append(("rmdir", path, None))
        temp = self._temps.get(path) or self._make_temp(op)
        if _exists(path):
            backup = _temp_name(path, "bak", self._next())
            self._backup(path, backup)
            _replace(temp, path)
            self._undo.append(("restore", path, backup))
        else:
            _replace(temp, path)
            self._undo.append(("created", path, None))

    def _aside(self, path: Path) -> Path:
        """Move a file to delete out of its directory (which may have to go), keeping it."""
        if self._stash is None:
            self._stash = Path(tempfile.mkdtemp(prefix=".keel-txn-", dir=self.root))
            self._undo.append(("rmstash", self._stash, None))
        backup = self._stash / str(self._next())
        try:
            _replace(path, backup)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            backup = _temp_name(path, "bak", self._next())
            _replace(path, backup)
        return backup

    def _backup(self, path: Path, backup: Path) -> None:
        try:
            os.link(path, backup, follow_symlinks=False)
        except OSError:
            shutil.copy2(path, backup, follow_symlinks=False)
        self._backups.append(backup)
        self._undo.append(("drop", backup, None))

    def _make_parents(self, directory: Path) -> None:
        missing: list[Path] = []
        current = directory
        while not _exists(current) and current != self.root:
            missing.append(current)
            current = current.parent
        for d in reversed(missing):
            d.mkdir()
            self._undo.append(("mkdir", d, None))

    def _rollback(self) -> None:
        for action, path, backup in reversed(self._undo):
            with contextlib.suppress(OSError):
                match action:
                    case "restore":
                        assert backup is not None
                        os.replace(backup, path)
                    case "created" | "temp" | "drop":
                        if _exists(path):
                            os.unlink(path)
                    case "mkdir":
                        path.rmdir()
                    case "rmdir":
                        path.mkdir()
                    case "rmstash":
                        shutil.rmtree(path, ignore_errors=True)
                    case _:
                        pass
        self._undo.clear()

    def _finish(self, prune_dirs: bool) -> None:
        for backup in self._backups:
            with contextlib.suppress(OSError):
                os.unlink(backup)
        if self._stash is not None:
            shutil.rmtree(self._stash, ignore_errors=True)
        if prune_dirs:
            for op in self.ops:
                if op.kind == "delete":
                    self._prune(op.path.parent)
        self._undo.clear()

    def _prune(self, directory: Path) -> None:
        current = directory
        while current != self.root and self.root in current.parents:
            try:
                current.rmdir()
            except OSError:
                return
            current = current.parent
