"""A patch that cannot apply changes nothing and says why: each error's code, message and
context (paths outside the workspace, in .git or .keel, through symlinks; missing, existing,
binary or non-regular files; hunks whose context is not found), the tree left byte-identical
and the failure journaled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from patch_helpers import Files, codex_patch, fails

AB: Files = {"a.txt": "a\nb\n", "b.txt": "b\n"}
APPLY_ERRORS: list[tuple[str, Files, str, str, str, dict[str, Any]]] = [
    (
        "dotdot",
        AB,
        codex_patch("*** Delete File: ../a.txt"),
        "patch.path",
        "path '../a.txt' contains '..'",
        {"path": "../a.txt"},
    ),
    (
        "dotdot_inside",
        AB,
        codex_patch("*** Delete File: sub/../a.txt"),
        "patch.path",
        "path 'sub/../a.txt' contains '..'",
        {"path": "sub/../a.txt"},
    ),
    (
        "itself",
        AB,
        codex_patch("*** Delete File: ./."),
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
        codex_patch("*** Add File: .git/hooks/pre-commit", "+x"),
        "patch.protected",
        "path '.git/hooks/pre-commit' is inside .git or .keel, which patches never touch",
        {"path": ".git/hooks/pre-commit"},
    ),
    (
        "keel",
        AB,
        codex_patch("*** Add File: ./sub/.keel/x", "+x"),
        "patch.protected",
        "path './sub/.keel/x' is inside .git or .keel, which patches never touch",
        {"path": "./sub/.keel/x"},
    ),
    (
        "move_into_git",
        AB,
        codex_patch("*** Update File: a.txt", "*** Move to: .git/a.txt"),
        "patch.protected",
        "path '.git/a.txt' is inside .git or .keel, which patches never touch",
        {"path": ".git/a.txt"},
    ),
    (
        "symlink_dir",
        {**AB, "d/f.txt": "f\n", "l": "-> d"},
        codex_patch("*** Delete File: l/f.txt"),
        "patch.symlink",
        "path 'l/f.txt' goes through the symlink 'l'; patches do not follow symlinks",
        {"path": "l/f.txt"},
    ),
    (
        "symlink_file",
        {**AB, "d/l": "-> ../a.txt"},
        codex_patch("*** Update File: d/l", "@@", "-a", "+A"),
        "patch.symlink",
        "path 'd/l' goes through the symlink 'd/l'; patches do not follow symlinks",
        {"path": "d/l"},
    ),
    (
        "dangling_symlink",
        {**AB, "l": "-> nowhere"},
        codex_patch("*** Add File: l", "+x"),
        "patch.symlink",
        "path 'l' goes through the symlink 'l'; patches do not follow symlinks",
        {"path": "l"},
    ),
    (
        "not_a_file",
        {**AB, "d": "<dir>"},
        codex_patch("*** Delete File: d"),
        "patch.not_a_file",
        "'d' is not a regular file",
        {"path": "d"},
    ),
    (
        "under_a_file",
        AB,
        codex_patch("*** Add File: a.txt/x", "+x"),
        "patch.path",
        "cannot use 'a.txt/x': Not a directory",
        {"path": "a.txt/x"},
    ),
    (
        "add_existing",
        AB,
        codex_patch("*** Add File: a.txt", "+x"),
        "patch.exists",
        "cannot add 'a.txt': it already exists",
        {"path": "a.txt"},
    ),
    (
        "add_twice",
        AB,
        codex_patch("*** Add File: n.txt", "+x", "*** Add File: n.txt", "+y"),
        "patch.exists",
        "cannot add 'n.txt': it already exists",
        {"path": "n.txt"},
    ),
    (
        "update_missing",
        AB,
        codex_patch("*** Update File: nope.txt", "@@", "-a", "+b"),
        "patch.missing",
        "cannot update 'nope.txt': no such file",
        {"path": "nope.txt"},
    ),
    (
        "update_deleted",
        AB,
        codex_patch("*** Delete File: a.txt", "*** Update File: a.txt", "@@", "-a", "+b"),
        "patch.missing",
        "cannot update 'a.txt': no such file",
        {"path": "a.txt"},
    ),
    (
        "delete_missing",
        AB,
        codex_patch("*** Delete File: nope.txt"),
        "patch.missing",
        "cannot delete 'nope.txt': no such file",
        {"path": "nope.txt"},
    ),
    (
        "move_missing",
        AB,
        codex_patch("*** Update File: nope.txt", "*** Move to: n.txt"),
        "patch.missing",
        "cannot move 'nope.txt': no such file",
        {"path": "nope.txt"},
    ),
    (
        "update_binary",
        {**AB, "bin": b"a\n\0\n"},
        codex_patch("*** Update File: bin", "@@", "-a", "+b"),
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
        codex_patch("*** Update File: bin", "*** Move to: n", "@@", "-a", "+b"),
        "patch.binary",
        "cannot move 'bin': it is a binary file",
        {"path": "bin"},
    ),
    (
        "move_onto_existing",
        AB,
        codex_patch("*** Update File: a.txt", "*** Move to: b.txt"),
        "patch.exists",
        "cannot move 'a.txt' to 'b.txt': the target exists",
        {"path": "b.txt"},
    ),
    (
        "move_onto_added",
        AB,
        codex_patch("*** Add File: n.txt", "+n", "*** Update File: a.txt", "*** Move to: n.txt"),
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
        codex_patch("*** Update File: a.txt", "@@ def  f():", "-a", "+A"),
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): the '@@ def  f():' line was not found; "
        "no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_not_found",
        AB,
        codex_patch("*** Update File: a.txt", "@@", "-a", "+A", "@@", " zz", "-b", "+B"),
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 6): the 2 line(s) this chunk replaces were not found "
        "in the file (first: 'zz'); no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_order",
        AB,
        codex_patch("*** Update File: a.txt", "@@", "-b", "+B", "@@", "-a", "+A"),
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 6): the 1 line(s) this chunk replaces were not found "
        "in the file (first: 'a'); no file was changed",
        {"path": "a.txt"},
    ),
    (
        "outside",
        AB,
        codex_patch("*** Add File: /etc/keel-test-x", "+x"),
        "patch.outside_workspace",
        "path '/etc/keel-test-x' is outside the workspace '{root}'",
        {"path": "/etc/keel-test-x"},
    ),
    (
        "outside_by_dotdot",
        AB,
        codex_patch("*** Add File: {root}/../x", "+x"),
        "patch.outside_workspace",
        "path '{root}/../x' is outside the workspace '{root}'",
        {"path": "{root}/../x"},
    ),
    (
        "codex_anchor_at_eof",
        AB,
        codex_patch("*** Update File: a.txt", "@@ h", "-b", "+B", "*** End of File"),
        "patch.hunk_failed",
        "'a.txt': hunk 1 (patch line 3): the '@@ h' line was not found; no file was changed",
        {"path": "a.txt"},
    ),
    (
        "codex_at_eof_not_found",
        AB,
        codex_patch("*** Update File: a.txt", "-a", "+A", "@@", "-q", "+Q", "*** End of File"),
        "patch.hunk_failed",
        "'a.txt': hunk 2 (patch line 5): the 1 line(s) this chunk replaces were not found "
        "at the end of the file (first: 'q'); no file was changed",
        {"path": "a.txt"},
    ),
    (
        "move_hunk_fails",
        AB,
        codex_patch("*** Update File: a.txt", "*** Move to: m.txt", "@@", "-q", "+Q"),
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
        codex_patch("*** Update File: a.txt", "-b", "+B", "@@ a", "+x"),
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
        codex_patch("*** Update File: a.txt", "@@", "-a", "+A", "*** Delete File: c.txt"),
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
    err = fails(workdir, files, text.replace("{root}", root))
    context = {k: v.replace("{root}", root) for k, v in context.items()}
    assert (err.code, err.message, err.context) == (code, message.replace("{root}", root), context)
