"""``keel monitor scan`` over a faithful sample of every recorded-run format."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from keel.cli.monitor import register
from keel.config import parse_config
from keel.core.errors import PayloadError, UserError
from keel.core.events import DataPayload, Event, ToolCallPayload, ToolResultPayload
from keel.journal import open_journal
from keel.monitor.formats import detect_format, read_run
from keel.monitor.scan import render_text, scan_file

SAMPLES = Path(__file__).resolve().parent / "samples"

EXPECTED = {
    "claude_transcript.jsonl": (
        "claude",
        [
            (5, "repeat", "hint"),
            (9, "failure", "hint"),
            (10, "test_weakening", "correct"),
            (12, "unverified_finish", "hint"),
        ],
    ),
    "codex_rollout.jsonl": (
        "codex",
        [
            (4, "repeat", "hint"),
            (4, "failure", "correct"),
            (5, "repeat", "correct"),
            (7, "test_weakening", "correct"),
        ],
    ),
    "mini_swe_agent.traj.json": (
        "mini-swe-agent",
        [(4, "repeat", "hint"), (5, "repeat", "correct"), (9, "unverified_finish", "hint")],
    ),
    "swe_agent.traj": (
        "swe-agent",
        [(7, "alternation", "replan"), (9, "unverified_finish", "hint")],
    ),
    "keel_session.jsonl": ("keel", [(7, "plan_drift", "hint"), (9, "unverified_finish", "hint")]),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scan_finds_the_problems_of_each_sample(name: str) -> None:
    fmt, expected = EXPECTED[name]
    report = scan_file(SAMPLES / name)
    assert report.format == fmt
    assert [(d.step, d.detector, d.level) for d in report.diagnostics] == expected
    for d in report.diagnostics:
        assert d.message and d.evidence


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_explicit_format_matches_detection(name: str) -> None:
    fmt, _ = EXPECTED[name]
    assert detect_format(SAMPLES / name) == fmt
    assert (
        scan_file(SAMPLES / name, format=fmt).diagnostics == scan_file(SAMPLES / name).diagnostics
    )  # pyright: ignore[reportArgumentType]


def test_readers_pair_every_result_with_its_call() -> None:
    for name in EXPECTED:
        _, events = read_run(SAMPLES / name)
        calls = [e.payload.tool_use_id for e in events if isinstance(e.payload, ToolCallPayload)]
        results = [
            e.payload.tool_use_id for e in events if isinstance(e.payload, ToolResultPayload)
        ]
        assert calls and set(results) <= set(calls), name


def test_claude_reader_counts_tokens_once_per_message_and_reads_errors() -> None:
    _, events = read_run(SAMPLES / "claude_transcript.jsonl")
    responses = [e for e in events if e.kind == "model.response"]
    assert len(responses) == 13
    failed = [
        e.payload for e in events if isinstance(e.payload, ToolResultPayload) and not e.payload.ok
    ]
    assert len(failed) == 3 and all(p.exit_code == 1 for p in failed)
    assert events[-1].kind == "session.end"


def test_codex_reader_unwraps_shell_and_reads_patches() -> None:
    _, events = read_run(SAMPLES / "codex_rollout.jsonl")
    calls = [e.payload for e in events if isinstance(e.payload, ToolCallPayload)]
    assert calls[1].command == "python -m pytest -q tests/test_api.py"
    patch = next(c for c in calls if c.tool == "apply_patch")
    assert patch.kind == "edit" and patch.paths == ["tests/test_api.py"]
    prompts = [e for e in events if e.kind == "prompt"]
    assert len(prompts) == 1  # the environment context is not a user prompt


def test_gates_from_the_workspace_config_change_the_verdict() -> None:
    config = parse_config('[gates]\nrequired = ["pytest -q"]\n')
    report = scan_file(SAMPLES / "keel_session.jsonl", config=config)
    last = report.diagnostics[-1]
    assert (last.detector, last.level) == ("unverified_finish", "correct")
    assert "failed at step 9" in last.message


def test_scan_reads_a_journal_database(workdir: Path) -> None:
    lines = (SAMPLES / "keel_session.jsonl").read_text().splitlines()
    with open_journal(workdir) as journal:
        for line in lines:
            journal.append(Event.from_json(line))
        journal.append(Event("tool.call", "other", ToolCallPayload("Bash", "exec", "ls")))
    db = workdir / ".keel" / "journal.db"
    report = scan_file(db)
    assert report.format == "keel" and len(report.runs) == 2
    only = scan_file(workdir, session="keel-demo-7f3a")
    assert [d.detector for d in only.diagnostics] == ["plan_drift", "unverified_finish"]
    prefixed = scan_file(workdir, session="keel-demo")  # a unique prefix, as `keel show` takes
    assert [r.session_id for r in prefixed.runs] == ["keel-demo-7f3a"]
    with pytest.raises(UserError) as caught:
        scan_file(workdir, session="nosuch")
    assert caught.value.code == "monitor.session_unknown"


def test_a_long_loop_is_reported_with_its_stop(workdir: Path) -> None:
    events = []
    for i in range(20):
        events.append(
            Event(
                "tool.call", "s", ToolCallPayload("Bash", "exec", "make", tool_use_id=f"c{i}"), ts=i
            )
        )
        events.append(
            Event(
                "tool.result",
                "s",
                ToolResultPayload("Bash", True, "make: Nothing to be done", tool_use_id=f"c{i}"),
                ts=i,
            )
        )
    path = workdir / "loop.jsonl"
    path.write_text("".join(e.to_json() + "\n" for e in events))
    report = scan_file(path)
    repeat = [d.level for d in report.diagnostics if d.detector == "repeat"]
    assert repeat == ["hint", "correct", "replan", "stop"]
    assert "no_progress" in {d.detector for d in report.diagnostics}
    assert report.runs[0].stopped_at == 12
    assert "would have stopped this session at step 12" in render_text(report)


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("not json at all\n", "payload.scan_format"),
        ('{"foo": 1}\n', "payload.scan_format"),
        ('{"trajectory": 3, "x": [\n1]}', "payload.scan_format"),
        ('{"messages": [1, 2], "x": {\n}}', None),
    ],
)
def test_malformed_files_give_structured_errors(
    workdir: Path, content: str, code: str | None
) -> None:
    path = workdir / "bad.json"
    path.write_text(content)
    if code is None:
        assert scan_file(path).diagnostics == ()
        return
    with pytest.raises(PayloadError) as info:
        scan_file(path)
    assert info.value.code == code


def test_wrong_explicit_format_is_a_payload_error() -> None:
    with pytest.raises(PayloadError):
        scan_file(SAMPLES / "swe_agent.traj", format="mini-swe-agent")


def test_missing_file_is_a_user_error(workdir: Path) -> None:
    with pytest.raises(UserError) as info:
        scan_file(workdir / "nope.jsonl", format="claude")
    assert info.value.code == "monitor.read"


def test_a_torn_last_line_is_ignored(workdir: Path) -> None:
    path = workdir / "torn.jsonl"
    text = (SAMPLES / "claude_transcript.jsonl").read_text()
    path.write_text(text + '{"type": "assistant", "message": {"content": [{"type": "tool')
    assert len(scan_file(path).diagnostics) == 4


# ---------------------------------------------------------------------------------------------
# CLI


def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _main(ctx: typer.Context) -> None:
        ctx.obj = {"workspace": None}

    register(root)
    return root


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cli_scan_json(name: str, workdir: Path) -> None:
    result = CliRunner().invoke(
        app(), ["monitor", "scan", str(SAMPLES / name), "--json", "-w", str(workdir)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["format"] == EXPECTED[name][0]
    steps = [
        (d["step"], d["detector"], d["level"]) for run in data["runs"] for d in run["diagnostics"]
    ]
    assert steps == EXPECTED[name][1]


def test_cli_scan_text_and_workspace_gates(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[gates]\nrequired = ["pytest -q"]\n')
    sample = workdir / "run.jsonl"
    shutil.copy(SAMPLES / "keel_session.jsonl", sample)
    result = CliRunner().invoke(
        app(), ["monitor", "scan", str(sample), "-w", str(workdir), "--format", "keel"]
    )
    assert result.exit_code == 0, result.output
    assert "step    9  unverified_finish correct" in result.stdout
    assert "evidence:" in result.stdout


def test_cli_scan_errors(workdir: Path) -> None:
    runner = CliRunner()
    bad_format = runner.invoke(
        app(),
        ["monitor", "scan", str(SAMPLES / "swe_agent.traj"), "--format", "x", "-w", str(workdir)],
    )
    assert bad_format.exit_code == 2
    missing = runner.invoke(
        app(), ["monitor", "scan", str(workdir / "nope"), "--format", "claude", "-w", str(workdir)]
    )
    assert missing.exit_code == 1 and "monitor.read" in missing.stderr


def test_plan_events_from_other_producers_are_read() -> None:
    event = Event(
        "plan", "s", DataPayload({"plan": [{"step": "Edit src/a.py", "status": "in_progress"}]})
    )
    from keel.config import KeelConfig
    from keel.monitor import Monitor

    monitor = Monitor(KeelConfig())
    monitor.observe(event)
    assert monitor.state.plan_steps == ["Edit src/a.py"]


def test_codex_variants_exec_command_list_outputs_and_legacy_lines(workdir: Path) -> None:
    def item(payload: dict[str, object]) -> str:
        return json.dumps(
            {"timestamp": "2026-11-30T10:00:00Z", "type": "response_item", "payload": payload}
        )

    lines = [
        json.dumps(
            {"timestamp": "2026-11-30T10:00:00Z", "type": "session_meta", "payload": {"id": "cx"}}
        )
    ]
    for i in range(3):
        args = json.dumps({"cmd": "cargo build", "workdir": "/w"})
        lines.append(
            item(
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": args,
                    "call_id": f"c{i}",
                }
            )
        )
        output = [
            {
                "type": "input_text",
                "text": f"Chunk ID: {i}a{i}\nProcess exited with code 101\nOutput:\nerror[E0425]",
            }
        ]
        lines.append(item({"type": "function_call_output", "call_id": f"c{i}", "output": output}))
    legacy = {
        "type": "function_call",
        "name": "shell",
        "arguments": '{"command": ["ls"]}',
        "call_id": "old",
    }
    lines.append(json.dumps(legacy))
    lines.append(json.dumps({"type": "function_call_output", "call_id": "old", "output": "a\nb"}))
    path = workdir / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = scan_file(path)
    assert report.format == "codex" and report.runs[0].session_id == "cx"
    assert [(d.step, d.detector, d.level) for d in report.diagnostics] == [
        (3, "repeat", "hint"),
        (3, "failure", "correct"),
    ]
    assert report.runs[0].steps == 4


def test_every_json_test_suite_file_scans_or_fails_cleanly(shared_data: Path) -> None:
    folder = shared_data / "parsers" / "json" / "test_parsing"
    files = sorted(folder.glob("*.json"))
    assert files
    for path in files:
        for fmt in ("auto", "keel", "claude", "codex", "mini-swe-agent", "swe-agent"):
            with contextlib.suppress(PayloadError, UserError):
                scan_file(path, format=fmt)  # pyright: ignore[reportArgumentType]
