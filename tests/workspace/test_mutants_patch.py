"""Mutation-testing survivors of the patch engine (issue 14, tests/MUTATION.md).

What users and agents rely on, pinned exactly: each error's code, message and context, the
bytes a patch writes (line endings, final newlines, where a hunk lands), the tree left
byte-identical after a failure, the result and the journal event.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal

import pytest

from keel.core.decision import Decision
from keel.core.errors import KeelError, PatchError
from keel.core.events import CheckpointPayload, Event
from keel.journal import MemoryJournal
from keel.workspace import patch as patch_mod
from keel.workspace.patch import apply_patch, parse_patch

Files = dict[str, bytes | str]


def _snapshot(root: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Everything under root: kind, content (or link target) and mode."""
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        st = path.lstat()
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()), 0)
        elif path.is_dir():
            out[rel] = ("dir", "", st.st_mode & 0o7777)
        else:
            out[rel] = ("file", path.read_bytes(), st.st_mode & 0o7777)
    return out


def _make(root: Path, files: Files) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content.startswith("-> "):
            path.symlink_to(content[3:])
        elif isinstance(content, str) and content == "<dir>":
            path.mkdir()
        else:
            path.write_bytes(content.encode() if isinstance(content, str) else content)


def _codex(*body: str) -> str:
    return "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"


def _payload(event: Event) -> CheckpointPayload:
    assert isinstance(event.payload, CheckpointPayload)
    return event.payload


def _fails(root: Path, files: Files, text: str, **kw: Any) -> PatchError:
    """Apply ``text`` to ``files``; it must fail and leave the tree exactly as it was."""
    _make(root, files)
    before = _snapshot(root)
    journal = MemoryJournal()
    with pytest.raises(PatchError) as info:
        apply_patch(root, text, journal=journal, **kw)
    assert _snapshot(root) == before
    [event] = list(journal.events())
    assert _payload(event).detail == {"ok": False, **info.value.to_dict()}
    return info.value


# -- parse errors: code, message, line ---------------------------------------------------------

EMPTY = (
    "no file changes found: expected a unified diff (---/+++/@@) or a Codex patch (*** Begin Patch)"
)
PARSE_ERRORS: list[tuple[str, str, str, int | None]] = [
    ("a\0b\n", "patch.binary", "the patch contains NUL bytes (binary)", None),
    ("hello\n", "patch.empty", EMPTY, None),
    ("*** Begin Patch\n*** End Patch\n", "patch.empty", EMPTY, None),
    ("--- a/x\n", "patch.empty", EMPTY, None),
    (
        _codex("*** Add File: n.txt", "+a", "b"),
        "patch.parse",
        "line 4: every line of an added file must start with '+'",
        4,
    ),
    (
        _codex("*** Frob File: x"),
        "patch.parse",
        "line 2: unexpected line '*** Frob File: x' (expected a '*** ... File:' header)",
        2,
    ),
    (
        "*** Begin Patch\n*** Delete File: a\n",
        "patch.parse",
        "line 3: the patch has no '*** End Patch' line",
        3,
    ),
    (
        "*** Begin Patch\n*** Delete File: a",
        "patch.parse",
        "line 2: the patch has no '*** End Patch' line",
        2,
    ),
    (
        "*** Begin Patch\n*** Add File: a\n+x",
        "patch.parse",
        "line 3: the patch has no '*** End Patch' line",
        3,
    ),
    (
        _codex("*** Update File: a.txt"),
        "patch.parse",
        "line 2: update of 'a.txt' has no changes",
        2,
    ),
    (
        _codex("", "*** Update File: a.txt", "*** End Patch"),
        "patch.parse",
        "line 3: update of 'a.txt' has no changes",
        3,
    ),
    (
        _codex("*** Update File: a.txt", "*** End of File"),
        "patch.parse",
        "line 3: '*** End of File' without a chunk before it",
        3,
    ),
    (
        _codex("*** Update File: a.txt", "@@", "-a", "xa"),
        "patch.parse",
        "line 5: chunk line must start with ' ', '+' or '-': 'xa'",
        5,
    ),
    (
        _codex("*** Update File: a.txt", "@@", "-a", "Xa"),
        "patch.parse",
        "line 5: chunk line must start with ' ', '+' or '-': 'Xa'",
        5,
    ),
    (
        _codex("*** Update File: a.txt", " a", " b"),
        "patch.parse",
        "line 2: chunk has no '+' or '-' lines",
        2,
    ),
    (
        _codex("*** Update File: a.txt", " a", "", " b"),  # an empty line is context too
        "patch.parse",
        "line 2: chunk has no '+' or '-' lines",
        2,
    ),
    (
        _codex("*** Update File: a.txt", "@@", "-a", "+b", "@@ def f", " a"),
        "patch.parse",
        "line 6: chunk has no '+' or '-' lines",
        6,
    ),
    (
        "--- a/x\n+++ b/x\nBinary files a/x and b/x differ\n",
        "patch.binary",
        "line 3: binary patches are not supported",
        3,
    ),
    (
        "diff --git a/x b/x\nGIT binary patch\nliteral 3\n",
        "patch.binary",
        "line 2: binary patches are not supported",
        2,
    ),
    (
        "@@ -1 +1 @@\n-a\n+b\n",
        "patch.parse",
        "line 1: hunk without '---'/'+++' file headers",
        1,
    ),
    (
        "diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n",
        "patch.parse",
        "line 2: hunk without '---'/'+++' file headers",
        2,
    ),
    (
        "diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n",
        "patch.unsupported",
        "line 1: copies are not supported; add the file instead",
        1,
    ),
    ("--- a/x", "patch.empty", EMPTY, None),
    (
        "--- a/x\n+++ b/x",
        "patch.parse",
        "line 1: no hunks for 'x' (mode-only changes are not supported)",
        1,
    ),
    (
        "--- a/x\n+++ b/x\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
        "patch.parse",
        "line 1: no hunks for 'x' (mode-only changes are not supported)",
        1,
    ),
    (
        "*** Begin Patch\n*** Update File: a",
        "patch.parse",
        "line 2: update of 'a' has no changes",
        2,
    ),
    (
        "diff --git a/x b/y\ncopy from x\n",
        "patch.unsupported",
        "line 1: copies are not supported; add the file instead",
        1,
    ),
    (
        "diff --git a/x b/y\nrename from x\n",  # no 'rename to': the names must agree
        "patch.parse",
        "line 1: cannot tell which file 'diff --git a/x b/y' names: without '---'/'+++' or "
        "rename lines, git writes one name twice, 'a/NAME b/NAME'",
        1,
    ),
    (
        "diff --git a/x b/x\n--- a/y\n+++ b/y\n",
        "patch.parse",
        "line 1: no hunks for 'y' (mode-only changes are not supported)",
        1,
    ),
    (
        "diff --git a/x b/y\ncopy to y\n",
        "patch.unsupported",
        "line 1: copies are not supported; add the file instead",
        1,
    ),
    (
        "--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n",
        "patch.parse",
        "line 1: both sides of the file header are /dev/null",
        1,
    ),
    (
        "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n",
        "patch.parse",
        "line 1: no hunks for 'x' (mode-only changes are not supported)",
        1,
    ),
    (
        "--- a/x\n+++ b/x\n",
        "patch.parse",
        "line 1: no hunks for 'x' (mode-only changes are not supported)",
        1,
    ),
    (
        "--- a/x\n+++ b/x\n@@ -a +b @@\n-a\n",
        "patch.parse",
        "line 3: malformed hunk header '@@ -a +b @@'",
        3,
    ),
    (
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b",
        "patch.hunk_counts",
        "line 3: hunk '@@ -1,2 +1,2 @@' promises 2 old and 2 new lines but has 1 and 1",
        3,
    ),
    (
        "--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\n+b",
        "patch.hunk_counts",
        "line 3: hunk '@@ -1 +1,2 @@' promises 1 old and 2 new lines but has 1 and 1",
        3,
    ),
    (
        "--- a/x\n+++ b/x\n@@ -1,2 +1 @@\n-a\n+b",
        "patch.hunk_counts",
        "line 3: hunk '@@ -1,2 +1 @@' promises 2 old and 1 new lines but has 1 and 1",
        3,
    ),
    (
        "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n?c\n",
        "patch.hunk_counts",
        "line 3: hunk '@@ -1,3 +1,3 @@' promises 3 old and 3 new lines but has 2 and 2",
        3,
    ),
    (
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\nXb\n",
        "patch.hunk_counts",
        "line 3: hunk '@@ -1,2 +1,2 @@' promises 2 old and 2 new lines but has 1 and 1",
        3,
    ),
]


