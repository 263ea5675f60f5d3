"""Adds, deletes and moves leave exactly the tree the patch describes, and each file's
outcome (action, paths, hunks, offsets) says what was done.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from patch_helpers import Files, codex_patch, make_files, snapshot

from keel.workspace.patch import apply_patch

TREE_CHANGES: list[tuple[str, Files, str, dict[str, bytes], list[dict[str, Any]]]] = [
    (
        "codex_add",
        {},
        codex_patch("*** Add File:  sub/new.txt ", "+a", "+", "+b"),
        {"sub/new.txt": b"a\n\nb\n"},
        [{"action": "add", "path": "sub/new.txt", "new_path": None, "hunks": 1, "offsets": []}],
    ),
    (
        "codex_add_empty",
        {},
        codex_patch("*** Add File: e.txt"),
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
        codex_patch("*** Add File: n.txt", "+a", "", "", "*** Update File: x", "-x", "+X", ""),
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
        codex_patch("*** Delete File: bin"),
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
        codex_patch("*** Update File: bin", "*** Move to:  d/bin2 "),
        {"d/bin2": b"\0\1"},
        [{"action": "move", "path": "bin", "new_path": "d/bin2", "hunks": 0, "offsets": []}],
    ),
    (
        "codex_move_onto_itself",
        {"x.txt": "x\n"},
        codex_patch("*** Update File: x.txt", "*** Move to: ./x.txt", "@@", "-x", "+X"),
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
        codex_patch("*** Delete File: x", "*** Add File: x", "+new"),
        {"x": b"new\n"},
        [
            {"action": "delete", "path": "x", "new_path": None, "hunks": 0, "offsets": []},
            {"action": "add", "path": "x", "new_path": None, "hunks": 1, "offsets": []},
        ],
    ),
    (
        "update_twice",
        {"x": "a\nb\n"},
        codex_patch("*** Update File: x", "-a", "+A", "*** Update File: x", "-b", "+B"),
        {"x": b"A\nB\n"},
        [
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
            {"action": "update", "path": "x", "new_path": None, "hunks": 1, "offsets": [0]},
        ],
    ),
    (
        "absolute_inside",
        {"x": "x\n"},
        codex_patch("*** Update File: {root}/./x", "-x", "+X"),
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
    make_files(workdir, files)
    result = apply_patch(workdir, text.replace("{root}", str(workdir)))
    assert {k: v for k, (kind, v, _) in snapshot(workdir).items() if kind == "file"} == after
    dirs = {k for k, (kind, _, _) in snapshot(workdir).items() if kind == "dir"}
    assert dirs == {p for k in after for p in _parents(k)}  # emptied directories are gone
    assert result.to_dict()["files"] == outcomes


def _parents(rel: str) -> set[str]:
    parts = rel.split("/")[:-1]
    return {"/".join(parts[: i + 1]) for i in range(len(parts))}


def test_unchanged_content_is_not_rewritten(workdir: Path) -> None:
    make_files(workdir, {"a.txt": "a\n", "b.txt": "b\n"})
    inode = os.stat(workdir / "a.txt").st_ino
    text = codex_patch("*** Update File: a.txt", "-a", "+a", "*** Update File: b.txt", "-b", "+B")
    apply_patch(workdir, text)
    assert os.stat(workdir / "a.txt").st_ino == inode
    assert os.stat(workdir / "b.txt").st_ino != inode


def test_an_add_then_delete_of_the_same_file_leaves_nothing(workdir: Path) -> None:
    text = codex_patch("*** Add File: n.txt", "+n", "*** Delete File: n.txt")
    result = apply_patch(workdir, text)
    assert list(workdir.iterdir()) == [] and result.paths == ("n.txt",)
