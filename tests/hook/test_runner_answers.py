"""What ``keel hook`` answers for each event, run in-process (``keel.hook.runner.answer``).

Its exit code and bytes, the options that reach it (workspace, client project dir, request id,
commit bound, deadline), what it notes, the contained line it gives back with the client's own
time limit, and the finish gates checked against Codex's rollout.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from adapter_helpers import StubGuard, factory_for
from runner_helpers import answer_for, pre_tool_use

from keel.core.calls import ToolCall
from keel.core.decision import Decision
from keel.hook.main import parse_hook_args
from keel.hook.protocol import HookInput
from keel.hook.runner import answer


class _Recording(StubGuard):
    """Denies with the command in the reason, and keeps the request id it was given."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.request_ids: list[str] = []

    def decide(self, call: ToolCall, **kw: Any) -> Decision:
        self.request_ids.append(kw["request_id"])
        return Decision.deny("test.deny", f"no {call.command}")


def test_an_allow_exits_0_silently_and_a_deny_answers_one_json_line(workdir: Path) -> None:
    code, out, err = answer_for(
        ["PreToolUse", "--agent", "claude"], pre_tool_use("ls"), StubGuard(), workdir
    )
    assert (code, out, err) == (0, b"", b"")
    guard = _Recording()
    code, out, err = answer_for(
        ["PreToolUse", "--agent", "claude"], pre_tool_use("rm x"), guard, workdir
    )
    assert code == 0 and err == b"" and out.endswith(b"}\n") and out.count(b"\n") == 1
    reply = json.loads(out)["hookSpecificOutput"]
    assert reply["permissionDecision"] == "deny" and "no rm x" in reply["permissionDecisionReason"]
    assert guard.request_ids == ["req-7"]


def test_a_lone_surrogate_in_the_payload_is_answered_not_crashed(workdir: Path) -> None:
    # JSON may escape a lone surrogate ("\\udcff"); the reply carries it back as the byte.
    data = pre_tool_use("rm \udcff")
    assert b"\\udcff" in data
    code, out, _ = answer_for(["PreToolUse", "--agent", "claude"], data, _Recording(), workdir)
    assert code == 0 and b"no rm \xff" in out
    guard = StubGuard(decisions={"Bash": Decision.deny("test.deny", "x")})
    raw = json.dumps({"session_id": "s", "hook_event_name": "Nonsense\udcff"}).encode()
    code, out, err = answer_for(["Nonsense\udcff", "--agent", "claude"], raw, guard, workdir)
    assert code == 2 and out == b"" and err


def test_the_workspace_option_picks_the_root(workdir: Path, tmp_path: Path) -> None:
    ws = workdir / "ws"
    (ws / ".git").mkdir(parents=True)
    seen: list[Path] = []

    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        seen.append(root)
        return StubGuard()

    args = parse_hook_args(["PreToolUse", "--agent", "claude", "--workspace", str(ws)])
    answer(args, pre_tool_use("ls"), request_id="r", deadline_at=time.monotonic() + 20,
           guard_factory=factory, env={})  # fmt: skip
    assert seen == [ws.resolve()]


def test_the_client_project_dir_picks_the_root(workdir: Path) -> None:
    ws = workdir / "proj"
    (ws / ".git").mkdir(parents=True)
    seen: list[Path] = []

    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        seen.append(root)
        return StubGuard()

    args = parse_hook_args(["PreToolUse", "--agent", "claude"])
    answer(args, pre_tool_use("ls"), request_id="r", deadline_at=time.monotonic() + 20,
           guard_factory=factory, env={"CLAUDE_PROJECT_DIR": str(ws)})  # fmt: skip
    assert seen == [ws.resolve()]