@pytest.mark.parametrize(("text", "code", "message", "line"), PARSE_ERRORS)
def test_a_malformed_patch_is_refused_with_its_code_message_and_line(
    workdir: Path, text: str, code: str, message: str, line: int | None
) -> None:
    with pytest.raises(PatchError) as info:
        parse_patch(text)
    err = info.value
    assert err.code == code
    assert err.message == message
    assert err.context.get("line") == line
    assert _fails(workdir, {"x": "a\n", "a.txt": "a\nb\n"}, text).to_dict() == err.to_dict()


# -- apply errors: nothing written, code, message and context -----------------------------------

AB: Files = {"a.txt": "a\nb\n", "b.txt": "b\n"}
APPLY_ERRORS: list[tuple[str, Files, str, str, str, dict[str, Any]]] = [
    (
        "dotdot",
        AB,
        _codex("*** Delete File: ../a.txt"),
        "patch.path",
        "path '../a.txt' contains '..'",
        {"path": "../a.txt"},
    ),
    (
        "dotdot_inside",
        AB,
        _codex("*** Delete File: sub/../a.txt"),
        "patch.path",
        "path 'sub/../a.txt' contains '..'",
        {"path": "sub/../a.txt"},
    ),
    (
        "itself",
        AB,
        _codex("*** Delete File: ./."),
        "patch.path",
        "path './.' names the workspace itself",
        {"path": "./."},
    ),
    (
        "empty_path",
        AB,
        "--- a/\n+++ b/\n@@ -1 +1 @@\n-a\n+b\n",
        "patch.path",
        "invalid path ''",
        {"path": ""},
    ),
    (
        "nul_path",
        AB,
        '--- "a/a\\000"\n+++ "b/a\\000"\n@@ -1 +1 @@\n-a\n+b\n',
        "patch.path",
        "invalid path 'a\\x00'",
        {"path": "a\0"},
    ),
    (
        "git",
        AB,
        _codex("*** Add File: .git/hooks/pre-commit", "+x"),
        "patch.protected",
        "path '.git/hooks/pre-commit' is inside .git or .keel, which patches never touch",
        {"path": ".git/hooks/pre-commit"},
    ),
    (
        "keel",
        AB,
        _codex("*** Add File: ./sub/.keel/x", "+x"),
        "patch.protected",
        "path './sub/.keel/x' is inside .git or .keel, which patches never touch",
        {"path": "./sub/.keel/x"},
    ),
    (
        "move_into_git",
        AB,
        _codex("*** Update File: a.txt", "*** Move to: .git/a.txt"),
        "patch.protected",
        "path '.git/a.txt' is inside .git or .keel, which patches never touch",
        {"path": ".git/a.txt"},
    ),
    (
        "symlink_dir",
        {**AB, "d/f.txt": "f\n", "l": "-> d"},
        _codex("*** Delete File: l/f.txt"),
        "patch.symlink",
        "path 'l/f.txt' goes through the symlink 'l'; patches do not follow symlinks",
        {"path": "l/f.txt"},
    ),
    (
        "symlink_file",
        {**AB, "d/l": "-> ../a.txt"},
        _codex("*** Update File: d/l", "@@", "-a", "+A"),
        "patch.symlink",
        "path 'd/l' goes through the symlink 'd/l'; patches do not follow symlinks",
        {"path": "d/l"},
    ),
    (
        "dangling_symlink",
        {**AB, "l": "-> nowhere"},
        _codex("*** Add File: l", "+x"),
        "patch.symlink",
        "path 'l' goes through the symlink 'l'; patches do not follow symlinks",
        {"path": "l"},
    ),
    (
        "not_a_file",
        {**AB, "d": "<dir>"},
        _codex("*** Delete File: d"),
        "patch.not_a_file",
        "'d' is not a regular file",
        {"path": "d"},
    ),
    (
        "under_a_file",
        AB,
        _codex("*** Add File: a.txt/x", "+x"),
        "patch.path",
        "cannot use 'a.txt/x': Not a directory",
        {"path": "a.txt/x"},
    ),
    (
        "add_existing",
        AB,
        _codex("*** Add File: a.txt", "+x"),
        "patch.exists",
        "cannot add 'a.txt': it already exists",
        {"path": "a.txt"},
    ),
    (
        "add_twice",
        AB,
        _codex("*** Add File: n.txt", "+x", "*** Add File: n.txt", "+y"),
        "patch.exists",
        "cannot add 'n.txt': it already exists",
        {"path": "n.txt"},
    ),
    (
        "update_missing",
        AB,
        _codex("*** Update File: nope.txt", "@@", "-a", "+b"),
        "patch.missing",
        "cannot update 'nope.txt': no such file",
        {"path": "nope.txt"},
    ),
    (
        "update_deleted",
        AB,
        _codex("*** Delete File: a.txt", "*** Update File: a.txt", "@@", "-a", "+b"),
        "patch.missing",
        "cannot update 'a.txt': no such file",
        {"path": "a.txt"},
    ),
    (
        "delete_missing",
        AB,
        _codex("*** Delete File: nope.txt"),
        "patch.missing",
        "cannot delete 'nope.txt': no such file",
        {"path": "nope.txt"},
    ),
    (
        "move_missing",
        AB,
        _codex("*** Update File: nope.txt", "*** Move to: n.txt"),
        "patch.missing",
        "cannot move 'nope.txt': no such file",
        {"path": "nope.txt"},
    ),
    (
        "update_binary",
        {**AB, "bin": b"a\n\0\n"},
        _codex("*** Update File: bin", "@@", "-a", "+b"),
        "patch.binary",
        "cannot update 'bin': it is a binary file",
        {"path": "bin"},
    ),
    (
        "delete_binary_with_hunks",
        {**AB, "bin": b"a\n\0\n"},
        "--- a/bin\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
        "patch.binary",
        "cannot delete 'bin': it is a binary file",
        {"path": "bin"},
    ),
    (
        "move_binary_with_hunks",
        {**AB, "bin": b"a\n\0\n"},
        _codex("*** Update File: bin", "*** Move to: n", "@@", "-a", "+b"),
        "patch.binary",
        "cannot move 'bin': it is a binary file",
        {"path": "bin"},
    ),
    (
        "move_onto_existing",
        AB,
        _codex("*** Update File: a.txt", "*** Move to: b.txt"),
        "patch.exists",
        "cannot move 'a.txt' to 'b.txt': the target exists",
        {"path": "b.txt"},
    ),
    (
        "move_onto_added",
        AB,
        _codex("*** Add File: n.txt", "+n", "*** Update File: a.txt", "*** Move to: n.txt"),
        "patch.exists",
        "cannot move 'a.txt' to 'n.txt': the target exists",
        {"path": "n.txt"},
    ),
    (
        "context_differs",
        AB,
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n a\n-c\n+C\n",
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): the context was not found anywhere in the file; "
        "at line 2 expected 'c', found 'b'; no file was changed",
        {"path": "a.txt"},
    ),
    (
        "context_differs_third",
        {"t.txt": "a\nb\nc\n"},
        "--- a/t.txt\n+++ b/t.txt\n@@ -1,3 +1,3 @@\n a\n b\n-x\n+X\n",
        "patch.hunk_failed",
        "'t.txt': hunk 1 (patch line 3): the context was not found anywhere in the file; "
        "at line 3 expected 'x', found 'c'; no file was changed",
        {"path": "t.txt"},
    ),
    (
        "context_past_end",
        AB,
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n a\n b\n-c\n+C\n",
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): the context was not found anywhere in the file; "
        "at line 3 expected 'c' but the file ends at line 2; no file was changed",
        {"path": "a.txt"},
    ),
    (
        "second_hunk",
        AB,
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n@@ -2 +2 @@\n-x\n+X\n",
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 6): the context was not found anywhere in the file; "
        "at line 2 expected 'x', found 'b'; no file was changed",
        {"path": "a.txt"},
    ),
    (
        "insert_past_end",
        AB,
        "--- a/a.txt\n+++ b/a.txt\n@@ -5,0 +6 @@\n+z\n",
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): line 5 is past the end of the file (2 lines); "
        "no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_anchor",
        AB,
        _codex("*** Update File: a.txt", "@@ def  f():", "-a", "+A"),
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): the '@@ def  f():' line was not found; "
        "no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_not_found",
        AB,
        _codex("*** Update File: a.txt", "@@", "-a", "+A", "@@", " zz", "-b", "+B"),
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 6): the 2 line(s) this chunk replaces were not found "
        "in the file (first: 'zz'); no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_order",
        AB,
        _codex("*** Update File: a.txt", "@@", "-b", "+B", "@@", "-a", "+A"),
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 6): the 1 line(s) this chunk replaces were not found "
        "in the file (first: 'a'); no file was changed",
        {"path": "a.txt"},
    ),
    (
        "outside",
        AB,
        _codex("*** Add File: /etc/keel-test-x", "+x"),
        "patch.outside_workspace",
        "path '/etc/keel-test-x' is outside the workspace '{root}'",
        {"path": "/etc/keel-test-x"},
    ),
    (
        "outside_by_dotdot",
        AB,
        _codex("*** Add File: {root}/../x", "+x"),
        "patch.outside_workspace",
        "path '{root}/../x' is outside the workspace '{root}'",
        {"path": "{root}/../x"},
    ),
    (
        "codex_anchor_at_eof",
        AB,
        _codex("*** Update File: a.txt", "@@ h", "-b", "+B", "*** End of File"),
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): the '@@ h' line was not found; no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_at_eof_not_found",
        AB,
        _codex("*** Update File: a.txt", "-a", "+A", "@@", "-q", "+Q", "*** End of File"),
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 5): the 1 line(s) this chunk replaces were not found "
        "at the end of the file (first: 'q'); no file was changed",
        {"path": "a.txt"},
    ),
    (
        "move_hunk_fails",
        AB,
        _codex("*** Update File: a.txt", "*** Move to: m.txt", "@@", "-q", "+Q"),
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 4): the 1 line(s) this chunk replaces were not found "
        "in the file (first: 'q'); no file was changed",
        {"path": "a.txt"},
    ),
    (
        "unified_is_exact",
        AB,
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n- a\n+A\n",
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): the context was not found anywhere in the file; "
        "at line 1 expected ' a', found 'a'; no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_anchor_before_cursor",
        AB,
        _codex("*** Update File: a.txt", "-b", "+B", "@@ a", "+x"),
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 5): the '@@ a' line was not found; no file was changed",
        {"path": "a.txt"},
    ),
    (
        "delete_is_exact",
        {"w": "a\n"},
        "--- a/w\n+++ /dev/null\n@@ -1 +0,0 @@\n-a \n",
        "patch.hunk_failed",
        "'w': hunk 1 (patch line 3): the context was not found anywhere in the file; "
        "at line 1 expected 'a ', found 'a'; no file was changed",
        {"path": "w"},
    ),
    (
        "delete_keeps_content",
        AB,
        "--- a/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
        "patch.hunk_failed",
        "'a.txt': the patch deletes the file but does not remove all of its content",
        {"path": "a.txt"},
    ),
    (
        "add_with_context",
        AB,
        "--- /dev/null\n+++ b/n.txt\n@@ -0,1 +1,2 @@\n+a\n a\n",
        "patch.parse",
        "the new file 'n.txt' has context or removed lines",
        {"path": "n.txt"},
    ),
    (
        "add_with_removal",
        AB,
        "--- /dev/null\n+++ b/n.txt\n@@ -0,1 +1 @@\n-a\n+a\n",
        "patch.parse",
        "the new file 'n.txt' has context or removed lines",
        {"path": "n.txt"},
    ),
    (
        "second_file_fails",
        AB,
        _codex("*** Update File: a.txt", "@@", "-a", "+A", "*** Delete File: c.txt"),
        "patch.missing",
        "cannot delete 'c.txt': no such file",
        {"path": "c.txt"},
    ),
]


