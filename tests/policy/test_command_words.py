"""How ``keel.policy._rules`` reads a command's words before any rule.

The command's name (paths of system and venv bin directories dropped, versions of python and
pip), harmless global options dropped before matching, operands past options and their values,
bundled short flags, and which words look like paths.
"""

from __future__ import annotations

import pytest
from policy_helpers import argv, split

from keel.policy._rules import looks_like_path, match_args, normalise, positional, short_flags


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("/usr/bin/rm", "rm"), ("/bin/ls", "ls"), ("/usr/local/bin/jq", "jq"),
        ("/sbin/ip", "ip"), ("/usr/sbin/useradd", "useradd"), ("/usr/local/sbin/x", "x"),
        (".venv/bin/pytest", "pytest"), ("venv/bin/ruff", "ruff"), ("./.venv/bin/a", "a"),
        ("./venv/bin/b", "b"), ("env/bin/c", "c"), ("/usr/bin/a/b", "/usr/bin/a/b"),
        ("/opt/bin/rm", "/opt/bin/rm"), ("python3", "python"), ("python3.11", "python"),
        ("python", "python"), ("/usr/bin/python3", "python"), ("python3x", "python3x"),
        ("pythonista", "pythonista"), ("pip3", "pip"), ("pip3.12", "pip"), ("pipx", "pipx"),
        ("pip", "pip"), ("rm", "rm"),
    ],
)  # fmt: skip
def test_normalise(name: str, expected: str) -> None:
    assert normalise(name) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("git --no-pager log", "log"), ("git -P log", "log"), ("git --paginate log", "log"),
        ("git --no-replace-objects log", "log"), ("git --literal-pathspecs log", "log"),
        ("git --no-optional-locks status", "status"), ("git -C sub status -s", "status -s"),
        ("git --no-pager -C sub status -s", "status -s"),
        ("git log -C x", "log -C x"), ("git log -P", "log"),
        ("python -u -B -O -OO -I -E -s -S -q -b -bb x.py", "x.py"),
        ("python -W ignore -X dev x.py", "x.py"), ("python x.py -u -W y", "x.py -u -W y"),
        ("ls -u -W x", "-u -W x"), ("gitx --no-pager", "--no-pager"),
    ],
)  # fmt: skip
def test_match_args_drops_harmless_global_options(line: str, expected: str) -> None:
    name, args = split(line)
    assert match_args(name, args) == argv(expected)


def test_positional_and_short_flags() -> None:
    args = argv("-a x -o v - -- -b $X")
    assert positional(args) == ["x", "v", "-", "-b", None]
    assert positional(args, frozenset({"-o"})) == ["x", "-", "-b", None]
    assert short_flags(argv("-rf --force -v x $X -")) == "rfv"


def test_positional_skips_both_values_of_a_two_value_option() -> None:
    assert positional(argv("--arg n v . f"), with_two=frozenset({"--arg"})) == [".", "f"]
    assert positional(argv("--arg n v -x f g"), frozenset({"-x"}), frozenset({"--arg"})) == ["g"]


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("/etc", True), ("~/x", True), ("\\x", True), ("..", True), ("a/../b", True),
        ("a/..", True), ("..\\x", True), ("%2E", True), ("%2F", True), ("%5C", True),
        ("a%2e", True), ("FILE:x", True), ("$HOME/x", True), ("$home", True), ("a/b", False),
        (".", False), ("...", False), ("x..", False), ("a.b", False),
    ],
)  # fmt: skip
def test_looks_like_path(arg: str, expected: bool) -> None:
    assert looks_like_path(arg) is expected


def test_a_leading_parent_is_a_path() -> None:
    assert looks_like_path("../x") is True