def test_the_guard_factory_gets_the_call_and_the_deadline(workdir: Path) -> None:
    seen: list[tuple[str, float]] = []

    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        seen.append((inp.session_id, deadline_at))
        return StubGuard()

    deadline = time.monotonic() + 20
    answer(parse_hook_args(["PreToolUse", "--agent", "claude"]), pre_tool_use("ls"), request_id="r",
           deadline_at=deadline, root=str(workdir), guard_factory=factory)  # fmt: skip
    assert seen == [("s", deadline)]


class _Kwargs(StubGuard):
    """Keeps the keyword arguments of every guard call, to check the options reach them."""

    seen: list[tuple[str, dict[str, Any]]]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.seen = []

    def decide(self, call: ToolCall, **kw: Any) -> Decision:
        self.seen.append(("decide", kw))
        return super().decide(call)

    def observe(self, result: Any, **kw: Any) -> Any:
        self.seen.append(("observe", kw))
        return super().observe(result)

    def gate_finish(self, failures: Any = (), **kw: Any) -> str | None:
        self.seen.append(("gate_finish", kw))
        return super().gate_finish(failures)

    def note(self, kind: str, data: dict[str, Any], **kw: Any) -> None:
        self.seen.append(("note", kw))
        super().note(kind, data)


def test_every_guard_call_gets_the_request_id_and_the_commit_bound(workdir: Path) -> None:
    guard = _Kwargs()
    deadline = time.monotonic() + 20
    events = [
        ("SessionStart", {"session_id": "s"}),
        ("PreToolUse", {"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}}),
        ("PostToolUse", {"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"},
                         "tool_response": {"stdout": ""}}),
        ("Stop", {"session_id": "s"}),
        ("SessionEnd", {"session_id": "s", "reason": "exit"}),
    ]  # fmt: skip
    for event, payload in events:
        data = json.dumps({**payload, "hook_event_name": event}).encode()
        args = parse_hook_args([event, "--agent", "claude"])
        answer(args, data, request_id="req-9", deadline_at=deadline, root=str(workdir),
               guard_factory=factory_for(guard))  # fmt: skip
    assert [name for name, _ in guard.seen] == ["note", "decide", "observe", "gate_finish", "note"]
    for _, kw in guard.seen:
        assert kw == {"request_id": "req-9", "commit_by": deadline - 0.25}


def test_session_notes_carry_the_client_fields(workdir: Path) -> None:
    guard = StubGuard()
    start = {"session_id": "s", "hook_event_name": "SessionStart", "source": "resume",
             "cwd": "/w", "transcript_path": "/t.jsonl"}  # fmt: skip
    code, out, _ = answer_for(
        ["SessionStart", "--agent", "claude"], json.dumps(start).encode(), guard, workdir
    )
    assert code == 0 and json.loads(out) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": guard.context}
    }
    prompt = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "fix it"}
    answer_for(
        ["UserPromptSubmit", "--agent", "claude"], json.dumps(prompt).encode(), guard, workdir
    )
    assert guard.notes[0] == (
        "session.start",
        {"event": "SessionStart", "client_session_id": "s", "source": "resume",
         "transcript_path": "/t.jsonl", "cwd": "/w"},
    )  # fmt: skip
    assert guard.notes[1] == (
        "prompt", {"event": "UserPromptSubmit", "client_session_id": "s", "prompt": "fix it"}
    )  # fmt: skip


def test_session_end_and_compaction_are_noted_with_their_reason(workdir: Path) -> None:
    guard = StubGuard()
    end = {"session_id": "s", "hook_event_name": "SessionEnd", "reason": "logout", "cwd": ""}
    code, out, err = answer_for(
        ["SessionEnd", "--agent", "claude"], json.dumps(end).encode(), guard, workdir
    )
    assert (code, out, err) == (0, b"", b"")
    compact = {"session_id": "s", "hook_event_name": "PreCompact", "reason": ""}
    code, out, err = answer_for(
        ["PreCompact", "--agent", "claude"], json.dumps(compact).encode(), guard, workdir
    )
    assert (code, out, err) == (0, b"", b"")  # compaction carries no context back
    assert guard.notes == [
        ("session.end", {"event": "SessionEnd", "client_session_id": "s", "reason": "logout"}),
        ("session.start", {"event": "PreCompact", "client_session_id": "s"}),
    ]


