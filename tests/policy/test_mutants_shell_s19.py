"""Mutation-testing survivors of ``keel.policy._shell`` (issue 14, tests/MUTATION.md), session 19.

Where bash's own shell stands after ``builtin``/``command``/``time`` run a ``cd``: the parse
must follow exactly the ``cd`` bash runs, and no other (a later write is judged in that
directory).
"""

from __future__ import annotations

import pytest

from keel.policy import Policy
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


# Session 20: the wrapper's own command. A wrapper run by a path outside the system's bin
# directories (``./nice``, which the agent may have written) is a program of its own: it is
# not marked a wrapper, so the engine judges it too, not only what it runs.


def _wrapping(line: str) -> list[tuple[list[str | None], bool, tuple[str, ...]]]:
    """Each simple command: argv, whether it is taken for a wrapper, the wrappers around it."""
    cmds = parse(line, cwd=CWD, home=HOME, probe=False).cmds
    return [(c.argv, c.is_wrapper, c.wrappers) for c in cmds]


@pytest.mark.parametrize(
    ("line", "is_wrapper", "inner", "via"),
    [
        # a system wrapper only runs what follows: it is a wrapper
        ("/usr/bin/nice rm x", True, ["rm", "x"], "nice"),
        ("/usr/local/sbin/nice rm x", True, ["rm", "x"], "nice"),
        # anything else named like one is judged as its own command too
        ("./nice rm x", False, ["rm", "x"], "nice"),
        ("/opt/bin/nice rm x", False, ["rm", "x"], "nice"),
        ("/usr/bin/x/nice rm x", False, ["rm", "x"], "nice"),
        ("./command rm x", False, ["rm", "x"], "command"),
        # stdbuf with no option runs its first word
        ("stdbuf rm x", True, ["rm", "x"], "stdbuf"),
        # /usr/bin/time -f takes a format; setsid -f is a flag (fork), it takes no value
        ("/usr/bin/time -f %e rm x", True, ["rm", "x"], "time"),
        ("setsid -f rm x", True, ["rm", "x"], "setsid"),
        # busybox with one applet and no arguments still runs the applet
        ("busybox reboot", True, ["reboot"], "busybox"),
    ],
)
def test_a_wrapper_is_its_own_command_unless_it_is_the_system_s(
    line: str, is_wrapper: bool, inner: list[str | None], via: str
) -> None:
    got = _wrapping(line)
    assert got == [(line.split(), is_wrapper, ()), (inner, False, (via,))]
    assert all(type(w) is bool for _, w, _ in got)  # a declared bool, never None


@pytest.fixture(scope="module")
def developer(tmp_path_factory: pytest.TempPathFactory) -> Policy:
    ws = tmp_path_factory.mktemp("shell20") / "ws"
    ws.mkdir()
    return Policy.for_preset("developer", ws)


def _unknown(name: str) -> tuple[str, str, str]:
    return ("ask", "default.ask", f"'{name}' is not allowed by the developer preset or keel.toml")


ALLOW_LS = ("allow", "preset.developer.allow", "matches 'ls' in the developer preset")
RM_ROOT = ("deny", "risk.rm_recursive", "a recursive delete of the workspace, home or system")


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("/usr/bin/nice ls", ALLOW_LS),
        ("/usr/local/bin/nice ls", ALLOW_LS),
        # the agent's own ./nice may do anything: it needs approval, not just its `ls`
        ("./nice ls", _unknown("./nice")),
        ("/opt/bin/nice ls", _unknown("/opt/bin/nice")),
        ("/usr/bin/x/nice ls", _unknown("/usr/bin/x/nice")),
        # what a wrapper runs is found past its options, whatever they are
        ("stdbuf rm -rf /", RM_ROOT),
        ("setsid -f rm -rf /", RM_ROOT),
        ("/usr/bin/time -f %e rm -rf /", RM_ROOT),
        ("busybox reboot", ("deny", "risk.system_power", "reboot stops or restarts the machine")),
        ("busybox sh <<'EOF'\nrm -rf /\nEOF", RM_ROOT),
    ],
)
def test_the_engine_judges_what_a_wrapper_runs_and_an_unknown_wrapper_itself(
    developer: Policy, line: str, want: tuple[str, str, str]
) -> None:
    got = developer.check_command(line)
    assert (got.decision, got.rule, got.reason) == want
