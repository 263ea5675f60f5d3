"""Help everywhere: ``-h`` and ``--help`` on every command, ``--version``, examples, completion."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from cli_bad_input_helpers import hook_payload
from typer.core import TyperGroup

from _support import KEEL, keel_env
from keel import __version__
from keel.cli._entry import main as keel_main
from keel.cli.main import app

WIDE = {"COLUMNS": "200", "TERMINAL_WIDTH": "200"}
"""A wide page, so rich wraps no line of the help text we look for."""


def _commands(group: TyperGroup, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path of the application, groups included: ("plan",), ("plan", "run")."""
    for name, command in group.commands.items():
        yield (*path, name)
        if isinstance(command, TyperGroup):
            yield from _commands(command, (*path, name))


COMMANDS = sorted(_commands(typer.main.get_command(app)))  # pyright: ignore[reportArgumentType]
LEAVES = [
    p
    for p in COMMANDS
    if not any(len(q) > len(p) and q[: len(p)] == p for q in COMMANDS)  # not a group
]


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``keel ARGV`` in this process through the console entry: (exit code, stdout)."""
    if argv[:1] == ["hook"]:  # keel.hook.main.main ends the process: ask its ``run`` instead
        from keel.hook.main import run

        code, out, _ = run(argv[1:])
        return code, out.decode()
    code = keel_main(argv)
    return code, capsys.readouterr().out


def test_the_walk_finds_every_command() -> None:
    found = {" ".join(p) for p in COMMANDS}
    assert {"hook", "exec", "wrap", "plan run", "checkpoint list", "completion"} <= found
    assert len(LEAVES) >= 30


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("path", [(), *COMMANDS], ids=lambda p: " ".join(p) or "keel")
def test_every_command_has_help(
    path: tuple[str, ...], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _help([*path, flag], capsys)
    assert code == 0, out
    assert "usage: keel" in out.lower().replace("\n", " "), out
    assert "<bool>" not in out  # a flag takes no value: no placeholder after it


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_help_page_has_examples(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in WIDE.items():
        monkeypatch.setenv(name, value)
    code, out = _help([*path, "--help"], capsys)
    assert code == 0
    examples = out.split("Examples:", 1)
    assert len(examples) == 2, out
    assert f"keel {' '.join(path)}" in examples[1], out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert keel_main(["--version"]) == 0
    assert capsys.readouterr().out == f"keel {__version__}\n"


def test_diff_help_keeps_the_word_scope(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in WIDE.items():
        monkeypatch.setenv(name, value)
    code, out = _help(["diff", "--help"], capsys)
    assert code == 0
    assert "List only changed files outside [scope]." in out
    assert "changed files outside [scope]" in out.split("Examples:")[1]


def test_hook_help_from_the_console_script_and_the_launcher(workdir: Path) -> None:
    launcher = [
        sys.executable,
        "-c",
        "import sys; from keel.hook.main import run, main\n"
        "code, out, err = run(['--help'])\n"
        "heavy = [m for m in ('typer', 'rich', 'keel.cli', 'keel.guard') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "main()",
        "hook",
        "--help",
    ]
    for argv in ([KEEL, "hook", "--help"], [KEEL, "hook", "-h"], launcher):
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=workdir, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("usage: keel hook EVENT --agent"), proc.stdout
        assert "Examples:" in proc.stdout and "blocked" not in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["PreToolUse", "--agent", "claude", "--help"],
        ["--help", "PreToolUse", "--agent", "claude"],
        ["-h", "PreToolUse", "--agent", "claude"],
    ],
)
def test_help_never_answers_a_hook_call(workdir: Path, args: list[str]) -> None:
    """A call that carries -h/--help is bad usage: blocked (exit 2), never help (exit 0)."""
    (workdir / ".git").mkdir()
    proc = subprocess.run(
        [KEEL, "hook", *args],
        input=hook_payload("claude", workdir),
        capture_output=True,
        cwd=workdir,
        env=keel_env(),
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"blocked to be safe" in proc.stderr and b"Examples:" not in proc.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert keel_main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert "_KEEL_COMPLETE=complete_" + shell in script and "keel" in script


def test_bash_completion_completes_commands(workdir: Path) -> None:
    """The bash script, loaded in a real bash, completes subcommands and options."""
    env = dict(os.environ, PATH=f"{Path(KEEL).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    script = (
        "source <(keel completion bash); COMP_WORDS=(keel checkpoint l); COMP_CWORD=2; "
        '_keel_completion keel; echo "${COMPREPLY[@]}"; '
        'COMP_WORDS=(keel log --si); COMP_CWORD=2; _keel_completion keel; echo "${COMPREPLY[@]}"'
    )
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, cwd=workdir, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["list", "--since"], proc.stdout


def test_completion_rejects_an_unknown_shell(capsys: pytest.CaptureFixture[str]) -> None:
    assert keel_main(["completion", "powershell"]) == 2
    assert "powershell" in capsys.readouterr().err
