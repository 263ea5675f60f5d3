"""Shell parsing: every construct is seen through, wrappers unwrapped, the strictest wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.policy import Policy
from keel.policy._shell import fast_split, parse


@pytest.fixture
def dev(tmp_path: Path) -> Policy:
    return Policy.for_preset("developer", tmp_path)


@pytest.fixture
def strict(tmp_path: Path) -> Policy:
    return Policy.for_preset("strict", tmp_path)


def names(line: str) -> list[str | None]:
    return [c.name for c in parse(line, cwd="/w", home="/home/u").cmds]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("a && b", ["a", "b"]),
        ("a || b", ["a", "b"]),
        ("a; b; c", ["a", "b", "c"]),
        ("a | b | c", ["a", "b", "c"]),
        ("(a; b)", ["a", "b"]),
        ("{ a; b; }", ["a", "b"]),
        ("echo $(a)", ["a", "echo"]),
        ("echo `a`", ["a", "echo"]),
        ("echo $(a $(b))", ["b", "a", "echo"]),
        ("diff <(a) <(b)", ["a", "b", "diff"]),
        ("x=$(a) && b", ["a", "b"]),
        ("f() { a; }; f", ["a", "f"]),
        ("function f { a | b; }", ["a", "b"]),
        ("if a; then b; else c; fi", ["a", "b", "c"]),
        ("while a; do b; done", ["a", "b"]),
        ("for i in 1 2; do a $i; done", ["a"]),
        ("case $x in y) a;; *) b;; esac", ["a", "b"]),
        ("! a", ["a"]),
        ("a &", ["a"]),
        ("cat <<EOF\n$(a)\nEOF", ["cat", "a"]),
    ],
)
def test_every_construct_yields_its_simple_commands(line: str, expected: list[str]) -> None:
    assert names(line) == expected


@pytest.mark.parametrize(
    ("line", "inner"),
    [
        ("sudo a -x", "a"),
        ("sudo -u root -E a", "a"),
        ("env A=1 B=2 a", "a"),
        ("env -i a", "a"),
        ("timeout 5 a", "a"),
        ("timeout -s KILL 5 a", "a"),
        ("nohup a", "a"),
        ("nice -n 5 a", "a"),
        ("xargs -n1 a", "a"),
        ("xargs -I{} a {}", "a"),
        ("bash -c 'a && b'", "b"),
        ("sh -c 'a'", "a"),
        ("bash -lc 'a'", "a"),
        ("eval a b", "a"),
        ("find . -exec a {} \\;", "a"),
        ("find . -execdir a {} +", "a"),
        ("command a", "a"),
        ("exec a", "a"),
        ("sudo env A=1 timeout 3 nice bash -c 'a'", "a"),
    ],
)
def test_wrappers_are_unwrapped(line: str, inner: str) -> None:
    assert inner in names(line)


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("sudo rm -rf /", "risk.rm_recursive"),
        ("env X=1 rm -rf ~", "risk.rm_recursive"),
        ("timeout 5 git reset --hard", "risk.git_reset_hard"),
        ("nohup git push --force &", "risk.git_force_push"),
        ("nice -n 19 dd if=/dev/zero of=/dev/sda", "risk.disk"),
        ("ls | xargs chmod -R 777", "risk.chmod_777"),
        ("bash -c 'git clean -fdx'", "risk.git_clean"),
        ('sh -c "cat ~/.ssh/id_rsa"', "risk.secret_read"),
        ("eval 'rm -rf /'", "risk.rm_recursive"),
        ("find / -exec rm -rf {} \\;", "risk.rm_recursive"),
        ("bash -c \"bash -c 'rm -rf /'\"", "risk.rm_recursive"),
        ("bash <<EOF\nrm -rf /\nEOF", "risk.rm_recursive"),
        ("bash <<< 'rm -rf /'", "risk.rm_recursive"),
        ("python - <<'EOF'\nimport socket\nEOF", "risk.interpreter_oneliner"),
        ("$'\\x72\\x6d' -rf /", "risk.rm_recursive"),
        ("r''m -rf /", "risk.rm_recursive"),
        ('"rm" -rf /', "risk.rm_recursive"),
        ("/bin/rm -rf /", "risk.rm_recursive"),
        ("x=/; rm -rf $x", "risk.rm_recursive"),
    ],
)
def test_wrapped_and_disguised_risks_are_denied(dev: Policy, line: str, rule: str) -> None:
    decision = dev.check_command(line)
    assert (decision.decision, decision.rule) == ("deny", rule), decision


@pytest.mark.parametrize(
    "line",
    [
        "ls && rm -rf /",
        "ls; rm -rf /",
        "ls || rm -rf /",
        "ls | rm -rf /",
        "(ls; rm -rf /)",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        "ls <(rm -rf /)",
        "f() { rm -rf /; }",
        "if true; then rm -rf /; fi",
        "cat <<EOF\n$(rm -rf /)\nEOF",
        "ls # harmless\nrm -rf /",
    ],
)
def test_the_strictest_command_wins(dev: Policy, line: str) -> None:
    assert dev.check_command("ls").decision == "allow"
    decision = dev.check_command(line)
    assert (decision.decision, decision.rule) == ("deny", "risk.rm_recursive"), decision


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ('echo "unterminated', "parse.unparseable"),
        ("ls )(", "parse.unparseable"),
        ("$x args", "parse.dynamic_command"),
        ("${CMD} -rf x", "parse.dynamic_command"),
        ('"$(echo ls)" -la', "parse.dynamic_command"),
        ('eval "$x"', "parse.dynamic_command"),
        ('bash -c "$x"', "parse.dynamic_command"),
        ("echo ls | bash", "parse.dynamic_script"),
        ("r\\m -rf build", "parse.obfuscated"),
    ],
)
def test_what_the_parser_cannot_understand_is_ask_or_deny(
    dev: Policy, strict: Policy, line: str, rule: str
) -> None:
    d, s = dev.check_command(line), strict.check_command(line)
    assert (d.decision, d.rule) == ("ask", rule), d
    assert (s.decision, s.rule) == ("deny", rule), s


def test_here_doc_writes_are_judged(dev: Policy) -> None:
    assert dev.check_command("cat <<'EOF' > src/a.py\nx = 1\nEOF").decision == "allow"
    decision = dev.check_command("cat <<'EOF' > /etc/cron.d/x\n* * * * * id\nEOF")
    assert (decision.decision, decision.rule) == ("deny", "path.outside_workspace")


def test_quoted_here_doc_body_is_not_executed(dev: Policy) -> None:
    assert dev.check_command("cat <<'EOF'\nrm -rf /\nEOF").decision == "allow"


def test_variables_assigned_literally_are_followed(dev: Policy) -> None:
    decision = dev.check_command('f=/etc/shadow; cat "$f"')
    assert decision.rule == "risk.secret_read"
    assert dev.check_command("d=src; ls $d").decision == "allow"


def test_cd_moves_the_directory_for_later_paths(dev: Policy, tmp_path: Path) -> None:
    decision = dev.check_command("cd .git && echo x > config")
    assert (decision.decision, decision.rule) == ("deny", "path.control")
    decision = dev.check_command("cd /etc && cat passwd")
    assert decision.decision == "deny"


def test_fast_split_only_for_plain_lines() -> None:
    assert fast_split("pytest -q tests/a.py") == ["pytest", "-q", "tests/a.py"]
    for line in ("A=1 ls", "ls *", "ls $x", "ls 'a b'", "if x", "ls ~", "ls\nid", "ls;id"):
        assert fast_split(line) is None


def test_empty_line_is_allowed(dev: Policy) -> None:
    assert dev.check_command("   ").rule == "command.empty"


def test_unknown_commands_follow_the_preset(dev: Policy, strict: Policy, tmp_path: Path) -> None:
    assert (dev.check_command("frobnicate --x").decision, dev.check_command("frobnicate").rule) == (
        "ask",
        "default.ask",
    )
    assert strict.check_command("frobnicate").rule == "default.deny"
    assert strict.check_command("pytest").decision == "deny"
    assert strict.check_command("git log --oneline").decision == "allow"
    assert strict.check_command("echo hi > notes.txt").rule == "preset.strict.no_writes"
    readonly = Policy.for_preset("readonly", tmp_path)
    assert readonly.check_command("ls -la").decision == "allow"
    assert readonly.check_command("touch a").decision == "deny"
    assert readonly.check_path("a.py", "write").rule == "preset.readonly.no_writes"
    assert readonly.check_url("https://pypi.org/simple").decision == "deny"


def test_privilege_and_absolute_commands_are_not_allowed(dev: Policy) -> None:
    assert dev.check_command("sudo ls").rule == "risk.privilege"
    assert dev.check_command("/usr/bin/id").decision == "ask"
    assert dev.check_command("/bin/ls").decision == "ask"


def test_globs_are_expanded_like_bash(dev: Policy, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOKEN=x\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    assert dev.check_command("cat .e*").rule == "risk.secret_read"
    assert dev.check_command("cat src/*.py").decision == "allow"
    assert dev.check_command("cp src/a.py .gi?/x").decision in ("allow", "deny")
    (tmp_path / ".git").mkdir()
    assert dev.check_command("cp src/a.py .gi?/x").rule == "path.protected"


@pytest.mark.parametrize(
    ("line", "decision", "rule"),
    [
        ("export PATH=/tmp/bin:$PATH; ls", "ask", "risk.path_override"),
        ("LD_PRELOAD=/tmp/x.so; ls", "deny", "risk.env_injection"),
        ("awk '{print > \"out\"}' f", "ask", "path.dynamic"),
        ("sed 's/a/b/w out.txt' f", "allow", "preset.developer.allow"),
        ("sed 's/a/b/w /etc/x' f", "deny", "path.outside_workspace"),
        ("sed 's/a/b/e' f", "ask", "risk.runs_program"),
        ("git diff --output=.git/config", "deny", "path.control"),
        ("watch -n1 'rm -rf /'", "deny", "risk.rm_recursive"),
        ("awk '$1 > 5 {print}' f", "allow", "preset.developer.allow"),
        ("sed -n 's/a/b/p' f", "allow", "preset.developer.allow"),
    ],
)
def test_hidden_writes_and_environment_tricks(
    dev: Policy, line: str, decision: str, rule: str
) -> None:
    result = dev.check_command(line)
    assert (result.decision, result.rule) == (decision, rule), result


def test_strict_allows_only_inspection_forms(strict: Policy, dev: Policy) -> None:
    for line in ("git branch", "git branch -a", "git tag", "git remote -v", "git status"):
        assert strict.check_command(line).decision == "allow", line
    for line in ("git branch feature", "git tag v1", "git remote add x y", "git branch -D x"):
        assert strict.check_command(line).decision == "deny", line
    assert dev.check_command("git branch feature").decision == "allow"
    assert dev.check_command("git branch -D feature").decision == "ask"


@pytest.mark.parametrize(
    ("line", "decision"),
    [
        ("echo $AWS_SECRET_ACCESS_KEY", "deny"),
        ("echo ${GITHUB_TOKEN:-none}", "deny"),
        ('curl -H "Authorization: Bearer $API_KEY" https://pypi.org/', "deny"),
        ("TOKEN=abc; echo $TOKEN", "allow"),
        ("echo $HOME $PATH $AUTHOR", "allow"),
    ],
)
def test_credential_variables_are_not_expanded(dev: Policy, line: str, decision: str) -> None:
    result = dev.check_command(line)
    assert result.decision == decision, result
    if decision == "deny":
        assert result.rule == "risk.secret_read"
