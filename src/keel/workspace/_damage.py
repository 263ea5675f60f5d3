"""Damage in the shadow repository: objects the checkpoints need that are gone.

keel never deletes an object from ``.keel/checkpoints`` (no gc, no prune), so a missing one
means the store was damaged: a disk error, a file removed by hand or by a tool cleaning up.
A damaged checkpoint cannot be diffed or restored; ``keel status`` says so before a rollback
is needed, and ``keel diff``/``keel rollback`` say which checkpoint lost what instead of
passing on git's failure.

``scan`` stays cheap while nothing is wrong: one ``git rev-list --objects --missing=print``
walks every checkpoint's commit and trees and looks every blob up, each object once, within a
time budget. Only when something is missing does keel walk the chain itself, each tree once
(``git cat-file --batch``, one process per directory level), to name the checkpoints that
lost something and the files whose saved content is gone.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

from keel.core.errors import WorkspaceError
from keel.workspace._git import ShadowGit

ObjectKind = Literal["commit", "tree", "blob"]
MAX_LISTED = 200
"""Missing objects kept per tree and per checkpoint: a bound on memory, not on detection."""
SHOWN = 5
"""Checkpoints and missing objects a message names before "and N more"."""
TREE_MODE = b"40000"
SUBMODULE_MODE = b"160000"


@dataclass(frozen=True, slots=True)
class MissingObject:
    """An object a checkpoint needs that the store lacks (or cannot read)."""

    oid: str
    kind: ObjectKind
    path: str | None = None
    """The file (blob) or directory (tree; ``""`` is the top) it held; None for a commit."""

    def describe(self) -> str:
        """``src/app.py (blob 1a2b3c4d5e6f)``, for people."""
        if self.kind == "commit":
            return f"the checkpoint commit {self.oid[:12]}"
        where = self.path if self.path else "every file (the top tree)"
        return f"{where} ({self.kind} {self.oid[:12]})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"oid": self.oid, "kind": self.kind, "path": self.path}


@dataclass(frozen=True, slots=True)
class Damage:
    """What ``scan`` found: empty (``found`` false) when every checkpoint is complete."""

    lost: tuple[tuple[str, tuple[MissingObject, ...]], ...] = ()
    """Each damaged checkpoint (its commit id, newest first) with what it lost."""
    cut: str | None = None
    """A checkpoint commit that is missing: the history ends there, older checkpoints are lost."""

    @property
    def found(self) -> bool:
        """True when something is missing."""
        return bool(self.lost) or self.cut is not None

    @property
    def damaged(self) -> tuple[str, ...]:
        """The damaged checkpoints' commit ids, newest first."""
        return tuple(commit for commit, _ in self.lost)

    @property
    def missing(self) -> tuple[MissingObject, ...]:
        """Every missing object, each once (the cut commit first)."""
        seen: dict[str, MissingObject] = {}
        if self.cut is not None:
            seen[self.cut] = MissingObject(self.cut, "commit")
        for _, objects in self.lost:
            for obj in objects:
                seen.setdefault(obj.oid, obj)
        return tuple(seen.values())

    def of(self, commit: str) -> tuple[MissingObject, ...]:
        """What checkpoint ``commit`` lost (nothing when it is intact)."""
        if commit == self.cut:
            return (MissingObject(commit, "commit"),)
        return next((objects for c, objects in self.lost if c == commit), ())

    def summary(self) -> str:
        """One line: which checkpoints lost what."""
        parts: list[str] = []
        if self.lost:
            ids = _listed([c[:12] for c in self.damaged])
            what = _listed([m.describe() for m in self.missing if m.kind != "commit"])
            parts.append(
                f"{len(self.lost)} checkpoint(s) cannot be diffed or restored ({ids}): the "
                f"checkpoint store lost the saved copy of {what}"
            )
        if self.cut is not None:
            parts.append(
                f"the checkpoint commit {self.cut[:12]} is missing: the checkpoints before it "
                "are lost"
            )
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "damaged": [c[:12] for c in self.damaged],
            "missing": [m.to_dict() for m in self.missing],
            "cut": self.cut,
        }

    def error(self, target: str | None, action: str) -> WorkspaceError:
        """``workspace.corrupt`` for ``action`` (``roll back to``) on checkpoint ``target``.

        Without ``target``, ``action`` is the whole of what failed (``read the history``).
        """
        short = target[:12] if target else None
        own = self.of(target) if target else ()
        if own:
            what = _listed([m.describe() for m in own])
            message = (
                f"cannot {action} checkpoint {short}: it is damaged, the checkpoint store "
                f"lost the saved copy of {what}"
            )
        else:
            subject = f"{action} checkpoint {short}" if short else action
            message = f"cannot {subject}: the checkpoint store is damaged: {self.summary()}"
        message += (
            ". keel never deletes these objects: something removed them from "
            ".keel/checkpoints. `keel status` lists every damaged checkpoint"
        )
        if short and self.cut is None:
            message += "; use another one"
        return WorkspaceError(
            message,
            code="workspace.corrupt",
            checkpoint=short,
            **self.to_dict(),
        )


