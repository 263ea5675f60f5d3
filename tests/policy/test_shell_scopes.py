"""Where each command of a line runs: shell scopes, ``cd -``, globs and scripts, as bash does.

Bugs found by mutation testing, each pinned in-process (decision and rule) and, for the
serious ones, by effect through the real ``keel hook`` (a marker file outside the workspace,
a secret string in what the agent would read):

1. a ``cd`` inside ``( ... )``, a pipeline stage, ``&`` (each runs in a subshell) or a
   function body that is never called moved every later command of the line; a ``{ ...; }``
   group runs in the same shell and does move them;
2. a glob after ``cd $X`` was left as written, even an absolute or ``~`` one;
3. ``cd -`` was taken for ``cd`` (home) instead of ``$OLDPWD``; ``popd``, ``pushd +N`` and
   ``pushd -n`` were misread; ``cd a b`` (an error in bash 5) was taken for ``cd a``;
4. ``xargs -aFILE`` cut FILE at ``=``;
5. a script run by its absolute path was never read for the secrets it names;
6. a ``cd`` through ``builtin``, ``command``, ``time`` or ``eval`` was not followed, nor was
   the directory taken as unknown after ``source``;
7. a ``cd`` that fails (its directory does not exist) or may not run (right of ``&&``/``||``,
   in an ``if``, a loop or a ``case`` branch, after a redirect that may fail) was taken to
   have moved the shell, and a loop body was judged only as its first round runs;
8. tree-sitter groups ``a && b 2>&1 | c`` as ``(a && b 2>&1) | c`` (so a's ``cd`` was taken
   for a pipeline stage's) and drops the ``-`` of ``cd - 2>/dev/null``;
9. taking every ``source`` as unknown (6.) made ``source .venv/bin/activate && pytest`` ask:
   a small workspace file nothing earlier on the line can have written is now walked.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from policy_helpers import hook

from _support import make_workspace
from keel.config import parse_config
from keel.policy import Policy
from keel.policy._shell import parse

SECRET = "KEY=s3cret-scopes"
SSH_KEY = "ssh-private-scopes"


# CPython's venv ``bin/activate`` for bash (3.13), as ``python -m venv .venv`` writes it.
ACTIVATE = """\
# This file must be used with "source bin/activate" *from bash*
# You cannot run it directly

deactivate () {
    # reset old environment variables
    if [ -n "${_OLD_VIRTUAL_PATH:-}" ] ; then
        PATH="${_OLD_VIRTUAL_PATH:-}"
        export PATH
        unset _OLD_VIRTUAL_PATH
    fi
    if [ -n "${_OLD_VIRTUAL_PYTHONHOME:-}" ] ; then
        PYTHONHOME="${_OLD_VIRTUAL_PYTHONHOME:-}"
        export PYTHONHOME
        unset _OLD_VIRTUAL_PYTHONHOME
    fi

    # Call hash to forget past locations. Without forgetting
    # past locations the $PATH changes we made may not be respected.
    # See "man bash" for more details. hash is usually a builtin of your shell
    hash -r 2> /dev/null

    if [ -n "${_OLD_VIRTUAL_PS1:-}" ] ; then
        PS1="${_OLD_VIRTUAL_PS1:-}"
        export PS1
        unset _OLD_VIRTUAL_PS1
    fi

    unset VIRTUAL_ENV
    unset VIRTUAL_ENV_PROMPT
    if [ ! "${1:-}" = "nondestructive" ] ; then
    # Self destruct!
        unset -f deactivate
    fi
}

# unset irrelevant variables
deactivate nondestructive

# on Windows, a path can contain colons and backslashes and has to be converted:
case "$(uname)" in
    CYGWIN*|MSYS*|MINGW*)
        # transform D:\\path\\to\\venv to /d/path/to/venv on MSYS and MINGW
        # and to /cygdrive/d/path/to/venv on Cygwin
        VIRTUAL_ENV=$(cygpath "{venv}")
        export VIRTUAL_ENV
        ;;
    *)
        # use the path as-is
        export VIRTUAL_ENV="{venv}"
        ;;
esac

_OLD_VIRTUAL_PATH="$PATH"
PATH="$VIRTUAL_ENV/"bin":$PATH"
export PATH

VIRTUAL_ENV_PROMPT=".venv"
export VIRTUAL_ENV_PROMPT

# unset PYTHONHOME if set
# this will fail if PYTHONHOME is set to the empty string (which is bad anyway)
# could use `if (set -u; : $PYTHONHOME) ;` in bash
if [ -n "${PYTHONHOME:-}" ] ; then
    _OLD_VIRTUAL_PYTHONHOME="${PYTHONHOME:-}"
    unset PYTHONHOME
fi

if [ -z "${VIRTUAL_ENV_DISABLE_PROMPT:-}" ] ; then
    _OLD_VIRTUAL_PS1="${PS1:-}"
    PS1="(".venv") ${PS1:-}"
    export PS1
fi

