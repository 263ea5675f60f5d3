from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from adapter_helpers import StubGuard, factory_for

from keel.core.decision import Decision, Guidance
from keel.hook.dialects import HookReply
from keel.hook.main import parse_hook_args, read_stdin
from keel.hook.protocol import HookInput
from keel.hook.runner import HookOptions, answer, run_hook

BASH = {
    "session_id": "s1",
    "prompt_id": "p1",
    "cwd": "/w",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build"},
    "tool_use_id": "toolu_1",
}
SHELL = {
    "session_id": "g1",
    "cwd": "/w",
    "tool_name": "run_shell_command",
    "tool_input": {"command": "rm -rf build"},
}


def _run(
    agent: str,
    event: str,
    payload: object,
    guard: StubGuard,
    root: Path,
    *,
    deadline: float = 20.0,
    fail_open: bool = False,
) -> HookReply:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    options = HookOptions(time.monotonic() + deadline, fail_open, "req")
    return run_hook(agent, event, data, root, options=options, guard_factory=factory_for(guard))


def _out(reply: HookReply) -> dict:
    return json.loads(reply.stdout) if reply.stdout else {}


def test_claude_deny_uses_permission_decision_with_rule_reason_and_suggestion(
    workdir: Path,
) -> None:
    reply = _run(
        "claude", "PreToolUse", {**BASH, "hook_event_name": "PreToolUse"}, StubGuard(), workdir
    )
    out = _out(reply)["hookSpecificOutput"]
    assert reply.exit_code == 0 and out["permissionDecision"] == "deny"
    assert out["hookEventName"] == "PreToolUse"
    assert "risk.rm_recursive" in out["permissionDecisionReason"]
    assert "delete single files" in out["permissionDecisionReason"]


def test_allow_is_silent_so_the_clients_own_permissions_still_apply(workdir: Path) -> None:
    guard = StubGuard()
    ok = {**BASH, "tool_input": {"command": "ls"}}
    assert _run("claude", "PreToolUse", ok, guard, workdir) == HookReply()
    assert _run("codex", "PreToolUse", ok, guard, workdir) == HookReply()
    assert _run(
        "gemini", "BeforeTool", {**SHELL, "tool_input": {"command": "ls"}}, guard, workdir
    ) == HookReply(0, "{}")
    assert [c.command for c in guard.calls] == ["ls", "ls", "ls"]


def test_codex_gets_only_fields_it_accepts_and_ask_becomes_deny(workdir: Path) -> None:
    guard = StubGuard(decisions={"Bash": Decision.ask("policy.ask", "pushes need approval")})
    reply = _run(
        "codex", "PreToolUse", {**BASH, "tool_input": {"command": "git push"}}, guard, workdir
    )
    out = _out(reply)
    assert set(out) == {"hookSpecificOutput"}
    assert set(out["hookSpecificOutput"]) == {
        "hookEventName",
        "permissionDecision",
        "permissionDecisionReason",
    }
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "approval" in out["hookSpecificOutput"]["permissionDecisionReason"]
    claude = _out(
        _run(
            "claude", "PreToolUse", {**BASH, "tool_input": {"command": "git push"}}, guard, workdir
        )
    )
    assert claude["hookSpecificOutput"]["permissionDecision"] == "ask"


def test_gemini_deny_is_a_top_level_decision(workdir: Path) -> None:
    reply = _run(
        "gemini", "BeforeTool", {**SHELL, "hook_event_name": "BeforeTool"}, StubGuard(), workdir
    )
    out = _out(reply)
    assert out["decision"] == "deny" and "risk.rm_recursive" in out["reason"]
    assert "hookSpecificOutput" not in out


@pytest.mark.parametrize(
    ("agent", "event", "level", "expect"),
    [
        ("claude", "PostToolUse", "hint", "context"),
        ("claude", "PostToolUse", "correct", "block"),
        ("codex", "PostToolUse", "correct", "context"),
        ("codex", "PostToolUse", "replan", "block"),
        ("gemini", "AfterTool", "hint", "context"),
        ("gemini", "AfterTool", "stop", "deny"),
    ],
)
def test_guidance_is_delivered_in_each_dialect(workdir: Path, agent, event, level, expect) -> None:
    guard = StubGuard(guidance=Guidance(level, "you ran the same command 5 times", "repeat"))
    base = SHELL if agent == "gemini" else BASH
    reply = _run(
        agent,
        event,
        {**base, "tool_input": {"command": "ls"}, "tool_response": "x"},
        guard,
        workdir,
    )
    out = _out(reply)
    if expect == "context":
        assert out["hookSpecificOutput"] == {
            "hookEventName": event,
            "additionalContext": f"keel guidance ({level}, repeat): {guard.guidance.message}",
        }
    else:
        assert out["decision"] == expect and "same command" in out["reason"]
    assert guard.results[0].output == "x"


