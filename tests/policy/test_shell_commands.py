"""Which simple commands a line runs, where, and with what: what ``keel.policy._shell`` sees.

Lists, pipelines, substitutions, ``cd``, redirects, here-docs and here-strings; whose failure is
the line's. The policy judges these facts; a parse that drifts on any of them changes a decision
or the reason an agent reads. (``shell_facts.fact`` says how a command is shown.)
"""

from __future__ import annotations

import pytest
from shell_facts import CWD, HOME, Case, facts

from keel.policy._shell import parse

# Lists, pipelines, substitutions, cd, redirects, here-docs: which commands run, where, with what.
STRUCTURE: list[Case] = [
    ("cat a b", ["cat a b | fails"], []),
    ("a=1 cat x", ["cat x | set=a=1 | fails"], []),
    ('echo "$HOME/x" ~/y ~+/z ~-/q ~2 ~+', ["echo /h/x ~/y /w/z ? ? /w | fails"], []),
    (
        "cd /tmp && cat x; cd; ls",
        ["cd /tmp", "cat x | cwd=/tmp", "cd | cwd=/tmp", "ls | cwd=/h | fails"],
        [],
    ),
    ("cd -P /tmp; ls", ["cd -P /tmp", "ls | cwd=/tmp | fails"], []),
    ("cd $x; ls", ["cd ?", "ls | cwd=None | fails"], []),
    (
        "pushd /tmp; ls; pushd; ls",
        ["pushd /tmp", "ls | cwd=/tmp", "pushd | cwd=/tmp", "ls | cwd=None | fails"],
        [],
    ),
    ("cd ..; cd ./a; ls", ["cd ..", "cd ./a | cwd=/", "ls | cwd=/a | fails"], []),
    ("cd ~/p; ls", ["cd ~/p", "ls | cwd=/h/p | fails"], []),
    ('cd "$HOME"/q; ls', ["cd /h/q", "ls | cwd=/h/q | fails"], []),
    ("CDPATH=/x cd foo; ls", ["cd foo | set=CDPATH=/x", "ls | cwd=None | fails"], []),
    ("CDPATH=/x cd ./foo; ls", ["cd ./foo | set=CDPATH=/x", "ls | cwd=/w/foo | fails"], []),
    ("CDPATH=/x cd ..; ls", ["cd .. | set=CDPATH=/x", "ls | cwd=/ | fails"], []),
    ("CDPATH=/x cd /abs; ls", ["cd /abs | set=CDPATH=/x", "ls | cwd=/abs | fails"], []),
    ("CDPATH=/x cd ~; ls", ["cd ~ | set=CDPATH=/x", "ls | cwd=/h | fails"], []),
    ("CDPATH=/x; cd foo; ls", ["cd foo", "ls | cwd=None | fails"], [("env", "CDPATH=/x")]),
    ("echo $(cd /tmp; a) ; b", ["cd /tmp", "a | cwd=/tmp", "echo ? | subs=cd,a", "b | fails"], []),
    (
        "echo $(a $(b)) | c",
        ["b", "a ? | subs=b", "echo ? | subs=a,b", "c | from=echo,a,b | fails"],
        [],
    ),
    ("diff <(a) <(b)", ["a", "b", "diff ? ? | subs=a,b | fails"], []),
    ('x=1; echo $x "$x" ${x}', ["echo 1 1 1 | fails"], []),
    ("x=$(a); echo $x", ["a", "echo ? | fails"], []),
    ("for x in a b; do echo $x; done", ["echo ?"], []),
    ("x=1; for x in a; do :; done; echo $x", [":", "echo ? | fails"], []),
    ("f() { a | b; }; f", ["a", "b | from=a", "f | fails"], []),
    ("function g { c; }", ["c"], []),
    (
        ":(){ :|:& };:",
        [":", ": | from=:", ": | fails"],
        [("fork_bomb", "function ':' calls itself in the background or a pipe")],
    ),
    (
        "f() { f & }; f",
        ["f", "f | fails"],
        [("fork_bomb", "function 'f' calls itself in the background or a pipe")],
    ),
    ("f() { g | f2; }", ["g", "f2 | from=g"], []),
    ("ls # rm -rf /", ["ls | fails"], []),
    ('echo "unterminated', ["echo"], [("unparseable", "cannot parse near '\"unterminated'")]),
    ("ls )(", ["ls"], [("unparseable", "cannot parse near ')('")]),
    ("A= cmd", ["cmd | set=A='' | fails"], []),
    ("A=$(x) B=y cmd", ["x", "cmd | set=A=?,B=y | subs=x | fails"], []),
    ("$x args", ["? args | fails"], []),
    ('"$(echo ls)" -la', ["echo ls", "? -la | subs=echo | fails"], []),
    ("> file", ["- | redir=>file"], []),
    (">> f ls", ["ls | redir=>>f | fails"], []),
    ("ls > out 2>&1 < in", ["ls | redir=>out,>&1,<in | fails"], []),
    ("ls &> all", ["ls | redir=&>all | fails"], []),
    ("ls 2> err >| clob", ["ls | redir=>err,>|clob | fails"], []),
    ("ls >&-", ["ls | redir=>&-'' | fails"], []),
    ('cat <<< "rm x"', ["cat | in='rm x' | fails"], []),
    ("cat <<< $x", ["cat | in=? | fails"], []),
    ("cat <<< 'lit' > out", ["cat | redir=>out | in='lit' | fails"], []),
    (
        "bash <<< 'rm -rf /'",
        ["bash | in='rm -rf /' | wrapper | fails", "rm -rf / | via=bash | fails"],
        [],
    ),
    ("cat <<EOF > out\nbody $x\nEOF", ["cat | redir=>out | in=? | fails"], []),
    ('cat <<"EOF"\n$(no)\nEOF', ["cat | in='$(no)\\n' | fails"], []),
    ("cat <<\\EOF\n`no`\nEOF", ["cat | in='`no`\\n' | fails"], []),
    ("cat <<EOF\n$(a)\nEOF", ["cat | in=? | fails", "a"], []),
    (
        "cat <<EOF\n`id`\nEOF",
        ["cat | in=? | fails"],
        [("unparseable", "backticks in an unquoted here-doc run commands")],
    ),
    ("cat <<EOF\nplain\nEOF", ["cat | in='plain\\n' | fails"], []),
    ("a | b | c", ["a", "b | from=a", "c | from=a,b | fails"], []),
    (
        "a $(s) | b $(t) | c",
        ["s", "a ? | subs=s", "t", "b ? | from=a,s | subs=t", "c | from=a,s,b,t | fails"],
        [],
    ),
    ("a && b || c", ["a", "b", "c | fails"], []),
    ("a; b &", ["a", "b"], []),
    ("a & b", ["a", "b | fails"], []),
    ("! a", ["a"], []),
    ("a | ! b", ["a", "b | from=a"], []),
    ("(a; b)", ["a", "b | fails"], []),
    ("{ a; b; }", ["a", "b | fails"], []),
    ("(a) > out", ["a | redir=>out | fails"], []),
    ("if a; then b; fi", ["a", "b"], []),
    ("while a; do b; done > out", ["a", "b | redir=>out"], []),
    ("a && (b; c)", ["a | fails", "b", "c | fails"], []),
    ("a || b", ["a", "b | fails"], []),
    ("a && b", ["a | fails", "b | fails"], []),
    ("for x in <(cd /tmp); do a; done", ["cd /tmp", "a"], []),
    ("for x in $(cd /tmp); do a; done", ["cd /tmp", "a"], []),
    ("for ((i=0; i<1; i++)) { a; }", ["a"], []),
    ("for ((i=0; i<$(id); i++)); do a; done", ["id", "a"], []),
    ("a | > f", ["a", "- | redir=>f"], []),
    ("> f | b", ["- | redir=>f", "b | fails"], []),
    ("$x | b", ["?", "b | fails"], []),
    (
        'echo "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',
        ["echo"],
        [
            (
                "unparseable",
                "cannot parse near '\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'",
            )
        ],
    ),
    ("cat <<EOF <<< $(a)\nx\nEOF", ["cat | in='x\\n' | fails", "a"], []),
    ("cat <<XX\n$(a)\nXX", ["cat | in=? | fails", "a"], []),
    (
        "cat <<EOF\n$API_TOKEN\nEOF",
        ["cat | in=? | fails"],
        [("secret_env", "expands $API_TOKEN, which looks like a credential")],
    ),
    (
        "cat <<EOF\n${API_TOKEN}\nEOF",
        ["cat | in=? | fails"],
        [("secret_env", "expands $API_TOKEN, which looks like a credential")],
    ),
    ("cat <<EOF\nEOF", ["cat | in='' | fails"], []),
    ("x=(a $(id)) c", ["id", "c | set=x=? | subs=id | fails"], []),
    ("CDPATH=/x cd .; ls", ["cd . | set=CDPATH=/x", "ls | fails"], []),
    ("CDPATH=/x cd ../a; ls", ["cd ../a | set=CDPATH=/x", "ls | cwd=/a | fails"], []),
    ("if a; then b; fi <<< x", ["a | in='x'", "b"], []),
    ("a | b <<< x", ["a", "b | in='x' | from=a | fails"], []),
    ("(a) <<< x", ["a | redir=<x | fails"], [("unparseable", "cannot parse near '<<'")]),
    ("</a>", ["- | redir=</a"], [("unparseable", "cannot parse near '</a>'")]),
    ("<<< x >", ["- | in='x'"], [("unparseable", "cannot parse near '<<< x >'")]),
    # an unclosed substitution still runs what is inside, and the missing ")" is not a word
    ("echo $(ls", ["ls", "echo ? | subs=ls | fails"], []),
    # a comment after the here-doc operator is not an argument of the command
    ("cat <<EOF # c\nx\nEOF", ["cat | in='x\\n' | fails"], []),
    # what follows the here-doc operator (a pipeline, a list, a redirected statement) runs
    ("cat <<EOF | sh\nx\nEOF", ["cat | in='x\\n'", "sh"], []),
    ("cat <<EOF && rm x\ny\nEOF", ["cat | in='y\\n'", "rm x"], []),
    ("cat <<EOF && rm x > f\ny\nEOF", ["cat | in='y\\n'", "rm x | redir=>f"], []),
    ("cat <<EOF && a && b\nx\nEOF", ["cat | in='x\\n'", "a", "b"], []),
    # text tree-sitter cannot read right after the operator is reported, not an argument
    (
        "cat <<EOF $ }\na\nEOF",
        ["cat | in='' | fails"],
        [("unparseable", "cannot parse near '$ }\\na'")],
    ),
    # a here-doc inside text tree-sitter cannot read still feeds its command
    (
        "cat <<EOF function } \n EOF <( fi =\na\nEOF",
        ["cat function } | in=''", "fi =", "a", "EOF"],
        [("unparseable", "cannot parse near 'cat <<EOF function } \\n EOF <( fi =\\na\\nEOF'")],
    ),
    ("{ a || b; } | c", ["a", "b", "c | from=a,b | fails"], []),
    ("case x in a) y;; b) z;; esac | d", ["y", "z", "d | from=y,z | fails"], []),
    ("if a; then b; elif c; then d; fi <<< s", ["a | in='s'", "b", "c", "d"], []),
    ("if a; then b; else c; fi <<< s", ["a | in='s'", "b", "c"], []),
]