@pytest.mark.parametrize(
    ("name", "files", "text", "code", "message", "context"),
    APPLY_ERRORS,
    ids=[c[0] for c in APPLY_ERRORS],
)
def test_a_patch_that_cannot_apply_changes_nothing_and_says_why(
    workdir: Path,
    name: str,
    files: Files,
    text: str,
    code: str,
    message: str,
    context: dict[str, Any],
) -> None:
    root = str(workdir)
    err = _fails(workdir, files, text.replace("{root}", root))
    context = {k: v.replace("{root}", root) for k, v in context.items()}
    assert (err.code, err.message, err.context) == (code, message.replace("{root}", root), context)


# -- the bytes written -------------------------------------------------------------------------

U = "--- a/f\n+++ b/f\n"
APPLIES: list[tuple[str, bytes, str, bytes]] = [
    # unified: where a hunk lands
    ("offset_down", b"x\na\nb\n", U + "@@ -1,2 +1,2 @@\n a\n-b\n+B\n", b"x\na\nB\n"),
    ("offset_up", b"a\nb\nx\nx\n", U + "@@ -3,2 +3,2 @@\n a\n-b\n+B\n", b"a\nB\nx\nx\n"),
    ("nearer_after", b"a\nx\nx\na\nx\n", U + "@@ -3 +3 @@\n-a\n+A\n", b"a\nx\nx\nA\nx\n"),
    ("nearer_before", b"x\na\nx\nx\nx\na\n", U + "@@ -4 +4 @@\n-a\n+A\n", b"x\nA\nx\nx\nx\na\n"),
    ("tie_goes_before", b"a\nx\nx\nx\na\n", U + "@@ -3 +3 @@\n-a\n+A\n", b"A\nx\nx\nx\na\n"),
    ("exact_wins", b"a\na\na\n", U + "@@ -2 +2 @@\n-a\n+A\n", b"a\nA\na\n"),
    ("insert_at_start", b"a\nb\n", U + "@@ -0,0 +1 @@\n+z\n", b"z\na\nb\n"),
    ("insert_after_line", b"a\nb\nc\n", U + "@@ -2,0 +3 @@\n+z\n", b"a\nb\nz\nc\n"),
    ("insert_at_end", b"a\nb\n", U + "@@ -2,0 +3 @@\n+z\n", b"a\nb\nz\n"),
    (
        "delta_moves_second_hunk",
        b"a\nb\nc\nd\n",
        U + "@@ -1 +1,3 @@\n-a\n+1\n+2\n+3\n@@ -3 +5 @@\n-c\n+C\n",
        b"1\n2\n3\nb\nC\nd\n",
    ),
    (
        "second_hunk_not_before_first",
        b"c\na\nc\n",
        U + "@@ -2 +2 @@\n-a\n+A\n@@ -1 +1 @@\n-c\n+C\n",
        b"c\nA\nC\n",
    ),
    (
        "never_before_the_previous_hunk",
        b"c\na\nx\nx\nc\n",
        U + "@@ -2 +2 @@\n-a\n+A\n@@ -1 +1 @@\n-c\n+C\n",
        b"c\nA\nx\nx\nC\n",
    ),
    (
        "context_trailing_cr",
        b"a\r\nb\r\n",
        U + "@@ -1,2 +1,2 @@\n a\r\n-b\r\n+B\r\n",
        b"a\r\nB\r\n",
    ),
    # line endings
    ("crlf_file", b"a\r\nb\r\n", U + "@@ -1,2 +1,3 @@\n a\n-b\n+B\n+c\n", b"a\r\nB\r\nc\r\n"),
    ("crlf_majority", b"a\r\nb\r\nc\n", U + "@@ -1 +1,2 @@\n-a\n+A\n+n\n", b"A\r\nn\r\nb\r\nc\n"),
    ("crlf_minority", b"a\r\nb\nc\n", U + "@@ -3 +3 @@\n-c\n+C\n", b"a\r\nb\nC\n"),
    ("crlf_tie_is_lf", b"a\r\nb\n", U + "@@ -2 +2,2 @@\n-b\n+B\n+c\n", b"a\r\nB\nc\n"),
    ("kept_ending", b"a\r\nb\nc\n", U + "@@ -1,2 +1,2 @@\n a\n-b\n+B\n", b"a\r\nB\nc\n"),
    # the end of the file
    ("no_eol_kept_context", b"a\nb", U + "@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline\n", b"A\nb"),
    ("no_eol_last_changed", b"a\nb", U + "@@ -2 +2 @@\n-b\n\\ No newline\n+B\n", b"a\nB\n"),
    (
        "no_eol_on_both",
        b"a\nb",
        U + "@@ -2 +2 @@\n-b\n\\ No newline\n+B\n\\ No newline\n",
        b"a\nB",
    ),
    ("no_eol_added", b"a\nb\n", U + "@@ -2 +2 @@\n-b\n+B\n\\ No newline\n", b"a\nB"),
    ("append_to_no_eol", b"a", U + "@@ -1 +1,2 @@\n-a\n\\ No newline\n+a\n+b\n", b"a\nb\n"),
    ("insert_after_no_eol", b"a", U + "@@ -1,0 +2 @@\n+b\n", b"a\nb\n"),
    ("remove_last_of_no_eol", b"a\nb", U + "@@ -1,2 +1 @@\n a\n-b\n\\ No newline\n", b"a\n"),
    ("no_eol_after_added", b"a\nb", U + "@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline\n", b"a\nc"),
    ("removed_then_context", b"a\nb\nc\n", U + "@@ -1,3 +1,2 @@\n-a\n b\n c\n", b"b\nc\n"),
    ("removed_then_crlf", b"a\nb\r\nc\n", U + "@@ -1,2 +1 @@\n-a\n b\n", b"b\r\nc\n"),
    ("remove_last_line", b"a\nb\n", U + "@@ -1,2 +1 @@\n a\n-b\n", b"a\n"),
    ("remove_last_lines_no_eol", b"a\nb\nc", U + "@@ -2,2 +1,0 @@\n-b\n-c\n", b"a\n"),
    ("empty_file_gets_lines", b"", U + "@@ -0,0 +1,2 @@\n+a\n+b\n", b"a\nb\n"),
    ("blank_context_line", b"a\n\nb\n", U + "@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n", b"a\n\nB\n"),
    (
        "blank_then_context",
        b"a\n\nc\nb\n",
        U + "@@ -1,4 +1,4 @@\n a\n\n c\n-b\n+B\n",
        b"a\n\nc\nB\n",
    ),
    (
        "non_utf8",
        b"caf\xe9\nb\n",
        U + "@@ -2 +2 @@\n-b\n+\xe9t\xe9\n",
        b"caf\xe9\n" + "\xe9t\xe9\n".encode(),
    ),
    # codex: matching by content
    (
        "codex_plain",
        b"a\nb\nc\n",
        _codex("*** Update File: f", "@@", " a", "-b", "+B"),
        b"a\nB\nc\n",
    ),
    ("codex_no_at", b"a\nb\n", _codex("*** Update File: f", "-b", "+B"), b"a\nB\n"),
    ("codex_rstrip", b"a  \nb\n", _codex("*** Update File: f", " a", "-b", "+B"), b"a  \nB\n"),
    ("codex_strip", b"  a\nb\n", _codex("*** Update File: f", " a", "-b", "+B"), b"  a\nB\n"),
    ("codex_exact_before_rstrip", b"a \na\n", _codex("*** Update File: f", "-a", "+A"), b"a \nA\n"),
    ("codex_rstrip_patch_side", b" a\na\n", _codex("*** Update File: f", "-a ", "+A"), b" a\nA\n"),
    ("codex_exact_first", b" a\na\n", _codex("*** Update File: f", "-a", "+A"), b" a\nA\n"),
    (
        "codex_rstrip_before_strip",
        b" a\na \n",
        _codex("*** Update File: f", "-a", "+A"),
        b" a\nA\n",
    ),
    (
        "codex_anchor",
        b"a\ndef f():\na\n",
        _codex("*** Update File: f", "@@  def f():  ", "-a", "+A"),
        b"a\ndef f():\nA\n",
    ),
    (
        "codex_anchor_only_add",
        b"a\nb\nc\n",
        _codex("*** Update File: f", "@@ b", "+x"),
        b"a\nb\nx\nc\n",
    ),
    ("codex_add_at_end", b"a\nb\n", _codex("*** Update File: f", "@@", "+x"), b"a\nb\nx\n"),
    (
        "codex_end_of_file",
        b"a\nb\na\nb\n",
        _codex("*** Update File: f", "@@", "-a", "+A", " b", "*** End of File"),
        b"a\nb\nA\nb\n",
    ),
    (
        "codex_end_of_file_strip",
        b"x\nb\na \n",
        _codex("*** Update File: f", "@@", "-a", "+A", "*** End of File"),
        b"x\nb\nA\n",
    ),
    (
        "codex_cursor",
        b"a\nb\na\nb\n",
        _codex("*** Update File: f", "@@", "-a", "+A", "@@", "-a", "+C"),
        b"A\nb\nC\nb\n",
    ),
    (
        "codex_anchor_after_cursor",
        b"h\na\nh\na\n",
        _codex("*** Update File: f", "@@ h", "-a", "+A", "@@ h", "-a", "+B"),
        b"h\nA\nh\nB\n",
    ),
    (
        "codex_blank_line_is_context",
        b"a\n\nb\n",
        _codex("*** Update File: f", "@@", " a", "", "-b", "+B"),
        b"a\n\nB\n",
    ),
    (
        "codex_crlf_patch",
        b"a\nb\n",
        _codex("*** Update File: f", "-b", "+B").replace("\n", "\r\n"),
        b"a\nB\n",
    ),
]