def test_a_denied_shell_call_is_not_rewritten_to_run_contained(workdir: Path) -> None:
    guard = StubGuard(rewrite=True, root=str(workdir))
    _, out, _ = answer_for(
        ["PreToolUse", "--agent", "claude"], pre_tool_use("rm -rf build"), guard, workdir
    )
    reply = json.loads(out)["hookSpecificOutput"]
    assert reply["permissionDecision"] == "deny" and "updatedInput" not in reply
    _, out, _ = answer_for(
        ["PreToolUse", "--agent", "claude"], pre_tool_use("make"), guard, workdir
    )
    reply = json.loads(out)["hookSpecificOutput"]
    assert reply["permissionDecision"] == "allow"
    assert " exec --workspace " in reply["updatedInput"]["command"]
    edit = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Write",
            "tool_input": {"file_path": "a.txt", "content": "x"}}  # fmt: skip
    code, out, _ = answer_for(
        ["PreToolUse", "--agent", "claude"], json.dumps(edit).encode(), guard, workdir
    )
    assert (code, out) == (0, b"")


def _contained_line(agent: str, event: str, tool_input: dict[str, Any], workdir: Path) -> str:
    """The rewritten shell line the client gets back for an allowed shell call."""
    from keel.sandbox.exec.line import command_of

    tool = {"claude": "Bash", "codex": "Bash", "gemini": "run_shell_command"}[agent]
    data = {"session_id": "s", "hook_event_name": event, "tool_name": tool,
            "tool_input": tool_input}  # fmt: skip
    guard = StubGuard(rewrite=True, root=str(workdir))
    code, out, _ = answer_for([event, "--agent", agent], json.dumps(data).encode(), guard, workdir)
    reply = json.loads(out)["hookSpecificOutput"]
    line = reply["updatedInput" if agent != "gemini" else "tool_input"]["command"]
    assert code == 0 and command_of(line) == tool_input["command"]
    return line


@pytest.mark.parametrize(
    ("timeout", "expected"),
    [
        (30000, "--timeout 30 "),  # Claude's limit is in milliseconds
        (1500, "--timeout 1.5 "),
        (1, "--timeout 0.001 "),
        (9_000_000, "--timeout 600 "),  # capped at ten minutes
        (None, "--timeout 120 "),  # Claude's own default
        (0, "--timeout 120 "),
        (-5, "--timeout 120 "),
        ("30000", "--timeout 120 "),
    ],
)
def test_a_contained_claude_call_keeps_its_own_time_limit(
    workdir: Path, timeout: object, expected: str
) -> None:
    tool_input: dict[str, Any] = {"command": "make"}
    if timeout is not None:
        tool_input["timeout"] = timeout
    line = _contained_line("claude", "PreToolUse", tool_input, workdir)
    assert expected in line and line.count("--timeout") == 1


@pytest.mark.parametrize(("agent", "event"), [("codex", "PreToolUse"), ("gemini", "BeforeTool")])
def test_other_clients_get_no_time_limit_of_keels(agent: str, event: str, workdir: Path) -> None:
    line = _contained_line(agent, event, {"command": "make", "timeout": 30000}, workdir)
    assert "--timeout" not in line


def test_stop_checks_the_codex_transcript_only_for_codex_with_gates(workdir: Path) -> None:
    guard = StubGuard(required_gates=("pytest -q",))
    stop = {"session_id": "s", "hook_event_name": "Stop", "transcript_path": str(workdir / "none")}
    code, out, _ = answer_for(
        ["Stop", "--agent", "claude"], json.dumps(stop).encode(), guard, workdir
    )
    assert (code, out) == (0, b"")


