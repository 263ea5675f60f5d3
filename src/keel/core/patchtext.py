"""Reading patch text: which files a patch touches and what it adds or removes, never failing.

Agents send patches in two shapes: unified diffs (``--- a/x`` / ``+++ b/x``, ``diff --git``,
``rename from/to``, ``copy from/to``) and Codex's ``*** Begin Patch`` envelope (``*** Add
File:``, ``*** Update File:`` with ``*** Move to:``, ``*** Delete File:``). The policy judges
every path a patch names, the hook adapters fill a call's paths from it, the monitor reads
what a patch adds and removes (test weakening), and the plan validator checks the paths of a
``patch.apply`` action: all through ``read_patch``. It is tolerant by design: text that is
not a well-formed patch still yields every path it mentions, so a judge errs on the side of
seeing more. Applying a patch is strict and lives in ``keel.workspace.patch``.

Standard library only (``re`` on first use): this runs on every hook call with a patch.
"""

from __future__ import annotations

from keel.core.frozen import Frozen

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Literal

    FileOp = Literal["add", "update", "delete"]

_CODEX = {"Add": "add", "Update": "update", "Delete": "delete"}


class PatchedFile(Frozen):
    """One file a patch touches."""

    __slots__ = ("added", "moved_to", "op", "path", "removed")
    path: str
    """The file as the patch names it (``a/``/``b/`` prefixes removed)."""
    op: FileOp
    moved_to: str | None
    """Where a move or rename takes it (``*** Move to:``, ``rename to``), if anywhere."""
    added: tuple[str, ...]
    """Lines the patch adds to it (without the ``+``)."""
    removed: tuple[str, ...]
    """Lines the patch removes from it (without the ``-``)."""

    def __init__(
        self,
        path: str,
        op: FileOp,
        moved_to: str | None = None,
        added: tuple[str, ...] = (),
        removed: tuple[str, ...] = (),
    ) -> None:
        """One touched file (``read_patch`` builds these)."""
        self._init(path=path, op=op, moved_to=moved_to, added=added, removed=removed)


def read_patch(text: str) -> tuple[PatchedFile, ...]:
    """Every file ``text`` touches, in order of first mention (one entry per file)."""
    reader = _Reader()
    lines = text.splitlines()
    skip = False
    for index, line in enumerate(lines):
        if skip:
            skip = False
            continue
        following = lines[index + 1] if index + 1 < len(lines) else None
        skip = reader.feed(line, following)
    return reader.files()


def patch_paths(text: str) -> list[str]:
    """Every path ``text`` names, moves and renames included, without duplicates."""
    out: list[str] = []
    for f in read_patch(text):
        for path in (f.path, f.moved_to):
            if path and path not in out:
                out.append(path)
    return out


class _Reader:
    """The state of one pass over a patch's lines."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.op: dict[str, str] = {}
        self.moved: dict[str, str] = {}
        self.added: dict[str, list[str]] = {}
        self.removed: dict[str, list[str]] = {}
        self.current: str | None = None

    def feed(self, line: str, following: str | None) -> bool:
        """Take one line; True when it also consumed ``following`` (a ``+++`` header)."""
        import re

        codex = re.match(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", line)
        if codex:
            self._start(codex.group(2), _CODEX[codex.group(1)])
            return False
        moved = re.match(r"^\*\*\* Move to: (.+?)\s*$", line) or re.match(
            r"^rename to (.+?)\s*$", line
        )
        if moved and self.current is not None:
            self.moved[self.current] = moved.group(1)
            return False
        git = re.match(r"^diff --git (\S+) (\S+)\s*$", line)
        if git:
            self._start(_strip(git.group(1)) or _strip(git.group(2)) or "", "update")
            new = _strip(git.group(2))
            if new and new != self.current:
                self.moved[self.current or ""] = new
            return False
        named = re.match(r"^(?:rename|copy) from (.+?)\s*$", line)
        if named:
            self._start(named.group(1), "update")
            return False
        old = re.match(r"^--- (.+?)\s*$", line)
        new = re.match(r"^\+\+\+ (.+?)\s*$", following) if following is not None else None
        if old and new:  # "--- x" is a header only when "+++ y" follows
            self._header(_strip(old.group(1)), _strip(new.group(1)))
            return True
        self._body(line)
        return False

    def _start(self, path: str, op: str) -> None:
        if path not in self.op:
            self.order.append(path)
            self.added[path], self.removed[path] = [], []
        self.op[path] = op
        self.current = path

    def _header(self, old: str | None, new: str | None) -> None:
        if new is None:
            self._start(old or "", "delete")
        elif old is None:
            self._start(new, "add")
        else:
            self._start(new, "update")
            if old != new:
                self.moved.setdefault(old, new)
                self._start(old, "update")
                self.current = new

    def _body(self, line: str) -> None:
        if self.current is None:
            return
        if line.startswith("+"):
            self.added[self.current].append(line[1:])
        elif line.startswith("-"):
            self.removed[self.current].append(line[1:])

    def files(self) -> tuple[PatchedFile, ...]:
        return tuple(
            PatchedFile(
                path,
                self.op[path],  # pyright: ignore[reportArgumentType]
                self.moved.get(path),
                tuple(self.added[path]),
                tuple(self.removed[path]),
            )
            for path in self.order
            if path
        )


def _strip(raw: str) -> str | None:
    """A header's path: tab-separated timestamp and ``a/``/``b/`` gone; None for /dev/null."""
    path = raw.split("\t", 1)[0].strip()
    if path == "/dev/null" or not path:
        return None
    if path.startswith('"') and path.endswith('"') and len(path) > 1:
        path = path[1:-1]
    return path[2:] if path[:2] in ("a/", "b/") else path
