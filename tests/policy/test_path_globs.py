"""Protected globs: gitignore-like matching, classes, ``**``, case, the glob that matched."""

from __future__ import annotations

import pytest

from keel.policy._paths import GlobSet, glob_to_regex

# glob -> (paths it matches, paths it does not)
GLOBS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("*.py", ("a.py", "d/a.py", "d/e/.py"), ("a.pyc", "a.py/x", "apy")),
    ("a*.py", ("a.py", "ab.py"), ("b.py", "xa.py")),
    ("?.txt", ("a.txt", "d/b.txt"), ("ab.txt", ".txt", "/.txt")),
    ("/top.txt", ("top.txt",), ("d/top.txt",)),
    ("d/*.py", ("d/a.py",), ("x/d/a.py", "d/e/a.py")),
    ("ab/**", ("ab", "ab/x", "ab/x/y"), ("abx", "a", "x/ab")),
    ("**/x", ("x", "a/b/x"), ("xa", "a/xb")),
    ("a/**/b", ("a/b", "a/x/b", "a/x/y/b"), ("b", "a/xb", "ab")),
    ("a/**/**/b", ("a/b", "a/x/y/b"), ("ab",)),
    ("a/**/**", ("a", "a/x", "a/x/y"), ("ax",)),
    ("**/**/x", ("x", "a/x"), ("ax",)),
    ("dir/", ("dir", "x/dir"), ("dirx", "dir/y")),
    ("/", ("a", "a/b"), ()),
    ("**", ("a", "a/b", "a\nb"), ()),
    ("[ab].txt", ("a.txt", "b.txt"), ("c.txt", "[ab].txt")),
    ("a.b", ("a.b",), ("axb",)),
    # an upper-case X next to a slash is a letter like any other
    ("/Xa", ("Xa",), ("a", "d/Xa")),
    ("a/X", ("a/X",), ("d/a/X", "a")),
    ("aX", ("aX", "d/aX"), ("a",)),
]


@pytest.mark.parametrize(("glob", "yes", "no"), GLOBS)
def test_glob_matching(glob: str, yes: tuple[str, ...], no: tuple[str, ...]) -> None:
    globs = GlobSet((glob,))
    assert [p for p in yes if globs.match(p) != glob] == []
    assert [p for p in no if globs.match(p) is not None] == []


def test_a_glob_anchored_at_the_root_by_request() -> None:
    assert glob_to_regex("a.py", anchored_any_depth=False) == "a\\.py"
    assert glob_to_regex("a.py") == "(?:.*/)?a\\.py"
    assert glob_to_regex("d/a.py") == "d/a\\.py"


def test_a_glob_set_names_the_glob_that_matched() -> None:
    globs = GlobSet(("*.py", "*.txt", "docs/**"))
    assert [globs.match(p) for p in ("a.py", "a.txt", "docs/x", "a.md")] == [
        "*.py", "*.txt", "docs/**", None,
    ]  # fmt: skip
    many = GlobSet(tuple(f"f{i}" for i in range(12)))
    assert many.match("f11") == "f11" and many.match("d/f10") == "f10"
    assert GlobSet(()).match("a") is None and GlobSet(()).globs == ()
    assert GlobSet(("x",)).globs == ("x",)


def test_a_glob_set_ignores_case_only_when_asked() -> None:
    assert GlobSet(("*.PY",)).match("a.py") is None
    assert GlobSet(("*.PY",), ignore_case=True).match("a.py") == "*.PY"
    exact = GlobSet(("a",))
    assert exact.match("a") == "a" and exact.match("a") == "a"  # compiled once, used twice


def test_a_double_star_glob_without_a_slash_matches_at_any_depth() -> None:
    # gitignore: "**.pem" is "*.pem" at any depth (a protected glob must not miss nested keys).
    assert GlobSet(("**.pem",)).match("certs/x.pem") == "**.pem"
    assert GlobSet(("**.pem",)).match("x.pem") == "**.pem"
    assert GlobSet(("**",)).match("a/b") == "**"


# glob -> its regular expression, anchored at the root: a "[" class, "]" first in the class,
# "!" negation, backslashes inside the class, and text before a class or "?" is kept.
GLOB_REGEXES: list[tuple[str, str]] = [
    ("a?.txt", "a[^/]\\.txt"),
    ("[]a]", "[]a]"),
    ("[]ab]", "[]ab]"),
    ("[]a]*]", "[]a][^/]*\\]"),
    ("[]]*]", "[]][^/]*\\]"),
    ("[a]*]", "[a][^/]*\\]"),
    ("[a\\]", "[a\\\\]"),
    ("[!a]", "[^a]"),
    ("x[ab]y", "x[ab]y"),
]


@pytest.mark.parametrize(("glob", "want"), GLOB_REGEXES)
def test_a_glob_class_becomes_a_regex_class(glob: str, want: str) -> None:
    assert glob_to_regex(glob, anchored_any_depth=False) == want


# glob -> (paths it matches, paths it does not), for the classes above
CLASS_GLOBS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("a?.txt", ("ab.txt", "d/ab.txt"), ("b.txt", "a.txt")),
    ("[!a].txt", ("b.txt", "!.txt"), ("a.txt",)),
    ("x[ab]", ("xa", "d/xb"), ("a", "xc")),
    ("[]a]*]", ("axy]", "]]"), ("]", "b]")),
    ("[a\\]", ("a", "\\"), ("b",)),
    # "**X" is "*X" at any depth, like "**.pem"
    ("**X", ("X", "aX", "d/aX"), ("Xa",)),
]


@pytest.mark.parametrize(("glob", "yes", "no"), CLASS_GLOBS)
def test_glob_classes_match(glob: str, yes: tuple[str, ...], no: tuple[str, ...]) -> None:
    globs = GlobSet((glob,))
    assert [p for p in yes if globs.match(p) != glob] == []
    assert [p for p in no if globs.match(p) is not None] == []


@pytest.mark.parametrize(
    ("glob", "matches", "misses"),
    [("[!]a]", ["b", "x"], ["a", "]"]), ("[]a]", ["]", "a"], ["b"]), ("[!]]", ["b"], ["]"])],
)
def test_a_bracket_first_in_a_class_is_a_literal_as_in_fnmatch(
    glob: str, matches: list[str], misses: list[str]
) -> None:
    import fnmatch

    found = GlobSet((glob,))
    for name in matches + misses:
        assert (found.match(name) is not None) == fnmatch.fnmatchcase(name, glob), name
        assert (found.match(name) is not None) == (name in matches), name
