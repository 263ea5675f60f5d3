"""The monitor's sources of truth, the same in the live hook and in ``monitor scan``.

Command facts come from the policy, tool kinds from ``keel.core.calls``, scope from the
workspace's policy.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from keel.cli.monitor import register
from keel.config import KeelConfig, config_for, parse_config
from keel.core.calls import ToolCall, ToolResult, tool_kind
from keel.core.events import Event, ToolCallPayload, ToolResultPayload
from keel.hook.protocol import parse_hook_input
from keel.hook.tools import to_tool_call
from keel.hook.tools import tool_kind as hook_kind
from keel.monitor import CallEntry, Monitor, MonitorState
from keel.monitor._calls import read_call
from keel.monitor._context import Context
from keel.monitor._state import EDIT, READ, TEST
from keel.monitor.formats import classify, read_run
from keel.monitor.scan import scan_file
from keel.policy import Policy
from keel.policy._facts import CommandFacts

TESTS = Path(__file__).resolve().parents[1]
SAMPLES = TESTS / "monitor" / "samples"
GATES = '[gates]\nrequired = ["pytest -q"]\n'


def bash(command: str, n: int) -> ToolCall:
    return ToolCall("Bash", "exec", command=command, tool_use_id=f"t{n}", cwd="/w")


def ran(monitor: Monitor, call: ToolCall, ok: bool = True) -> None:
    monitor.before_call(call)
    result = ToolResult(call.tool, call.kind, ok, "out", None, 0 if ok else 1, call.tool_use_id)
    monitor.after_call(result)


# ---------------------------------------------------------------------------------------------
# 1. commands: the policy's parse is the only reader


@pytest.mark.parametrize("command", ["env rm -rf build", "git branch -D main", "sed s/a/b/w out f"])
@pytest.mark.parametrize("injected", [True, False])
def test_a_change_after_the_gate_passed_blocks_finishing(command: str, injected: bool) -> None:
    config = parse_config(GATES)
    facts = Policy.from_config(config, Path("/w")).command_facts if injected else None
    monitor = Monitor(config, facts=facts)
    ran(monitor, bash("pytest -q", 1))
    assert monitor.may_finish()[0]
    ran(monitor, bash(command, 2))
    allowed, why = monitor.may_finish()
    assert not allowed and "before the edit at step 2" in why


def test_the_injected_reader_is_the_only_reader_of_commands() -> None:
    asked: list[tuple[str, str | None]] = []

    def facts(line: str, cwd: str | None) -> CommandFacts:
        asked.append((line, cwd))
        return CommandFacts(False, (), True, True, (("frobnicate",),), (("pytest", "-q"),))

    monitor = Monitor(parse_config(GATES), facts=facts)
    ran(monitor, bash("frobnicate", 1))
    assert asked and all(a == ("frobnicate", "/w") for a in asked)
    assert monitor.state.gates["pytest -q"][1] is True  # the facts said it ran the gate
    assert monitor.state.last_edit_step == 1 and monitor.state.last_test_pass_step == 1


def test_a_failing_reader_is_taken_as_the_conservative_answer() -> None:
    def facts(line: str, cwd: str | None) -> CommandFacts:
        raise RuntimeError("broken reader")

    monitor = Monitor(parse_config(GATES), facts=facts)
    ran(monitor, bash("pytest -q", 1))
    assert monitor.state.recent[-1].flags & EDIT
    assert not monitor.may_finish()[0]


def _corpus_strings() -> list[str]:
    """Every string literal of the policy and monitor tests, and of the read-only test lists."""
    files = [
        *sorted((TESTS / "policy").glob("*.py")),
        *sorted((TESTS / "monitor").glob("*.py")),
        TESTS / "hook" / "test_hookperf_checkpoints.py",
    ]
    found: dict[str, None] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found[node.value] = None
    for name in ("claude_transcript.jsonl", "codex_rollout.jsonl", "mini_swe_agent.traj.json"):
        for event in read_run(SAMPLES / name)[1]:
            if isinstance(event.payload, ToolCallPayload) and event.payload.command:
                found[event.payload.command] = None
    return [s for s in found if s and len(s) < 4000]  # an empty command is never read


CORPUS = _corpus_strings()
MINE = [
    "ls -la && cat README.md | head -5",
    "git log --oneline -3",
    "sudo rm -rf /",
    "xargs rm < list.txt",
    "find . -name '*.tmp' -exec rm {} \\;",
    "python - <<'EOF'\nopen('x', 'w').write('y')\nEOF",
    "pytest -q && git commit -am wip",
    "npm ci && npm test",
    "tee out.log < in.txt",
    "echo $(rm -rf x)",
    "cd sub; ls",
]


def _check_flags(lines: list[str], policy: Policy) -> None:
    config = parse_config('[gates]\nrequired = ["pytest -q", "npm test"]\n')
    ctx = Context(config, MonitorState(), None, policy.command_facts)
    engine = policy._engine  # pyright: ignore[reportPrivateUsage]
    for line in lines:
        facts = policy.command_facts(line, "/w")
        assert facts.read_only == engine.is_read_only(line, "/w"), line
        assert facts.read_only == policy.is_read_only(line, "/w"), line
        flags = read_call(ctx, bash(line, 0), 0.0).flags
        assert bool(flags & EDIT) == facts.mutates, line
        assert bool(flags & READ) == facts.read_only, line
        assert bool(flags & TEST) == facts.test_run, line
        assert not (facts.read_only and facts.mutates), line


def test_monitor_flags_follow_the_policy_facts_on_the_test_corpus() -> None:
    assert len(CORPUS) > 500
    _check_flags([*CORPUS, *MINE], Policy.for_preset("developer", Path("/w")))


def test_monitor_flags_follow_the_policy_facts_on_hostile_lines(shared_data: Path) -> None:
    lines = [
        line
        for path in sorted((shared_data / "command-injection").glob("*.txt"))
        for line in path.read_text(errors="replace").splitlines()
        if line.strip()
    ]
    assert lines
    _check_flags(lines, Policy.for_preset("strict", Path("/w")))


# ---------------------------------------------------------------------------------------------
# 2. tool kinds: one table for the hooks and for scan

ALL_TOOLS = [
    "Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep", "LS",
    "WebFetch", "WebSearch", "exec_command", "shell", "shell_command", "local_shell",
    "apply_patch", "view_image", "web_search", "run_shell_command", "read_file",
    "read_many_files", "write_file", "replace", "glob", "grep_search", "search_file_content",
    "list_directory", "web_fetch", "google_web_search", "mcp__github__create_issue",
    "mcp_github_create_issue", "TodoWrite", "SomethingNew",
]  # fmt: skip


@pytest.mark.parametrize("name", ALL_TOOLS)
def test_the_hook_and_scan_classify_every_tool_alike(name: str) -> None:
    assert hook_kind(name) == tool_kind(name) == classify(name, {}).kind


def test_searches_are_network_and_shell_command_is_exec() -> None:
    assert [tool_kind(n) for n in ("WebSearch", "web_search", "google_web_search")] == [
        "network"
    ] * 3
    assert hook_kind("shell_command") == classify("shell_command", {"command": "ls"}).kind
    assert hook_kind("shell_command") == "exec"
    data = {
        "session_id": "s",
        "hook_event_name": "PreToolUse",
        "tool_name": "shell_command",
        "tool_input": {"command": "ls"},
        "cwd": "/w",
    }
    call = to_tool_call(parse_hook_input("codex", "PreToolUse", json.dumps(data)))
    assert (call.kind, call.command) == ("exec", "ls")


def test_a_web_search_is_judged_by_name_not_as_a_bad_url() -> None:
    search = ToolCall("WebSearch", "network", args={"query": "pytest fixtures"})
    decision = Policy.for_preset("developer", Path("/w")).check_call(search)
    assert decision.decision == "ask" and decision.rule == "default.ask"
    assert "not on an allow list" in decision.reason
    allowed = Policy.from_config(parse_config('[policy]\nallow = ["WebSearch"]\n'), Path("/w"))
    assert allowed.check_call(search).decision == "allow"
    fetch = ToolCall("WebFetch", "network", url="https://example.com/x")
    assert allowed.check_call(fetch).rule.startswith("network.")


# ---------------------------------------------------------------------------------------------
# 3. scope: scan judges paths like the live hook


def _journal(path: Path, root: Path) -> None:
    calls = [
        ToolCallPayload("Edit", "edit", paths=[f"{root}/src/a.py"], tool_use_id="e1"),
        ToolCallPayload("Write", "write", paths=["src/b.py"], tool_use_id="e2"),
        ToolCallPayload("Bash", "exec", f"echo x > {root}/src/c.py", tool_use_id="e3"),
        ToolCallPayload("Edit", "edit", paths=[f"{root}/docs/d.md"], tool_use_id="e4"),
    ]
    events = []
    for call in calls:
        events.append(Event("tool.call", "s", call))
        result = ToolResultPayload(call.tool, True, "ok", tool_use_id=call.tool_use_id)
        events.append(Event("tool.result", "s", result))
    path.write_text("".join(e.to_json() + "\n" for e in events))


def _scope_steps(diagnostics: list[dict[str, object]]) -> list[object]:
    return [d["evidence"] for d in diagnostics if d["detector"] == "scope"]


def test_scan_judges_absolute_workspace_paths_as_in_scope(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[scope]\ninclude = ["src/**"]\n')
    run = workdir / "run.jsonl"
    _journal(run, workdir)
    report = scan_file(run, config=config_for(workdir), workspace=workdir)
    scope = [d.evidence for d in report.diagnostics if d.detector == "scope"]
    assert scope == [{"paths": [f"{workdir}/docs/d.md"]}]


def test_cli_scan_uses_the_workspace_policy_for_scope(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[scope]\ninclude = ["src/**"]\n')
    run = workdir / "run.jsonl"
    _journal(run, workdir)
    root = typer.Typer()

    @root.callback()
    def _main(ctx: typer.Context) -> None:
        ctx.obj = {"workspace": None}

    register(root)
    result = CliRunner().invoke(root, ["monitor", "scan", str(run), "-w", str(workdir), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    diagnostics = [d for r in data["runs"] for d in r["diagnostics"]]
    assert _scope_steps(diagnostics) == [{"paths": [f"{workdir}/docs/d.md"]}]


def test_scan_judges_a_transcript_by_its_recorded_working_directory(workdir: Path) -> None:
    config = parse_config('[scope]\ninclude = ["src/**"]\n[monitor]\ntask_is_about_tests = true\n')
    report = scan_file(SAMPLES / "claude_transcript.jsonl", config=config, workspace=workdir)
    scope = [d.evidence for d in report.diagnostics if d.detector == "scope"]
    assert scope == [{"paths": ["tests/test_calc.py"]}]


def test_live_scope_gets_paths_the_policy_can_place(workdir: Path) -> None:
    policy = Policy.from_config(parse_config('[scope]\ninclude = ["sub/**"]\n'), workdir)
    monitor = Monitor(KeelConfig(), in_scope=policy.in_scope, facts=policy.command_facts)
    sub = str(workdir / "sub")
    inside = ToolCall("Edit", "edit", paths=("a.py",), cwd=sub, tool_use_id="1")
    assert monitor.before_call(inside) is None
    shell = ToolCall("Bash", "exec", command="echo x > b.py", cwd=sub, tool_use_id="2")
    assert monitor.before_call(shell) is None
    outside = ToolCall("Bash", "exec", command="echo x > ../c.py", cwd=sub, tool_use_id="3")
    denied = monitor.before_call(outside)
    assert denied is not None and denied.detector == "scope"


# ---------------------------------------------------------------------------------------------
# the state as a dict


def test_state_round_trips_as_a_dict_with_call_entries() -> None:
    monitor = Monitor(parse_config(GATES))
    for i in range(4):
        ran(monitor, bash("pytest -q", i))
    data = monitor.state.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert isinstance(data["recent"][0], list) and data["recent"][0][7] == ["pytest -q"]
    again = MonitorState.from_dict(data)
    assert again == monitor.state
    assert isinstance(again.recent[0], CallEntry) and again.recent[0].gates == ("pytest -q",)
    assert MonitorState.from_json(monitor.state.to_json()) == again
    data["step"] = 99
    assert monitor.state.step == 4  # a copy


@pytest.mark.parametrize(
    "recent",
    [
        [[1, "k", "exec", ["out"], None, None, 0, [], "l"]],
        [[1, "k", "exec", None, None, None, 0, [3], "l"]],
        [[1, "k", "exec", None, "yes", None, 0, [], "l"]],
        [[1, "k", "exec", None, None, None, 0, [], "l", "extra"]],
        {"not": "a list"},
    ],
)
def test_malformed_call_entries_are_a_payload_error(recent: object) -> None:
    from keel.core.errors import PayloadError

    with pytest.raises(PayloadError) as info:
        MonitorState.from_dict({"version": 1, "recent": recent})
    assert info.value.code == "payload.monitor_state"
    with pytest.raises(PayloadError):
        MonitorState.from_dict({"version": 1, "ladder": {"repeat": [["hint"], 3]}})