def test_no_guidance_is_silent(workdir: Path) -> None:
    reply = _run(
        "claude", "PostToolUse", {**BASH, "tool_response": {"stdout": ""}}, StubGuard(), workdir
    )
    assert reply == HookReply()


@pytest.mark.parametrize(
    ("agent", "event", "decision"),
    [("claude", "Stop", "block"), ("codex", "Stop", "block"), ("gemini", "AfterAgent", "deny")],
)
def test_a_gate_block_reaches_each_dialect_and_a_pass_is_silent(
    workdir: Path, agent, event, decision
) -> None:
    guard = StubGuard(finish="keel: do not finish yet: `pytest -q` has not passed")
    stop = {"session_id": f"s-{agent}", "stop_hook_active": False}
    out = _out(_run(agent, event, stop, guard, workdir))
    assert out["decision"] == decision and "pytest -q" in out["reason"]
    guard.finish = None
    assert not _out(_run(agent, event, stop, guard, workdir)).get("decision")


@pytest.mark.parametrize(
    ("agent", "event", "kind"),
    [
        ("claude", "SessionStart", "session.start"),
        ("claude", "UserPromptSubmit", "prompt"),
        ("codex", "SessionStart", "session.start"),
        ("codex", "UserPromptSubmit", "prompt"),
        ("gemini", "SessionStart", "session.start"),
        ("gemini", "BeforeAgent", "prompt"),
    ],
)
def test_context_events_reinject_constraints_and_are_journaled(
    workdir: Path, agent, event, kind
) -> None:
    guard = StubGuard()
    reply = _run(
        agent,
        event,
        {"session_id": "s", "prompt_id": "p9", "prompt": "do it", "source": "startup"},
        guard,
        workdir,
    )
    assert _out(reply) == {
        "hookSpecificOutput": {"hookEventName": event, "additionalContext": guard.context}
    }
    note_kind, data = guard.notes[0]
    assert note_kind == kind and data["client_session_id"] == "s" and data["event"] == event


def test_compaction_and_session_end_are_journaled_and_silent(workdir: Path) -> None:
    guard = StubGuard()
    assert (
        _run("claude", "PreCompact", {"session_id": "s", "trigger": "auto"}, guard, workdir)
        == HookReply()
    )
    assert (
        _run("claude", "SessionEnd", {"session_id": "s", "reason": "other"}, guard, workdir)
        == HookReply()
    )
    assert _run(
        "gemini", "SessionEnd", {"session_id": "s", "reason": "exit"}, guard, workdir
    ) == HookReply(0, "{}")
    assert [k for k, _ in guard.notes] == ["session.start", "session.end", "session.end"]
    assert guard.notes[1][1]["reason"] == "other"


def test_empty_context_is_silent(workdir: Path) -> None:
    assert (
        _run("claude", "SessionStart", {"session_id": "s"}, StubGuard(context=""), workdir)
        == HookReply()
    )


# -- failing closed ---------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
@pytest.mark.parametrize(
    ("event", "payload", "code"),
    [
        ("PreToolUse", "{broken", "payload.json"),
        ("PreToolUse", "", "payload.empty"),
        ("Nonsense", "{}", "payload.hook_event"),
    ],
)
def test_bad_input_fails_closed_with_exit_2(workdir: Path, agent, event, payload, code) -> None:
    if agent == "gemini" and event == "PreToolUse":
        event = "BeforeTool"
    guard = StubGuard()
    reply = _run(agent, event, payload, guard, workdir)
    assert reply.exit_code == 2 and reply.stdout == ""
    assert code in reply.stderr and "blocked to be safe" in reply.stderr
    assert guard.calls == []
    log = (workdir / ".keel" / "hook-errors.jsonl").read_text()
    assert code in log


class _Exploding(StubGuard):
    def decide(self, call, **_):  # type: ignore[override]
        raise RuntimeError("injected fault")


def test_an_exception_inside_keel_fails_closed(workdir: Path) -> None:
    reply = _run("claude", "PreToolUse", BASH, _Exploding(), workdir)
    assert reply.exit_code == 2 and "injected fault" in reply.stderr and "Bash" in reply.stderr


def test_a_guard_that_cannot_open_fails_closed(workdir: Path) -> None:
    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        raise OSError("journal is unwritable")

    reply = run_hook(
        "gemini",
        "BeforeTool",
        json.dumps(SHELL),
        workdir,
        options=HookOptions(time.monotonic() + 20),
        guard_factory=factory,
    )
    assert reply.exit_code == 2 and "unwritable" in reply.stderr


