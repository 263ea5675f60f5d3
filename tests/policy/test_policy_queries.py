"""What the ``Policy`` answers besides a verdict: ``explain``, ``in_scope``, ``is_read_only``.

``keel policy explain`` is also checked through a ``keel`` subprocess (test_policy_cli.py);
here the same questions are asked of the ``Policy`` itself, with client-rule syntax.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from policy_helpers import Tree

from _support import make_workspace
from keel.config import parse_config
from keel.policy import Policy

CONFIG = """\
[policy]
preset = "developer"
allow = ["make lint"]
ask = ["npm publish"]
deny = ["git push --force"]
network_allow = ["x.test"]
unknown = "deny"
unparseable = "ask"
[scope]
include = ["src/**"]
exclude = ["src/vendor/**"]
[[constraints]]
id = "mig"
text = "no migrations"
protect = ["migrations/**"]
forbid = ["alembic upgrade --head"]
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws", files={"src/a.py": "x = 1\n"})


@pytest.fixture
def policy(ws: Path) -> Policy:
    return Policy.from_config(parse_config(CONFIG), ws, source="keel.toml")


def test_explain_names_every_part_of_the_policy(policy: Policy, ws: Path) -> None:
    info = policy.explain()
    assert list(info) == [
        "preset", "root", "source", "contained", "default", "commands", "paths",
        "network_allow", "constraints", "max_input_bytes",
    ]  # fmt: skip
    assert (info["preset"], info["root"], info["source"]) == ("developer", str(ws), "keel.toml")
    assert info["contained"] is False
    assert info["default"] == {"unknown": "deny", "unparseable": "ask"}
    assert info["commands"]["config"] == {
        "allow": ["make lint"], "ask": ["npm publish"], "deny": ["git push --force"],
    }  # fmt: skip
    preset = info["commands"]["preset"]
    assert list(preset) == ["allow", "ask", "deny"]
    assert "git status" in preset["allow"] and "ls" in preset["allow"]
    assert info["commands"]["command_writes"] is True
    paths = info["paths"]
    assert list(paths) == [
        "control", "prompt_files", "protected", "read_outside", "secrets", "scope", "file_writes",
    ]  # fmt: skip
    assert "**/.git/config" in paths["control"] and "**/keel.toml" in paths["control"]
    assert ".env" in paths["protected"]
    assert "**/AGENTS.md" in paths["prompt_files"] and "**/.envrc" in paths["control"]
    assert "/usr/include/**" in paths["read_outside"]
    assert "**/.env" in paths["secrets"]
    assert paths["scope"] == {"include": ["src/**"], "exclude": ["src/vendor/**"]}
    assert paths["file_writes"] is True
    assert info["network_allow"][-1] == "x.test" and "pypi.org" in info["network_allow"]
    assert info["constraints"] == [
        {
            "id": "mig",
            "rule": "constraint.mig",
            "text": "no migrations",
            "protect": ["migrations/**"],
            "forbid": ["alembic upgrade --head"],
        }
    ]
    assert info["max_input_bytes"] == 1_000_000


def test_explain_of_a_preset_without_a_file_has_no_source(ws: Path) -> None:
    info = Policy.for_preset("strict", ws, contained=True).explain()
    assert info["source"] is None and info["contained"] is True
    assert info["preset"] == "strict"


def test_in_scope_needs_both_the_written_and_the_real_path_inside(
    policy: Policy, ws: Path, tmp_path: Path
) -> None:
    assert policy.in_scope("src/a.py") and policy.in_scope(str(ws / "src" / "new.py"))
    for outside in ("docs/x.md", "src/vendor/lib.py", "../x", "", "  ", "src/\x00a"):
        assert not policy.in_scope(outside), outside
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / "src" / "out").symlink_to(elsewhere)
    assert not policy.in_scope("src/out/x.py")


def test_in_scope_expands_the_home_of_the_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    root = home / "ws"
    (root / "src").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    policy = Policy.from_config(parse_config('[scope]\ninclude = ["src/**"]\n'), root)
    assert policy.in_scope("~/ws/src/a.py")
    assert not policy.in_scope("~/other/src/a.py")


def test_in_scope_by_every_form(tree: Tree) -> None:
    (tree.ws / "src" / "to_docs").symlink_to(tree.ws / "docs")
    engine = tree.engine(scope_include=("src/**",), scope_exclude=("src/vendor/**",))
    yes = ("src/a.py", f"{tree.ws}/src/new.py", "src/x%2epy")
    no = (
        "", " ", "docs/x", "link_in/a.py", "src/vendor/x", "C:\\src\\a.py", "src/%2e%2e/docs/x",
        "../ws/docs/x", "src/to_docs/x", "link_out/f.txt", "a\x00b", "\udcff",
    )  # fmt: skip
    assert [p for p in yes if not engine.in_scope(p)] == []
    assert [p for p in no if engine.in_scope(p)] == []
    everything = tree.engine()  # scope "**": only the link's target being outside says no
    assert everything.in_scope("link_in/a.py") and not everything.in_scope("link_out/f.txt")


