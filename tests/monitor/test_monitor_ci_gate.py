"""``keel monitor scan`` as a CI gate (``--fail-on``), and mini-swe-agent's bare message lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from _support import keel
from keel.cli.monitor import register
from keel.config import parse_config
from keel.core.errors import UsageError
from keel.core.events import ToolCallPayload, ToolResultPayload
from keel.monitor.formats import detect_format, read_run
from keel.monitor.scan import FAIL_EXIT, scan_file

SAMPLES = Path(__file__).resolve().parent / "samples"
BARE = SAMPLES / "mini_swe_agent_messages.traj.json"
WRAPPED = SAMPLES / "mini_swe_agent.traj.json"
TOOLCALLS = SAMPLES / "mini_swe_agent_toolcalls.traj.json"
BARE_EXPECTED = [
    (6, "failure", "hint"),
    (7, "repeat", "hint"),
    (7, "failure", "correct"),
    (8, "unverified_finish", "hint"),
]


def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _main(ctx: typer.Context) -> None:
        ctx.obj = {"workspace": None}

    register(root)
    return root


def invoke(*args: str) -> object:
    return CliRunner().invoke(app(), ["monitor", "scan", *args])


# -- the bare list of messages ----------------------------------------------------------------


def test_bare_message_list_is_detected_and_read() -> None:
    assert json.loads(BARE.read_text())[0]["role"] == "system"  # a list, as mini-swe-agent keeps
    assert detect_format(BARE) == "mini-swe-agent"
    fmt, events = read_run(BARE)
    assert fmt == "mini-swe-agent"
    calls = [e.payload for e in events if isinstance(e.payload, ToolCallPayload)]
    assert [c.command for c in calls][:2] == ["ls -R src tests", "nl -ba src/calc.py"]
    assert len(calls) == 8  # the submit command is a claim, not a call
    assert events[0].kind == "prompt" and events[-1].kind == "session.end"
    assert events[-1].payload.data == {"claim": True}  # type: ignore[union-attr]


def test_bare_message_list_scans_like_the_wrapped_form(workdir: Path) -> None:
    report = scan_file(BARE, workspace=workdir)
    assert [(d.step, d.detector, d.level) for d in report.diagnostics] == BARE_EXPECTED
    explicit = scan_file(BARE, format="mini-swe-agent", workspace=workdir)
    assert explicit.diagnostics == report.diagnostics
    wrapped = workdir / "wrapped.traj.json"
    wrapped.write_text(json.dumps({"info": {}, "messages": json.loads(BARE.read_text())}))
    assert scan_file(wrapped, workspace=workdir).diagnostics == report.diagnostics


def test_bare_list_scope_is_judged_on_workspace_paths(workdir: Path) -> None:
    """Relative paths in the commands are workspace paths, as the live hook reads them."""
    config = parse_config('[scope]\ninclude = ["src/**", "tests/**"]\n')
    report = scan_file(BARE, config=config, workspace=workdir)
    scope = [(d.step, d.evidence) for d in report.diagnostics if d.detector == "scope"]
    # the sed on src/calc.py (step 4) is in scope; the note in docs/ (step 8) is not
    assert scope == [(8, {"paths": [f"{workdir}/docs/NOTES.md"]})]


def test_fences_of_both_mini_swe_agent_generations_are_read(workdir: Path) -> None:
    """mini-swe-agent's test trajectories fence commands as ```mswea_bash_command (today's)
    or ```bash (older ones): the same commands either way."""
    messages = json.loads(BARE.read_text())
    assert "```mswea_bash_command\n" in messages[2]["content"]
    older = workdir / "older.traj.json"
    older.write_text(BARE.read_text().replace("```mswea_bash_command\\n", "```bash\\n"))
    assert "```bash\n" in json.loads(older.read_text())[2]["content"]
    assert (
        scan_file(older, workspace=workdir).diagnostics
        == scan_file(BARE, workspace=workdir).diagnostics
    )


def _results(path: Path) -> list[tuple[str | None, bool, int | None]]:
    _, events = read_run(path)
    calls = {
        e.payload.tool_use_id: e.payload.command
        for e in events
        if isinstance(e.payload, ToolCallPayload)
    }
    return [
        (calls[e.payload.tool_use_id], e.payload.ok, e.payload.exit_code)
        for e in events
        if isinstance(e.payload, ToolResultPayload)
    ]


TOOLCALL_RESULTS = [
    ("ls -R src tests", True, 0),
    ("python -m pytest -q tests/test_calc.py", False, 1),
    ("sed -i '2s/a - b/a + b/' src/calc.py", True, 0),
    ("python -m pytest -q tests/test_calc.py", False, 1),
    ("python -m pytest -q tests/test_calc.py", False, 1),
]