# Call hash to forget past commands. Without forgetting
# past commands the $PATH changes we made may not be respected
hash -r 2> /dev/null
"""


def _workspace(parent: Path) -> Path:
    """``parent/ws`` (0755 parents) with ``src/``, a secret, a script naming it, a fake HOME."""
    parent.chmod(0o755)
    ws = parent / "ws"
    files = {
        "src/app.py": "x = 1\n",
        ".env": SECRET + "\n",
        "run.sh": '#!/bin/sh\ncd "$(dirname "$0")" || exit 1\ncat \'.env\'\n',
        # ``cd src; source .venv/bin/activate`` is allowed by name: this one moves the shell up
        "src/.venv/bin/activate": "cd ..\n",
        # 9. what ``source`` reads: a real activate (no cd), a file that moves the shell up, one
        # that does not, and a chain of five files, each sourcing the next, the last moving up
        ".venv/bin/activate": ACTIVATE.replace("{venv}", str(ws / ".venv")),
        "up.sh": "cd ..\n",
        "stay.sh": "true\n",
        **{f"chain/{k}.sh": f". ./chain/{k + 1}.sh\n" for k in range(1, 5)},
        "chain/5.sh": "cd ..\n",
    }
    # contain = "off": the hook's text policy is all that stands between the line and bash
    toml = f'[policy]\npreset = "developer"\nallow = ["{ws}/run.sh"]\n[sandbox]\ncontain = "off"\n'
    make_workspace(ws, keel_toml=toml, files=files)
    (ws / "k=v").symlink_to(".env")  # a name with '=' that is the secret
    (ws / "run.sh").chmod(0o755)
    (parent / "outside.sh").write_text("true\n")
    (parent / "home" / ".ssh").mkdir(parents=True)
    (parent / "home" / ".ssh" / "id_scopes").write_text(SSH_KEY + "\n")
    return ws


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _workspace(tmp_path_factory.mktemp("scopes"))


@pytest.fixture
def fresh_ws(workdir: Path) -> Path:
    return _workspace(workdir)


def _policy(mode: str, ws: Path, monkeypatch: pytest.MonkeyPatch) -> Policy:
    monkeypatch.setenv("HOME", str(ws.parent / "home"))  # the policy reads HOME once, here
    if mode == "cfg":
        return Policy.from_config(parse_config((ws / "keel.toml").read_text()), ws)
    return Policy.for_preset("developer", ws, contained=mode == "box")


def _check(mode: str, line: str, ws: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    got = _policy(mode, ws, monkeypatch).check_command(line.replace("{ws}", str(ws)))
    return got.decision, got.rule


OUTSIDE = ("deny", "path.outside_workspace")
DYNAMIC = ("ask", "path.dynamic")
SECRET_READ = ("deny", "risk.secret_read")
IN_SCRIPT = ("ask", "risk.secret_in_script")
ALLOW = ("allow", "preset.developer.allow")

# Each row was decided otherwise before the fix (``dev``: developer; ``box``: contained;
# ``cfg``: the workspace's keel.toml, which allows ``{ws}/run.sh`` by its path).
FIXED: list[tuple[str, str, tuple[str, str]]] = [
    # 1. a subshell's cd stays in the subshell
    ("dev", "(cd src); echo x > ../x", OUTSIDE),
    ("dev", "(cd src) && echo x > ../x", OUTSIDE),
    ("dev", "(cd src); rm -rf ../x", ("deny", "risk.rm_recursive")),
    ("dev", "(cd src) > /dev/null; echo x > ../x", OUTSIDE),
    ("dev", "cd src | true; cat ../x", OUTSIDE),
    ("dev", "cd src | true; echo x > ../x", OUTSIDE),
    ("dev", "cd src & echo x > ../x", OUTSIDE),
    ("dev", "true && cd src & echo x > ../x", OUTSIDE),
    ("dev", "true | cd src; echo x > ../x", DYNAMIC),  # the last stage moves only with lastpipe
    ("dev", "f() { cd src; }; echo x > ../x", DYNAMIC),  # a body runs when called, if ever
    ("dev", "x=/etc; (x=.); cat $x/shadow", SECRET_READ),  # nor does a subshell's variable leak
    # 2. an absolute or ~ glob does not depend on the directory
    ("dev", "cd $X && cat {ws}/.en*", SECRET_READ),
    ("dev", "pushd; cat {ws}/.en*", SECRET_READ),
    ("box", "cd $X && cat ~/.ss*/id_*", SECRET_READ),
    ("box", "cd $X && cat {ws}/.en?", SECRET_READ),
    # 3. cd - goes to $OLDPWD: known only when this line set it
    ("box", "cd -; cat x", DYNAMIC),
    ("dev", "cd -- -; cat x", DYNAMIC),
    ("dev", "cd src; cd -; echo x > src/y", ALLOW),
    ("dev", "OLDPWD={ws}/src; cd -; echo x > ../y", ALLOW),
    ("dev", "OLDPWD=/etc cd -; cat shadow", SECRET_READ),
    ("dev", "pushd src; popd; echo x > ../x", DYNAMIC),
    ("dev", "pushd src; pushd +1; echo x > ../x", DYNAMIC),
    ("dev", "pushd -n src; echo x > ../x", OUTSIDE),
    ("dev", "cd src extra; echo x > ../x", DYNAMIC),  # bash 5: too many arguments
    # 4. xargs -aFILE reads all of FILE
    ("dev", "xargs -ak=v echo", SECRET_READ),
    # 5. a script run by its path is read, however the path is spelt
    ("dev", "{ws}/run.sh", IN_SCRIPT),
    ("dev", "$PWD/run.sh", IN_SCRIPT),
    ("dev", "cd src && $PWD/../run.sh", IN_SCRIPT),
    ("cfg", "{ws}/run.sh", IN_SCRIPT),
    ("cfg", "cd src; {ws}/run.sh", IN_SCRIPT),
    ("dev", "pushd; {ws}/run.sh", IN_SCRIPT),  # the directory is unknown, the path is not
    ("box", "pushd; ~/../ws/run.sh", IN_SCRIPT),
]


@pytest.mark.parametrize(("mode", "line", "expected"), FIXED)
def test_each_command_is_judged_where_bash_runs_it(
    mode: str, line: str, expected: tuple[str, str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _check(mode, line, ws, monkeypatch) == expected


# What already held and must keep holding: the same shell moves, a substitution does not.
KEPT: list[tuple[str, str, tuple[str, str]]] = [
    ("dev", "{ cd src; }; echo x > ../x", ALLOW),
    ("dev", "{ cd src; }; rm -rf ../x", ("ask", "default.ask")),
    ("dev", "(cd src; echo x > ../x)", ALLOW),
    ("dev", "cd src && echo x > ../x", ALLOW),
    ("dev", "echo $(cd src); echo x > ../x", OUTSIDE),
    ("dev", "cat <(cd src); echo x > ../x", OUTSIDE),
    ("dev", "cd $X && cat ./.en*", DYNAMIC),  # a relative glob needs the directory
    ("dev", "./run.sh", IN_SCRIPT),
    ("dev", "/bin/sh run.sh", IN_SCRIPT),
    ("dev", "xargs --arg-file=k=v echo", SECRET_READ),
]


@pytest.mark.parametrize(("mode", "line", "expected"), KEPT)
def test_what_runs_in_the_same_shell_still_moves(
    mode: str, line: str, expected: tuple[str, str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _check(mode, line, ws, monkeypatch) == expected


# The parse itself: the directory (``None``: only known at run time) each command runs in.
CWDS: list[tuple[str, list[tuple[str | None, str | None]]]] = [
    ("(cd a); b", [("cd", "/w"), ("b", "/w")]),
    ("(cd a; b); c", [("cd", "/w"), ("b", "/w/a"), ("c", "/w")]),
    ("cd a | b; c", [("cd", "/w"), ("b", "/w"), ("c", "/w")]),
    ("a | cd b | c; d", [("a", "/w"), ("cd", "/w"), ("c", "/w"), ("d", "/w")]),
    ("a | cd b; c", [("a", "/w"), ("cd", "/w"), ("c", None)]),
    ("cd a & b", [("cd", "/w"), ("b", "/w")]),
    ("f() { cd a; b; }; c", [("cd", "/w"), ("b", "/w/a"), ("c", None)]),
    ("cd -; a", [("cd", "/w"), ("a", None)]),
    (
        "cd /t; cd -; a; cd -; b",
        [("cd", "/w"), ("cd", "/t"), ("a", "/w"), ("cd", "/w"), ("b", "/t")],
    ),
    ("cd /t; cd $OLDPWD; a", [("cd", "/w"), ("cd", "/t"), ("a", "/w")]),
    ("(cd /t); cd -; a", [("cd", "/w"), ("cd", "/w"), ("a", None)]),
    ("OLDPWD=/o cd -; a", [("cd", "/w"), ("a", "/o")]),
    ("pushd -n a; b", [("pushd", "/w"), ("b", "/w")]),
    ("popd; b", [("popd", "/w"), ("b", None)]),
    ("cd a b; c", [("cd", "/w"), ("c", None)]),
    ("cd -x a; c", [("cd", "/w"), ("c", None)]),  # not an option of cd: it fails
]


# Already so before the fix, and kept: a group moves; a last stage that ends where it began;
# popd -n, pushd -N; cd's options.
KEPT_CWDS: list[tuple[str, list[tuple[str | None, str | None]]]] = [
    ("{ cd a; b; }; c", [("cd", "/w"), ("b", "/w/a"), ("c", "/w/a")]),
    ("a | cd /w; c", [("a", "/w"), ("cd", "/w"), ("c", "/w")]),
    ("popd -n; b", [("popd", "/w"), ("b", "/w")]),
    ("pushd a; pushd -1; b", [("pushd", "/w"), ("pushd", "/w/a"), ("b", None)]),
    ("cd -P -- a; c", [("cd", "/w"), ("c", "/w/a")]),
]


@pytest.mark.parametrize(("line", "expected"), CWDS + KEPT_CWDS)
def test_the_parse_keeps_each_scope_s_directory(
    line: str, expected: list[tuple[str | None, str | None]]
) -> None:
    got = [(c.name, c.cwd) for c in parse(line, cwd="/w", home="/h", probe=False).cmds]
    assert got == expected


def test_cd_sets_oldpwd_for_later_words() -> None:
    line = "cd /t; echo $OLDPWD; (cd /u; echo $OLDPWD); echo $OLDPWD"
    cmds = parse(line, cwd="/w", home="/h", probe=False)
    assert [c.argv for c in cmds.cmds if c.name == "echo"] == [
        ["echo", "/w"],
        ["echo", "/t"],
        ["echo", "/w"],
    ]


# A function body or a last pipeline stage may or may not change the shell's state: a value
# survives only where both ways agree. A subshell's changes never survive.
STATES: list[tuple[str, list[str | None], str | None, list[tuple[str, str]]]] = [
    ("f() { x=/b; }; cat $x", ["cat", None], "/w", []),
    ("x=/a; f() { x=/b; }; cat $x", ["cat", None], "/w", []),
    ("a | x=/b; cat $x", ["cat", None], "/w", []),
    ("(x=/b); cat $x", ["cat", None], "/w", []),
    ("echo $(x=/b); cat $x", ["cat", None], "/w", []),
    ("x=/a; f() { :; }; a | true; (x=/b); cat $x", ["cat", "/a"], "/w", []),
    # (kept: a body that may set CDPATH or declare -i still counts as setting it)
    ("f() { CDPATH=/x; }; cd foo; cat", ["cat"], None, [("env", "CDPATH=/x")]),
    ("(CDPATH=/x); cd foo; cat", ["cat"], "/w/foo", [("env", "CDPATH=/x")]),
    (
        "f() { declare -i n; }; n=$(id); cat",
        ["cat"],
        "/w",
        [("arithmetic", "n is an integer variable: its value is evaluated")],
    ),
    ("(declare -i n); n=$(id); cat", ["cat"], "/w", []),
]


@pytest.mark.parametrize(("line", "argv", "cwd", "issues"), STATES)
def test_a_scope_s_variables_survive_as_bash_keeps_them(
    line: str, argv: list[str | None], cwd: str | None, issues: list[tuple[str, str]]
) -> None:
    parsed = parse(line, cwd="/w", home="/h", probe=False)
    assert (parsed.cmds[-1].argv, parsed.cmds[-1].cwd) == (argv, cwd)
    assert parsed.issues == issues


def test_xargs_a_keeps_the_whole_file_name() -> None:
    cmds = parse("xargs -aa=b echo", cwd="/w", home="/h").cmds
    assert [c.redirects for c in cmds] == [[("<", "a=b")], [("<", "a=b")]]


# 6. and 7.: where bash's shell really is after a ``cd`` it runs through a builtin, or one that
# may fail or not run at all. ``missing`` does not exist in the workspace; ``src`` does.
MOVES: list[tuple[str, str, tuple[str, str]]] = [
    # 6. builtin, command and time run cd in the shell itself; eval runs its text there
    ("dev", "cd src; builtin cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; builtin -- cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; command cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; command -p -- cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; builtin command cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; time cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; time -p cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; builtin pushd ..; echo x > ../x", OUTSIDE),
    ("dev", 'cd src; eval "cd .."; echo x > ../x', OUTSIDE),
    ("dev", "cd src; eval cd ..; echo x > ../x", OUTSIDE),
    ("dev", "cd src; command eval 'cd ..'; echo x > ../x", OUTSIDE),
    ("dev", "cd src; cd ..; eval 'cd .'; cd -; echo x > ../x", OUTSIDE),  # eval set OLDPWD
    ("dev", "cd src; source .venv/bin/activate; echo x > ../x", OUTSIDE),  # 9.: it cds up
    ("dev", "cd src; . .venv/bin/activate && echo x > ../x", OUTSIDE),
    # tree-sitter reads ``a && b 2>&1 | c`` as ``(a && b 2>&1) | c``; bash runs a in the shell
    ("dev", "cd src; cd .. && true 2>&1 | cat; echo x > ../x", OUTSIDE),
    ("dev", "cd src; cd .. && true 2>&1 | cat 2>&1 | cat; echo x > ../x", OUTSIDE),
    # ... and drops the ``-`` of ``cd - 2>/dev/null``, which is not ``cd`` (home)
    ("dev", "cd src; cd ..; cd - 2>/dev/null; echo x > ../x", ALLOW),
    # 7. a cd to a directory that does not exist fails: the shell stays where it was
    ("dev", "cd missing; echo x > ../x", DYNAMIC),
    ("box", "cd missing; echo x > ../x", DYNAMIC),
    ("dev", "cd src/app.py; echo x > ../x", DYNAMIC),  # not a directory
    ("dev", "cd missing 2>/dev/null; echo x > ../x", DYNAMIC),
    ("dev", "cd missing || echo x > ../x", OUTSIDE),  # runs only where cd failed
    ("dev", "cd missing || true; echo x > ../x", DYNAMIC),
    ("dev", "! cd missing && echo x > ../x", OUTSIDE),
    ("dev", "cd missing && true; echo x > ../x", DYNAMIC),
    ("dev", "builtin cd missing; echo x > ../x", DYNAMIC),
    ("dev", "eval 'cd missing'; echo x > ../x", DYNAMIC),
    ("dev", "cd src < missing; echo x > ../x", DYNAMIC),  # a failed redirect skips the cd
    # ... or one that may not run at all
    ("dev", "false && cd src; echo x > ../x", DYNAMIC),
    ("dev", "test -d src || cd src; echo x > ../x", DYNAMIC),
    ("dev", "true || cd src; echo x > ../x", DYNAMIC),
    ("dev", "if false; then cd src; fi; echo x > ../x", DYNAMIC),
    ("dev", "if test -d src; then true; else cd src; fi; echo x > ../x", DYNAMIC),
    ("dev", "if cd missing; then true; fi; echo x > ../x", DYNAMIC),
    ("dev", "while false; do cd src; done; echo x > ../x", DYNAMIC),
    ("dev", "until true; do cd src; done; echo x > ../x", DYNAMIC),
    ("dev", "for f in $(false); do cd src; done; echo x > ../x", DYNAMIC),
    ("dev", "case $X in a) cd src;; esac; echo x > ../x", DYNAMIC),
    ("dev", "case a in a) cd src;; b) echo x > ../x;; esac", OUTSIDE),  # each branch from the start
    # a loop body runs more than once: its second round starts where the first ended
    ("dev", "cd src; for d in 1 2; do cd ..; echo x > x; done", DYNAMIC),
    ("dev", "cd src; while true; do echo x > ../x; cd ..; done", DYNAMIC),
]


@pytest.mark.parametrize(("mode", "line", "expected"), MOVES)
def test_a_cd_moves_later_commands_only_where_bash_moves(
    mode: str, line: str, expected: tuple[str, str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _check(mode, line, ws, monkeypatch) == expected


# What already held and must keep holding: a cd that must have succeeded for a command to run
# still moves it (``cd src && pytest`` is judged in src), and what runs cd outside the shell
# (env, nohup, bash -c, /usr/bin/time) moves nothing.
STAYS: list[tuple[str, str, tuple[str, str]]] = [
    ("dev", "cd src; echo x > ../x", ALLOW),
    ("dev", "cd src > /dev/null 2>&1; echo x > ../x", ALLOW),
    ("dev", "cd src 2>/dev/null && echo x > ../x", ALLOW),
    ("dev", "cd missing && echo x > ../x", ALLOW),  # runs in missing, or not at all
    ("dev", "mkdir -p missing && cd missing && echo x > ../x", ALLOW),
    ("dev", "cd src && cd .. && echo x > ../x", OUTSIDE),
    ("dev", "if cd src; then echo x > ../x; fi", ALLOW),
    ("dev", "if cd src; then true; fi; echo x > ../x", ALLOW),  # src exists: cd moved the shell
    ("dev", "for f in a b; do cd src; echo x > ../x; cd ..; done", ALLOW),
    ("dev", "cd src; for f in a; do cd ..; cd src; done; echo x > ../x", ALLOW),
    ("dev", "cd src; env cd ..; echo x > ../x", ALLOW),  # env runs a program named cd
    ("dev", "cd src; nohup cd ..; echo x > ../x", ALLOW),
    ("dev", "cd src; command -v cd; echo x > ../x", ALLOW),
    ("dev", "cd src; bash -c 'cd ..'; echo x > ../x", ALLOW),
    ("dev", "cd src; command time cd ..; echo x > ../x", ALLOW),  # /usr/bin/time, not bash's
    ("dev", "cd src; source .venv/bin/activate", ALLOW),
]


@pytest.mark.parametrize(("mode", "line", "expected"), STAYS)
def test_a_cd_that_must_have_run_still_moves(
    mode: str, line: str, expected: tuple[str, str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _check(mode, line, ws, monkeypatch) == expected


# The parse, every directory taken to exist (``probe=False``): which branch a command runs on.
BRANCH_CWDS: list[tuple[str, list[tuple[str | None, str | None]]]] = [
    ("builtin cd a; b", [("builtin", "/w"), ("cd", "/w"), ("b", "/w/a")]),
    ("command -p cd a; b", [("command", "/w"), ("cd", "/w"), ("b", "/w/a")]),
    ("time cd a; b", [("time", "/w"), ("cd", "/w"), ("b", "/w/a")]),
    ("time time cd a; b", [("time", "/w"), ("time", "/w"), ("cd", "/w"), ("b", "/w/a")]),
    (
        "command builtin pushd a; b",
        [("command", "/w"), ("builtin", "/w"), ("pushd", "/w"), ("b", "/w/a")],
    ),
    ("eval 'cd a'; b", [("eval", "/w"), ("cd", "/w"), ("b", "/w/a")]),
    ("eval 'x=/t'; cd $x; b", [("eval", "/w"), ("cd", "/w"), ("b", "/t")]),
    ("eval $c; b", [("eval", "/w"), ("b", None)]),
    ("source f; b", [("source", "/w"), ("b", None)]),
    ("$c a; b", [(None, "/w"), ("b", None)]),
    ("cd a && b 2>&1 | c; d", [("cd", "/w"), ("b", "/w/a"), ("c", "/w/a"), ("d", "/w/a")]),
    (
        "cd a && b 2>&1 | c 2>&1 | d; e",
        [("cd", "/w"), ("b", "/w/a"), ("c", "/w/a"), ("d", "/w/a"), ("e", "/w/a")],
    ),
    ("a || cd b > f; c", [("a", "/w"), ("cd", "/w"), ("c", None)]),
    ("cd - 2>/dev/null; b", [("cd", "/w"), ("b", None)]),
    ("false && cd a; b", [("false", "/w"), ("cd", "/w"), ("b", None)]),
    ("cd a || b; c", [("cd", "/w"), ("b", "/w"), ("c", "/w/a")]),
    ("! cd a && b; c", [("cd", "/w"), ("b", "/w"), ("c", "/w/a")]),
    ("cd a < f; b", [("cd", "/w"), ("b", None)]),
    ("if a; then cd b; fi; c", [("a", "/w"), ("cd", "/w"), ("c", None)]),
    (
        "if a; then cd b; else cd /w/b; fi; c",
        [("a", "/w"), ("cd", "/w"), ("cd", "/w"), ("c", "/w/b")],
    ),
    (
        "if a; then b; elif cd c; then d; fi; e",
        [("a", "/w"), ("b", "/w"), ("cd", "/w"), ("d", "/w/c"), ("e", None)],
    ),
    ("while cd a; do b; done; c", [("cd", None), ("b", None), ("c", None)]),
    ("until a; do cd /t; done; b", [("a", None), ("cd", None), ("b", None)]),
    ("case x in a) cd a;; b) c;; esac; d", [("cd", "/w"), ("c", "/w"), ("d", None)]),
    ("case x in a) cd a;& b) c;; esac; d", [("cd", "/w"), ("c", None), ("d", None)]),
]


# Already so before the fix, and kept: a cd that must have run for a command to run moves it;
# a loop that ends where it began leaves the directory known; after an assignment ``time`` is
# /usr/bin/time, which runs no builtin.
KEPT_BRANCH_CWDS: list[tuple[str, list[tuple[str | None, str | None]]]] = [
    ("x=1 time cd a; b", [("time", "/w"), ("cd", "/w"), ("b", "/w")]),
    ("command -v cd; b", [("command", "/w"), ("b", "/w")]),
    ("cd a && b; c", [("cd", "/w"), ("b", "/w/a"), ("c", "/w/a")]),
    ("for i in 1 2; do b; cd /w; done; c", [("b", "/w"), ("cd", "/w"), ("c", "/w")]),
]


@pytest.mark.parametrize(("line", "expected"), BRANCH_CWDS + KEPT_BRANCH_CWDS)
def test_the_parse_follows_a_cd_only_on_the_branches_it_runs(
    line: str, expected: list[tuple[str | None, str | None]]
) -> None:
    got = [(c.name, c.cwd) for c in parse(line, cwd="/w", home="/h", probe=False).cmds]
    assert got == expected


# The parse against a real directory: ``a`` exists, ``m`` does not, ``f`` is a file.
PROBED_CWDS: list[tuple[str, list[tuple[str | None, str | None]]]] = [
    ("cd m; b", [("cd", "."), ("b", None)]),
    ("cd f; b", [("cd", "."), ("b", None)]),
    ("cd m && b; c", [("cd", "."), ("b", "m"), ("c", None)]),
    ("cd m || b; c", [("cd", "."), ("b", "."), ("c", None)]),
    ("cd m || exit; b", [("cd", "."), ("exit", "."), ("b", "m")]),
    ("! cd m && b", [("cd", "."), ("b", ".")]),
    ("builtin cd m; b", [("builtin", "."), ("cd", "."), ("b", None)]),
    ("eval 'cd m'; b", [("eval", "."), ("cd", "."), ("b", None)]),
    ("eval 'cd a'; b", [("eval", "."), ("cd", "."), ("b", "a")]),
    ("if cd m; then b; fi; c", [("cd", "."), ("b", "m"), ("c", None)]),
]


# Kept: a cd to a directory that exists moves the shell; one that a command creates first
# moves what runs only if it succeeded.
KEPT_PROBED_CWDS: list[tuple[str, list[tuple[str | None, str | None]]]] = [
    ("cd a; b", [("cd", "."), ("b", "a")]),
    ("mkdir m && cd m && b", [("mkdir", "."), ("cd", "."), ("b", "m")]),
    ("if cd a; then b; fi; c", [("cd", "."), ("b", "a"), ("c", "a")]),
]


@pytest.mark.parametrize(("line", "expected"), PROBED_CWDS + KEPT_PROBED_CWDS)
def test_the_parse_takes_a_cd_to_a_missing_directory_as_failing(
    line: str, expected: list[tuple[str | None, str | None]], tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "f").write_text("")
    got = [(c.name, c.cwd) for c in parse(line, cwd=str(tmp_path), home="/h").cmds]
    rel = [(n, None if d is None else os.path.relpath(d, tmp_path)) for n, d in got]
    assert rel == expected


# -- the hook path, by effect ---------------------------------------------------------------


def _run_as_client(reply: dict[str, Any], command: str, ws: Path) -> str:
    """What Claude Code would do: run an allowed command (as rewritten) and show its output."""
    if reply.get("permissionDecision") != "allow":
        return str(reply.get("permissionDecisionReason", ""))
    line = reply.get("updatedInput", {}).get("command", command)
    proc = subprocess.run(
        ["bash", "-c", line], cwd=ws, capture_output=True, timeout=120, check=False, text=True
    )
    return proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "line",
    [
        "(cd src); echo x > ../marker",
        "(cd src) && echo x > ../marker",
        "cd src | true; echo x > ../marker",
        "cd src & echo x > ../marker",
    ],
)
def test_the_hook_keeps_a_subshell_s_cd_from_moving_a_write_out(fresh_ws: Path, line: str) -> None:
    marker = fresh_ws.parent / "marker"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert not marker.exists(), seen
    assert "path.outside_workspace" in seen, seen


def test_the_hook_keeps_a_subshell_s_cd_from_clobbering_a_file_outside(fresh_ws: Path) -> None:
    marker = fresh_ws.parent / "marker"
    marker.write_text("keep\n")
    line = "(cd src); echo gone > ../marker"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert marker.read_text() == "keep\n", seen


@pytest.mark.parametrize("line", ["pushd; cat {ws}/.en*", "pushd; cat {ws}/.e?v"])
def test_the_hook_expands_an_absolute_glob_where_the_directory_is_unknown(
    fresh_ws: Path, line: str
) -> None:
    line = line.replace("{ws}", str(fresh_ws))
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert SECRET not in seen, seen
    assert "risk.secret_read" in seen, seen


@pytest.mark.parametrize("line", ["{ws}/run.sh", "cd src; {ws}/run.sh"])
def test_the_hook_reads_a_script_run_by_its_absolute_path(fresh_ws: Path, line: str) -> None:
    # keel.toml allows ``{ws}/run.sh`` by name; the secret it prints is still asked about
    line = line.replace("{ws}", str(fresh_ws))
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert SECRET not in seen, seen
    assert "risk.secret_in_script" in seen, seen


def test_the_stand_in_client_runs_what_the_hook_allows(fresh_ws: Path) -> None:
    """The effect checks above can fail: an allowed write does land, an allowed cat does print."""
    line = "{ cd src; }; echo x > ../made && cat ../src/app.py"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert (fresh_ws / "made").read_text() == "x\n", seen
    assert "x = 1" in seen, seen


@pytest.mark.parametrize(
    "line",
    [
        "cd src; builtin cd ..; echo x > ../marker",
        "cd src; eval 'cd ..'; echo x > ../marker",
        "cd src; source .venv/bin/activate; echo x > ../marker",
        "cd missing; echo x > ../marker",
        "false && cd src; echo x > ../marker",
        "if false; then cd src; fi; echo x > ../marker",
        "cd src; for d in 1 2; do cd ..; echo x > marker; done",
        "cd src; cd .. && true 2>&1 | cat; echo x > ../marker",
    ],
)
def test_the_hook_keeps_a_cd_that_did_not_happen_from_moving_a_write_out(
    fresh_ws: Path, line: str
) -> None:
    marker = fresh_ws.parent / "marker"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert not marker.exists(), seen
    assert "path.outside_workspace" in seen or "path.dynamic" in seen, seen


def test_the_hook_still_runs_a_line_that_cds_and_checks(fresh_ws: Path) -> None:
    """``cd DIR && cmd`` stays allowed, and the write it makes does land where it was judged."""
    line = "mkdir -p made && cd made && echo x > ../made.txt && cd missing || true"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert (fresh_ws / "made.txt").read_text() == "x\n", seen


# 9. ``source FILE``: FILE's text is walked when keel can know it is what bash will read.
SOURCED: list[tuple[str, str, tuple[str, str]]] = [
    # a real venv activate has no cd: the line runs where it began, as before 6.
    ("dev", "source .venv/bin/activate && pytest tests/", ALLOW),
    ("dev", ". .venv/bin/activate && pytest tests/", ALLOW),
    ("dev", "source .venv/bin/activate > /dev/null 2>&1 && pytest tests/", ALLOW),
    ("dev", "cd src && source ../.venv/bin/activate; echo x > app.txt", ("ask", "default.ask")),
    ("dev", "source .venv/bin/activate; echo x > ../x", OUTSIDE),  # still in the workspace root
    # a sourced file that moves the shell moves what follows
    ("dev", "source ./up.sh; echo x > x", OUTSIDE),
    ("dev", "source ./up.sh && echo x > ws/x", ("ask", "default.ask")),  # judged from above
    ("dev", "cd src; . ./../up.sh; echo x > ws/x", ("ask", "default.ask")),
    # outside the workspace, missing, a bare name ($PATH first), too deep: unknown
    ("box", "source ../outside.sh; echo x > x", DYNAMIC),
    ("box", "source {ws}/../outside.sh; echo x > x", DYNAMIC),
    ("box", "source ./missing.sh; echo x > x", DYNAMIC),
    ("box", "source up.sh; echo x > x", DYNAMIC),
    ("dev", "source ./chain/2.sh; echo x > x", OUTSIDE),  # four files deep: followed
    ("box", "source ./chain/1.sh; echo x > x", DYNAMIC),  # five: the fifth is not read
    # something earlier on the line (or the source's own redirect) may have written the file
    ("dev", "echo 'cd ..' > s.sh; source s.sh; echo x > x", DYNAMIC),
    ("dev", "echo 'cd ..' > stay.sh; source ./stay.sh; echo x > x", DYNAMIC),
    ("dev", "cp up.sh stay.sh; source ./stay.sh; echo x > x", DYNAMIC),
    ("dev", "true $(cp up.sh stay.sh); source ./stay.sh; echo x > x", DYNAMIC),
    ("dev", "source ./stay.sh $(cp up.sh stay.sh); echo x > x", DYNAMIC),
    ("dev", "source ./stay.sh > stay.sh; echo x > x", DYNAMIC),
    ("dev", "eval 'source ./stay.sh' > stay.sh; echo x > x", DYNAMIC),
    ("dev", "cp up.sh stay.sh; eval 'source ./stay.sh'; echo x > x", DYNAMIC),
    ("dev", "cp up.sh stay.sh; bash -c 'source ./stay.sh; echo x > x'", DYNAMIC),
    ("dev", "source ./stay.sh; source ./stay.sh; echo x > x", DYNAMIC),  # the first may write
    ("dev", "for i in 1; do source ./stay.sh; done; echo x > x", DYNAMIC),  # each round may
    # ... while an untouched file is still followed, through eval and bash -c too
    ("dev", "source ./stay.sh; echo x > ../x", OUTSIDE),  # known: still in the workspace root
    ("dev", "echo hi; source ./stay.sh; echo x > ../x", OUTSIDE),
    ("dev", "eval 'source ./up.sh'; echo x > x", OUTSIDE),
    ("dev", "bash -c 'source ./up.sh; echo x > x'", OUTSIDE),
]


@pytest.mark.parametrize(("mode", "line", "expected"), SOURCED)
def test_a_sourced_workspace_file_is_walked(
    mode: str, line: str, expected: tuple[str, str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _check(mode, line, ws, monkeypatch) == expected


# What a sourced file may do that keel does not follow: the directory after it is unknown.
SPOILT_SOURCES = [
    "alias ls='cd ..'\nls\n",  # an alias expands on the file's later lines
    "trap 'cd ..' DEBUG\n",  # runs before every later command
    "[ -n x ] && return\ncd src\n",  # may end the file before its cd
    'cd "$(dirname "${BASH_SOURCE[0]}")"\n',  # a directory only known at run time
    "HOME=/etc\n",  # a later ``cd`` or ``~`` goes there
    "cd src )\n",  # unparseable
]


@pytest.mark.parametrize("text", SPOILT_SOURCES)
def test_a_sourced_file_keel_cannot_follow_leaves_the_directory_unknown(
    text: str, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "s.sh").write_text(text)
    for line in ("source ./s.sh; b", "cd src; cd ..; . ./s.sh; b"):
        cmds = parse(line, cwd=str(tmp_path), home="/h", root=str(tmp_path)).cmds
        assert cmds[-1].cwd is None, (text, line)


def test_a_sourced_file_sets_the_directory_and_variables_it_leaves(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "s.sh").write_text("x=/t\nz=$(id)\ncd src\n")
    root = str(tmp_path)
    cmds = parse("y=/u; source ./s.sh; cat $x $y $z", cwd=root, home="/h", root=root).cmds
    assert (cmds[-1].argv, cmds[-1].cwd) == (["cat", "/t", "/u", None], str(tmp_path / "src"))
    # without a workspace, or bigger than 64 KiB, or not UTF-8, it is not read
    assert parse("source ./s.sh; b", cwd=root, home="/h").cmds[-1].cwd is None
    (tmp_path / "big.sh").write_text("cd src\n" + "#" * 65536 + "\n")
    (tmp_path / "bin.sh").write_bytes(b"cd src\n\xff\n")
    for name in ("big.sh", "bin.sh"):
        assert parse(f". ./{name}; b", cwd=root, home="/h", root=root).cmds[-1].cwd is None


def test_the_hook_follows_a_sourced_cd_out_of_the_workspace(fresh_ws: Path) -> None:
    marker = fresh_ws.parent / "marker"
    for line in ("source ./up.sh; echo x > marker", "cd src; . ./../up.sh && echo x > marker"):
        seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
        assert not marker.exists(), seen
        assert "path.outside_workspace" in seen or "default.ask" in seen, seen
    # the stand-in client does run an allowed line after a real activate, where it was judged
    line = "source .venv/bin/activate && echo x > made.txt"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert (fresh_ws / "made.txt").read_text() == "x\n", seen


def test_the_hook_does_not_trust_a_file_the_line_rewrites_first(fresh_ws: Path) -> None:
    marker = fresh_ws.parent / "marker"
    line = "cp up.sh stay.sh; source ./stay.sh; echo x > marker"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert not marker.exists(), seen
    assert "path.dynamic" in seen, seen


# -- eval's text is walked whole, even when it is one command --------------------------------


def test_a_declaration_inside_eval_is_kept(tmp_path: Path) -> None:
    """``eval 'export CDPATH=/x'`` sets CDPATH for the line, like ``export`` itself."""
    root = str(tmp_path)
    (tmp_path / "d").mkdir()
    line = "eval 'export CDPATH=/x'; cd d; ls"
    got = parse(line, cwd=root, home="/h", root=root)
    assert got.cmds[-1].cwd is None  # CDPATH may take `cd d` anywhere
    assert (
        parse("eval 'declare -i n'; n=1+1", cwd=root, home="/h").issues
        == parse("declare -i n; n=1+1", cwd=root, home="/h").issues
    )


def test_the_hook_keeps_an_eval_cdpath_from_moving_a_write_out(fresh_ws: Path) -> None:
    outside = fresh_ws.parent / "elsewhere"
    (outside / "d").mkdir(parents=True, exist_ok=True)
    (fresh_ws / "d").mkdir(exist_ok=True)
    line = f"eval 'export CDPATH={outside}'; cd d; echo x > marker"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert not (outside / "d" / "marker").exists(), seen


@pytest.mark.parametrize("wrapper", ["nice", "timeout 5", "env", "nohup", "bash -c", "su -c"])
def test_the_hook_judges_a_workspace_script_named_like_a_wrapper(
    fresh_ws: Path, wrapper: str
) -> None:
    """``./nice ls`` runs the agent's own ``./nice``, not the system's: it is not just ``ls``."""
    marker = fresh_ws.parent / "marker"
    name, _, rest = wrapper.partition(" ")
    script = fresh_ws / name
    script.write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    script.chmod(0o755)
    line = f"./{name} {rest} ls".replace("  ", " ") if rest != "-c" else f"./{name} -c ls"
    seen = _run_as_client(hook(fresh_ws, "Bash", {"command": line}), line, fresh_ws)
    assert not marker.exists(), seen
