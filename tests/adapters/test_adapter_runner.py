from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from adapter_helpers import StubGuard, factory_for

from keel.adapters.dialects import HookReply
from keel.adapters.protocol import HookInput
from keel.adapters.runner import HookOptions, run_hook
from keel.decision import Decision, Guidance

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
    agent: str, event: str, payload: object, guard: StubGuard, root: Path, **opts: object
) -> HookReply:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    options = HookOptions(workspace=root, **opts)  # type: ignore[arg-type]
    return run_hook(agent, event, data, options=options, guard_factory=factory_for(guard))


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
def test_finishing_is_blocked_until_the_gate_passes_and_bounded(
    workdir: Path, agent, event, decision
) -> None:
    guard = StubGuard(finish=(False, "`pytest -q` has not passed since the last edit"))
    stop = {"session_id": f"s-{agent}", "stop_hook_active": False}
    reasons = []
    for _ in range(3):
        out = _out(_run(agent, event, stop, guard, workdir))
        assert out["decision"] == decision
        reasons.append(out["reason"])
        stop["stop_hook_active"] = True
    assert all("pytest -q" in r and r.startswith("keel: do not finish yet") for r in reasons)
    # the fourth attempt is let through: keel never traps the agent
    assert not _out(_run(agent, event, stop, guard, workdir)).get("decision")
    assert guard.notes[-1][0] == "error" and guard.notes[-1][1]["gate"] == "gave_up"
    # and once the gate passes, finishing is allowed and the count starts over
    guard.finish = (True, "")
    assert not _out(_run(agent, event, stop, guard, workdir)).get("decision")
    guard.finish = (False, "tests")
    for _ in range(3):
        assert _out(_run(agent, event, stop, guard, workdir))["decision"] == decision
    assert not _out(_run(agent, event, stop, guard, workdir)).get("decision")


def test_a_retry_prompt_does_not_reset_the_stop_bound(workdir: Path) -> None:
    # Gemini sends a blocked AfterAgent's reason back as a new prompt (BeforeAgent)
    guard = StubGuard(finish=(False, "tests"))
    blocked = 0
    for _ in range(6):
        out = _out(_run("gemini", "AfterAgent", {"session_id": "s"}, guard, workdir))
        if out.get("decision") != "deny":
            break
        blocked += 1
        _run("gemini", "BeforeAgent", {"session_id": "s", "prompt": out["reason"]}, guard, workdir)
    assert blocked == 3


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
    def decide(self, call):  # type: ignore[override]
        raise RuntimeError("injected fault")


def test_an_exception_inside_keel_fails_closed(workdir: Path) -> None:
    reply = _run("claude", "PreToolUse", BASH, _Exploding(), workdir)
    assert reply.exit_code == 2 and "injected fault" in reply.stderr and "Bash" in reply.stderr


def test_a_guard_that_cannot_open_fails_closed(workdir: Path) -> None:
    def factory(root: Path, inp: HookInput) -> StubGuard:
        raise OSError("journal is unwritable")

    reply = run_hook(
        "gemini",
        "BeforeTool",
        json.dumps(SHELL),
        options=HookOptions(workspace=workdir),
        guard_factory=factory,
    )
    assert reply.exit_code == 2 and "unwritable" in reply.stderr


def test_missing_the_deadline_fails_closed(workdir: Path) -> None:
    release = threading.Event()

    class Hanging(StubGuard):
        def decide(self, call):  # type: ignore[override]
            release.wait(30)
            return Decision.allow("late", "too late")

    try:
        reply = _run("codex", "PreToolUse", BASH, Hanging(), workdir, deadline=0.2)
    finally:
        release.set()
    assert reply.exit_code == 2 and "hook.deadline" in reply.stderr


def test_stdin_that_never_ends_is_under_the_deadline(workdir: Path) -> None:
    release = threading.Event()

    def read() -> bytes:
        release.wait(30)
        return b"{}"

    try:
        reply = run_hook(
            "claude",
            "PreToolUse",
            read,
            options=HookOptions(workspace=workdir, deadline=0.2),
            guard_factory=factory_for(StubGuard()),
        )
    finally:
        release.set()
    assert reply.exit_code == 2


def test_failing_on_a_continued_stop_does_not_trap_the_agent(workdir: Path) -> None:
    class BrokenGates(StubGuard):
        def may_finish(self):  # type: ignore[override]
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


def test_gemini_calls_get_unique_ids_matched_from_before_to_after(workdir: Path) -> None:
    guard = StubGuard()
    ls = {**SHELL, "tool_input": {"command": "ls"}}
    for _ in range(2):
        _run("gemini", "BeforeTool", ls, guard, workdir)
    _run("gemini", "BeforeTool", SHELL, guard, workdir)  # denied: never gets an AfterTool
    for _ in range(2):
        _run("gemini", "AfterTool", {**ls, "tool_response": {"llmContent": "x"}}, guard, workdir)
    ids = [c.tool_use_id for c in guard.calls]
    assert len(set(ids)) == 3 and all(i and i.startswith("derived-") for i in ids)
    assert [r.tool_use_id for r in guard.results] == ids[:2]


def test_the_workspace_comes_from_the_clients_project_dir(workdir: Path) -> None:
    project = workdir / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "keel.toml").write_text("")
    seen: list[Path] = []

    def factory(root: Path, inp: HookInput) -> StubGuard:
        seen.append(root)
        return StubGuard()

    stop = json.dumps({"session_id": "s"})
    run_hook(
        "claude",
        "Stop",
        stop,
        guard_factory=factory,
        env={"CLAUDE_PROJECT_DIR": str(project / "sub")},
    )
    run_hook(
        "gemini",
        "AfterAgent",
        stop,
        guard_factory=factory,
        env={"GEMINI_PROJECT_DIR": str(project)},
    )
    run_hook("codex", "Stop", stop, guard_factory=factory, env={"KEEL_WORKSPACE": str(project)})
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
    from types import SimpleNamespace

    guard = StubGuard(finish=(True, "every gate passed"))
    guard.config = SimpleNamespace(gates=SimpleNamespace(required=["pytest -q"], max_blocks=3))  # type: ignore[attr-defined]
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
