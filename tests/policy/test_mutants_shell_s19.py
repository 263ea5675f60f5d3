"""Mutation-testing survivors of ``keel.policy._shell`` (issue 14, tests/MUTATION.md), session 19.

Where bash's own shell stands after ``builtin``/``command``/``time`` run a ``cd``: the parse
must follow exactly the ``cd`` bash runs, and no other (a later write is judged in that
directory).
"""

from __future__ import annotations

import pytest

from keel.policy._shell import parse

CWD, HOME = "/w", "/h"


def _where(line: str) -> list[tuple[list[str | None], str | None]]:
    """Each simple command the parse sees, with the directory it runs in."""
    return [(c.argv, c.cwd) for c in parse(line, cwd=CWD, home=HOME, probe=False).cmds]


@pytest.mark.parametrize(
    ("line", "b_cwd"),
    [
        # bash: "builtin: -p: invalid option", the cd never runs: b stays in /w.
        ("builtin -p cd a; b", "/w"),
        ("builtin -x cd a; b", "/w"),
        # "--" ends builtin's options: the cd runs.
        ("builtin -- cd a; b", "/w/a"),
        # command -p runs cd in the shell; -v/-V only look.
        ("command -p cd a; b", "/w/a"),
        ("command -v cd a; b", "/w"),
        ("command -pv cd a; b", "/w"),
        ("time -p -- cd a; b", "/w/a"),
        ("time -- cd a; b", "/w/a"),
        # "-" is a command name, not an option: bash runs "-" (not found), the cd never runs.
        ("command - cd a; b", "/w"),
        # time with nothing after it times nothing: the parse must not run off the end.
        ("time; b", "/w"),
        ("time -p; b", "/w"),
        ("time --; b", "/w"),
    ],
)
def test_a_cd_run_through_builtin_moves_the_shell_only_when_bash_runs_it(
    line: str, b_cwd: str
) -> None:
    assert _where(line)[-1] == (["b"], b_cwd)


@pytest.mark.parametrize(
    ("line", "b_cwd"),
    [
        # pushd +N/-N rotates a directory stack keel does not keep: where b runs is unknown.
        ("pushd +1; b", None),
        ("pushd -2; b", None),
        ("pushd a; b", "/w/a"),
        # cd has no -n (bash: invalid option, cd fails): unknown; pushd -n only edits the stack.
        ("cd -n a; b", None),
        ("pushd -n a; b", "/w"),
    ],
)
def test_a_pushd_that_rotates_the_stack_leaves_the_directory_unknown(
    line: str, b_cwd: str | None
) -> None:
    assert _where(line)[-1] == (["b"], b_cwd)


@pytest.mark.parametrize(
    ("line", "inner"),
    [
        # watch's --equexit takes a value: the command watch runs is "rm x", not "3 rm x".
        ("watch --equexit 3 rm x", ["rm", "x"]),
        ("watch -q 3 rm x", ["rm", "x"]),
        ("busybox rm x", ["rm", "x"]),
        ("busybox", ["busybox"]),
        # an option is busybox's own (e.g. --list), not an applet to run
        ("busybox -x rm x", ["busybox", "-x", "rm", "x"]),
    ],
)
def test_the_command_a_wrapper_runs_is_seen_past_its_options(line: str, inner: list[str]) -> None:
    assert [argv for argv, _ in _where(line)][-1] == inner
