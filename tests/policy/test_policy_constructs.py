"""What the parser cannot see is never allow: arithmetic, here-docs, tildes, braces, xargs...

In both modes, an unresolved construct or an option that runs another program asks (denies
under strict); what the parser can resolve (brace expansion, ``~+``, ``env -C``, a sed script)
it resolves the way bash, env and sed do, and judges the result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.policy import Policy
from keel.policy._sed import sed_script
from keel.policy._shell import expand_braces, parse
from keel.policy._tools import hidden_programs

UNSEEN = [
    ("test -v 'a[$(id)]'", "parse.arithmetic"),
    ("[ -v 'a[$(id)]' ]", "parse.arithmetic"),
    ("[[ $x -eq 'a[$(id)]' ]]", "parse.arithmetic"),
    ("[[ $n -gt 3 ]]", "parse.arithmetic"),
    ("[[ -v 'a[$(id)]' ]]", "parse.arithmetic"),
    ("declare -i x='a[$(id)]'", "parse.arithmetic"),
    ("declare -i x; x='a[$(id)]'", "parse.arithmetic"),
    ("local -n r='a[$(id)]'", "parse.arithmetic"),
    ("export 'a[$(id)]'", "parse.arithmetic"),
    ("echo $((x))", "parse.arithmetic"),
    ("echo $(( $v + 1 ))", "parse.arithmetic"),
    ("((x++))", "parse.arithmetic"),
    ("echo $[x]", "parse.arithmetic"),
    ("echo ${a[$i]}", "parse.arithmetic"),
    ("printf -v 'a[$(id)]' x", "parse.arithmetic"),
    ("read 'a[$(id)]' <<< x", "parse.arithmetic"),
    ("unset 'a[$(id)]'", "parse.arithmetic"),
    ("cat <<EOF\n`id`\nEOF", "parse.unparseable"),
    ("cat <<EOF\n$((x))\nEOF", "default.ask"),  # tree-sitter reads $((x)) here as $( (x) )
    ("cat ~-/x", "path.dynamic"),
    ("cat ~2/x", "path.dynamic"),
    ("cat ~+1/x", "path.dynamic"),
    ("CDPATH=/etc cd ssh && cat ssh_config", "path.dynamic"),
    ("xargs cat < list.txt", "path.dynamic"),
    ("xargs -I{} cat {} < list.txt", "path.dynamic"),
    ("xargs --replace=@ head @ < list.txt", "path.dynamic"),
    ("sed 's/[/]/x/' f", "path.dynamic|parse.sed_script"),  # it may write anywhere
    ("echo {1..100000}", "parse.unparseable"),
]
KNOWN = [
    ("x=3; echo $((x + 1))", "allow"),
    ("echo $((1 + 2))", "allow"),
    ("for ((i = 0; i < 3; i++)); do echo $i; done", "allow"),
    ("[[ $# -eq 0 ]] && echo none", "allow"),
    ("[[ -f README.md ]] && echo yes", "allow"),
    ("cat <<'EOF'\n`id` $(id) $((x))\nEOF", "allow"),
    ("cat <<EOF\nplain $HOME text\nEOF", "allow"),
    ("cat ~+/README.md", "allow"),
    ("mkdir -p src/{a,b}/tests", "allow"),
    ("echo {1..3} {a..c}", "allow"),
    ("git log HEAD@{1}", "allow"),
    ("find . -name '*.py' | xargs wc -l", "allow"),
    ("sed -n '/start/,/end/p' README.md", "allow"),
    ("sed -i 's/a/b/' README.md", "allow"),
]


@pytest.fixture
def dev(tmp_path: Path) -> Policy:
    (tmp_path / "README.md").write_text("x\n")
    return Policy.for_preset("developer", tmp_path)


@pytest.mark.parametrize(("line", "rule"), UNSEEN)
@pytest.mark.parametrize("contained", [False, True])
def test_what_the_parser_cannot_see_asks(
    tmp_path: Path, line: str, rule: str, contained: bool
) -> None:
    dev = Policy.for_preset("developer", tmp_path, contained=contained)
    strict = Policy.for_preset("strict", tmp_path, contained=contained)
    decision = dev.check_command(line)
    assert decision.decision == "ask" and decision.rule in rule.split("|"), decision
    assert strict.check_command(line).decision == "deny"


@pytest.mark.parametrize(("line", "expected"), KNOWN)
def test_what_it_can_resolve_is_judged(dev: Policy, line: str, expected: str) -> None:
    assert dev.check_command(line).decision == expected, dev.check_command(line)


def test_brace_expansion_is_bash_s() -> None:
    assert expand_braces("a{b,c}d") == ["abd", "acd"]
    assert expand_braces("{a,b{c,d}}") == ["a", "bc", "bd"]
    assert expand_braces("{1..3}") == ["1", "2", "3"]
    assert expand_braces("{01..03}") == ["01", "02", "03"]
    assert expand_braces("{a..e..2}") == ["a", "c", "e"]
    assert expand_braces("{3..1}") == ["3", "2", "1"]
    assert expand_braces("{a}") == ["{a}"]
    assert expand_braces("{}") == ["{}"]
    assert expand_braces("x\\{a,b}") == ["x\\{a,b}"]
    assert expand_braces("{1..100000}") is None
    cmds = parse("cat {/etc/shadow,x} ~+/y", cwd="/w", home="/h").cmds
    assert cmds[0].argv == ["cat", "/etc/shadow", "x", "/w/y"]
    assert parse('cat "$d"{a,b}', cwd="/w", home="/h").cmds[0].argv == ["cat", None]


def test_brace_and_tilde_tricks_are_seen(dev: Policy) -> None:
    assert dev.check_command("cat {/etc/shadow,README.md}").rule == "risk.secret_read"
    assert dev.check_command("cat /etc/{passwd,shadow}").rule == "risk.secret_read"
    assert dev.check_command("cat ~+/../../etc/passwd").rule == "path.outside_workspace"
    assert dev.check_command("echo x > ~+/.git/hooks/pre-commit").rule == "path.control"


def test_xargs_writers_are_left_to_the_sandbox(tmp_path: Path) -> None:
    line = "xargs -a list.txt rm"
    assert Policy.for_preset("developer", tmp_path).check_command(line).rule == "path.dynamic"
    boxed = Policy.for_preset("developer", tmp_path, contained=True)
    assert boxed.check_command(line).decision == "allow"
    assert boxed.check_command("xargs -a list.txt rm -rf").rule == "risk.rm_recursive"


def test_env_and_xargs_wrappers(dev: Policy, tmp_path: Path) -> None:
    assert dev.check_command("env -C /etc cat passwd").rule == "path.outside_workspace"
    assert dev.check_command("env --chdir=.git/hooks touch x").rule == "path.control"
    assert dev.check_command("env -C src ls").decision == "allow"
    (tmp_path / ".env").write_text("K=v\n")
    assert dev.check_command("xargs -a .env echo").rule == "risk.secret_read"
    inner = parse("env -C d A=1 ls", cwd="/w", home="/h").cmds[-1]
    assert (inner.argv, inner.cwd, inner.assigns) == (["ls"], "/w/d", [("A", "1")])


def test_sed_scripts_are_read_like_sed() -> None:
    assert sed_script("s/a/b/g").understood
    assert sed_script("w out.txt").writes == ("out.txt",)
    assert sed_script("s/a/b/w log.txt").writes == ("log.txt",)
    assert sed_script("r /etc/passwd").reads == ("/etc/passwd",)
    assert sed_script("1e id").executes and sed_script("s/x/y/e").executes
    assert sed_script("/start/,/end/p").writes == ()
    assert sed_script(":a;N;$!ba;s/\\n/ /g").understood
    assert sed_script("$a\\\nlast line").understood
    assert not sed_script("w").understood
    assert not sed_script("k").understood


@pytest.mark.parametrize(
    ("name", "args"),
    [("git", ["grep", "-O", "x"]), ("git", ["-c", "core.pager=id", "log"]),
     ("git", ["fetch", "--upload-pack=x"]), ("git", ["submodule", "foreach", "id"]),
     ("tar", ["--to-command=id", "-xf", "a"]), ("tar", ["-xIf", "id", "a"]),
     ("tar", ["xIf", "id", "a"]), ("sort", ["--compress-program", "id"]),
     ("make", ["--eval=x:"]), ("make", ["-E", "x:"]), ("less", ["+!id", "f"]),
     ("rsync", ["-e", "id", "a", "b"]), ("ssh", ["-o", "ProxyCommand=id", "h"]),
     ("ssh", ["-oLocalCommand=id", "h"]), ("scp", ["-S", "x", "a", "h:b"]),
     ("awk", ["-f", "x.awk"]), ("man", ["-P", "id", "ls"]), ("sed", ["-f", "x.sed"])],
)  # fmt: skip
def test_options_that_run_programs(name: str, args: list[str | None]) -> None:
    assert hidden_programs(name, args)


@pytest.mark.parametrize(
    ("name", "args"),
    [("git", ["-c", "user.name=x", "commit", "-m", "y"]), ("git", ["grep", "-o", "x"]),
     ("tar", ["-xzf", "a.tgz"]), ("sort", ["-o", "out", "f"]), ("make", ["-C", "d", "test"]),
     ("less", ["+G", "f"]), ("ssh", ["-o", "ConnectTimeout=3", "h"]), ("awk", ["-F,", "{}"])],
)  # fmt: skip
def test_options_that_do_not(name: str, args: list[str | None]) -> None:
    assert hidden_programs(name, args) == []


def test_read_only_facts_follow_the_new_rules(dev: Policy) -> None:
    assert not dev.is_read_only("git grep -O id x")
    assert not dev.is_read_only("sort --compress-program=id f")
    assert not dev.is_read_only("echo $((x))")
    assert dev.is_read_only("git grep -n TODO")
