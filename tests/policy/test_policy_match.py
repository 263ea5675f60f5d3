"""Ask, deny and forbid patterns match in any order of options; allow patterns are prefixes."""

from __future__ import annotations

from pathlib import Path

import pytest
from policy_helpers import Tree

from keel.config import parse_config
from keel.policy import Policy
from keel.policy._match import match_anywhere, match_prefix


def words(line: str) -> list[str | None]:
    return [None if w == "$X" else w for w in line.split()]


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        ("git branch -D*", "git branch -D x"),
        ("git branch -D*", "git branch -v -D x"),
        ("git branch -D*", "git branch -vD x"),
        ("git branch -D*", "git branch x -D"),
        ("git branch -D*", "git branch --list -D x"),
        ("git commit --amend*", "git commit -am x --amend"),
        ("git commit --amend*", "git commit --amend=x"),
        ("git stash drop*", "git -c a=b stash drop"),
        ("git stash drop*", "git stash -q drop stash@{0}"),
        ("find * -delete", "find . -name x -delete"),
        ("rm -rf", "rm -r -f x"),
        ("rm -rf", "rm -fr x"),
        ("rm -rf", "rm x -rf"),
        ("make install*", "make -C build install"),
        ("npm run deploy*", "npm --silent run deploy:prod"),
        ("git push origin main", "git push -q origin main"),
        ("git branch -D*", "git branch $X x"),
        ("git branch -D*", "git $X -D x"),
    ],
)
def test_anywhere_matches_in_any_order(pattern: str, line: str) -> None:
    assert match_anywhere(tuple(pattern.split()), words(line))


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        ("git branch -D*", "git branch -d x"),
        ("git branch -D*", "git log -D x"),
        ("git branch -D*", "git fetch $X"),
        ("git commit --amend*", "git commit -m amend"),
        ("git stash drop*", "git drop stash"),
        ("rm -rf", "rm -r x"),
        ("find * -delete", "find . -name delete"),
        ("make install*", "make test"),
        ("git push origin main", "git push main origin"),
    ],
)
def test_anywhere_needs_every_word(pattern: str, line: str) -> None:
    assert not match_anywhere(tuple(pattern.split()), words(line))


def test_prefix_is_exact_for_allow() -> None:
    assert match_prefix(("git", "branch", "-v*"), words("git branch -v"), conservative=False)
    assert not match_prefix(("git", "branch", "-v*"), words("git -v branch"), conservative=False)
    assert not match_prefix(("git", "branch", "$"), words("git branch x"), conservative=False)
    assert not match_prefix(("git", "log"), words("git $X"), conservative=False)
    assert match_prefix(("git", "log"), words("git $X"), conservative=True)


@pytest.mark.parametrize("preset", ["developer", "strict"])
@pytest.mark.parametrize(
    "line",
    ["git branch -v -D feature", "git branch --all -d x", "git commit -am x --amend",
     "git tag -l -d v1", "git stash -q drop", "git remote -v remove origin",
     "git branch --no-merged -D x", "git worktree --verbose remove w"],
)  # fmt: skip
def test_flag_order_does_not_defeat_ask(tmp_path: Path, preset: str, line: str) -> None:
    decision = Policy.for_preset(preset, tmp_path).check_command(line)
    assert decision.decision == ("ask" if preset == "developer" else "deny"), decision


def test_config_patterns_and_constraints_match_anywhere(tmp_path: Path) -> None:
    config = parse_config(
        '[policy]\ndeny = ["git push origin main", "rm -rf"]\nask = ["npm publish"]\n'
        '[[constraints]]\nid = "no-drop"\ntext = "never drop tables"\n'
        'forbid = ["psql --command*"]\n'
    )
    policy = Policy.from_config(config, tmp_path)
    assert policy.check_command("git push -q origin main").rule == "config.deny"
    assert policy.check_command("rm -f -r build").rule == "config.deny"
    assert policy.check_command("npm --tag beta publish").rule == "config.ask"
    assert policy.check_command("psql -d x --command='drop table t'").rule == "constraint.no-drop"
    assert policy.check_command("git push origin feature").rule != "config.deny"


def test_a_pattern_whose_first_word_is_a_glob_still_matches(tree: Tree) -> None:
    engine = tree.engine(deny=("g* push",), allow=("m?ke lint",))
    assert tuple(engine.check_line("git push")) == (
        "deny", "config.deny", "matches 'g* push' in keel.toml [policy]", "do not run this",
    )  # fmt: skip
    assert tuple(engine.check_line("make lint"))[:2] == ("allow", "config.allow")
    # the pattern named by the command's own word is tried first, and reported
    both = tree.engine(ask=("g* push", "git push"))
    assert tuple(both.check_line("git push"))[:3] == (
        "ask", "config.ask", "matches 'git push' in keel.toml [policy]",
    )  # fmt: skip