READ_ONLY = [
    "", "   ", "cat a.txt", "< a.txt", "sed -n 1,5p a.txt", "cat $X", "env cat a.txt",
    "time cat a.txt", "nice cat a.txt", "cd src", ": x", "tree", "sort a.txt", "uniq a.txt",
    "uniq -f 1 a.txt", "cat a.txt 2>&1", "cat a.txt >&2", "cat a.txt >&-",
    "cat a.txt > /dev/null", "git branch", "git branch -a", "find . -name x", "rg x", "fd x",
    "ls -la", "git log", "grep -r x .",
]  # fmt: skip

NOT_READ_ONLY = [
    "sed 1,5p a.txt", "sed -n -e 1p a.txt", "sed -n 's/a/b/p' a.txt", "./x.sh",
    "/bin/cat a.txt", "bin/cat a.txt", "$X a.txt", "FOO=1 cat a.txt", "xargs cat",
    "sudo cat a", "tree -o out.txt", "sort -o out.txt a.txt", "sort --output=o a",
    "uniq a.txt out.txt", "cat a.txt >& out.txt", "cat a.txt > 1", "cat a.txt > out.txt",
    "git branch -d x", "git branch -D x", "awk 1 a", "find . -delete", "rg --pre cat x",
    "python3 -c 'print(1)'", "tee out.txt", "cat a\x00b", "cat a.txt | tee x",
    "git log --output=x", "find . -exec rm {} +", "cp a b", "fd -x rm", "echo $(touch x)",
]  # fmt: skip


def test_is_read_only_exactly(policy: Policy) -> None:
    assert [line for line in READ_ONLY if not policy.is_read_only(line)] == []
    assert [line for line in NOT_READ_ONLY if policy.is_read_only(line)] == []


def test_client_rule_syntax_is_recognised_with_spaces_around_it() -> None:
    from keel.policy._core import split_pattern

    assert split_pattern("Bash(ls) ") == ("ls", "$")
    assert split_pattern("Bash(npm test:*)") == ("npm", "test")
    assert split_pattern("mcp__srv__tool") == ("mcp__srv__tool",)
    for rule in ("bash(ls)", "mcp__x__y(z) ", "Read(./x)"):
        with pytest.raises(ValueError):
            split_pattern(rule)


# Each refused for one reason alone: a written file (`-o`; a run-time word of `git config`
# may be a value to set), or a risk (a network socket named with `-i`).
WRITES_OR_RISKS = [
    ("git diff -o out", "git diff out"), ("git show -o out", "git show out"),
    ("git config --get user.name $X", "git config --get user.name"),
    ("grep -i x /dev/tcp/example.com/80", "grep -i x /dev/tc/example.com/80"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "without"), WRITES_OR_RISKS)
def test_an_inspection_command_that_writes_or_risks_is_not_read_only(
    policy: Policy, line: str, without: str
) -> None:
    assert policy.is_read_only(line) is False
    assert policy.is_read_only(without) is True


def test_the_read_only_question_reuses_the_parse_of_the_check(
    policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard checks a line, then asks if it is read-only: one parse serves both."""
    import keel.policy._judge_cmds as judge

    parses: list[tuple[str, str | None]] = []
    real = judge.parse

    def counted(line: str, **kw: Any) -> Any:
        parses.append((line, kw["cwd"]))
        return real(line, **kw)

    monkeypatch.setattr(judge, "parse", counted)
    assert policy.check_command("cat a.py", "src").decision == "allow"
    assert policy.is_read_only("cat a.py", "src") is True
    assert policy.command_facts("cat a.py", "src").read_only is True
    assert len(parses) == 1 and parses[0][1] is not None and parses[0][1].endswith("/src")


def test_read_only_needs_the_inspection_ask_list_and_literal_words(tree: Tree) -> None:
    engine = tree.engine()
    not_read_only = (
        "git reflog delete x", "git fsck --lost-found", "git $X", "git $X status",
        # an inspection command that runs a program or writes a file through an option
        "less +!sh f", "less -o log f", "less --log-file=x f", "file -C -m x",
        "ag --pager=x y", "ack --pager=x y",
    )  # fmt: skip
    for line in not_read_only:
        assert not engine.is_read_only(line), line
    assert engine.is_read_only("git reflog") and engine.is_read_only("ls $X")
    # sed printing standard input; `>& -` closes stdout like `>&-`
    for line in ("sed -n 1p", "cat a | sed -n 1,5p", "cat a >& -"):
        assert engine.is_read_only(line), line