# Whose failure is the line's: last of a sequence, either side of ``&&``, right of ``||``, the
# last stage of a pipeline without ``!``; never backgrounded, in a function, a condition, or a
# substitution. Line continuations join words; comments run nothing.
FLOW: list[Case] = [
    ('echo "line\\\ncont"', ["echo linecont | fails"], []),
    ("ec\\\nho x", ["ec ho x | fails"], []),
    ("a; b", ["a", "b | fails"], []),
    ("a;", ["a | fails"], []),
    ("a &", ["a"], []),
    ("a && b &", ["a", "b"], []),
    ("{ a; } &", ["a"], []),
    ("a | b &", ["a", "b | from=a"], []),
    ("a\n# c", ["a | fails"], []),
    ("cat <<EOF\nx\nEOF\nb", ["cat | in='x\\n'", "b | fails"], []),
    ("cat <<EOF\nx\nEOF", ["cat | in='x\\n' | fails"], []),
    ("! a | b", ["a", "b | from=a"], []),
    ("(a; b) | c", ["a", "b", "c | from=a,b | fails"], []),
    ("a || b && c", ["a", "b | fails", "c | fails"], []),
    ("f() { a; }", ["a"], []),
    ("a\nb", ["a", "b | fails"], []),
    ("a | b 2>x", ["a", "b | redir=>x | from=a | fails"], []),
    ("a 2>x | b", ["a | redir=>x", "b | from=a | fails"], []),
    ("if a; then b; fi; c", ["a", "b", "c | fails"], []),
    ("x=1", [], []),
    ("a; x=1", ["a"], []),
    ("echo $(a; b)", ["a", "b", "echo ? | subs=a,b | fails"], []),
    ("(a &)", ["a"], []),
    ("a && { b; c & }", ["a | fails", "b", "c"], []),
    ("cat <<'EOF' > out\n$(x)\nEOF", ["cat | redir=>out | in='$(x)\\n' | fails"], []),
]


