"""The forms of a path ``keel.policy._paths`` judges, each by the rule its docstring states.

Decodings (percent, ``%u``, entities, overlong UTF-8, ``0x``), spelling variants (backslashes,
``;`` parameters, full-width dots, ``file:`` URLs), ``~`` and ``$HOME``, Windows and network
paths, the written and the real absolute form, containment and relative paths.
"""

from __future__ import annotations

import pytest
from policy_helpers import Tree

from keel.policy._paths import (
    absolute_forms,
    decodings,
    expand_home,
    inside,
    is_foreign_absolute,
    relative,
    variants,
)


def _encoded(times: int) -> str:
    text = "%2e"
    for _ in range(times):
        text = text.replace("%", "%25")
    return text


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a", ["a"]),
        ("%252e", ["%252e", "%2e", "."]),
        ("&#46;&#46;/x", ["&#46;&#46;/x", "../x"]),
        ("a&ltb", ["a&ltb"]),  # an entity needs its semicolon
        ("a;b", ["a;b"]),
        ("%u002e%u002e/x", ["%u002e%u002e/x", "../x"]),
        ("%U002e%U002e/x", ["%U002e%U002e/x", "../x"]),
        ("0x2e0x2e/x", ["0x2e0x2e/x", "../x"]),
        ("0X2E0X2F", ["0X2E0X2F", "./"]),
        ("..%c0%afx", ["..%c0%afx", "../x"]),
        ("%2E%2e", ["%2E%2e", ".."]),
        ("a%ffb", ["a%ffb", "a\ufffdb"]),
        ("%udcff%2e", ["%udcff%2e", "\ufffd\ufffd\ufffd."]),
        (_encoded(7), [_encoded(7 - i) for i in range(8)] + ["."]),
    ],
)
def test_decodings(text: str, want: list[str]) -> None:
    assert decodings(text) == want


def test_decodings_stop_after_eight_rounds() -> None:
    assert decodings(_encoded(9)) == [_encoded(9 - i) for i in range(9)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a", ["a"]),
        ("a\\b", ["a\\b", "a/b"]),
        ("a;x/b;y", ["a;x/b;y", "a/b"]),
        ("..;/x", ["..;/x", "../x"]),
        ("%2e%2e\\x", ["%2e%2e\\x", "%2e%2e/x", "..\\x", "../x"]),
        ("\uff0e\uff0e/x", ["\uff0e\uff0e/x", "../x"]),
        ("..\uff3cx", ["..\uff3cx", "..\\x", "../x"]),
        ("\ufb01le", ["\ufb01le", "file"]),
        ("file:///etc/passwd", ["file:///etc/passwd", "/etc/passwd"]),
        ("FILE:///etc/passwd", ["FILE:///etc/passwd", "/etc/passwd"]),
        ("file://localhost/etc/x", ["file://localhost/etc/x", "/etc/x"]),
        ("file://LocalHost/etc/x", ["file://LocalHost/etc/x", "/etc/x"]),
        ("file://srv/x", ["file://srv/x", "//srv/x"]),
        ("file:x", ["file:x", "x"]),
        ("file:%2e%2e/x", ["file:%2e%2e/x", "file:../x", "%2e%2e/x", "../x"]),
    ],
)
def test_variants(text: str, want: list[str]) -> None:
    assert variants(text) == want


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("~", "/h"),
        ("~/x", "/h/x"),
        ("~root/x", "/root/x"),
        ("$HOME", "/h"),
        ("$HOME/x", "/h/x"),
        ("${HOME}", "/h"),
        ("${HOME}/x", "/h/x"),
        ("$HOMEX/y", "$HOMEX/y"),
        ("$home/x", "$home/x"),
        ("x/~", "x/~"),
        ("/a", "/a"),
    ],
)
def test_expand_home(path: str, want: str) -> None:
    assert expand_home(path, "/h") == want


@pytest.mark.parametrize(
    ("path", "want"),
    [("C:\\x", True), ("c:/x", True), ("\\\\srv\\x", True), ("//srv/x", True),
     ("///x", False), ("/x", False), ("x", False), ("x/c:", False)],
)  # fmt: skip
def test_is_foreign_absolute(path: str, want: bool) -> None:
    assert is_foreign_absolute(path) is want


def test_absolute_forms(tree: Tree) -> None:
    ws = str(tree.ws)
    assert absolute_forms("/a/./b/", "/c") == ("/a/b", "/a/b")
    assert absolute_forms("b", "/c") == ("/c/b", "/c/b")
    assert absolute_forms("//x", "/") == ("/x", "/x")
    assert absolute_forms("//Xx/y", "/") == ("/Xx/y", "/Xx/y")  # only the slashes go
    assert absolute_forms("cfg", ws) == (f"{ws}/cfg", f"{ws}/.git/config")
    assert absolute_forms("link_out/../x", ws) == (f"{ws}/x", f"{tree.base}/x")
    assert absolute_forms("link_in/../a.py", ws) == (f"{ws}/a.py", f"{ws}/a.py")


@pytest.mark.parametrize(
    ("path", "root", "want"),
    [("/a", "/a", True), ("/a/b", "/a", True), ("/ab", "/a", False), ("/a", "/a/b", False),
     ("/x", "/", True), ("/a/b", "/aX", False), ("/aX/b", "/aX", True)],
)  # fmt: skip
def test_inside(path: str, root: str, want: bool) -> None:
    assert inside(path, root) is want


@pytest.mark.parametrize(
    ("path", "root", "want"),
    [("/a", "/a", "."), ("/a/b/c", "/a", "b/c"), ("/x", "/", "x"), ("/ab/c", "/ab/", "c")],
)
def test_relative(path: str, root: str, want: str) -> None:
    assert relative(path, root) == want
