from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from _support import keel
from keel.cli import hook as hook_cli

HEAVY = ("typer", "pydantic", "rich", "yaml", "click")


def test_usage_errors_fail_closed_with_exit_2(workdir: Path) -> None:
    for args in (
        [],
        ["PreToolUse"],
        ["PreToolUse", "--agent"],
        ["PreToolUse", "--agent", "claude", "--bogus"],
        ["PreToolUse", "--agent", "claude", "--deadline", "soon"],
    ):
        proc = keel("hook", *args, input="{}", cwd=workdir)
        assert proc.returncode == 2, args
        assert "blocked to be safe" in proc.stderr and "usage: keel hook" in proc.stderr


def test_bad_stdin_fails_closed_through_the_console_entry(workdir: Path) -> None:
    args = ["PreToolUse", "--agent", "claude", "--workspace", str(workdir)]
    proc = keel("hook", *args, input="{nope", cwd=workdir)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "payload.json" in proc.stderr


def test_fail_open_flag_passes_and_is_recorded(workdir: Path) -> None:
    args = ["BeforeTool", "--agent", "gemini", "--fail-open", "--workspace", str(workdir)]
    proc = keel("hook", *args, input="", cwd=workdir)
    assert proc.returncode == 0 and proc.stdout.strip() == "{}"
    (line,) = (workdir / ".keel" / "hook-errors.jsonl").read_text().splitlines()
    assert json.loads(line)["fail_open"] is True


def test_the_hook_path_does_not_import_typer_or_pydantic(workdir: Path) -> None:
    args = ["PreToolUse", "--agent", "claude", "--workspace", str(workdir)]
    # -X importtime, for the console script: each import is listed on stderr
    proc = keel("hook", *args, input="{nope", cwd=workdir, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 2
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if "|" in line
    }
    assert "keel" in imported
    assert not imported & set(HEAVY), imported & set(HEAVY)


def test_hook_is_also_a_typer_command(workdir: Path) -> None:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    hook_cli.register(app)
    result = CliRunner().invoke(
        app, ["hook", "Stop", "--agent", "codex", "--workspace", str(workdir)], input="[]"
    )
    assert result.exit_code == 2
    assert "payload.shape" in result.output


def test_parse_args_reads_options_in_any_order(monkeypatch) -> None:
    from keel.hook.main import parse_hook_args

    monkeypatch.setenv("KEEL_HOOK_DEADLINE", "4.5")
    opts = parse_hook_args(["--agent=codex", "Stop", "--fail-open", "-w", "/x"])
    assert (opts.event, opts.agent, opts.fail_open, opts.deadline, opts.workspace) == (
        "Stop",
        "codex",
        True,
        4.5,
        "/x",
    )


def test_a_missed_deadline_ends_the_process_with_a_block(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    payload = json.dumps(
        {"session_id": "d", "tool_name": "Bash", "tool_input": {"command": "touch x"}}
    )
    args = ["PreToolUse", "--agent", "claude", "--deadline", "0.001", "--workspace", str(workdir)]
    proc = keel("hook", *args, input=payload, cwd=workdir)
    assert proc.returncode == 2 and "hook.deadline" in proc.stderr and proc.stdout == ""
