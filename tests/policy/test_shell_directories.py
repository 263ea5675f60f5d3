"""The directory the parse says each command runs in, as bash's own shell would be there.

``cd`` through ``builtin``/``command``/``time``, ``pushd`` and its stack, ``exit``, redirects
that may fail, loops past the round budget, ``CDPATH``, and what a sourced or eval'd text
leaves behind. (Decisions and effects through the hook: test_shell_scopes.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shell_facts import CWD, HOME, fact, facts, where

from keel.policy._shell import MAX_SOURCE_BYTES, parse, resolve_dir


@pytest.mark.parametrize(
    ("cwd", "target", "where"),
    [
        ("/w", "a", "/w/a"),
        ("/w", "/t", "/t"),
        ("/w", "~", "/h"),
        ("/w", "~/x/y", "/h/x/y"),
        ("/w", "$HOME", "/h"),
        ("/w", "$HOME/q", "/h/q"),
        ("/w", "../..", "/"),
        ("/w", "a/./b/../c", "/w/a/c"),
        (None, "a", None),
        ("/w", None, None),
    ],
)
def test_resolve_dir(cwd: str | None, target: str | None, where: str | None) -> None:
    assert resolve_dir(cwd, target, HOME) == where


def test_cdpath_set_outside_the_line_makes_a_bare_cd_unknown() -> None:
    assert facts("cd foo; ls", cdpath=True) == (["cd foo", "ls | cwd=None | fails"], [])
    assert facts("cd ./foo; ls", cdpath=True) == (["cd ./foo", "ls | cwd=/w/foo | fails"], [])
    assert facts("cd foo; ls") == (["cd foo", "ls | cwd=/w/foo | fails"], [])
    assert parse("ls", cwd=CWD, home=HOME, cdpath=True).cdpath is True
    assert parse("ls; ls", cwd=CWD, home=HOME, cdpath=True).cdpath is True
    assert parse("CDPATH=x; ls", cwd=CWD, home=HOME).cdpath is True
    assert parse("ls; ls", cwd=CWD, home=HOME).cdpath is False
    assert facts("bash -c 'cd foo; ls'", cdpath=True)[0][-1] == "ls | cwd=None | via=bash | fails"


def test_an_unknown_directory_stays_unknown() -> None:
    assert facts("cd /tmp; echo ~+ $PWD", cwd=None) == (
        ["cd /tmp | cwd=None", "echo ? ? | cwd=None | fails"],
        [],
    )


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
    assert where(line)[-1] == (["b"], b_cwd)


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
    assert where(line)[-1] == (["b"], b_cwd)


# Where the shell is after ``exit``, descriptor copies and closes, a redirect that may fail,
# comments, and loops.
AFTER_EXITS_AND_REDIRECTS: list[tuple[str, tuple[list[str], list[tuple[str, str]]]]] = [
    ("if exit; then cd /tmp; fi; ls", (["exit", "cd /tmp", "ls | cwd=/tmp | fails"], [])),
    ("exit && cd /tmp; ls", (["exit", "cd /tmp", "ls | cwd=/tmp | fails"], [])),
    ("cd /tmp && exit; ls", (["cd /tmp", "exit | cwd=/tmp", "ls | cwd=/tmp | fails"], [])),
    ("cd /tmp <&0; ls", (["cd /tmp | redir=<&0", "ls | cwd=/tmp | fails"], [])),
    ("cd /tmp 2>&2; ls", (["cd /tmp | redir=>&2", "ls | cwd=/tmp | fails"], [])),
    ("cd /tmp > 1; ls", (["cd /tmp | redir=>1", "ls | cwd=None | fails"], [])),
    ("cd /tmp >& x; ls", (["cd /tmp | redir=>&x", "ls | cwd=None | fails"], [])),
    ("cd /tmp >& -; ls", (["cd /tmp | redir=>&-", "ls | cwd=/tmp | fails"], [])),
    (
        "cd /tmp >&2 && ls || ls",
        (["cd /tmp | redir=>&2", "ls | cwd=/tmp", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "if x; then exit; else cd /tmp; fi; ls",
        (["x", "exit", "cd /tmp", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "cd /tmp && { ls; } > f; ls",
        (["cd /tmp", "ls | cwd=/tmp | redir=>f", "ls | cwd=/tmp | fails"], []),
    ),
    ("until cd /tmp; do ls; done; ls", (["cd /tmp", "ls", "ls | cwd=None | fails"], [])),
    ("until cd /tmp # c\n do ls; done; ls", (["cd /tmp", "ls", "ls | cwd=None | fails"], [])),
    (
        "if exit; then :; elif cd /tmp; then ls; fi; ls",
        (["exit", ":", "cd /tmp", "ls | cwd=/tmp", "ls | fails"], []),
    ),
    ("{ cd /tmp; } < x; ls", (["cd /tmp | redir=<x", "ls | cwd=None | fails"], [])),
    (
        "cat <<EOF > f && cd /tmp\nx\nEOF\nls",
        (["cat | redir=>f | in='x\\n'", "cd /tmp", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "{ cd /tmp; } < x && ls || ls",
        (["cd /tmp | redir=<x", "ls | cwd=/tmp", "ls | cwd=None | fails"], []),
    ),
    (
        "a; b; while x; do cd a; done; ls",
        (["a", "b", "x | cwd=None", "cd a | cwd=None", "ls | cwd=None | fails"], []),
    ),
    (
        "{ cd /tmp; cat < y; } 2>&1 || ls",
        (["cd /tmp", "cat | cwd=/tmp | redir=<y,>&1", "ls | cwd=/tmp | fails"], []),
    ),
    ("cd /tmp 2>&1 || ls", (["cd /tmp | redir=>&1", "ls | fails"], [])),
    (
        "if cd ./nodir # c\nthen ls; else ls; fi; ls",
        (["cd ./nodir", "ls | cwd=/w/nodir", "ls", "ls | cwd=/w/nodir | fails"], []),
    ),
]


@pytest.mark.parametrize(("line", "expected"), AFTER_EXITS_AND_REDIRECTS)
def test_where_the_shell_stands_after_exits_redirects_and_loops(
    line: str, expected: tuple[list[str], list[tuple[str, str]]]
) -> None:
    assert facts(line) == expected


@pytest.mark.parametrize(("loops", "where"), [(256, "/tmp"), (257, "None")])
def test_loops_past_the_round_budget_leave_the_directory_unknown(loops: int, where: str) -> None:
    # 256 rounds of loop bodies are followed; past them a loop is walked once, state forgotten
    cmds, issues = facts("cd /tmp; " + "while x; do :; done; " * loops + "ls")
    assert (len(cmds), cmds[-1], issues) == (2 + 2 * loops, f"ls | cwd={where} | fails", [])
    assert cmds[-3:-1] == [f"x | cwd={where}", f": | cwd={where}"]


def _workspace(tmp_path: Path) -> str:
    """Scripts a ``source`` may read: inside ``ws``, one link out of it, one at the size limit."""
    ws = tmp_path / "ws"
    (ws / "-").mkdir(parents=True)
    (ws / "d").mkdir()
    files = {
        "go.sh": "cd /tmp\n",
        "-/go.sh": "cd /tmp\n",
        "cdp.sh": "CDPATH=/x\n",
        "ints.sh": "declare -i n\n",
        "nop.sh": ":\n",
        "hm.sh": "if x; then HOME=/q; fi\ncd /tmp\n",
        "run.sh": "true\n",
        "s1.sh": "source ./s2.sh\n",
        "s2.sh": "source ./s3.sh\n",
        "s3.sh": "source ./s4.sh\n",
        "s4.sh": "eval 'source ./go.sh'\n",
    }
    for name, text in files.items():
        (ws / name).write_text(text)
    (ws / "run.sh").chmod(0o755)
    (tmp_path / "outside.sh").write_text("cd /tmp\n")
    (ws / "out.sh").symlink_to(tmp_path / "outside.sh")
    last = "cd /tmp"  # the file's last bytes, no newline: a short read would cut them
    (ws / "big.sh").write_text("#" * (MAX_SOURCE_BYTES - len(last) - 1) + "\n" + last)
    return str(ws)


# Run in a workspace with ``probe``: what ``source`` may trust and read, and what it leaves.
SOURCED: list[tuple[str, tuple[list[str], list[tuple[str, str]]]]] = [
    (
        "echo x 2>&1; . ./go.sh; ls",
        (["echo x | cwd=R | redir=>&1", ". ./go.sh | cwd=R", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "echo x 2>&2; . ./go.sh; ls",
        (["echo x | cwd=R | redir=>&2", ". ./go.sh | cwd=R", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "echo x >&0; . ./go.sh; ls",
        (["echo x | cwd=R | redir=>&0", ". ./go.sh | cwd=R", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "echo x >& -; . ./go.sh; ls",
        (["echo x | cwd=R | redir=>&-", ". ./go.sh | cwd=R", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "echo x > /dev/null; . ./go.sh; ls",
        (["echo x | cwd=R | redir=>/dev/null", ". ./go.sh | cwd=R", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "test -f x < y; . ./go.sh; ls",
        (["test -f x | cwd=R | redir=<y", ". ./go.sh | cwd=R", "ls | cwd=/tmp | fails"], []),
    ),
    (
        "echo x >& y; . ./go.sh; ls",
        (["echo x | cwd=R | redir=>&y", ". ./go.sh | cwd=R", "ls | cwd=None | fails"], []),
    ),
    (
        "echo x > 1; . ./go.sh; ls",
        (["echo x | cwd=R | redir=>1", ". ./go.sh | cwd=R", "ls | cwd=None | fails"], []),
    ),
    (
        "echo x > f; sh -c '. ./go.sh; ls'",
        (
            [
                "echo x | cwd=R | redir=>f",
                "sh -c '. ./go.sh; ls' | cwd=R | wrapper | fails",
                ". ./go.sh | cwd=R | via=sh",
                "ls | cwd=None | via=sh | fails",
            ],
            [],
        ),
    ),
    (
        "echo 2>&1; sh -c '. ./go.sh; ls'",
        (
            [
                "echo | cwd=R | redir=>&1",
                "sh -c '. ./go.sh; ls' | cwd=R | wrapper | fails",
                ". ./go.sh | cwd=R | via=sh",
                "ls | cwd=/tmp | via=sh | fails",
            ],
            [],
        ),
    ),
    (
        ". ./go.sh > f && cd /tmp; ls",
        ([". ./go.sh | cwd=R | redir=>f", "cd /tmp | cwd=None", "ls | cwd=None | fails"], []),
    ),
    (
        "cd /tmp; x=1 time . ./go.sh > f; ls",
        (
            [
                "cd /tmp | cwd=R",
                "time . ./go.sh | cwd=/tmp | set=x=1 | redir=>f | wrapper",
                ". ./go.sh | cwd=/tmp | set=x=1 | redir=>f | via=time",
                "ls | cwd=/tmp | fails",
            ],
            [],
        ),
    ),
    (". ./hm.sh; ls", ([". ./hm.sh | cwd=R", "ls | cwd=None | fails"], [])),
    (
        "a=2; if cd $x; then :; else a=1; fi; echo $a",
        (["cd ? | cwd=R", ": | cwd=None", "echo ? | cwd=None | fails"], []),
    ),
    ("cd ./run.sh; ls", (["cd ./run.sh | cwd=R", "ls | cwd=None | fails"], [])),
    (
        "eval eval eval eval cd /tmp; ls",
        (
            [
                "eval eval eval eval cd /tmp | cwd=R | wrapper",
                "eval eval eval cd /tmp | cwd=R | via=eval | wrapper",
                "eval eval cd /tmp | cwd=R | via=eval,eval | wrapper",
                "eval cd /tmp | cwd=R | via=eval,eval,eval | wrapper",
                "cd /tmp | cwd=R | via=eval,eval,eval,eval",
                "ls | cwd=/tmp | fails",
            ],
            [],
        ),
    ),
    (
        "declare -i m; eval :; m=1+1",
        (
            ["eval : | cwd=R | wrapper", ": | cwd=R | via=eval"],
            [("arithmetic", "m is an integer variable: its value is evaluated")],
        ),
    ),
    (
        "eval 'CDPATH=/x'; cd d; ls",
        (
            ["eval CDPATH=/x | cwd=R | wrapper", "cd d | cwd=R", "ls | cwd=None | fails"],
            [("env", "CDPATH=/x")],
        ),
    ),
    (
        "CDPATH=/x; eval ':'; cd d; ls",
        (
            [
                "eval : | cwd=R | wrapper",
                ": | cwd=R | via=eval",
                "cd d | cwd=R",
                "ls | cwd=None | fails",
            ],
            [("env", "CDPATH=/x")],
        ),
    ),
    (
        "declare -i m; source ./ints.sh; m=1+1; n=1+1",
        (
            ["source ./ints.sh | cwd=R"],
            [
                ("arithmetic", "m is an integer variable: its value is evaluated"),
                ("arithmetic", "n is an integer variable: its value is evaluated"),
            ],
        ),
    ),
    (
        "CDPATH=/x; source ./nop.sh; cd d; ls",
        (
            ["source ./nop.sh | cwd=R", "cd d | cwd=R", "ls | cwd=None | fails"],
            [("env", "CDPATH=/x")],
        ),
    ),
    (
        "source ./cdp.sh; cd d; ls",
        (["source ./cdp.sh | cwd=R", "cd d | cwd=R", "ls | cwd=None | fails"], []),
    ),
    ("source; ls", (["source | cwd=R", "ls | cwd=None | fails"], [])),
    ("source -/go.sh; ls", (["source -/go.sh | cwd=R", "ls | cwd=None | fails"], [])),
    (". ./out.sh; ls", ([". ./out.sh | cwd=R", "ls | cwd=None | fails"], [])),
    (". ./big.sh; ls", ([". ./big.sh | cwd=R", "ls | cwd=/tmp | fails"], [])),
    ("source ./s1.sh; ls", (["source ./s1.sh | cwd=R", "ls | cwd=None | fails"], [])),
]


@pytest.mark.parametrize(("line", "expected"), SOURCED)
def test_sourced(
    tmp_path: Path, line: str, expected: tuple[list[str], list[tuple[str, str]]]
) -> None:
    root = _workspace(tmp_path)
    parsed = parse(line, cwd=root, home=HOME, root=root, probe=True)
    assert ([fact(c).replace(root, "R") for c in parsed.cmds], parsed.issues) == expected
