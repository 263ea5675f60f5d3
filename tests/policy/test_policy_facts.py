"""``Policy.command_facts``: one parse of a command line answers every question about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.policy import Policy
from keel.policy._facts import CONSERVATIVE, CommandFacts


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.for_preset("developer", Path("/w"))


@pytest.mark.parametrize(
    ("command", "written", "mutates", "read_only", "test_run"),
    [
        ("ls -la src", (), False, True, False),
        ("git diff --stat && git status", (), False, True, False),
        ("cat a.txt > b.txt", ("/w/b.txt",), True, False, False),
        ("echo hi >> notes.md 2>&1", ("/w/notes.md",), True, False, False),
        ("grep x y 2>/dev/null", (), False, True, False),
        ("sed -i 's/a/b/' src/x.py src/y.py", ("/w/src/x.py", "/w/src/y.py"), True, False, False),
        ("rm -rf build", ("/w/build",), True, False, False),
        ("cp a.py b.py", ("/w/b.py",), True, False, False),
        ("git checkout -- src/x.py", ("/w/src/x.py",), True, False, False),
        ("find . -name '*.pyc' -delete", (), True, False, False),
        ("cat <<'EOF' > gen.py\nx = a > b\nEOF", ("/w/gen.py",), True, False, False),
        ("bash -lc 'pytest -q'", (), False, False, True),
        ("cd web && npm test", (), False, False, True),
        ("python -m pytest tests/test_x.py -k foo", (), False, False, True),
        ("python script.py", (), True, False, False),
        ("pytest -q > log.txt", ("/w/log.txt",), True, False, True),
        # the regexes of the monitor called these read-only; the parser knows better
        ("env rm -rf build", ("/w/build",), True, False, False),
        ("git branch -D main", (), True, False, False),
        ("sed s/a/b/w out f", (), True, False, False),
        ("", (), False, True, False),
    ],
)
def test_command_facts(
    policy: Policy,
    command: str,
    written: tuple[str, ...],
    mutates: bool,
    read_only: bool,
    test_run: bool,
) -> None:
    facts = policy.command_facts(command, "/w")
    assert facts.written == written
    assert (facts.mutates, facts.read_only, facts.test_run) == (mutates, read_only, test_run)
    assert facts.read_only == policy.is_read_only(command, "/w")


@pytest.mark.parametrize(
    "command",
    [
        "pytest",
        "py.test -x",
        "python3 -u -m pytest",
        "python -m unittest discover",
        "coverage run -m pytest",
        "tox -e py311",
        "nox",
        "npm test",
        "yarn test",
        "pnpm run test",
        "bun run test:unit",
        "yarn jest",
        "npx vitest run",
        "go test ./...",
        "cargo test",
        "cargo +nightly test",
        "make test",
        "make -C web check",
        "jest --ci",
        "vitest",
        "mocha",
        "rspec spec/a_spec.rb",
        "phpunit",
        "ctest --output-on-failure",
        "mvn -q test",
        "gradle test",
        "./gradlew test",
        "uv run pytest -q",
        "poetry run pytest",
        ".venv/bin/pytest -q",
        "bash -lc 'pytest -q'",
        "env X=1 pytest",
        "cd t && pytest",
        "timeout 600 pytest -q",
    ],
)
def test_test_runs_are_read_on_the_parsed_argv(policy: Policy, command: str) -> None:
    assert policy.command_facts(command).test_run, command


@pytest.mark.parametrize(
    "command",
    [
        "pip install pytest",
        "echo pytest",
        "npm run build",
        "go vet ./...",
        "make",
        "cat tests/test_a.py",
        "grep -rn pytest .",
        "python tests.py",
        "pytest -q 'unbalanced",
    ],
)
def test_other_commands_are_not_test_runs(policy: Policy, command: str) -> None:
    assert not policy.command_facts(command).test_run, command


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q", True),
        ("  pytest   -q ", True),
        ("cd /w && pytest -q", True),
        ("cd src && pytest -q", True),
        ("pytest -q 2>&1", True),
        ("pytest -q > log.txt", True),
        ("bash -lc 'pytest -q'", True),
        ("env X=1 pytest -q", True),
        ("pytest -q && echo ok", True),
        ("(cd src && pytest -q)", True),
        ("pytest -q || true", False),
        ("pytest -q | tail -3", False),
        ("pytest -q; echo done", False),
        ("pytest -q &", False),
        ("! pytest -q", False),
        ("if pytest -q; then echo ok; fi", False),
        ("echo $(pytest -q)", False),
        ("watch pytest -q", False),
        ("pytest -q tests/test_one.py", False),
        ("pytest", False),
        ("pytest -q 'unbalanced", False),
    ],
)
def test_runs_a_gate_only_when_its_status_is_the_lines(
    policy: Policy, command: str, expected: bool
) -> None:
    assert policy.command_facts(command, "/w").runs("pytest -q") is expected


def test_a_gate_of_several_commands_runs_when_each_does_in_order(policy: Policy) -> None:
    gate = "ruff check . && pytest -q"
    assert policy.command_facts("ruff check . && pytest -q").runs(gate)
    assert policy.command_facts("ruff check . && pytest -q 2>&1").runs(gate)
    assert not policy.command_facts("ruff check . ; pytest -q").runs(gate)
    assert not policy.command_facts("pytest -q && ruff check .").runs(gate)
    assert not policy.command_facts("pytest -q").runs(gate)
    assert not policy.command_facts("pytest -q").runs("pytest -q 'unbalanced")


def test_words_are_each_simple_command_with_wrappers_unwrapped(policy: Policy) -> None:
    facts = policy.command_facts("bash -lc 'rm tests/a.py' && echo $HOME $X", "/w")
    assert ("rm", "tests/a.py") in facts.words
    assert ("bash", "-lc", "rm tests/a.py") in facts.words
    assert facts.words[-1][0] == "echo" and facts.words[-1][-1] == ""


@pytest.mark.parametrize("line", ["ls\x00 -la", "ls " + "a" * 2_000_000, None, ["ls"], 3])
def test_unreadable_input_gets_the_conservative_answer(policy: Policy, line: object) -> None:
    facts = policy.command_facts(line)  # pyright: ignore[reportArgumentType]
    assert facts == CONSERVATIVE
    assert (facts.read_only, facts.mutates, facts.test_run) == (False, True, False)
    assert not facts.runs("pytest -q")


def test_an_unparseable_line_is_conservative_but_keeps_what_it_writes(policy: Policy) -> None:
    facts = policy.command_facts("echo x > out.txt; grep 'unbalanced", "/w")
    assert (facts.read_only, facts.mutates, facts.test_run) == (False, True, False)
    assert facts.written == ("/w/out.txt",)


def test_an_error_inside_gives_the_conservative_answer(
    policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: object) -> bool:
        raise RuntimeError("a bug in a rule")

    fresh = Policy.for_preset("developer", Path("/w"))
    monkeypatch.setattr(fresh._engine, "is_read_only", boom)  # pyright: ignore[reportPrivateUsage]
    assert fresh.command_facts("ls") == CONSERVATIVE
    assert fresh.is_read_only("ls") is False


def test_facts_are_remembered_per_line_and_cwd(policy: Policy) -> None:
    one = policy.command_facts("rm a.txt", "/w")
    assert policy.command_facts("rm a.txt", "/w") is one
    other = policy.command_facts("rm a.txt", "/w/sub")
    assert other.written == ("/w/sub/a.txt",)
    assert isinstance(one, CommandFacts)