def test_tool_call_trajectory_reads_return_codes_and_the_exit(workdir: Path) -> None:
    """mini-swe-agent 2's saved form: tool calls, JSON observations, an ``exit`` message."""
    assert detect_format(TOOLCALLS) == "mini-swe-agent"
    assert _results(TOOLCALLS) == TOOLCALL_RESULTS
    report = scan_file(TOOLCALLS, workspace=workdir)
    assert [(d.step, d.detector, d.level) for d in report.diagnostics] == [
        (5, "failure", "hint"),
        (5, "unverified_finish", "hint"),
    ]
    data = json.loads(TOOLCALLS.read_text())
    for message in data["messages"]:  # without the recorded extras: the JSON text alone
        if message["role"] != "exit":
            message.pop("extra", None)
    # a bare list without the submit call: the claim comes from the exit message alone
    bare = workdir / "bare.traj.json"
    bare.write_text(json.dumps(data["messages"][:-2] + data["messages"][-1:]))
    assert _results(bare) == TOOLCALL_RESULTS
    assert scan_file(bare, workspace=workdir).diagnostics == report.diagnostics


@pytest.mark.parametrize("content", ["[]", "[1, 2]", '[{"no_role": 1}]'])
def test_lists_that_are_not_messages_are_not_guessed(workdir: Path, content: str) -> None:
    path = workdir / "x.json"
    path.write_text(content)
    with pytest.raises(Exception) as info:
        detect_format(path)
    assert getattr(info.value, "code", None) == "payload.scan_format"


# -- --fail-on ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "code", "reached"),
    [("hint", FAIL_EXIT, 4), ("correct", FAIL_EXIT, 1), ("replan", 0, 0), ("stop", 0, 0)],
)
def test_fail_on_gives_a_ci_exit_code(workdir: Path, level: str, code: int, reached: int) -> None:
    result = invoke(str(BARE), "--fail-on", level, "--json", "-w", str(workdir))
    assert result.exit_code == code, result.output  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert (data["fail_on"], data["reached"], data["exit_code"]) == (level, reached, code)
    text = invoke(str(BARE), "--fail-on", level, "-w", str(workdir))
    assert text.exit_code == code  # type: ignore[attr-defined]
    assert f"--fail-on {level}: {reached} diagnostic(s)" in text.stdout  # type: ignore[attr-defined]


def test_without_fail_on_findings_exit_zero(workdir: Path) -> None:
    result = invoke(str(WRAPPED), "-w", str(workdir))
    assert result.exit_code == 0  # type: ignore[attr-defined]
    assert scan_file(WRAPPED, workspace=workdir).exit_code(None) == 0


def test_fail_on_correct_catches_scope_in_the_workspace(workdir: Path) -> None:
    """The reported case: correct-level diagnostics used to exit 0."""
    (workdir / "keel.toml").write_text('[scope]\ninclude = ["src/**", "tests/**"]\n')
    result = invoke(str(BARE), "--fail-on", "correct", "--json", "-w", str(workdir))
    assert result.exit_code == FAIL_EXIT  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert data["reached"] == 2  # the failure loop and the edit outside [scope]


def test_fail_on_rejects_unknown_levels(workdir: Path) -> None:
    result = invoke(str(BARE), "--fail-on", "severe", "-w", str(workdir))
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "usage.fail_on" in result.stderr  # type: ignore[attr-defined]
    with pytest.raises(UsageError):
        scan_file(BARE, workspace=workdir).at_or_above("severe")  # type: ignore[arg-type]


def test_unreadable_file_is_an_error_not_a_pass(workdir: Path) -> None:
    result = invoke(str(workdir / "absent.json"), "--fail-on", "stop", "-w", str(workdir))
    assert result.exit_code == 1  # type: ignore[attr-defined]


def test_real_cli_exit_code(workdir: Path) -> None:
    """The console script, as CI runs it."""
    proc = keel(
        "monitor", "scan", str(BARE), "--fail-on", "correct", "-w", str(workdir), cwd=workdir
    )
    assert proc.returncode == FAIL_EXIT, proc.stdout + proc.stderr
    assert "the scan fails (exit 3)" in proc.stdout


# -- help -----------------------------------------------------------------------------------


def test_help_has_examples_and_keeps_bracketed_words() -> None:
    from keel.cli.main import app as main_app

    runner = CliRunner()
    for args in (["monitor", "--help"], ["monitor", "scan", "--help"]):
        result = runner.invoke(main_app, args, env={"COLUMNS": "200", "NO_COLOR": "1"})
        assert result.exit_code == 0, result.output
        assert "Examples:" in result.stdout and "keel monitor scan" in result.stdout
    scan_help = runner.invoke(main_app, ["monitor", "scan", "-h"], env={"COLUMNS": "200"})
    assert "[scope]" in scan_help.stdout and "--fail-on" in scan_help.stdout
    assert "exit 3" in scan_help.stdout
