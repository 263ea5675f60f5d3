r"""Atomic patches: unified diffs and the Codex ``*** Begin Patch`` format, all or nothing.

``apply_patch`` works in three steps and writes nothing until the last:

1. **parse** the text into ``FilePatch`` values (add, update, delete, move), rejecting binary
   hunks, malformed headers and hunks whose line counts do not add up;
2. **validate**: check every path (no ``..``, no symlinks, nothing under ``.git`` or
   ``.keel``, inside the workspace, allowed by the policy), then apply every hunk to an
   in-memory copy of each file; the first hunk that does not apply stops everything with a
   ``PatchError`` naming the file, the hunk and what did not match;
3. **write** through a ``FileTransaction``: temporary files, then renames, undone on failure.

Unified hunks match their context exactly (a trailing ``\r`` aside) but may sit at an offset
from the line their header names, like ``git apply``; Codex chunks, which carry no line
numbers, are found by content after an optional ``@@`` anchor, tolerating trailing and then
surrounding whitespace as Codex does. Line endings are kept: new lines take the file's
dominant ending, so a CRLF file stays CRLF.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from keel.core.errors import KeelError, PatchError
from keel.core.events import CheckpointPayload, Event
from keel.core.root import GIT_MARKER, STATE_DIR
from keel.workspace._atomic import FileTransaction

if TYPE_CHECKING:
    from keel.core.decision import Decision
    from keel.workspace.checkpoints import Checkpoints, EventSink

PatchFormat = Literal["unified", "codex"]
FileAction = Literal["add", "update", "delete", "move"]
PathOp = Literal["read", "write", "edit"]

MANUAL_SESSION = "manual"
FORBIDDEN_PARTS = frozenset({GIT_MARKER, STATE_DIR})
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# git's C-style quoting (quote.c): \\ \" \a \b \f \n \r \t \v and three-digit octal bytes.
_C_QUOTED_RE = re.compile(r'"((?:[^"\\]|\\[0-3][0-7]{2}|\\[abfnrtv"\\])*)"')
_C_ESCAPE_RE = re.compile(r'(?:\\[0-3][0-7]{2})+|\\[abfnrtv"\\]')
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class PathPolicy(Protocol):
    """The part of ``keel.policy.Policy`` patches need."""

    def check_path(self, path: str, op: Literal["read", "write", "edit"]) -> Decision:
        """Judge one workspace path for ``op``."""
        ...


@dataclass(frozen=True, slots=True)
class Hunk:
    """One hunk (unified) or chunk (Codex): tagged lines, without their line endings."""

    lines: tuple[tuple[str, str], ...]
    """``(tag, text)`` with tag ``" "`` (context), ``"-"`` (removed) or ``"+"`` (added)."""
    old_start: int | None = None
    """1-based line the hunk names (unified only)."""
    anchor: str | None = None
    """Codex ``@@ text``: a line to find before the chunk."""
    at_eof: bool = False
    """The chunk must end at the end of the file (Codex ``*** End of File``)."""
    new_no_eol: bool = False
    r"""The new side's last line has no newline (``\ No newline at end of file``)."""
    line: int = 0
    """Where the hunk starts in the patch text (1-based)."""

    @property
    def old(self) -> list[str]:
        """The lines the hunk expects to find."""
        return [t for tag, t in self.lines if tag != "+"]

    @property
    def new(self) -> list[str]:
        """The lines the hunk leaves."""
        return [t for tag, t in self.lines if tag != "-"]


@dataclass(frozen=True, slots=True)
class FilePatch:
    """The changes a patch makes to one file."""

    action: FileAction
    path: str
    new_path: str | None = None
    hunks: tuple[Hunk, ...] = ()
    line: int = 0


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """What a patch did (or would do) to one file."""

    action: FileAction
    path: str
    new_path: str | None = None
    hunks: int = 0
    offsets: tuple[int, ...] = ()
    """For each hunk, how many lines away from its stated line it applied (unified)."""