def scan(git: ShadowGit, head: str, *, deadline: float | None = None) -> Damage | None:
    """The damage in the checkpoint chain that ends at ``head``; None when over ``deadline``.

    ``deadline`` is a ``time.monotonic()`` instant; git is killed when it passes.
    """
    try:
        quick = _run(git, ["rev-list", "--objects", "--missing=print", head], deadline)
        if quick.returncode == 0 and not any(
            line.startswith(b"?") for line in quick.stdout.splitlines()
        ):
            return Damage()
        return _walk(git, head, deadline)
    except subprocess.TimeoutExpired:
        return None


def _walk(git: ShadowGit, head: str, deadline: float | None) -> Damage:
    chain, cut = _chain(git, head, deadline)
    trees = _Trees(git, deadline)
    trees.load({tree for _, tree in chain})
    lost = [(commit, found) for commit, tree in chain if (found := trees.lost(tree))]
    return Damage(tuple(lost), cut)


def _chain(
    git: ShadowGit, head: str, deadline: float | None
) -> tuple[list[tuple[str, str]], str | None]:
    """Every readable checkpoint (commit, tree), newest first, and the missing commit if any.

    ``git log`` reads commits only, so a missing tree or blob does not stop it; a missing
    commit does, having printed some of the newer ones (git reads ahead): from the last one
    printed, the chain is followed commit by commit to the one that cannot be read.
    """
    proc = _run(git, ["log", "--format=%H %T %P", head], deadline)
    chain: list[tuple[str, str]] = []
    parent: str | None = head
    for line in proc.stdout.decode("ascii", "replace").splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        chain.append((fields[0], fields[1]))
        parent = fields[2] if len(fields) > 2 else None
    if proc.returncode == 0:
        return chain, None
    while parent is not None:
        commit = _read_commit(git, parent, deadline)
        if commit is None:
            return chain, parent
        chain.append((parent, commit[0]))
        parent = commit[1]
    return chain, None  # log failed for another reason: every commit could be read


def _read_commit(git: ShadowGit, oid: str, deadline: float | None) -> tuple[str, str | None] | None:
    """The tree and first parent of commit ``oid``; None when it is missing or unreadable."""
    proc = _run(git, ["cat-file", "commit", oid], deadline)
    if proc.returncode != 0:
        return None
    tree: str | None = None
    parent: str | None = None
    for line in proc.stdout.split(b"\n\n", 1)[0].decode("ascii", "replace").splitlines():
        key, _, value = line.partition(" ")
        if key == "tree":
            tree = value
        elif key == "parent" and parent is None:
            parent = value
    return None if tree is None else (tree, parent)


