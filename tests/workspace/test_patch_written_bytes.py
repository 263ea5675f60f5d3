"""The bytes an update writes: where a hunk lands (offsets, the nearest match, the order of
hunks, Codex's matching by content), line endings, and the end of the file (final newlines).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from patch_helpers import codex_patch

from keel.workspace.patch import apply_patch

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
        codex_patch("*** Update File: f", "@@", " a", "-b", "+B"),
        b"a\nB\nc\n",
    ),
    ("codex_no_at", b"a\nb\n", codex_patch("*** Update File: f", "-b", "+B"), b"a\nB\n"),
    ("codex_rstrip", b"a  \nb\n", codex_patch("*** Update File: f", " a", "-b", "+B"), b"a  \nB\n"),
    ("codex_strip", b"  a\nb\n", codex_patch("*** Update File: f", " a", "-b", "+B"), b"  a\nB\n"),
    (
        "codex_exact_before_rstrip",
        b"a \na\n",
        codex_patch("*** Update File: f", "-a", "+A"),
        b"a \nA\n",
    ),
    (
        "codex_rstrip_patch_side",
        b" a\na\n",
        codex_patch("*** Update File: f", "-a ", "+A"),
        b" a\nA\n",
    ),
    ("codex_exact_first", b" a\na\n", codex_patch("*** Update File: f", "-a", "+A"), b" a\nA\n"),
    (
        "codex_rstrip_before_strip",
        b" a\na \n",
        codex_patch("*** Update File: f", "-a", "+A"),
        b" a\nA\n",
    ),
    (
        "codex_anchor",
        b"a\ndef f():\na\n",
        codex_patch("*** Update File: f", "@@  def f():  ", "-a", "+A"),
        b"a\ndef f():\nA\n",
    ),
    (
        "codex_anchor_only_add",
        b"a\nb\nc\n",
        codex_patch("*** Update File: f", "@@ b", "+x"),
        b"a\nb\nx\nc\n",
    ),
    ("codex_add_at_end", b"a\nb\n", codex_patch("*** Update File: f", "@@", "+x"), b"a\nb\nx\n"),
    (
        "codex_end_of_file",
        b"a\nb\na\nb\n",
        codex_patch("*** Update File: f", "@@", "-a", "+A", " b", "*** End of File"),
        b"a\nb\nA\nb\n",
    ),
    (
        "codex_end_of_file_strip",
        b"x\nb\na \n",
        codex_patch("*** Update File: f", "@@", "-a", "+A", "*** End of File"),
        b"x\nb\nA\n",
    ),
    (
        "codex_cursor",
        b"a\nb\na\nb\n",
        codex_patch("*** Update File: f", "@@", "-a", "+A", "@@", "-a", "+C"),
        b"A\nb\nC\nb\n",
    ),
    (
        "codex_anchor_after_cursor",
        b"h\na\nh\na\n",
        codex_patch("*** Update File: f", "@@ h", "-a", "+A", "@@ h", "-a", "+B"),
        b"h\nA\nh\nB\n",
    ),
    (
        "codex_blank_line_is_context",
        b"a\n\nb\n",
        codex_patch("*** Update File: f", "@@", " a", "", "-b", "+B"),
        b"a\n\nB\n",
    ),
    (
        "codex_crlf_patch",
        b"a\nb\n",
        codex_patch("*** Update File: f", "-b", "+B").replace("\n", "\r\n"),
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
    apply_patch(workdir, codex_patch("*** Update File: src", "*** Move to: dst"))
    assert (workdir / "dst").read_bytes() == data and not (workdir / "src").exists()


def test_line_separators_other_than_newline_are_kept(workdir: Path) -> None:
    (workdir / "f").write_bytes(b"a\n\x0c\nb\rc\x1cd\ne\n")
    apply_patch(workdir, U + "@@ -4 +4 @@\n-e\n+E\n")
    assert (workdir / "f").read_bytes() == b"a\n\x0c\nb\rc\x1cd\nE\n"  # what git apply writes


def test_an_end_of_file_chunk_changes_the_end_of_the_file(workdir: Path) -> None:
    (workdir / "f").write_bytes(b"a\nb\na \n")
    apply_patch(workdir, codex_patch("*** Update File: f", "@@", "-a", "+A", "*** End of File"))
    assert (workdir / "f").read_bytes() == b"a\nb\nA\n"