@dataclass(frozen=True, slots=True)
class PatchResult:
    """A patch that applied (or, with ``check=True``, would apply)."""

    format: PatchFormat
    files: tuple[FileOutcome, ...]
    applied: bool
    patch_id: str
    checkpoint: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path written, created or removed."""
        out: list[str] = []
        for f in self.files:
            out.append(f.path)
            if f.new_path:
                out.append(f.new_path)
        return tuple(dict.fromkeys(out))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "format": self.format,
            "applied": self.applied,
            "patch_id": self.patch_id,
            "checkpoint": self.checkpoint,
            "files": [
                {
                    "action": f.action,
                    "path": f.path,
                    "new_path": f.new_path,
                    "hunks": f.hunks,
                    "offsets": list(f.offsets),
                }
                for f in self.files
            ],
        }


# -- parsing ---------------------------------------------------------------------------------


def parse_patch(text: str) -> tuple[PatchFormat, list[FilePatch]]:
    """Parse a unified diff or a Codex patch; ``PatchError`` says what is malformed and where."""
    if "\0" in text:
        raise PatchError("the patch contains NUL bytes (binary)", code="patch.binary")
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if any(ln.strip() == "*** Begin Patch" for ln in lines):
        files = _parse_codex(lines)
        fmt: PatchFormat = "codex"
    else:
        files = _parse_unified(lines)
        fmt = "unified"
    if not files:
        raise PatchError(
            "no file changes found: expected a unified diff (---/+++/@@) or a Codex patch "
            "(*** Begin Patch)",
            code="patch.empty",
        )
    return fmt, files


def _perr(message: str, line: int, code: str = "patch.parse") -> PatchError:
    return PatchError(f"line {line}: {message}", code=code, line=line)


def _parse_codex(lines: list[str]) -> list[FilePatch]:
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "*** Begin Patch")
    files: list[FilePatch] = []
    i = start + 1
    while i < len(lines):
        ln = lines[i].strip()
        if ln == "*** End Patch":
            return files
        if ln.startswith("*** Add File: "):
            body, i = _codex_block(lines, i + 1)
            bad = next((j for j, (n, b) in enumerate(body) if not b.startswith("+")), None)
            if bad is not None:
                raise _perr("every line of an added file must start with '+'", body[bad][0])
            added = tuple(("+", b[1:]) for _, b in body)
            hunks = (Hunk(added, line=i),) if added else ()
            files.append(FilePatch("add", ln[len("*** Add File: ") :].strip(), None, hunks, i))
        elif ln.startswith("*** Delete File: "):
            files.append(FilePatch("delete", ln[len("*** Delete File: ") :].strip(), line=i + 1))
            i += 1
        elif ln.startswith("*** Update File: "):
            path = ln[len("*** Update File: ") :].strip()
            header_line = i + 1
            new_path = None
            i += 1
            if i < len(lines) and lines[i].strip().startswith("*** Move to: "):
                new_path = lines[i].strip()[len("*** Move to: ") :].strip()
                i += 1
            body, i = _codex_block(lines, i)
            hunks = _codex_chunks(body, header_line)
            if not hunks and new_path is None:
                raise _perr(f"update of {path!r} has no changes", header_line)
            action: FileAction = "move" if new_path else "update"
            files.append(FilePatch(action, path, new_path, tuple(hunks), header_line))
        elif ln == "":
            i += 1
        else:
            raise _perr(f"unexpected line {lines[i]!r} (expected a '*** ... File:' header)", i + 1)
    raise _perr("the patch has no '*** End Patch' line", len(lines))


def _codex_block(lines: list[str], i: int) -> tuple[list[tuple[int, str]], int]:
    body: list[tuple[int, str]] = []
    while i < len(lines):
        s = lines[i]
        if s.startswith("*** ") and s.strip() != "*** End of File":
            break
        body.append((i + 1, s))
        i += 1
    while body and body[-1][1] == "":
        body.pop()  # blank lines before the next header
    return body, i


def _codex_chunks(body: list[tuple[int, str]], header_line: int) -> list[Hunk]:
    hunks: list[Hunk] = []
    current: list[tuple[str, str]] = []
    anchor: str | None = None
    start = header_line
    for n, s in body:
        if s.startswith("@@"):
            if current:
                hunks.append(Hunk(tuple(current), anchor=anchor, line=start))
            current, anchor, start = [], s[2:].strip() or None, n
        elif s.strip() == "*** End of File":
            if not current:
                raise _perr("'*** End of File' without a chunk before it", n)
            hunks.append(Hunk(tuple(current), anchor=anchor, at_eof=True, line=start))
            current, anchor = [], None
        elif s == "":
            current.append((" ", ""))
        elif s[0] in " +-":
            current.append((s[0], s[1:]))
        else:
            raise _perr(f"chunk line must start with ' ', '+' or '-': {s!r}", n)
    if current:
        hunks.append(Hunk(tuple(current), anchor=anchor, line=start))
    for h in hunks:
        if not any(tag != " " for tag, _ in h.lines):
            raise _perr("chunk has no '+' or '-' lines", h.line)
    return hunks


@dataclass(slots=True)
class _UnifiedFile:
    line: int
    old: str | None = None
    new: str | None = None
    rename_from: str | None = None
    rename_to: str | None = None
    created: bool = False
    deleted: bool = False
    git: bool = False
    git_names: str = ""
    """What follows ``diff --git ``."""
    headers: bool = False


def _parse_unified(lines: list[str]) -> list[FilePatch]:
    files: list[FilePatch] = []
    cur: _UnifiedFile | None = None
    hunks: list[Hunk] = []
    i = 0

    def close() -> None:
        if cur is not None:
            files.append(_unified_file(cur, hunks))

    while i < len(lines):
        ln = lines[i]
        if ln.startswith("diff --git "):
            close()
            cur, hunks = _UnifiedFile(i + 1, git=True, git_names=ln[len("diff --git ") :]), []
        elif ln.startswith("GIT binary patch") or (
            ln.startswith("Binary files ") and ln.endswith(" differ")
        ):
            raise _perr("binary patches are not supported", i + 1, "patch.binary")
        elif ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if cur is None or cur.headers or hunks:
                close()
                cur, hunks = _UnifiedFile(line=i + 1), []
            cur.old, cur.new = _header_path(ln[4:], i + 1), _header_path(lines[i + 1][4:], i + 2)
            cur.headers = True
            i += 1
        elif ln.startswith("@@"):
            if cur is None or not cur.headers:
                raise _perr("hunk without '---'/'+++' file headers", i + 1)
            hunk, i = _read_hunk(lines, i)
            hunks.append(hunk)
            continue
        elif cur is not None and cur.git and not hunks:
            _git_header(cur, ln, i + 1)
        i += 1
    close()
    return files


def _git_header(cur: _UnifiedFile, ln: str, line: int) -> None:
    if ln.startswith("new file mode"):
        cur.created = True
    elif ln.startswith("deleted file mode"):
        cur.deleted = True
    elif ln.startswith("rename from "):
        cur.rename_from = _unquote_path(ln[len("rename from ") :], line)
    elif ln.startswith("rename to "):
        cur.rename_to = _unquote_path(ln[len("rename to ") :], line)
    elif ln.startswith("copy from ") or ln.startswith("copy to "):
        raise _perr("copies are not supported; add the file instead", cur.line, "patch.unsupported")


def _header_path(raw: str, line: int) -> str | None:
    path = _unquote_path(raw.split("\t", 1)[0].rstrip(), line)
    return None if path == "/dev/null" else path


def _unquote_path(path: str, line: int) -> str:
    """``path``, unquoted if git quoted it; ``PatchError`` if its quoting is malformed."""
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    found = _c_unquote(path, 0)
    if found is None or found[1] != len(path):
        raise _perr(
            f'malformed quoted path {path!r}: git quotes with \\\\, \\", \\a, \\b, \\f, \\n, '
            "\\r, \\t, \\v and three-digit octal escapes",
            line,
        )
    return found[0]


def _c_unquote(text: str, start: int) -> tuple[str, int] | None:
    """The git-quoted name at ``text[start]`` and the index after it; None if malformed.

    Octal escapes are the name's bytes: UTF-8, or kept as surrogates where they are not.
    Any other character, ASCII or not, stands for itself.
    """
    m = _C_QUOTED_RE.match(text, start)
    if m is None:
        return None
    return _C_ESCAPE_RE.sub(_c_escape, m.group(1)), m.end()


def _c_escape(m: re.Match[str]) -> str:
    esc = m.group(0)
    if not esc[1].isdigit():
        return _C_ESCAPES.get(esc[1], esc[1])
    octets = bytes(int(esc[k + 1 : k + 4], 8) for k in range(0, len(esc), 4))
    return octets.decode("utf-8", "surrogateescape")


def _git_name(names: str) -> str | None:
    """The one file ``diff --git a/NAME b/NAME`` names, as git reads it; None if unclear.

    Git writes the same name twice when it matters (an empty file created or deleted, with
    no ``---``/``+++`` lines), so unquoted names split where the two halves agree.
    """
    if '"' not in names:
        n = (len(names) - 5) // 2
        name = names[2 : 2 + n]
        return name if n > 0 and names == f"a/{name} b/{name}" else None
    sides = _git_sides(names)
    if sides is None or not sides[0].startswith("a/") or sides[1] != "b/" + sides[0][2:]:
        return None
    return sides[0][2:] or None


def _git_sides(names: str) -> tuple[str, str] | None:
    """Both names of a ``diff --git`` line holding a ``"``; None if they are malformed."""
    if names.startswith('"'):
        first = _c_unquote(names, 0)
        if first is None or names[first[1] : first[1] + 1] != " ":
            return None
        a, rest = first[0], names[first[1] + 1 :]
    else:
        cut = names.index('"')  # an unquoted name holds no '"': it starts the second name
        if names[cut - 1] != " ":
            return None
        a, rest = names[: cut - 1], names[cut:]
    if not rest.startswith('"'):
        return a, rest
    second = _c_unquote(rest, 0)
    return (a, second[0]) if second is not None and second[1] == len(rest) else None


