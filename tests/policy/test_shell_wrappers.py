"""What a wrapper runs (``sudo``, ``env``, ``xargs``, ``find -exec``, ``bash -c``, ``eval``...).

The command each wrapper runs is judged too, with the wrapper's context: its directory, home,
assignments, input and the depth of nested scripts. A wrapper named by a path outside the
system's bin directories is a program of its own and is judged as one.
"""

from __future__ import annotations

import shlex

import pytest
from shell_facts import CWD, HOME, Case, facts, where

from keel.policy import Policy
from keel.policy._shell import parse

# Wrappers: the command each one runs is judged too, with the wrapper's context.
WRAPPERS: list[Case] = [
    (
        "sudo -u root -E a b",
        ["sudo -u root -E a b | wrapper | fails", "a b | via=sudo | fails"],
        [],
    ),
    ("sudo --user=root a", ["sudo --user=root a | wrapper | fails", "a | via=sudo | fails"], []),
    ("/usr/bin/sudo -- a", ["/usr/bin/sudo -- a | wrapper | fails", "a | via=sudo | fails"], []),
    ("doas -u x a", ["doas -u x a | wrapper | fails", "a | via=doas | fails"], []),
    ("sudo", ["sudo | fails"], []),
    ("sudo -u", ["sudo -u | fails"], []),
    (
        "timeout -s KILL 5 a",
        ["timeout -s KILL 5 a | wrapper | fails", "a | via=timeout | fails"],
        [],
    ),
    (
        "timeout --kill-after=1 5 a",
        ["timeout --kill-after=1 5 a | wrapper | fails", "a | via=timeout | fails"],
        [],
    ),
    ("timeout 5", ["timeout 5 | fails"], []),
    ("nice -n 5 a", ["nice -n 5 a | wrapper | fails", "a | via=nice | fails"], []),
    ("nice a", ["nice a | wrapper | fails", "a | via=nice | fails"], []),
    ("ionice -c 3 a", ["ionice -c 3 a | wrapper | fails", "a | via=ionice | fails"], []),
    ("chrt -f 10 a", ["chrt -f 10 a | wrapper | fails", "a | via=chrt | fails"], []),
    ("taskset 0x1 a", ["taskset 0x1 a | wrapper | fails", "a | via=taskset | fails"], []),
    ("taskset -p 0x1 a", ["taskset -p 0x1 a | fails"], []),
    ("stdbuf -oL a", ["stdbuf -oL a | wrapper | fails", "a | via=stdbuf | fails"], []),
    ("command a b", ["command a b | wrapper | fails", "a b | via=command | fails"], []),
    ("command -v a", ["command -v a | fails"], []),
    ("command -V a", ["command -V a | fails"], []),
    ("command -p a", ["command -p a | wrapper | fails", "a | via=command | fails"], []),
    ("xargs a", ["xargs a | wrapper | fails", "a | via=xargs | tail=? | fails"], []),
    ("xargs", ["xargs | wrapper | fails", "echo | via=xargs | tail=? | fails"], []),
    (
        "xargs -n1 -P 2 a",
        ["xargs -n1 -P 2 a | wrapper | fails", "a | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -I{} cp {} dst",
        ["xargs -I{} cp {} dst | wrapper | fails", "cp ? dst | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -I {} cp x{}y z",
        ["xargs -I {} cp x{}y z | wrapper | fails", "cp ? z | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -i cp {} z",
        ["xargs -i cp {} z | wrapper | fails", "cp ? z | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs --replace=R cp R z",
        ["xargs --replace=R cp R z | wrapper | fails", "cp ? z | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -IR cp R z",
        ["xargs -IR cp R z | wrapper | fails", "cp ? z | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -a list a",
        [
            "xargs -a list a | redir=<list | wrapper | fails",
            "a | redir=<list | via=xargs | tail=? | fails",
        ],
        [],
    ),
    (
        "xargs --arg-file=l a",
        [
            "xargs --arg-file=l a | redir=<l | wrapper | fails",
            "a | redir=<l | via=xargs | tail=? | fails",
        ],
        [],
    ),
    (
        "xargs -al a",
        ["xargs -al a | redir=<l | wrapper | fails", "a | redir=<l | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs --arg-file l a",
        [
            "xargs --arg-file l a | redir=<l | wrapper | fails",
            "a | redir=<l | via=xargs | tail=? | fails",
        ],
        [],
    ),
    ("xargs -- -a", ["xargs -- -a | wrapper | fails", "-a | via=xargs | tail=? | fails"], []),
    ("xargs - a", ["xargs - a | wrapper | fails", "- a | via=xargs | tail=? | fails"], []),
    ("xargs -0 a", ["xargs -0 a | wrapper | fails", "a | via=xargs | tail=? | fails"], []),
    ("xargs -d , a", ["xargs -d , a | wrapper | fails", "a | via=xargs | tail=? | fails"], []),
    (
        "xargs --max-args 1 a",
        ["xargs --max-args 1 a | wrapper | fails", "a | via=xargs | tail=? | fails"],
        [],
    ),
    ("eval a b", ["eval a b | wrapper | fails", "a b | via=eval | fails"], []),
    ('eval "a; b"', ["eval 'a; b' | wrapper | fails", "a | via=eval", "b | via=eval | fails"], []),
    ("eval $x", ["eval ? | fails"], [("dynamic_command", "eval of a dynamic string")]),
    ("watch -n 1 a b", ["watch -n 1 a b | wrapper", "a b | via=watch"], []),
    (
        "watch $x",
        ["watch ? | fails"],
        [("dynamic_command", "watch runs a command only known at run time")],
    ),
    ("su -c 'a b' root", ["su -c 'a b' root | wrapper | fails", "a b | via=su | fails"], []),
    ("su root", ["su root | fails"], []),
    (
        "su -c",
        ["su -c | wrapper | fails"],
        [("dynamic_command", "a shell runs a script only known at run time")],
    ),
    ("find . -exec a {} \\;", ["find . -exec a {} ; | fails", "a ? | via=find"], []),
    ("find . -execdir a x{}y +", ["find . -execdir a x{}y + | fails", "a ? | via=find"], []),
    ("find . -ok a ';'", ["find . -ok a ; | fails", "a | via=find"], []),
    (
        "find . -exec a {} \\; -exec b \\;",
        ["find . -exec a {} ; -exec b ; | fails", "a ? | via=find", "b | via=find"],
        [],
    ),
    ("find . -exec \\;", ["find . -exec ; | fails"], []),
    ("find . -name x", ["find . -name x | fails"], []),
    ("fd -x a", ["fd -x a | wrapper | fails", "a | via=fd"], []),
    ("fd --exec=a x", ["fd --exec=a x | wrapper | fails", "a x | via=fd"], []),
    ("fd -X a {} \\; b", ["fd -X a {} ; b | wrapper | fails", "a ? | via=fd"], []),
    ("fdfind --exec-batch a", ["fdfind --exec-batch a | wrapper | fails", "a | via=fdfind"], []),
    (
        "fd -x {}",
        ["fd -x {} | fails"],
        [("dynamic_command", "fd -x runs a program only known at run time")],
    ),
    ("fd -e py", ["fd -e py | fails"], []),
    ("fd $x -x a", ["fd ? -x a | wrapper | fails", "a | via=fd"], []),
    ("rg --pre a pat", ["rg --pre a pat | wrapper | fails", "a ? | via=rg"], []),
    ("rg --pre=b pat", ["rg --pre=b pat | wrapper | fails", "b ? | via=rg"], []),
    (
        "rg --pre",
        ["rg --pre | fails"],
        [("dynamic_command", "rg --pre runs a program only known at run time")],
    ),
    ("rg pat", ["rg pat | fails"], []),
    (
        "bash -c 'a; b'",
        ["bash -c 'a; b' | wrapper | fails", "a | via=bash", "b | via=bash | fails"],
        [],
    ),
    ("bash -lc a", ["bash -lc a | wrapper | fails", "a | via=bash | fails"], []),
    ("bash -xc 'a'", ["bash -xc a | wrapper | fails", "a | via=bash | fails"], []),
    ("bash --norc -c a", ["bash --norc -c a | wrapper | fails", "a | via=bash | fails"], []),
    (
        "bash -c",
        ["bash -c | wrapper | fails"],
        [("dynamic_command", "a shell runs a script only known at run time")],
    ),
    ("bash script.sh", ["bash script.sh | fails"], []),
    ("bash +x -c a", ["bash +x -c a | wrapper | fails", "a | via=bash | fails"], []),
    (
        "bash $x -c a",
        ["bash ? -c a | fails"],
        [("dynamic_command", "a shell option only known at run time")],
    ),
    ("sh -e", ["sh -e | fails"], []),
    ("bash -- -c a", ["bash -- -c a | wrapper | fails", "a | via=bash | fails"], []),
    ("zsh -c a", ["zsh -c a | wrapper | fails", "a | via=zsh | fails"], []),
    ("/bin/sh -c a", ["/bin/sh -c a | wrapper | fails", "a | via=/bin/sh | fails"], []),
    ("nohup a", ["nohup a | wrapper | fails", "a | via=nohup | fails"], []),
    ("setsid -w a", ["setsid -w a | wrapper | fails", "a | via=setsid | fails"], []),
    ("builtin a", ["builtin a | wrapper | fails", "a | via=builtin | fails"], []),
    ("time a", ["time a | wrapper | fails", "a | via=time | fails"], []),
    ("unbuffer a", ["unbuffer a | wrapper | fails", "a | via=unbuffer | fails"], []),
    ("env", ["env | fails"], []),
    ("env -i a", ["env -i a | wrapper | fails", "a | via=env | fails"], []),
    ("env A=1 B=2 a", ["env A=1 B=2 a | wrapper | fails", "a | set=A=1,B=2 | via=env | fails"], []),
    ("env -u X a", ["env -u X a | wrapper | fails", "a | via=env | fails"], []),
    ("env --unset X a", ["env --unset X a | wrapper | fails", "a | via=env | fails"], []),
    ("env -C /d a", ["env -C /d a | wrapper | fails", "a | cwd=/d | via=env | fails"], []),
    (
        "env --chdir /d a",
        ["env --chdir /d a | wrapper | fails", "a | cwd=/d | via=env | fails"],
        [],
    ),
    (
        "env --chdir=/d a",
        ["env --chdir=/d a | wrapper | fails", "a | cwd=/d | via=env | fails"],
        [],
    ),
    ("env -C/d a", ["env -C/d a | wrapper | fails", "a | cwd=/d | via=env | fails"], []),
    ("env -C", ["env -C | fails"], []),
    ("env -S 'a b' c", ["env -S 'a b' c | wrapper | fails", "a b c | via=env | fails"], []),
    (
        "env --split-string 'a -x'",
        ["env --split-string 'a -x' | wrapper | fails", "a -x | via=env | fails"],
        [],
    ),
    ("env -S $x", ["env -S ? | fails"], [("dynamic_command", "env -S with a dynamic string")]),
    ("env -- a", ["env -- a | wrapper | fails", "a | via=env | fails"], []),
    ("env A=1", ["env A=1 | fails"], []),
    (
        "env -C /d -u X A=1 a",
        ["env -C /d -u X A=1 a | wrapper | fails", "a | cwd=/d | set=A=1 | via=env | fails"],
        [],
    ),
    (
        "X=1 env Y=2 a",
        ["env Y=2 a | set=X=1 | wrapper | fails", "a | set=X=1,Y=2 | via=env | fails"],
        [],
    ),
    (
        "env sudo timeout 3 a",
        [
            "env sudo timeout 3 a | wrapper | fails",
            "sudo timeout 3 a | via=env | wrapper | fails",
            "timeout 3 a | via=env,sudo | wrapper | fails",
            "a | via=env,sudo,timeout | fails",
        ],
        [],
    ),
    (
        "env bash -c 'cd; a'",
        [
            "env bash -c 'cd; a' | wrapper | fails",
            "bash -c 'cd; a' | via=env | wrapper | fails",
            "cd | via=env,bash",
            "a | cwd=/h | via=env,bash | fails",
        ],
        [],
    ),
    (
        "xargs bash -c 'cd; a'",
        [
            "xargs bash -c 'cd; a' | wrapper | fails",
            "bash -c 'cd; a' | via=xargs | tail=? | wrapper | fails",
            "cd | via=xargs,bash",
            "a | cwd=/h | via=xargs,bash | fails",
        ],
        [],
    ),
    (
        "eval 'cd; a'",
        ["eval 'cd; a' | wrapper | fails", "cd | via=eval", "a | cwd=/h | via=eval | fails"],
        [],
    ),
    ("watch 'cd; a'", ["watch 'cd; a' | wrapper", "cd | via=watch", "a | cwd=/h | via=watch"], []),
    (
        "su -c 'cd; a'",
        ["su -c 'cd; a' | wrapper | fails", "cd | via=su", "a | cwd=/h | via=su | fails"],
        [],
    ),
    (
        "find . -exec bash -c 'cd; a' \\;",
        [
            "find . -exec bash -c 'cd; a' ; | fails",
            "bash -c 'cd; a' | via=find | wrapper",
            "cd | via=find,bash",
            "a | cwd=/h | via=find,bash",
        ],
        [],
    ),
    (
        "fd -x bash -c 'cd; a'",
        [
            "fd -x bash -c 'cd; a' | wrapper | fails",
            "bash -c 'cd; a' | via=fd | wrapper",
            "cd | via=fd,bash",
            "a | cwd=/h | via=fd,bash",
        ],
        [],
    ),
    (
        "bash -c 'cd; a'",
        ["bash -c 'cd; a' | wrapper | fails", "cd | via=bash", "a | cwd=/h | via=bash | fails"],
        [],
    ),
    (
        "sudo bash -c 'cd; a'",
        [
            "sudo bash -c 'cd; a' | wrapper | fails",
            "bash -c 'cd; a' | via=sudo | wrapper | fails",
            "cd | via=sudo,bash",
            "a | cwd=/h | via=sudo,bash | fails",
        ],
        [],
    ),
    (
        "bash <<EOF\ncd; a\nEOF",
        [
            "bash | in='cd; a\\n' | wrapper | fails",
            "cd | via=bash",
            "a | cwd=/h | via=bash | fails",
        ],
        [],
    ),
    ("env -C ~ a", ["env -C ~ a | wrapper | fails", "a | cwd=/h | via=env | fails"], []),
    (
        "a; bash -c 'cd; b'",
        [
            "a",
            "bash -c 'cd; b' | wrapper | fails",
            "cd | via=bash",
            "b | cwd=/h | via=bash | fails",
        ],
        [],
    ),
    ("command", ["command | wrapper | fails"], []),
    ("command -v", ["command -v | fails"], []),
    ("command -p", ["command -p | wrapper | fails"], []),
    ("unbuffer -p a", ["unbuffer -p a | wrapper | fails", "a | via=unbuffer | fails"], []),
    ("watch --interval 1 a", ["watch --interval 1 a | wrapper", "a | via=watch"], []),
    ("watch -q 3 a", ["watch -q 3 a | wrapper", "a | via=watch"], []),
    ("env A=b=c a", ["env A=b=c a | wrapper | fails", "a | set=A=b=c | via=env | fails"], []),
    ("env -c /d a", ["env -c /d a | wrapper | fails", "/d a | via=env | fails"], []),
    (
        "env --chdir=/d=e a",
        ["env --chdir=/d=e a | wrapper | fails", "a | cwd=/d=e | via=env | fails"],
        [],
    ),
    ("env -S", ["env -S | fails"], []),
    (
        "sudo env A=1 a",
        [
            "sudo env A=1 a | wrapper | fails",
            "env A=1 a | via=sudo | wrapper | fails",
            "a | set=A=1 | via=sudo,env | fails",
        ],
        [],
    ),
    ("find . -okdir a \\;", ["find . -okdir a ; | fails", "a | via=find"], []),
    ("find . -exec a", ["find . -exec a | fails", "a | via=find"], []),
    ("/usr/bin/fd -x a", ["/usr/bin/fd -x a | wrapper | fails", "a | via=fd"], []),
    ("/usr/bin/rg --pre a", ["/usr/bin/rg --pre a | wrapper | fails", "a ? | via=rg"], []),
    ("rg --pre a", ["rg --pre a | wrapper | fails", "a ? | via=rg"], []),
    ("fd -e py -x a", ["fd -e py -x a | wrapper | fails", "a | via=fd"], []),
    (
        "a | bash -c 'b | c'",
        [
            "a",
            "bash -c 'b | c' | from=a | wrapper | fails",
            "b | from=a | via=bash",
            "c | from=b | via=bash | fails",
        ],
        [],
    ),
    ("bash -ce 'a'", ["bash -ce a | wrapper | fails", "a | via=bash | fails"], []),
    ("nice - a", ["nice - a | wrapper | fails", "- a | via=nice | fails"], []),
    ("nice -- -x a", ["nice -- -x a | wrapper | fails", "-x a | via=nice | fails"], []),
    (
        "xargs -a",
        ["xargs -a | redir=<? | wrapper | fails", "echo | redir=<? | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -a f",
        ["xargs -a f | redir=<f | wrapper | fails", "echo | redir=<f | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -I R cp R z",
        ["xargs -I R cp R z | wrapper | fails", "cp ? z | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs -a list cp list x",
        [
            "xargs -a list cp list x | redir=<list | wrapper | fails",
            "cp list x | redir=<list | via=xargs | tail=? | fails",
        ],
        [],
    ),
    (
        "xargs -I R -n 1 cp R z",
        ["xargs -I R -n 1 cp R z | wrapper | fails", "cp ? z | via=xargs | tail=? | fails"],
        [],
    ),
    (
        "xargs --replace=a=b cp a=b a b",
        [
            "xargs --replace=a=b cp a=b a b | wrapper | fails",
            "cp ? a b | via=xargs | tail=? | fails",
        ],
        [],
    ),
    # find's terminator may be written quoted; what follows it is find's own again
    (
        "find . -exec rm {} '\\;' -name x",
        ["find . -exec rm {} \\; -name x | fails", "rm ? | via=find"],
        [],
    ),
    # xargs reads the whole file name after --arg-file=, "=" and all
    (
        "xargs --arg-file=k=v.txt cat",
        [
            "xargs --arg-file=k=v.txt cat | redir=<k=v.txt | wrapper | fails",
            "cat | redir=<k=v.txt | via=xargs | tail=? | fails",
        ],
        [],
    ),
    (
        "xargs --replace rm {}",
        ["xargs --replace rm {} | wrapper | fails", "rm ? | via=xargs | tail=? | fails"],
        [],
    ),
]


@pytest.mark.parametrize(("line", "cmds", "issues"), WRAPPERS)
def test_wrappers(line: str, cmds: list[str], issues: list[tuple[str, str]]) -> None:
    assert facts(line) == (cmds, issues)


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
    assert [argv for argv, _ in where(line)][-1] == inner


# A wrapper run by a path outside the system's bin directories (``./nice``, which the agent
# may have written) is a program of its own: it is not marked a wrapper, so the engine
# judges it too, not only what it runs.
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
    ws = tmp_path_factory.mktemp("wrappers") / "ws"
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


def test_nesting_deeper_than_six_scripts_is_unparseable() -> None:
    deep = ("unparseable", "commands nested too deeply")
    six, seven = facts("eval " * 6 + "a *"), facts("eval " * 7 + "a *")
    assert six[1] == []
    assert six[0][-1] == "a * | via=eval,eval,eval,eval,eval,eval | fails"
    assert seven[1] == [deep]
    assert seven[0][-1] == "eval a * | via=eval,eval,eval,eval,eval,eval | wrapper | fails"


@pytest.mark.parametrize(
    ("levels", "where", "issues"),
    [(6, "/tmp", []), (7, None, [("unparseable", "commands nested too deeply")])],
)
def test_each_eval_is_one_level_of_nesting(
    levels: int, where: str | None, issues: list[tuple[str, str]]
) -> None:
    # ``eval 'eval ...; :'; :``: each eval parses its text one level deeper (MAX_DEPTH is 6)
    text = "cd /tmp; :"
    for _ in range(levels):
        text = f"eval {shlex.quote(text)}; :"
    parsed = parse(text + "; ls", cwd=CWD, home=HOME, probe=False)
    assert (parsed.cmds[-1].argv, parsed.cmds[-1].cwd, parsed.issues) == (["ls"], where, issues)


def test_env_assignments_split_at_the_first_equals_sign() -> None:
    cmds = parse("env A=b=c B= a", cwd=CWD, home=HOME).cmds
    assert cmds[-1].assigns == [("A", "b=c"), ("B", "")]


def test_env_without_a_directory_option_keeps_the_directory_as_given() -> None:
    # ``-c`` is no option of env: the command runs in the caller's directory, unchanged
    cmds = parse("env -c x ls", cwd="/w/", home=HOME).cmds
    assert [(c.argv, c.cwd) for c in cmds] == [
        (["env", "-c", "x", "ls"], "/w/"),
        (["x", "ls"], "/w/"),
    ]