@pytest.mark.parametrize(("line", "cmds", "issues"), STRUCTURE)
def test_structure(line: str, cmds: list[str], issues: list[tuple[str, str]]) -> None:
    assert facts(line) == (cmds, issues)


@pytest.mark.parametrize(("line", "cmds", "issues"), FLOW)
def test_flow(line: str, cmds: list[str], issues: list[tuple[str, str]]) -> None:
    assert facts(line) == (cmds, issues)


def test_an_empty_line_runs_nothing() -> None:
    for line in ("", "   ", "\n"):
        parsed = parse(line, cwd=CWD, home=HOME)
        assert (parsed.cmds, parsed.issues) == ([], [])


def test_a_plain_line_is_one_command_whose_failure_is_the_line_s() -> None:
    assert facts("pytest -q a.py") == (["pytest -q a.py | fails"], [])
    assert facts("sudo pytest") == (
        ["sudo pytest | wrapper | fails", "pytest | via=sudo | fails"],
        [],
    )


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("cat <<EOF | a\nx\nEOF", ["cat", "a"]),
        ("cat <<EOF && a\nx\nEOF", ["cat", "a"]),
        ("cat <<EOF && a > f\nx\nEOF", ["cat", "a"]),
        ("cat <<EOF && a && b\nx\nEOF", ["cat", "a", "b"]),
    ],
)
def test_what_follows_a_here_doc_operator_runs_too(line: str, names: list[str]) -> None:
    parsed = parse(line, cwd=CWD, home=HOME)
    assert [c.name for c in parsed.cmds] == names
    assert parsed.cmds[0].heredoc == "x\n"
    assert parsed.cmds[0].fails_line is False  # a later stage or command decides the status


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("echo a > out b", ["echo", "a", "b"]),  # bash: b is echo's argument
        ("time -f %e ls", ["time", "-f", "%e", "ls"]),
        ("watch -n 1 ls", ["watch", "-n", "1", "ls"]),
    ],
)
def test_words_after_a_redirect_target_and_wrapper_values_are_arguments(
    line: str, argv: list[str]
) -> None:
    assert parse(line, cwd="/w", home="/h").cmds[0].argv == argv


def test_a_dropped_dash_before_a_continued_line_s_redirect_is_an_argument() -> None:
    # ``cat - \<newline>2>x``: the line continuation is no word; ``-`` (in no node) is cat's
    assert facts("cat - \\\n2>x") == (["cat - | redir=>x | fails"], [])