def _strip_prefix(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    def strip(p: str | None, prefix: str) -> str | None:
        return p[2:] if p is not None and p.startswith(prefix) else p

    if (old is None or old.startswith("a/")) and (new is None or new.startswith("b/")):
        return strip(old, "a/"), strip(new, "b/")
    return old, new


def _unified_file(cur: _UnifiedFile, hunks: list[Hunk]) -> FilePatch:
    if cur.rename_from and cur.rename_to:
        return FilePatch("move", cur.rename_from, cur.rename_to, tuple(hunks), cur.line)
    old, new = _strip_prefix(cur.old, cur.new)
    if not cur.headers and cur.git and not hunks:
        name = _git_file(cur)
        old = None if cur.created else name
        new = None if cur.deleted else name
    if old is None and new is None:
        raise _perr("both sides of the file header are /dev/null", cur.line)
    if old is None and new is not None:
        return FilePatch("add", new, None, tuple(hunks), cur.line)
    if new is None and old is not None:
        return FilePatch("delete", old, None, tuple(hunks), cur.line)
    if old is None or new is None:
        raise _perr("file header names no path", cur.line)
    if not hunks:
        raise _perr(f"no hunks for {new!r} (mode-only changes are not supported)", cur.line)
    if old != new:
        return FilePatch("move", old, new, tuple(hunks), cur.line)
    return FilePatch("update", new, None, tuple(hunks), cur.line)


def _git_file(cur: _UnifiedFile) -> str:
    name = _git_name(cur.git_names)
    if name is None:
        header = f"diff --git {cur.git_names}"
        raise _perr(
            f"cannot tell which file {header!r} names: without '---'/'+++' or rename lines, "
            "git writes one name twice, 'a/NAME b/NAME'",
            cur.line,
        )
    return name


def _read_hunk(lines: list[str], i: int) -> tuple[Hunk, int]:
    header = lines[i]
    m = _HUNK_RE.match(header)
    if m is None:
        raise _perr(f"malformed hunk header {header!r}", i + 1)
    old_start = int(m.group(1))
    old_len = int(m.group(2)) if m.group(2) is not None else 1
    new_len = int(m.group(4)) if m.group(4) is not None else 1
    body: list[tuple[str, str]] = []
    new_no_eol = False
    j = i + 1
    n_old = n_new = 0
    while j < len(lines) and (n_old < old_len or n_new < new_len):
        s = lines[j]
        tag = s[:1] if s else " "
        if tag == "\\":
            j += 1
            continue
        if tag not in " +-":
            break
        body.append((tag, s[1:]))
        n_old += tag != "+"
        n_new += tag != "-"
        j += 1
    if j < len(lines) and lines[j].startswith("\\"):
        last = body[-1][0] if body else " "
        new_no_eol = last != "-"
        j += 1
    if n_old != old_len or n_new != new_len:
        raise _perr(
            f"hunk {header!r} promises {old_len} old and {new_len} new lines but has "
            f"{n_old} and {n_new}",
            i + 1,
            "patch.hunk_counts",
        )
    return Hunk(tuple(body), old_start=old_start, new_no_eol=new_no_eol, line=i + 1), j


# -- applying in memory ------------------------------------------------------------------------


@dataclass(slots=True)
class _Text:
    """A file as lines (text, ending) with its dominant line ending."""

    lines: list[tuple[str, str]]
    eol: str

    @classmethod
    def parse(cls, data: bytes) -> _Text:
        # Only \n ends a line, as in the patch text and in git: a form feed, a lone \r or
        # U+2028 (str.splitlines would split there) stays inside its line, byte for byte.
        pieces = data.decode("utf-8", "surrogateescape").split("\n")
        out = [(p[:-1], "\r\n") if p.endswith("\r") else (p, "\n") for p in pieces[:-1]]
        if pieces[-1]:
            out.append((pieces[-1], ""))
        crlf = sum(1 for _, e in out if e == "\r\n")
        lf = sum(1 for _, e in out if e == "\n")
        return cls(out, "\r\n" if crlf > lf else "\n")

    def dump(self) -> bytes:
        return "".join(t + e for t, e in self.lines).encode("utf-8", "surrogateescape")


def _same(a: str, b: str, level: int) -> bool:
    match level:
        case 0:
            return a == b
        case 1:
            return a.rstrip() == b.rstrip()
        case _:
            return a.strip() == b.strip()


def _matches(file: list[tuple[str, str]], at: int, old: list[str], level: int) -> bool:
    if at < 0 or at + len(old) > len(file):
        return False
    return all(_same(file[at + k][0], old[k], level) for k in range(len(old)))


def _unified_positions(expected: int, floor: int, limit: int) -> Iterator[int]:
    yield expected
    for d in range(1, limit + 1):
        if expected - d >= floor:
            yield expected - d
        yield expected + d


class _HunkFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _apply_hunks(text: _Text, hunks: tuple[Hunk, ...], fmt: PatchFormat) -> list[int]:
    """Apply every hunk to ``text`` in place; return the offsets, or raise ``_HunkFailed``."""
    offsets: list[int] = []
    cursor = 0
    delta = 0
    for index, hunk in enumerate(hunks):
        try:
            if fmt == "unified":
                at = _find_unified(text.lines, hunk, cursor, delta)
                offsets.append(at - _expected(hunk, delta))
            else:
                at = _find_codex(text.lines, hunk, cursor)
                offsets.append(0)
        except _HunkFailed as exc:
            raise _HunkFailed(f"hunk {index + 1} (patch line {hunk.line}): {exc.reason}") from None
        old_n = len(hunk.old)
        touches_end = at + old_n >= len(text.lines)
        replaced = text.lines[at : at + old_n]
        new_lines = _new_lines(hunk, replaced, text.eol)
        text.lines[at : at + old_n] = new_lines
        if touches_end and new_lines:
            last_text, _ = text.lines[-1] if text.lines else ("", "")
            final = "" if hunk.new_no_eol else text.eol
            if at + len(new_lines) == len(text.lines):
                text.lines[-1] = (last_text, final)
        cursor = at + len(new_lines)
        delta += len(new_lines) - old_n
    for k in range(len(text.lines) - 1):
        if text.lines[k][1] == "":
            text.lines[k] = (text.lines[k][0], text.eol)
    return offsets


def _new_lines(hunk: Hunk, replaced: list[tuple[str, str]], eol: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    k = 0
    for tag, t in hunk.lines:
        if tag == " ":
            out.append(replaced[k] if k < len(replaced) else (t, eol))
            k += 1
        elif tag == "-":
            k += 1
        else:
            out.append((t, eol))
    return out


def _expected(hunk: Hunk, delta: int) -> int:
    start = hunk.old_start or 0
    return (start if not hunk.old else start - 1) + delta


def _find_unified(file: list[tuple[str, str]], hunk: Hunk, cursor: int, delta: int) -> int:
    old = hunk.old
    expected = max(_expected(hunk, delta), cursor)
    if not old:
        if expected > len(file):
            raise _HunkFailed(f"line {expected} is past the end of the file ({len(file)} lines)")
        return expected
    for at in _unified_positions(expected, cursor, len(file)):
        if _matches(file, at, old, 0):
            return at
    raise _HunkFailed(_mismatch(file, expected, old))


def _mismatch(file: list[tuple[str, str]], at: int, old: list[str]) -> str:
    for k, want in enumerate(old):
        if at + k >= len(file):
            return (
                f"the context was not found anywhere in the file; at line {at + k + 1} expected "
                f"{want!r} but the file ends at line {len(file)}"
            )
        got = file[at + k][0]
        if got != want:
            return (
                f"the context was not found anywhere in the file; at line {at + k + 1} "
                f"expected {want!r}, found {got!r}"
            )
    return "the context was not found in the file"


def _find_codex(file: list[tuple[str, str]], hunk: Hunk, cursor: int) -> int:
    start = cursor
    if hunk.anchor:
        found = next(
            (k for k in range(cursor, len(file)) if file[k][0].strip() == hunk.anchor.strip()),
            None,
        )
        if found is None:
            raise _HunkFailed(f"the '@@ {hunk.anchor}' line was not found")
        start = found + 1
    old = hunk.old
    if not old:
        return start if hunk.anchor else len(file)
    # An '*** End of File' chunk matches only at the end, as Codex applies it.
    positions = [len(file) - len(old)] if hunk.at_eof else range(start, len(file) - len(old) + 1)
    for level in (0, 1, 2):
        for at in positions:
            if _matches(file, at, old, level):
                return at
    where = "at the end of the file" if hunk.at_eof else "in the file"
    raise _HunkFailed(
        f"the {len(old)} line(s) this chunk replaces were not found {where} (first: {old[0]!r})"
    )


# -- paths -------------------------------------------------------------------------------------


def _check_path(root: Path, raw: str, op: PathOp, policy: PathPolicy | None) -> str:
    """Validate one patch path; the workspace-relative path, or ``PatchError``."""
    if not raw or "\0" in raw:
        raise PatchError(f"invalid path {raw!r}", code="patch.path", path=raw)
    candidate = Path(raw)
    if candidate.is_absolute():
        try:
            candidate = Path(os.path.normpath(candidate)).relative_to(root)
        except ValueError:
            raise PatchError(
                f"path {raw!r} is outside the workspace {str(root)!r}",
                code="patch.outside_workspace",
                path=raw,
            ) from None
    parts = [p for p in candidate.parts if p not in ("", ".")]
    if ".." in parts:
        raise PatchError(f"path {raw!r} contains '..'", code="patch.path", path=raw)
    if not parts:
        raise PatchError(f"path {raw!r} names the workspace itself", code="patch.path", path=raw)
    if FORBIDDEN_PARTS.intersection(parts):
        raise PatchError(
            f"path {raw!r} is inside .git or .keel, which patches never touch",
            code="patch.protected",
            path=raw,
        )
    rel = "/".join(parts)
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise PatchError(
                f"path {raw!r} goes through the symlink {current.relative_to(root).as_posix()!r}; "
                "patches do not follow symlinks",
                code="patch.symlink",
                path=raw,
            )
    if policy is not None:
        _check_policy(policy, rel, op)
    return rel


def _check_policy(policy: PathPolicy, rel: str, op: PathOp) -> None:
    try:
        decision = policy.check_path(rel, op)
    except KeelError:
        raise
    except Exception as exc:  # fail closed: a broken policy denies
        raise PatchError(
            f"the policy could not judge {rel!r}: {exc}", code="patch.denied", path=rel
        ) from exc
    if decision.decision != "allow":
        raise PatchError(
            f"the policy does not allow {op} on {rel!r}: {decision.reason} [{decision.rule}]",
            code="patch.denied",
            path=rel,
            rule=decision.rule,
        )


# -- the whole patch ---------------------------------------------------------------------------


class _Plan:
    """The in-memory result of a patch: final content (or deletion) per path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state: dict[str, bytes | None] = {}
        self.original: dict[str, bytes | None] = {}
        self.modes: dict[str, int] = {}

    def read(self, rel: str) -> bytes | None:
        if rel in self.state:
            return self.state[rel]
        path = self.root / rel
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            data = None
        except OSError as exc:
            raise PatchError(f"cannot use {rel!r}: {exc.strerror}", code="patch.path",
                             path=rel) from None  # fmt: skip
        else:
            if not stat.S_ISREG(st.st_mode):
                raise PatchError(
                    f"{rel!r} is not a regular file", code="patch.not_a_file", path=rel
                )
            data = path.read_bytes()
            self.modes[rel] = stat.S_IMODE(st.st_mode)
        self.original.setdefault(rel, data)
        return data

    def writable(self, rel: str) -> None:
        mode = self.modes.get(rel)
        if mode is not None and not mode & 0o222:
            raise PatchError(
                f"{rel!r} is read-only (mode {mode:o}); make it writable first",
                code="patch.read_only",
                path=rel,
            )

    def unchanged_on_disk(self) -> list[str]:
        moved: list[str] = []
        for rel, before in self.original.items():
            path = self.root / rel
            try:
                now: bytes | None = path.read_bytes()
            except FileNotFoundError:
                now = None
            except OSError:
                now = b"\0unreadable"
            if now != before:
                moved.append(rel)
        return moved


def apply_patch(
    root: Path,
    text: str,
    *,
    policy: PathPolicy | None = None,
    journal: EventSink | None = None,
    session_id: str | None = None,
    tool_use_id: str | None = None,
    checkpoints: Checkpoints | None = None,
    check: bool = False,
) -> PatchResult:
    """Apply a unified diff or Codex patch under ``root``, all or nothing.

    Args:
        root: The workspace root; every path in the patch must stay inside it.
        text: The patch text.
        policy: Judges each path (``write`` for adds, deletes and moves, ``edit`` for updates).
        journal: Gets one ``patch`` event, whether the patch applied or not.
        session_id: The journal session of that event.
        tool_use_id: The tool call that carried the patch, for the journal.
        checkpoints: If given, a checkpoint is taken first (its id goes into the result).
        check: Validate only; write nothing.

    Raises:
        PatchError: The patch is malformed, a path is not allowed, or a hunk does not apply
            (``code`` says which); no file was changed.
    """
    root = Path(root).resolve()
    patch_id = "patch-" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    call_id = tool_use_id or patch_id
    try:
        fmt, files = parse_patch(text)
        plan = _Plan(root)
        outcomes = [_plan_file(plan, fp, fmt, policy) for fp in files]
        checkpoint = None
        if not check:
            if checkpoints is not None:
                checkpoint = checkpoints.create(
                    session_id=session_id, tool_use_id=call_id, label=patch_id, kind="before"
                ).short
            _write(plan)
    except PatchError as exc:
        _journal(journal, session_id, tool_use_id, patch_id, [], {"ok": False, **exc.to_dict()})
        raise
    result = PatchResult(fmt, tuple(outcomes), not check, patch_id, checkpoint)
    if not check:
        detail = {"ok": True, "format": fmt, "checkpoint": checkpoint}
        _journal(journal, session_id, tool_use_id, patch_id, list(result.paths), detail)
        if checkpoints is not None:
            checkpoints.after_call(session_id, call_id)
    return result


def _plan_file(
    plan: _Plan, fp: FilePatch, fmt: PatchFormat, policy: PathPolicy | None
) -> FileOutcome:
    op: PathOp = "edit" if fp.action == "update" else "write"
    rel = _check_path(plan.root, fp.path, op, policy)
    data = plan.read(rel)
    match fp.action:
        case "add":
            if data is not None:
                raise PatchError(f"cannot add {rel!r}: it already exists", code="patch.exists",
                                 path=rel)  # fmt: skip
            plan.state[rel] = _added(fp)
            return FileOutcome("add", rel, hunks=len(fp.hunks))
        case "delete":
            current = _existing(data, rel, "delete", bool(fp.hunks))
            plan.writable(rel)
            if fp.hunks:
                _apply_or_fail(current, fp, fmt, rel)
            plan.state[rel] = None
            return FileOutcome("delete", rel, hunks=len(fp.hunks))
        case "update":
            current = _existing(data, rel, "update", True)
            plan.writable(rel)
            new, offsets = _apply_or_fail(current, fp, fmt, rel)
            plan.state[rel] = new
            return FileOutcome("update", rel, hunks=len(fp.hunks), offsets=tuple(offsets))
        case "move":
            assert fp.new_path is not None
            current = _existing(data, rel, "move", bool(fp.hunks))
            plan.writable(rel)
            dest = _check_path(plan.root, fp.new_path, "write", policy)
            if dest != rel and plan.read(dest) is not None:
                raise PatchError(f"cannot move {rel!r} to {dest!r}: the target exists",
                                 code="patch.exists", path=dest)  # fmt: skip
            new, offsets = _apply_or_fail(current, fp, fmt, rel) if fp.hunks else (current, [])
            plan.state[rel] = None
            plan.state[dest] = new
            if rel in plan.modes:
                plan.modes[dest] = plan.modes[rel]
            return FileOutcome("move", rel, dest, len(fp.hunks), tuple(offsets))


def _existing(data: bytes | None, rel: str, verb: str, hunks: bool) -> bytes:
    if data is None:
        raise PatchError(f"cannot {verb} {rel!r}: no such file", code="patch.missing", path=rel)
    if hunks and b"\0" in data:
        raise PatchError(f"cannot {verb} {rel!r}: it is a binary file", code="patch.binary",
                         path=rel)  # fmt: skip
    return data


def _added(fp: FilePatch) -> bytes:
    lines = [t for h in fp.hunks for tag, t in h.lines if tag == "+"]
    if any(tag != "+" for h in fp.hunks for tag, _ in h.lines):
        raise PatchError(f"the new file {fp.path!r} has context or removed lines",
                         code="patch.parse", path=fp.path)  # fmt: skip
    if not lines:
        return b""
    no_eol = bool(fp.hunks) and fp.hunks[-1].new_no_eol
    body = "\n".join(lines) + ("" if no_eol else "\n")
    return body.encode("utf-8", "surrogateescape")


def _apply_or_fail(
    data: bytes, fp: FilePatch, fmt: PatchFormat, rel: str
) -> tuple[bytes, list[int]]:
    text = _Text.parse(data)
    try:
        offsets = _apply_hunks(text, fp.hunks, fmt)
    except _HunkFailed as exc:
        raise PatchError(
            f"{rel!r}: {exc.reason}; no file was changed", code="patch.hunk_failed", path=rel
        ) from None
    if fp.action == "delete" and text.lines:
        raise PatchError(
            f"{rel!r}: the patch deletes the file but does not remove all of its content",
            code="patch.hunk_failed",
            path=rel,
        )
    return text.dump(), offsets


def _write(plan: _Plan) -> None:
    moved = plan.unchanged_on_disk()
    if moved:
        raise PatchError(
            f"files changed on disk while the patch was checked: {', '.join(sorted(moved))}",
            code="patch.conflict",
            files=sorted(moved),
        )
    txn = FileTransaction(plan.root)
    for rel, data in plan.state.items():
        path = plan.root / rel
        if data is None:
            if plan.original.get(rel) is not None:
                txn.delete(path)
        elif data != plan.original.get(rel):
            txn.write(path, data, plan.modes.get(rel))
    try:
        txn.commit(prune_dirs=True)
    except KeelError as exc:
        raise PatchError(exc.message, code="patch.write_failed", **exc.context) from exc


def _journal(
    journal: EventSink | None,
    session_id: str | None,
    tool_use_id: str | None,
    patch_id: str,
    files: list[str],
    detail: dict[str, Any],
) -> None:
    if journal is None:
        return
    outcome = "applied" if detail.get("ok") else f"failed [{detail.get('code')}]"
    payload = CheckpointPayload(
        checkpoint_id=detail.get("checkpoint") or patch_id,
        label=f"{patch_id} {outcome}",
        tool_use_id=tool_use_id,
        files=files,
        detail=detail,
    )
    journal.append(Event("patch", session_id or MANUAL_SESSION, payload))