class _Trees:
    """The trees of the store, read level by level, and what each one lost (memoised)."""

    def __init__(self, git: ShadowGit, deadline: float | None) -> None:
        self._git = git
        self._deadline = deadline
        self._entries: dict[str, list[tuple[bytes, str, str]] | None] = {}
        """tree -> (mode, name, oid) of each entry; None when the tree is missing."""
        self._missing_blobs: set[str] = set()
        self._lost: dict[str, tuple[MissingObject, ...]] = {}

    def load(self, roots: set[str]) -> None:
        """Read ``roots`` and every tree below them, then look up every blob they name."""
        blobs: set[str] = set()
        pending = set(roots)
        while pending:
            batch = sorted(pending)
            for oid, entries in zip(batch, self._read(batch), strict=True):
                self._entries[oid] = entries
                for mode, _, child in entries or ():
                    if mode == TREE_MODE:
                        pending.add(child)
                    elif mode != SUBMODULE_MODE:
                        blobs.add(child)
            pending -= self._entries.keys()
        self._missing_blobs = absent(self._git, sorted(blobs), self._deadline)

    def lost(self, root: str) -> tuple[MissingObject, ...]:
        """What the tree ``root`` lost: missing subtrees and blobs, with their paths."""
        stack: list[tuple[str, bool]] = [(root, False)]
        while stack:  # post-order without recursion: trees can nest deeper than Python's stack
            oid, ready = stack.pop()
            if oid in self._lost:
                continue
            entries = self._entries.get(oid)
            if entries is None:
                self._lost[oid] = (MissingObject(oid, "tree", ""),)
                continue
            if not ready:
                stack.append((oid, True))
                stack.extend((c, False) for m, _, c in entries if m == TREE_MODE)
                continue
            self._lost[oid] = self._gather(entries)
        return self._lost[root]

    def _gather(self, entries: list[tuple[bytes, str, str]]) -> tuple[MissingObject, ...]:
        found: list[MissingObject] = []
        for mode, name, child in entries:
            if mode == TREE_MODE:
                for obj in self._lost[child]:
                    found.append(replace(obj, path=f"{name}/{obj.path}" if obj.path else name))
            elif mode != SUBMODULE_MODE and child in self._missing_blobs:
                found.append(MissingObject(child, "blob", name))
            if len(found) >= MAX_LISTED:
                break
        return tuple(found[:MAX_LISTED])

    def _read(self, oids: list[str]) -> list[list[tuple[bytes, str, str]] | None]:
        """The entries of each tree in ``oids``; None for one that is missing or unreadable."""
        proc = _run(self._git, ["cat-file", "--batch"], self._deadline,
                    stdin="".join(o + "\n" for o in oids).encode())  # fmt: skip
        out = proc.stdout
        result: list[list[tuple[bytes, str, str]] | None] = []
        pos = 0
        for _ in oids:
            end = out.find(b"\n", pos)
            header = out[pos:end].split() if end >= 0 else []
            if len(header) != 3:  # "<oid> missing", or git died reading it
                result.append(None)
                pos = end + 1 if end >= 0 else len(out)
                continue
            size = int(header[2])
            body = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
            ok = header[1] == b"tree" and len(body) == size
            result.append(_parse_tree(body) if ok else None)
        return result


def absent(git: ShadowGit, oids: list[str], deadline: float | None = None) -> set[str]:
    """Which of ``oids`` the store lacks (or cannot read); one git process, reading no content."""
    if not oids:
        return set()
    proc = _run(git, ["cat-file", "--batch-check=%(objectname)"], deadline,
                stdin="".join(o + "\n" for o in oids).encode())  # fmt: skip
    present = {  # "<oid> missing" for an absent one; no line at all once git died
        line for line in proc.stdout.decode("ascii", "replace").splitlines() if " " not in line
    }
    return {o for o in oids if o not in present}


def _parse_tree(body: bytes) -> list[tuple[bytes, str, str]] | None:
    """A tree object's entries (mode, name, oid); None when it is malformed."""
    entries: list[tuple[bytes, str, str]] = []
    pos = 0
    while pos < len(body):
        space = body.find(b" ", pos)
        nul = body.find(b"\0", space + 1)
        if space < 0 or nul < 0 or nul + 21 > len(body):
            return None
        name = body[space + 1 : nul].decode("utf-8", "surrogateescape")
        entries.append((body[pos:space], name, body[nul + 1 : nul + 21].hex()))
        pos = nul + 21
    return entries


def _run(
    git: ShadowGit, args: list[str], deadline: float | None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    timeout = None if deadline is None else deadline - time.monotonic()
    if timeout is not None and timeout <= 0:
        raise subprocess.TimeoutExpired(args, 0)
    return git.proc(args, stdin=stdin, timeout=timeout)


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")