def test_missing_the_deadline_fails_closed(workdir: Path) -> None:
    release = threading.Event()

    class Hanging(StubGuard):
        def decide(self, call, **_):  # type: ignore[override]
            release.wait(30)
            return Decision.allow("late", "too late")

    try:
        reply = _run("codex", "PreToolUse", BASH, Hanging(), workdir, deadline=0.2)
    finally:
        release.set()
    assert reply.exit_code == 2 and "hook.deadline" in reply.stderr


def test_stdin_that_never_ends_is_read_under_a_time_limit() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b'{"session_id": ')  # no JSON object yet, and no end
        data, ended = read_stdin(0.3, read_end)
        assert (data, ended) == (b'{"session_id": ', False)
        os.write(write_end, b'"s"}')  # a whole object, then silence: it is taken
        data, ended = read_stdin(30, read_end)
        assert (data, ended) == (b'"s"}', False)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_failing_on_a_continued_stop_does_not_trap_the_agent(workdir: Path) -> None:
    class BrokenGates(StubGuard):
        def gate_finish(self, failures=(), **_):  # type: ignore[override]
            raise RuntimeError("gates broke")

    first = _run(
        "claude", "Stop", {"session_id": "s", "stop_hook_active": False}, BrokenGates(), workdir
    )
    assert first.exit_code == 2
    again = _run(
        "claude", "Stop", {"session_id": "s", "stop_hook_active": True}, BrokenGates(), workdir
    )
    assert again.exit_code == 0 and "gates broke" in again.stderr


def test_fail_open_lets_the_call_through_and_records_it(workdir: Path) -> None:
    reply = _run("claude", "PreToolUse", BASH, _Exploding(), workdir, fail_open=True)
    assert reply.exit_code == 0 and reply.stdout == "" and "fail-open" in reply.stderr
    gem = _run("gemini", "BeforeTool", "{bad", StubGuard(), workdir, fail_open=True)
    assert gem.exit_code == 0 and gem.stdout == "{}"
    lines = [
        json.loads(x) for x in (workdir / ".keel" / "hook-errors.jsonl").read_text().splitlines()
    ]
    assert [x["fail_open"] for x in lines] == [True, True]


def test_the_workspace_comes_from_the_clients_project_dir(workdir: Path) -> None:
    project = workdir / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "keel.toml").write_text("")
    seen: list[Path] = []

    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        seen.append(root)
        return StubGuard()

    stop = json.dumps({"session_id": "s"}).encode()
    for agent, event, var, where in (
        ("claude", "Stop", "CLAUDE_PROJECT_DIR", project / "sub"),
        ("gemini", "AfterAgent", "GEMINI_PROJECT_DIR", project),
        ("codex", "Stop", "KEEL_WORKSPACE", project),
    ):
        args = parse_hook_args([event, "--agent", agent])
        answer(
            args,
            stop,
            request_id="r",
            deadline_at=time.monotonic() + 20,
            guard_factory=factory,
            env={var: str(where)},
        )
    assert seen == [project.resolve()] * 3


def _codex_transcript(path: Path, runs: list[tuple[str, int]]) -> None:
    lines = []
    for n, (cmd, code) in enumerate(runs):
        call = {
            "type": "function_call",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": cmd}),
            "call_id": f"c{n}",
        }
        out = {
            "type": "function_call_output",
            "call_id": f"c{n}",
            "output": f"Wall time: 0.0 seconds\nProcess exited with code {code}\nOutput:\n",
        }
        lines += [
            json.dumps({"type": "response_item", "payload": call}),
            json.dumps({"type": "response_item", "payload": out}),
        ]
    path.write_text("\n".join(["not json", *lines]) + "\n")


@pytest.mark.parametrize(
    ("runs", "blocked"),
    [
        ([("pytest  -q", 1)], True),
        ([("pytest -q", 1), ("pytest -q", 0)], False),
        ([("ls", 2)], False),
        ([], False),
    ],
)
def test_codex_gate_failures_are_read_from_its_transcript(
    workdir: Path, runs, blocked: bool
) -> None:
    guard = StubGuard(required_gates=("pytest -q",))
    transcript = workdir / "rollout.jsonl"
    _codex_transcript(transcript, runs)
    out = _out(
        _run(
            "codex", "Stop", {"session_id": "s", "transcript_path": str(transcript)}, guard, workdir
        )
    )
    assert (out.get("decision") == "block") is blocked
    if blocked:
        assert "`pytest -q` exited with code 1" in out["reason"]
