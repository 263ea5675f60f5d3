r"""How the patch engine reads file names from headers, as git writes them.

``diff --git a/NAME b/NAME`` names a file twice; for an empty file created or deleted (no
``---``/``+++`` lines) the name is where the two halves agree, and a line with no such split
is refused rather than guessed. Quoted names use git's C-style quoting: octal escapes are
UTF-8 bytes, any other character stands for itself. Checked by effect on a workspace.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from patch_helpers import fails, make_files

from keel.core.errors import PatchError
from keel.workspace.patch import apply_patch, parse_patch


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def _update(old: str, new: str) -> str:
    return f"--- {old}\n+++ {new}\n@@ -1 +1 @@\n-caf\u00e9\n+th\u00e9 \u20ac\n"


# -- which file a diff --git line names ---------------------------------------------------------


def test_deleting_the_empty_file_x_b_y_leaves_x_alone(workdir: Path) -> None:
    make_files(workdir, {"x": b"keep me\n", "x b/y": b""})
    patch = "diff --git a/x b/y b/x b/y\ndeleted file mode 100644\nindex e69de29..0000000\n"
    result = apply_patch(workdir, patch)
    assert _tree(workdir) == {"x": b"keep me\n"}
    assert not (workdir / "x b").exists()
    assert [(f.action, f.path) for f in result.files] == [("delete", "x b/y")]


def test_creating_the_empty_file_x_b_y_creates_that_file(workdir: Path) -> None:
    make_files(workdir, {"x": b"keep me\n"})
    patch = "diff --git a/x b/y b/x b/y\nnew file mode 100644\nindex 0000000..e69de29\n"
    apply_patch(workdir, patch)
    assert _tree(workdir) == {"x": b"keep me\n", "x b/y": b""}


@pytest.mark.parametrize(
    "header",
    [
        "diff --git a/x b/y",  # two different names: git never writes this for a deletion
        "diff --git a/x b/y b/z",  # three ways to split, none with equal halves
        "diff --git a/x b/x b/x",  # 'x' + 'x b/x' or 'x b/x' + 'x': unequal either way
        'diff --git "a/x" "b/y"',  # quoted names that differ
        'diff --git "a/x\\q" "b/x\\q"',  # malformed quoting
        "diff --git x x",  # no a/ b/ prefixes
        "diff --git a/ b/",  # an empty name
        'diff --git "a/" "b/"',
        'diff --git "a/x"',  # one name
        'diff --git "a/x" "b/x"y',  # text after the second name
        'diff --git a/x"b/x"',  # a quote that does not start the second name
    ],
)
@pytest.mark.parametrize("mode", ["deleted file mode 100644", "new file mode 100644"])
def test_a_git_header_naming_no_one_file_is_refused(workdir: Path, header: str, mode: str) -> None:
    files = {"x": b"x\n", "y": b"", "x b/y": b"", "x b/x": b"", "z": b""}
    make_files(workdir, files)
    with pytest.raises(PatchError) as caught:
        apply_patch(workdir, f"{header}\n{mode}\nindex e69de29..0000000\n")
    assert caught.value.code == "patch.parse"
    assert caught.value.context["line"] == 1
    assert repr(header) in caught.value.message
    assert _tree(workdir) == files


def test_the_minus_plus_lines_say_which_file_when_the_git_line_cannot(workdir: Path) -> None:
    make_files(workdir, {"x": b"a\n", "x b/y": b"a\n"})
    patch = (
        "diff --git a/x b/y b/z\ndeleted file mode 100644\n"
        "--- a/x b/y\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
    )
    apply_patch(workdir, patch)
    assert _tree(workdir) == {"x": b"a\n"}


def test_a_quoted_git_line_names_its_file(workdir: Path) -> None:
    make_files(workdir, {"\u00e9.txt": b"", 'q"q': b"", "k": b"k\n"})
    patch = (
        'diff --git "a/\\303\\251.txt" "b/\\303\\251.txt"\ndeleted file mode 100644\n'
        'diff --git "a/q\\"q" "b/q\\"q"\ndeleted file mode 100644\n'
        'diff --git "a/n\\tx" b/n\tx\nnew file mode 100644\n'
        'diff --git a/\u00e9 "b/\\303\\251"\nnew file mode 100644\n'
    )
    apply_patch(workdir, patch)
    assert _tree(workdir) == {"k": b"k\n", "n\tx": b"", "\u00e9": b""}


def test_quoted_rename_lines_name_the_files(workdir: Path) -> None:
    make_files(workdir, {"sp \u00e9.txt": b"hi\n"})
    patch = (
        'diff --git "a/sp \\303\\251.txt" "b/sp \\303\\274.txt"\nsimilarity index 100%\n'
        'rename from "sp \\303\\251.txt"\nrename to "sp \\303\\274.txt"\n'
    )
    apply_patch(workdir, patch)
    assert _tree(workdir) == {"sp \u00fc.txt": b"hi\n"}


# -- quoted names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "quoted",
    [
        '"a/\u00e9.txt"',  # raw, at or below U+00FF
        '"a/\\303\\251.txt"',  # git's default: octal UTF-8 bytes
    ],
)
def test_a_quoted_non_ascii_name_is_the_file_it_spells(workdir: Path, quoted: str) -> None:
    make_files(workdir, {"\u00e9.txt": "caf\u00e9\n".encode(), "e.txt": b"e\n"})
    apply_patch(workdir, _update(quoted, quoted.replace('"a/', '"b/')))
    assert _tree(workdir) == {"e.txt": b"e\n", "\u00e9.txt": "th\u00e9 \u20ac\n".encode()}


@pytest.mark.parametrize(
    "quoted",
    [
        '"a/\u20ac.txt"',  # raw, above U+00FF: was a UnicodeEncodeError
        '"a/\\342\\202\\254.txt"',
    ],
)
def test_a_quoted_name_above_latin_1_is_the_file_it_spells(workdir: Path, quoted: str) -> None:
    make_files(workdir, {"\u20ac.txt": "caf\u00e9\n".encode()})
    apply_patch(workdir, _update(quoted, quoted.replace('"a/', '"b/')))
    assert _tree(workdir) == {"\u20ac.txt": "th\u00e9 \u20ac\n".encode()}


@pytest.mark.parametrize(
    ("quoted", "name"),
    [
        ('"a/\u20ac \\342\\202\\254.txt"', "\u20ac \u20ac.txt"),
        ('"a/\\a\\b\\f\\n\\r\\t\\v\\\\\\"x"', '\a\b\f\n\r\t\v\\"x'),
        ('"a/\\101\\\\101"', "A\\101"),  # an escaped backslash does not start an octal escape
        ('"a/x\\377\\303\\251"', "x\udcff\u00e9"),  # a byte that is not UTF-8, then one that is
        ('"a/\\x41"', None),
        ('"a/\\u20ac"', None),
        ('"a/\\400"', None),  # octal escapes are bytes: at most \377
        ('"a/\\12"', None),
        ('"a/x"y"', None),
        ('"a/x\\"', None),
    ],
)
def test_quoted_names_follow_gits_c_quoting(quoted: str, name: str | None) -> None:
    text = _update(quoted, quoted.replace('"a/', '"b/', 1))
    if name is None:
        with pytest.raises(PatchError) as caught:
            parse_patch(text)
        assert (caught.value.code, caught.value.context["line"]) == ("patch.parse", 1)
        assert repr(quoted) in caught.value.message
        return
    _, [fp] = parse_patch(text)
    assert (fp.action, fp.path) == ("update", name)


@pytest.mark.parametrize("quoted", ['"a/\u20ac\\q.txt"', '"a/\u20ac\\400.txt"'])
def test_a_bad_quoted_name_is_a_patch_error_that_changes_nothing(
    workdir: Path, quoted: str
) -> None:
    files = {"\u20ac.txt": "caf\u00e9\n".encode(), "\u20ac\\q.txt": "caf\u00e9\n".encode()}
    make_files(workdir, files)
    with pytest.raises(PatchError) as caught:
        apply_patch(workdir, _update(quoted, "b/\u20ac.txt"))
    assert caught.value.code == "patch.parse"
    assert _tree(workdir) == files


# -- quoted names in ---/+++ and rename lines, as the parser reads them ----------------------------


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


def test_a_quoted_empty_header_path_is_an_empty_name_and_refused(workdir: Path) -> None:
    err = fails(workdir, {'""': "a\n"}, '--- ""\n+++ ""\n@@ -1 +1 @@\n-a\n+b\n')
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


# -- git's own output ---------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args]
    return subprocess.run(cmd, cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_diff_git_wrote_applies_as_git_applies_it(workdir: Path) -> None:
    before = {
        "x": b"keep me\n",
        "x b/y": b"",
        "\u00e9.txt": b"",
        "\u20ac.txt": "caf\u00e9\n".encode(),
        "sp \u00e9.txt": b"moved\n",
    }
    repo, ws = workdir / "repo", workdir / "ws"
    make_files(repo, before)
    make_files(ws, before)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "before")
    (repo / "x b/y").unlink()
    (repo / "\u00e9.txt").unlink()
    (repo / "\u20ac.txt").write_bytes("th\u00e9\n".encode())
    _git(repo, "mv", "sp \u00e9.txt", "sp \u00fc.txt")
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "-M")
    assert "diff --git a/x b/y b/x b/y\ndeleted file mode" in diff
    assert '"a/\\303\\251.txt"' in diff
    apply_patch(ws, diff)
    assert _tree(ws) == _tree(repo)