class _Gates(StubGuard):
    """Keeps the failures each ``gate_finish`` is given."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.given: list[Any] = []

    def gate_finish(self, failures: Any = (), **kw: Any) -> str | None:
        self.given.append(failures)
        return super().gate_finish(failures)


def _failing_gate_rollout(path: Path) -> Path:
    """A Codex rollout where ``pytest -q`` ran and exited 1."""
    call = {"type": "function_call", "name": "exec_command", "call_id": "c1",
            "arguments": json.dumps({"cmd": "pytest -q"})}  # fmt: skip
    out = {"type": "function_call_output", "call_id": "c1",
           "output": "Process exited with code 1\nOutput:\n1 failed\n"}  # fmt: skip
    path.write_text(
        "".join(json.dumps({"type": "response_item", "payload": p}) + "\n" for p in (call, out))
    )
    return path


def test_only_codex_finishes_are_checked_against_its_rollout(workdir: Path) -> None:
    rollout = str(_failing_gate_rollout(workdir / "rollout.jsonl"))
    stop = {"session_id": "s", "hook_event_name": "Stop", "transcript_path": rollout}
    codex = _Gates(required_gates=("pytest -q",))
    code, out, _ = answer_for(
        ["Stop", "--agent", "codex"], json.dumps(stop).encode(), codex, workdir
    )
    reason = "keel: do not finish yet: the [gates] must pass: `pytest -q` exited with code 1"
    assert (code, json.loads(out)) == (0, {"decision": "block", "reason": reason})
    assert codex.given == [["`pytest -q` exited with code 1"]]
    claude = _Gates(required_gates=("pytest -q",))
    code, out, _ = answer_for(
        ["Stop", "--agent", "claude"], json.dumps(stop).encode(), claude, workdir
    )
    assert (code, out, claude.given) == (0, b"", [[]])
    no_gates = _Gates()
    answer_for(["Stop", "--agent", "codex"], json.dumps(stop).encode(), no_gates, workdir)
    assert no_gates.given == [[]]


def _grep(guard: StubGuard, workdir: Path) -> dict[str, Any]:
    data = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Grep",
            "tool_input": {"pattern": "x", "glob": "*.py"}}  # fmt: skip
    code, out, _ = answer_for(
        ["PreToolUse", "--agent", "claude"], json.dumps(data).encode(), guard, workdir
    )
    assert code == 0
    return json.loads(out)["hookSpecificOutput"]


def test_an_allowed_search_is_rewritten_to_leave_secret_files_out(workdir: Path) -> None:
    from keel.policy import secret_excludes

    reply = _grep(StubGuard(), workdir)
    assert "permissionDecision" not in reply
    globs = reply["updatedInput"]["glob"].split(" ")
    assert globs == ["*.py", *(f"!{g}" for g in secret_excludes())]
    ask = _grep(StubGuard(decisions={"Grep": Decision.ask("test.ask", "why")}), workdir)
    assert ask["permissionDecision"] == "ask" and ask["updatedInput"]["glob"] == " ".join(globs)


def test_a_denied_search_is_denied_not_rewritten(workdir: Path) -> None:
    reply = _grep(StubGuard(decisions={"Grep": Decision.deny("test.deny", "no")}), workdir)
    assert reply["permissionDecision"] == "deny" and "updatedInput" not in reply


def test_each_contained_line_names_a_fresh_report(workdir: Path) -> None:
    from keel.sandbox.exec.line import decode

    lines = [_contained_line("claude", "PreToolUse", {"command": "make"}, workdir) for _ in "ab"]
    reports = [line.report for line in map(decode, lines) if line is not None]
    assert len(reports) == 2 and reports[0] != reports[1]
    for report in reports:  # 64 random bits, as keel exec --report takes them
        assert (
            report is not None and len(report) == 16 and not set(report) - set("0123456789abcdef")
        )