@pytest.mark.parametrize(("name", "before", "text", "after"), APPLIES, ids=[c[0] for c in APPLIES])
def test_an_update_writes_exactly_these_bytes(
    workdir: Path, name: str, before: bytes, text: str, after: bytes
) -> None:
    (workdir / "f").write_bytes(before)
    result = apply_patch(workdir, text)
    assert (workdir / "f").read_bytes() == after
    assert sorted(p.name for p in workdir.iterdir()) == ["f"]
    assert [f.action for f in result.files] == ["update"]


# -- adds, deletes, moves ----------------------------------------------------------------------

TREE_CHANGES: list[tuple[str, Files, str, dict[str, bytes], list[dict[str, Any]]]] = [
    (
        "codex_add",
        {},
        _codex("*** Add File:  sub/new.txt ", "+a", "+", "+b"),
        {"sub/new.txt": b"a\n\nb\n"},
        [{"action": "add", "path": "sub/new.txt", "new_path": None, "hunks": 1, "offsets": []}],
    ),
    (
        "codex_add_empty",
        {},
        _codex("*** Add File: e.txt"),
        {"e.txt": b""},
        [{"action": "add", "path": "e.txt", "new_path": None, "hunks": 0, "offsets": []}],
    ),
    (
        "unified_add_no_eol",
        {},
        "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n",
        {"n.txt": b"a\nb"},
        [{"action": "add", "path": "n.txt", "new_path": None, "hunks": 1, "offsets": []}],
    ),
    (
        "unified_add_raw_bytes",
        {},
        "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+caf\udce9\n",
        {"n.txt": b"caf\xe9\n"},
        [{"action": "add", "path": "n.txt", "new_path": None, "hunks": 1, "offsets": []}],
    ),
    (
        "codex_blank_lines_before_a_header",
        {"x": "x\n"},
        _codex("*** Add File: n.txt", "+a", "", "", "*** Update File: x", "-x", "+X", ""),
        {"n.txt": b"a\n", "x": b"X\n"},
        [
            {"action": "add", "path": "n.txt", "new_path": None, "hunks": 1, "offsets": []},
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
        ],
    ),
    (
        "git_new_empty_file",
        {},
        "diff --git a/e.txt b/e.txt\nnew file mode 100644\nindex 0000000..e69de29\n",
        {"e.txt": b""},
        [{"action": "add", "path": "e.txt", "new_path": None, "hunks": 0, "offsets": []}],
    ),
    (
        "git_deleted_file",
        {"d.txt": "d\n", "k.txt": "k\n"},
        "diff --git a/d.txt b/d.txt\ndeleted file mode 100644\nindex 1..0\n",
        {"k.txt": b"k\n"},
        [{"action": "delete", "path": "d.txt", "new_path": None, "hunks": 0, "offsets": []}],
    ),
    (
        "unified_delete_with_hunk",
        {"sub/deep/d.txt": "a\nb\n", "k.txt": "k\n"},
        "--- a/sub/deep/d.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
        {"k.txt": b"k\n"},
        [
            {
                "action": "delete",
                "path": "sub/deep/d.txt",
                "new_path": None,
                "hunks": 1,
                "offsets": [],
            }
        ],
    ),
    (
        "codex_delete_binary",
        {"bin": b"\0\1", "k.txt": "k\n"},
        _codex("*** Delete File: bin"),
        {"k.txt": b"k\n"},
        [{"action": "delete", "path": "bin", "new_path": None, "hunks": 0, "offsets": []}],
    ),
    (
        "git_pure_rename",
        {"x.txt": "x\n"},
        "diff --git a/x.txt b/d/y.txt\nsimilarity index 100%\nrename from x.txt\n"
        "rename to d/y.txt\n",
        {"d/y.txt": b"x\n"},
        [{"action": "move", "path": "x.txt", "new_path": "d/y.txt", "hunks": 0, "offsets": []}],
    ),
    (
        "git_rename_with_hunk",
        {"x.txt": "a\nx\n"},
        "diff --git a/x.txt b/y.txt\nrename from x.txt\nrename to y.txt\n--- a/x.txt\n"
        "+++ b/y.txt\n@@ -1 +1 @@\n-x\n+X\n",
        {"y.txt": b"a\nX\n"},
        [{"action": "move", "path": "x.txt", "new_path": "y.txt", "hunks": 1, "offsets": [1]}],
    ),
    (
        "unified_move",
        {"x.txt": "x\n"},
        "--- a/x.txt\n+++ b/y.txt\n@@ -1 +1 @@\n-x\n+X\n",
        {"y.txt": b"X\n"},
        [{"action": "move", "path": "x.txt", "new_path": "y.txt", "hunks": 1, "offsets": [0]}],
    ),
    (
        "codex_move_binary",
        {"bin": b"\0\1"},
        _codex("*** Update File: bin", "*** Move to:  d/bin2 "),
        {"d/bin2": b"\0\1"},
        [{"action": "move", "path": "bin", "new_path": "d/bin2", "hunks": 0, "offsets": []}],
    ),
    (
        "codex_move_onto_itself",
        {"x.txt": "x\n"},
        _codex("*** Update File: x.txt", "*** Move to: ./x.txt", "@@", "-x", "+X"),
        {"x.txt": b"X\n"},
        [{"action": "move", "path": "x.txt", "new_path": "x.txt", "hunks": 1, "offsets": [0]}],
    ),
    (
        "plain_names",
        {"x.txt": "x\n"},
        "--- x.txt\t2024-01-01 10:00:00\n+++ x.txt\t2024-01-02 10:00:00\n@@ -1 +1 @@\n-x\n+X\n",
        {"x.txt": b"X\n"},
        [{"action": "update", "path": "x.txt", "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
    (
        "git_words_outside_a_git_diff",
        {"x": "x\n"},
        "new file mode 100644\n--- a/x\n+++ b/x\nrename from x\nrename to y\n@@ -1 +1 @@\n-x\n+X\n",
        {"x": b"X\n"},
        [{"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
    (
        "no_eol_then_next_file",
        {"x": "x", "y": "y\n"},
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+X\n"
        "\\ No newline at end of file\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-y\n+Y\n",
        {"x": b"X", "y": b"Y\n"},
        [
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
            {"action": "update", "path": "y", "new_path": None, "hunks": 1, "offsets": [0]},
        ],
    ),
    (
        "header_spaces_and_tabs",
        {"x": "x\n"},
        "--- a/x \t2024-01-01\t+0000\n+++ b/x  \n@@ -1 +1 @@\n-x\n+X\n",
        {"x": b"X\n"},
        [{"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
    (
        "quote_at_the_end_only",
        {'q"': "x\n"},
        '--- q"\n+++ q"\n@@ -1 +1 @@\n-x\n+X\n',
        {'q"': b"X\n"},
        [{"action": "update", "path": 'q"', "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
    (
        "git_names_without_b_prefix",
        {},
        "diff --git a/n n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+n\n",
        {"n": b"n\n"},
        [{"action": "add", "path": "n", "new_path": None, "hunks": 1, "offsets": []}],
    ),
    (
        "git_names_with_b_inside",
        {"x": "x\n"},
        "diff --git a/x b/y b/z\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n+X\n",
        {"x": b"X\n"},
        [{"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
    (
        "prose_around_the_diff",
        {"x": "x\n"},
        "These two files differ\nBinary files are not part of this change.\n"
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n+X\n",
        {"x": b"X\n"},
        [{"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
    (
        "one_side_prefixed",
        {"a/x.txt": "x\n"},
        "--- a/x.txt\n+++ x.txt\n@@ -1 +1 @@\n-x\n+X\n",
        {"x.txt": b"X\n"},
        [{"action": "move", "path": "a/x.txt", "new_path": "x.txt", "hunks": 1, "offsets": [0]}],
    ),
    (
        "quoted_names",
        {"caf\xe9 x.txt": "x\n"},
        '--- "a/caf\\303\\251 x.txt"\n+++ "b/caf\\303\\251 x.txt"\n@@ -1 +1 @@\n-x\n+X\n',
        {"caf\xe9 x.txt": b"X\n"},
        [
            {
                "action": "update",
                "path": "caf\xe9 x.txt",
                "new_path": None,
                "hunks": 1,
                "offsets": [0],
            }
        ],
    ),
    (
        "quoted_tab",
        {"t\tx": "x\n"},
        '--- "a/t\\tx"\n+++ "b/t\\tx"\n@@ -1 +1 @@\n-x\n+X\n',
        {"t\tx": b"X\n"},
        [{"action": "update", "path": "t\tx", "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
    (
        "two_files_in_one_diff",
        {"x": "x\n", "y": "y\n"},
        "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n+X\n"
        "diff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-y\n+Y\n",
        {"x": b"X\n", "y": b"Y\n"},
        [
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
            {"action": "update", "path": "y", "new_path": None, "hunks": 1, "offsets": [0]},
        ],
    ),
    (
        "two_plain_files",
        {"x": "x\n", "y": "y\n"},
        "--- x\n+++ x\n@@ -1 +1 @@\n-x\n+X\n--- y\n+++ y\n@@ -1 +1 @@\n-y\n+Y\n",
        {"x": b"X\n", "y": b"Y\n"},
        [
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
            {"action": "update", "path": "y", "new_path": None, "hunks": 1, "offsets": [0]},
        ],
    ),
    (
        "delete_then_add",
        {"x": "x\n"},
        _codex("*** Delete File: x", "*** Add File: x", "+new"),
        {"x": b"new\n"},
        [
            {"action": "delete", "path": "x", "new_path": None, "hunks": 0, "offsets": []},
            {"action": "add", "path": "x", "new_path": None, "hunks": 1, "offsets": []},
        ],
    ),
    (
        "update_twice",
        {"x": "a\nb\n"},
        _codex("*** Update File: x", "-a", "+A", "*** Update File: x", "-b", "+B"),
        {"x": b"A\nB\n"},
        [
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
        ],
    ),
    (
        "absolute_inside",
        {"x": "x\n"},
        _codex("*** Update File: {root}/./x", "-x", "+X"),
        {"x": b"X\n"},
        [{"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]}],
    ),
]


@pytest.mark.parametrize(
    ("name", "files", "text", "after", "outcomes"), TREE_CHANGES, ids=[c[0] for c in TREE_CHANGES]
)
def test_adds_deletes_and_moves_leave_exactly_this_tree(
    workdir: Path,
    name: str,
    files: Files,
    text: str,
    after: dict[str, bytes],
    outcomes: list[dict[str, Any]],
) -> None:
    _make(workdir, files)
    result = apply_patch(workdir, text.replace("{root}", str(workdir)))
    assert {k: v for k, (kind, v, _) in _snapshot(workdir).items() if kind == "file"} == after
    dirs = {k for k, (kind, _, _) in _snapshot(workdir).items() if kind == "dir"}
    assert dirs == {p for k in after for p in _parents(k)}  # emptied directories are gone
    assert result.to_dict()["files"] == outcomes


def _parents(rel: str) -> set[str]:
    parts = rel.split("/")[:-1]
    return {"/".join(parts[: i + 1]) for i in range(len(parts))}


# -- result, journal, checkpoints, check mode --------------------------------------------------

MOVE_AND_ADD = _codex("*** Update File: a.txt", "*** Move to: c.txt", "*** Add File: a.txt", "+n")


def test_the_result_and_the_journal_event_of_an_applied_patch(workdir: Path) -> None:
    _make(workdir, {"a.txt": "a\n"})
    journal = MemoryJournal()
    result = apply_patch(workdir, MOVE_AND_ADD, journal=journal, tool_use_id="call-1")
    patch_id = "patch-" + hashlib.sha256(MOVE_AND_ADD.encode()).hexdigest()[:12]
    assert result.patch_id == patch_id and result.applied and result.checkpoint is None
    assert result.paths == ("a.txt", "c.txt")
    assert result.to_dict() == {
        "format": "codex",
        "applied": True,
        "patch_id": patch_id,
        "checkpoint": None,
        "files": [
            {"action": "move", "path": "a.txt", "new_path": "c.txt", "hunks": 0, "offsets": []},
            {"action": "add", "path": "a.txt", "new_path": None, "hunks": 1, "offsets": []},
        ],
    }
    assert _snapshot(workdir) == {
        "a.txt": ("file", b"n\n", 0o644),
        "c.txt": ("file", b"a\n", 0o644),
    }
    [event] = list(journal.events())
    assert (event.kind, event.session_id) == ("patch", "manual")
    p = _payload(event)
    assert (p.checkpoint_id, p.label, p.tool_use_id) == (patch_id, f"{patch_id} applied", "call-1")
    assert p.files == ["a.txt", "c.txt"]
    assert p.detail == {"ok": True, "format": "codex", "checkpoint": None}


def test_the_journal_event_of_a_failed_patch(workdir: Path) -> None:
    journal = MemoryJournal()
    text = _codex("*** Delete File: gone.txt")
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, text, journal=journal, session_id="s-9", tool_use_id="call-2")
    [event] = list(journal.events())
    assert info.value.code == "patch.missing"
    p = _payload(event)
    assert (event.kind, event.session_id, p.tool_use_id, p.files) == (
        "patch",
        "s-9",
        "call-2",
        [],
    )
    patch_id = "patch-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    assert (p.checkpoint_id, p.label) == (patch_id, f"{patch_id} failed [patch.missing]")
    assert p.detail == {
        "ok": False,
        "code": "patch.missing",
        "message": "cannot delete 'gone.txt': no such file",
        "path": "gone.txt",
    }


def test_a_surrogate_in_the_patch_text_still_names_the_patch(workdir: Path) -> None:
    text = "--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+\udcff\n"
    result = apply_patch(workdir, text, check=True)
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    assert result.patch_id == "patch-" + digest
    assert not (workdir / "n").exists()


def test_check_mode_validates_but_writes_and_journals_nothing(workdir: Path) -> None:
    _make(workdir, {"a.txt": "a\n"})
    before = _snapshot(workdir)
    journal = MemoryJournal()
    result = apply_patch(workdir, MOVE_AND_ADD, journal=journal, check=True)
    assert not result.applied and result.checkpoint is None
    assert result.to_dict()["applied"] is False
    assert [f.action for f in result.files] == ["move", "add"]
    assert _snapshot(workdir) == before and list(journal.events()) == []
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, _codex("*** Delete File: nope"), journal=journal, check=True)
    assert info.value.code == "patch.missing" and len(list(journal.events())) == 1


def test_a_checkpoint_is_taken_before_and_after_the_patch(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    _make(workdir, {"a.txt": "a\n"})
    cps = Checkpoints(workdir)
    journal = MemoryJournal()
    result = apply_patch(
        workdir, MOVE_AND_ADD, checkpoints=cps, journal=journal, session_id="s1", tool_use_id="t1"
    )
    before = cps.get(result.checkpoint or "")
    assert (before.kind, before.session_id, before.tool_use_id) == ("before", "s1", "t1")
    assert before.label == result.patch_id and result.checkpoint == before.short
    after = cps.history("s1")[-1]
    assert (after.kind, after.tool_use_id) == ("after", "t1")
    patch_events = [e for e in journal.events() if e.kind == "patch"]
    assert [_payload(e).checkpoint_id for e in patch_events] == [before.short]
    assert patch_events[0].session_id == "s1" and _payload(patch_events[0]).tool_use_id == "t1"
    assert _payload(patch_events[0]).detail["checkpoint"] == before.short


def test_without_a_tool_call_the_checkpoint_is_filed_under_the_patch_id(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    _make(workdir, {"a.txt": "a\n"})
    cps = Checkpoints(workdir)
    result = apply_patch(workdir, MOVE_AND_ADD, checkpoints=cps, session_id="s2")
    assert cps.find("s2", result.patch_id) is not None
    assert [c.kind for c in cps.history("s2")] == ["before", "after"]
    assert all(c.tool_use_id == result.patch_id for c in cps.history("s2"))


def test_check_mode_takes_no_checkpoint(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    _make(workdir, {"a.txt": "a\n"})
    cps = Checkpoints(workdir)
    assert apply_patch(workdir, MOVE_AND_ADD, checkpoints=cps, check=True).checkpoint is None
    assert cps.history() == []


# -- policy ------------------------------------------------------------------------------------


class _Recorder:
    """A PathPolicy that allows everything but ``deny`` and records what it was asked."""

    def __init__(self, deny: str = "") -> None:
        self.deny = deny
        self.asked: list[tuple[str, str]] = []

    def check_path(self, path: str, op: Literal["read", "write", "edit"]) -> Decision:
        self.asked.append((path, op))
        if path == self.deny:
            return Decision.deny("path.protected", f"{path} is protected")
        if path.startswith("ask"):
            return Decision.ask("path.ask", "confirm")
        return Decision.allow("test.allow", "ok")


def test_the_policy_is_asked_about_every_path_with_its_operation(workdir: Path) -> None:
    _make(workdir, {"a.txt": "a\n", "b.txt": "b\n", "d.txt": "d\n"})
    policy = _Recorder()
    text = _codex(
        "*** Update File: ./a.txt",
        "-a",
        "+A",
        "*** Update File: b.txt",
        "*** Move to: sub/b.txt",
        "*** Delete File: d.txt",
        "*** Add File: n.txt",
        "+n",
    )
    apply_patch(workdir, text, policy=policy)
    assert policy.asked == [
        ("a.txt", "edit"),
        ("b.txt", "write"),
        ("sub/b.txt", "write"),
        ("d.txt", "write"),
        ("n.txt", "write"),
    ]


@pytest.mark.parametrize(
    ("deny", "text", "message", "context"),
    [
        (
            "sub/b.txt",
            _codex("*** Update File: b.txt", "*** Move to: sub/b.txt"),
            "the policy does not allow write on 'sub/b.txt': sub/b.txt is protected "
            "[path.protected]",
            {"path": "sub/b.txt", "rule": "path.protected"},
        ),
        (
            "a.txt",
            _codex("*** Update File: a.txt", "-a", "+A"),
            "the policy does not allow edit on 'a.txt': a.txt is protected [path.protected]",
            {"path": "a.txt", "rule": "path.protected"},
        ),
        (
            "",
            _codex("*** Add File: ask.txt", "+x"),
            "the policy does not allow write on 'ask.txt': confirm [path.ask]",
            {"path": "ask.txt", "rule": "path.ask"},
        ),
    ],
)
def test_a_path_the_policy_does_not_allow_stops_the_patch(
    workdir: Path, deny: str, text: str, message: str, context: dict[str, Any]
) -> None:
    err = _fails(workdir, {"a.txt": "a\n", "b.txt": "b\n"}, text, policy=_Recorder(deny))
    assert (err.code, err.message, err.context) == ("patch.denied", message, context)


def test_a_policy_that_breaks_denies_and_a_keel_error_passes_through(workdir: Path) -> None:
    class Broken:
        def __init__(self, exc: Exception) -> None:
            self.exc = exc

        def check_path(self, path: str, op: Literal["read", "write", "edit"]) -> Decision:
            raise self.exc

    text = _codex("*** Update File: a.txt", "-a", "+A")
    err = _fails(workdir, {"a.txt": "a\n"}, text, policy=Broken(RuntimeError("boom")))
    assert (err.code, err.message, err.context) == (
        "patch.denied",
        "the policy could not judge 'a.txt': boom",
        {"path": "a.txt"},
    )
    assert isinstance(err.__cause__, RuntimeError)
    own = PatchError("config broke", code="patch.custom")
    assert _fails(workdir, {}, text, policy=Broken(own)) is own
    other = KeelError("k", code="keel.other")
    with pytest.raises(KeelError) as info:
        apply_patch(workdir, text, policy=Broken(other))
    assert info.value is other and (workdir / "a.txt").read_text() == "a\n"


# -- modes, read-only files, races, write failures ---------------------------------------------


def test_modes_are_kept_through_updates_and_moves(workdir: Path) -> None:
    _make(workdir, {"x.sh": "a\n", "y.sh": "b\n"})
    (workdir / "x.sh").chmod(0o751)
    (workdir / "y.sh").chmod(0o700)
    text = _codex(
        "*** Update File: x.sh", "-a", "+A", "*** Update File: y.sh", "*** Move to: d/z.sh"
    )
    apply_patch(workdir, text)
    assert _snapshot(workdir) == {
        "d": ("dir", "", 0o755),
        "d/z.sh": ("file", b"b\n", 0o700),
        "x.sh": ("file", b"A\n", 0o751),
    }


@pytest.mark.parametrize(
    ("mode", "text", "ok"),
    [
        (0o444, _codex("*** Update File: r", "-r", "+R"), False),
        (0o400, _codex("*** Delete File: r"), False),
        (0o440, _codex("*** Update File: r", "*** Move to: s"), False),
        (0o555, _codex("*** Update File: r", "-r", "+R"), False),
        (0o644, _codex("*** Update File: r", "-r", "+R"), True),
        (0o200, _codex("*** Update File: r", "-r", "+R"), True),
        (0o020, _codex("*** Delete File: r"), True),
        (0o402, _codex("*** Update File: r", "*** Move to: s"), True),
    ],
)
def test_a_read_only_file_is_refused(workdir: Path, mode: int, text: str, ok: bool) -> None:
    _make(workdir, {"r": "r\n"})
    (workdir / "r").chmod(mode)
    if ok:
        before = _snapshot(workdir)
        assert apply_patch(workdir, text).applied
        assert _snapshot(workdir) != before
        return
    err = _fails(workdir, {}, text)
    assert (err.code, err.message, err.context) == (
        "patch.read_only",
        f"'r' is read-only (mode {mode:o}); make it writable first",
        {"path": "r"},
    )


def test_a_file_changed_after_the_check_stops_the_patch(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make(workdir, {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
    real = patch_mod._Plan.unchanged_on_disk

    def racing(self: patch_mod._Plan) -> list[str]:
        (workdir / "c.txt").write_text("changed\n")
        (workdir / "b.txt").unlink()
        (workdir / "n.txt").write_text("appeared\n")
        return real(self)

    monkeypatch.setattr(patch_mod._Plan, "unchanged_on_disk", racing)
    text = _codex(
        "*** Update File: a.txt",
        "-a",
        "+A",
        "*** Update File: c.txt",
        "-c",
        "+C",
        "*** Delete File: b.txt",
        "*** Add File: n.txt",
        "+n",
    )
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, text)
    err = info.value
    assert (err.code, err.message, err.context) == (
        "patch.conflict",
        "files changed on disk while the patch was checked: b.txt, c.txt, n.txt",
        {"files": ["b.txt", "c.txt", "n.txt"]},
    )
    assert (workdir / "a.txt").read_text() == "a\n"
    assert (workdir / "c.txt").read_text() == "changed\n"


def test_an_unreadable_file_counts_as_changed(workdir: Path) -> None:
    _make(workdir, {"a.txt": "a\n"})
    plan = patch_mod._Plan(workdir)
    assert plan.read("a.txt") == b"a\n" and plan.read("n.txt") is None
    assert plan.unchanged_on_disk() == []
    (workdir / "a.txt").unlink()
    (workdir / "a.txt").mkdir()  # reading it now fails with IsADirectoryError
    assert plan.unchanged_on_disk() == ["a.txt"]
    (workdir / "n.txt").mkdir()  # where nothing was, something unreadable is a change too
    assert plan.unchanged_on_disk() == ["a.txt", "n.txt"]


def test_a_write_failure_is_a_patch_error_that_keeps_its_context(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keel.workspace import _atomic

    _make(workdir, {"a.txt": "a\n"})

    def full(path: Path, data: bytes, mode: int) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(_atomic, "_write_temp", full)
    err = _fails(workdir, {}, _codex("*** Update File: a.txt", "-a", "+A"))
    assert err.code == "patch.write_failed"
    assert err.message.startswith(f"could not write {workdir}/.a.txt.keel-tmp-")
    assert err.message.endswith(": No space left on device; no file was changed")
    assert err.context["path"].startswith(f"{workdir}/.a.txt.keel-tmp-")
    assert err.__cause__ is not None and err.__cause__.__class__.__name__ == "WorkspaceError"


def test_unchanged_content_is_not_rewritten(workdir: Path) -> None:
    _make(workdir, {"a.txt": "a\n", "b.txt": "b\n"})
    inode = os.stat(workdir / "a.txt").st_ino
    text = _codex("*** Update File: a.txt", "-a", "+a", "*** Update File: b.txt", "-b", "+B")
    apply_patch(workdir, text)
    assert os.stat(workdir / "a.txt").st_ino == inode
    assert os.stat(workdir / "b.txt").st_ino != inode


def test_an_add_then_delete_of_the_same_file_leaves_nothing(workdir: Path) -> None:
    text = _codex("*** Add File: n.txt", "+n", "*** Delete File: n.txt")
    result = apply_patch(workdir, text)
    assert list(workdir.iterdir()) == [] and result.paths == ("n.txt",)


# -- what the parser hands on ------------------------------------------------------------------


def test_parse_patch_gives_these_values() -> None:
    from keel.workspace.patch import FilePatch, Hunk

    codex = _codex(
        "*** Update File: a.py",
        "-x",
        "+y",
        "@@def f():",
        "-a",
        "+b",
        "@@",
        " c",
        "-d",
        "*** End of File",
        "*** Delete File: gone.py",
    )
    assert parse_patch(codex) == (
        "codex",
        [
            FilePatch(
                "update",
                "a.py",
                None,
                (
                    Hunk((("-", "x"), ("+", "y")), line=2),
                    Hunk((("-", "a"), ("+", "b")), anchor="def f():", line=5),
                    Hunk(((" ", "c"), ("-", "d")), at_eof=True, line=8),
                ),
                2,
            ),
            FilePatch("delete", "gone.py", line=12),
        ],
    )
    added = _codex("*** Add File: n.py", "+a", "+b", "*** Add File: e.py")
    [n, e] = parse_patch(added)[1]
    assert (n.action, n.path, n.hunks[0].lines) == ("add", "n.py", (("+", "a"), ("+", "b")))
    # an added file's line is where its block ends, not its header (reported): pin only that
    # it points into the block
    assert 2 <= n.line <= 4 and n.hunks[0].line == n.line
    assert e == FilePatch("add", "e.py", None, (), 5)
    unified = "--- a/a.py\n+++ b/a.py\n@@ -3,2 +3 @@ def f():\n x\n-y\n\\ No newline\n"
    assert parse_patch(unified) == (
        "unified",
        [FilePatch("update", "a.py", None, (Hunk(((" ", "x"), ("-", "y")), 3, line=3),), 1)],
    )
    [fp] = parse_patch(unified.replace("-y\n", "-y\n+z\n").replace("+3 @@", "+3,2 @@"))[1]
    assert fp.hunks[0].new_no_eol is True
    empty = "--- a/x\n+++ b/x\n@@ -0,0 +0,0 @@\n\\ No newline at end of file\n"
    assert parse_patch(empty)[1][0].hunks == (Hunk((), 0, new_no_eol=True, line=3),)
    three = (
        "diff --git a/x b/y\nrename from x\nrename to y\n"
        "diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+n\n"
        "--- a/d\n+++ /dev/null\n@@ -1 +0,0 @@\n-d\n"
    )
    assert parse_patch(three)[1] == [
        FilePatch("move", "x", "y", (), 1),
        FilePatch("add", "n", None, (Hunk((("+", "n"),), 0, line=8),), 4),
        FilePatch("delete", "d", None, (Hunk((("-", "d"),), 1, line=12),), 10),
    ]


def test_offsets_follow_the_lines_earlier_hunks_added(workdir: Path) -> None:
    (workdir / "f").write_text("".join(f"{i}\n" for i in range(1, 11)))
    text = U + (
        "@@ -1 +1,3 @@\n-1\n+1\n+1a\n+1b\n"
        "@@ -4 +6,2 @@\n-4\n+4\n+4a\n"
        "@@ -8 +11 @@\n-8\n+8!\n"
        "@@ -8 +12 @@\n-9\n+9!\n"
    )
    result = apply_patch(workdir, text)
    assert result.files[0].offsets == (0, 0, 0, 1)
    assert (workdir / "f").read_text() == "1\n1a\n1b\n2\n3\n4\n4a\n5\n6\n7\n8!\n9!\n10\n"


def test_a_move_without_hunks_keeps_every_byte(workdir: Path) -> None:
    data = b"a\r\nb\x0cc\rd\x1ce\xc2\x85f\n\x0c\ng"
    (workdir / "src").write_bytes(data)
    apply_patch(workdir, _codex("*** Update File: src", "*** Move to: dst"))
    assert (workdir / "dst").read_bytes() == data and not (workdir / "src").exists()


def test_line_separators_other_than_newline_are_kept(workdir: Path) -> None:
    (workdir / "f").write_bytes(b"a\n\x0c\nb\rc\x1cd\ne\n")
    apply_patch(workdir, U + "@@ -4 +4 @@\n-e\n+E\n")
    assert (workdir / "f").read_bytes() == b"a\n\x0c\nb\rc\x1cd\nE\n"  # what git apply writes


def test_an_end_of_file_chunk_changes_the_end_of_the_file(workdir: Path) -> None:
    (workdir / "f").write_bytes(b"a\nb\na \n")
    apply_patch(workdir, _codex("*** Update File: f", "@@", "-a", "+A", "*** End of File"))
    assert (workdir / "f").read_bytes() == b"a\nb\nA\n"


# -- session-4 survivors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "path"),
    [
        ('"a/x\\377.txt"', "x\udcff.txt"),  # git's quoting of a byte that is not UTF-8
        ('"a/\\303\\251.txt"', "\u00e9.txt"),  # of UTF-8: the name as the user sees it
        ('"a/x\udcff.txt"', "x\udcff.txt"),  # a patch read from bytes that are not UTF-8
        ('"a/tab\\there.txt"', "tab\there.txt"),
    ],
)
def test_a_quoted_header_path_is_unquoted_byte_for_byte(header: str, path: str) -> None:
    new = header.replace('"a/', '"b/', 1)
    fmt, [fp] = parse_patch(f"--- {header}\n+++ {new}\n@@ -1 +1 @@\n-a\n+b\n")
    assert (fmt, fp.action, fp.path) == ("unified", "update", path)


def test_a_move_by_its_headers_remembers_its_line() -> None:
    text = "intro\n--- a/old.txt\n+++ b/new.txt\n@@ -1 +1 @@\n-a\n+b\n"
    _, [fp] = parse_patch(text)
    assert (fp.action, fp.path, fp.new_path, fp.line) == ("move", "old.txt", "new.txt", 2)


# -- session-18 survivors -----------------------------------------------------------------------


def test_a_quoted_empty_header_path_is_an_empty_name_and_refused(workdir: Path) -> None:
    err = _fails(workdir, {'""': "a\n"}, '--- ""\n+++ ""\n@@ -1 +1 @@\n-a\n+b\n')
    assert (err.code, err.message, err.context) == ("patch.path", "invalid path ''", {"path": ""})


@pytest.mark.parametrize(
    "text",
    [
        'x\n--- a/x\n+++ "b/x" y"\n@@ -1 +1 @@\n-a\n+b\n',  # the +++ line names its own line
        'diff --git a/x b/y\nsimilarity index 90%\nrename from "x" q"\nrename to y\n',
        'diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to "y" q"\n',
    ],
)
def test_a_malformed_quoted_path_names_its_line(text: str) -> None:
    with pytest.raises(PatchError) as info:
        parse_patch(text)
    bad = next(ln for ln in text.splitlines() if ln.endswith(' q"') or ln.endswith(' y"'))
    line = text.splitlines().index(bad) + 1
    assert info.value.code == "patch.parse"
    assert info.value.context == {"line": line}
    assert info.value.message.startswith(f"line {line}: malformed quoted path ")


@pytest.mark.parametrize("content", [b"XX\0unreadableXX", b"\0UNREADABLE", b"\0unreadable!"])
def test_a_file_that_became_unreadable_counts_as_changed_whatever_it_held(
    workdir: Path, content: bytes
) -> None:
    _make(workdir, {"a.bin": content})
    plan = patch_mod._Plan(workdir)
    assert plan.read("a.bin") == content
    (workdir / "a.bin").unlink()
    (workdir / "a.bin").mkdir()  # reading it now fails with IsADirectoryError
    assert plan.unchanged_on_disk() == ["a.bin"]
