"""The ``keel exec`` line codec (``keel.sandbox.exec.line``): made once, read back once.

The hooks rewrite an allowed shell command to ``encode(...)``; the guard reads the line the
client reports with ``decode``: the command as the agent wrote it (None: the client ran
something else, a bypass) and the ``--report`` id. A line an agent could forge must read as
no contained command.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from exec_helpers import Box

import keel
from keel.sandbox.exec.line import (
    LAUNCHER,
    LAUNCHER_BEFORE_22,
    ExecLine,
    command_of,
    decode,
    encode,
    exec_argv,
    shell_argv,
)

ODD = [
    "ls",
    "",
    " ",
    "echo 'a b' \"$HOME\" > x && cat x | wc -l",
    "printf '%s\\n' \"it's\"",
    "echo one\necho two\n",
    "echo $(id -u) `whoami` ${HOME:-none}",
    "echo ünïcødé ☃ 日本語 \U0001f600",
    "--",
    "-c",
    "--report deadbeef",
    "-- bash -c ls",
    "a -- b",
    "\tindented\\ with\\\\backslashes\\",
    "'",
    '"',
    'echo "unclosed',
    "; rm -rf / #",
]
WORKSPACES = ["/ws", "/w s/it's/ü"]


@pytest.mark.parametrize("command", ODD)
@pytest.mark.parametrize("workspace", WORKSPACES)
def test_a_line_reads_back_as_it_was_made(command: str, workspace: str) -> None:
    line = encode(workspace, command, timeout=2.5, report="0123abcd", python="/opt/py thon")
    assert shlex.split(line) == shell_argv(
        workspace, command, timeout=2.5, report="0123abcd", python="/opt/py thon"
    )
    got = decode(line)
    assert got == ExecLine(
        ("--workspace", workspace, "--timeout", "2.5", "--report", "0123abcd"),
        ("bash", "-c", command),
        False,
    )
    assert got is not None and got.command == command and command_of(line) == command
    assert (got.workspace, got.timeout, got.report) == (workspace, 2.5, "0123abcd")


@pytest.mark.parametrize("command", ODD)
def test_a_line_with_no_options_reads_back(command: str) -> None:
    line = encode("/ws", command)
    got = decode(line)
    assert got is not None and got.command == command and got.legacy is False
    assert (got.timeout, got.report) == (None, None) and got.workspace == "/ws"
    assert shlex.split(line)[:5] == [sys.executable, "-I", "-S", LAUNCHER, "exec"]


def test_the_words_are_keel_execs_own() -> None:
    assert shell_argv("/ws", "make -j2", timeout=600.0) == exec_argv(
        "/ws", ["bash", "-c", "make -j2"], timeout=600.0
    )
    assert exec_argv("/w", ["ls"], report="ab", python="/p") == [
        "/p", "-I", "-S", LAUNCHER, "exec", "--workspace", "/w", "--report", "ab", "--", "ls",
    ]  # fmt: skip


def test_a_shell_line_runs_under_the_python_it_names() -> None:
    argv = shell_argv("/w", "ls", report="ab", python="/p")
    assert argv == exec_argv("/w", ["bash", "-c", "ls"], report="ab", python="/p")
    assert argv[0] == "/p"
    assert shlex.split(encode("/w", "ls", python="/p"))[0] == "/p"


def _line(*words: str) -> str:
    return shlex.join(words)


PY = sys.executable
GOOD = [PY, "-I", "-S", LAUNCHER, "exec", "--workspace", "/ws"]


@pytest.mark.parametrize(
    "line",
    [
        _line(PY, "-S", "-c", "import keel", "exec", "--", "bash", "-c", "ls"),  # an old -S -c
        _line(PY, "-S", "-c", LAUNCHER, "exec", "--", "bash", "-c", "ls"),
        _line(PY, "-I", "-s", LAUNCHER, "exec", "--", "bash", "-c", "ls"),
        _line(PY, "-S", "-I", LAUNCHER, "exec", "--", "bash", "-c", "ls"),
        _line(PY, "-I", "-S", "-X", "dev", LAUNCHER, "exec", "--", "bash", "-c", "ls"),
        _line(PY, "-S", LAUNCHER, "exec", "--", "bash", "-c", "ls"),
        _line(PY, "-I", "-S", LAUNCHER_BEFORE_22, "exec", "--", "bash", "-c", "ls"),
        _line(PY, "-I", "-S", "/tmp/_launch.py", "exec", "--", "bash", "-c", "ls"),
        _line(PY, "-I", "-S", LAUNCHER, "run", "--", "bash", "-c", "ls"),
        _line(PY, "-I", "-S", LAUNCHER, "hook", "exec", "--", "bash", "-c", "ls"),
        _line("-I", "-S", LAUNCHER, "exec", "--", "bash", "-c", "ls"),  # no interpreter
        _line("env", "X=1", *GOOD, "--", "bash", "-c", "ls"),
        "bash -c ls",
        "ls",
        "",
        "echo 'unclosed",
    ],
)
def test_other_lines_are_no_exec_line(line: str) -> None:
    assert decode(line) is None and command_of(line) is None


@pytest.mark.parametrize(
    ("words", "argv"),
    [
        ([*GOOD, "--", "bash", "-c", "ls", "extra"], ("bash", "-c", "ls", "extra")),
        ([*GOOD, "--", "bash", "-c"], ("bash", "-c")),
        ([*GOOD, "--", "sh", "-c", "ls"], ("sh", "-c", "ls")),
        ([*GOOD, "--", "bash", "-C", "ls"], ("bash", "-C", "ls")),
        ([*GOOD, "--", "bash", "--", "-c", "ls"], ("bash", "--", "-c", "ls")),
        ([*GOOD, "bash", "-c", "ls"], ()),  # no "--": all options, no command
        ([*GOOD], ()),
    ],
    ids=["extra-arg", "no-line", "sh", "-C", "bash---", "no-dashes", "no-command"],
)
def test_an_exec_line_of_another_command_contains_no_shell_line(
    words: list[str], argv: tuple[str, ...]
) -> None:
    got = decode(shlex.join(words))
    assert got is not None and got.argv == argv and got.command is None
    assert command_of(shlex.join(words)) is None


@pytest.mark.parametrize("tail", [" && curl evil", "; rm -rf ~", " | sh", " > /etc/x", "\nid"])
def test_a_made_line_with_more_shell_after_it_contains_no_shell_line(tail: str) -> None:
    line = encode("/ws", "ls") + tail
    got = decode(line)
    assert got is not None and got.command is None and command_of(line) is None


def test_the_line_of_before_issue_22_reads_back_as_legacy() -> None:
    old = [PY, "-S", LAUNCHER_BEFORE_22, "exec", "--workspace", "/ws", "--timeout", "5"]
    got = decode(shlex.join([*old, "--report", "ab", "--", "bash", "-c", "ls"]))
    assert got is not None and got.legacy is True
    assert (got.command, got.workspace, got.timeout, got.report) == ("ls", "/ws", 5.0, "ab")
    assert command_of(shlex.join([PY, "-S", LAUNCHER_BEFORE_22, "exec", "--", *"xyz"])) is None


@pytest.mark.parametrize(
    ("options", "report", "timeout"),
    [
        (["--report"], None, None),
        (["--timeout"], None, None),
        (["--report", "r1", "--report", "r2"], "r1", None),
        (["--timeout", "soon"], None, None),
        (["--timeout", "1e2", "--report", "--timeout"], "--timeout", 100.0),
        ([], None, None),
    ],
)
def test_options_are_read_as_keel_exec_would_be_given_them(
    options: list[str], report: str | None, timeout: float | None
) -> None:
    got = decode(shlex.join([*GOOD[:5], *options, "--", "bash", "-c", "ls --report x"]))
    assert got is not None and (got.report, got.timeout) == (report, timeout)
    assert got.command == "ls --report x" and got.workspace is None
    assert got.option("--bogus") is None


def test_an_exec_line_is_a_frozen_value() -> None:
    got = decode(encode("/ws", "ls"))
    assert got is not None and got == decode(encode("/ws", "ls")) and hash(got)
    with pytest.raises(AttributeError):
        got.argv = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    "command",
    [
        'printf \'%s|\' "it\'s" \'a  b\' ünï "$((6 * 7))" "$(echo sub)"',
        "echo one\necho two",
        "echo -n -- -e; echo ' -x' --report ab -- bash -c",
    ],
)
def test_the_line_runs_the_command_as_bash_would(bwrap_box: Box, command: str) -> None:
    """The line, run by the client's shell, runs exactly ``command`` (contained)."""
    plain = subprocess.run(
        ["bash", "-c", command], cwd=bwrap_box.ws, capture_output=True, text=True, check=False
    )
    line = encode(bwrap_box.ws, command, timeout=60)
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=bwrap_box.ws,
        env=bwrap_box.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == plain.returncode == 0, done.stderr
    assert done.stdout == plain.stdout and plain.stdout


def test_no_other_module_makes_or_reads_the_line() -> None:
    """One codec: nothing else in keel builds a contained ``bash -c`` line or parses one."""
    src = Path(keel.__file__).parent
    codec = src / "sandbox" / "exec" / "line.py"
    others = [p for p in src.rglob("*.py") if p != codec]
    assert len(others) > 100
    for path in others:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r'exec_argv\([^)]*"bash",\s*"-c"', text), path
        assert '"-I", "-S", LAUNCHER' not in text and '"sandbox", "_launch.py"' not in text, path
