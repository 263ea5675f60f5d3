"""Mutation-testing survivors of the hook runner (issue 14, tests/MUTATION.md), in-process.

``answer`` is what ``keel hook`` runs; its exit code, bytes and options were only seen through a
``keel hook`` subprocess, which mutmut cannot map to the function.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from adapter_helpers import StubGuard, factory_for

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


def _pre(command: str) -> bytes:
    payload = {"session_id": "s", "tool_name": "Bash", "tool_input": {"command": command}}
    return json.dumps({**payload, "hook_event_name": "PreToolUse"}).encode()


def _answer(
    argv: list[str], data: bytes, guard: StubGuard, workdir: Path
) -> tuple[int, bytes, bytes]:
    return answer(
        parse_hook_args(argv),
        data,
        request_id="req-7",
        deadline_at=time.monotonic() + 20,
        root=str(workdir),
        guard_factory=factory_for(guard),
    )


def test_an_allow_exits_0_silently_and_a_deny_answers_one_json_line(workdir: Path) -> None:
    code, out, err = _answer(["PreToolUse", "--agent", "claude"], _pre("ls"), StubGuard(), workdir)
    assert (code, out, err) == (0, b"", b"")
    guard = _Recording()
    code, out, err = _answer(["PreToolUse", "--agent", "claude"], _pre("rm x"), guard, workdir)
    assert code == 0 and err == b"" and out.endswith(b"}\n") and out.count(b"\n") == 1
    reply = json.loads(out)["hookSpecificOutput"]
    assert reply["permissionDecision"] == "deny" and "no rm x" in reply["permissionDecisionReason"]
    assert guard.request_ids == ["req-7"]


def test_a_block_keeps_exit_2_and_the_reason_on_stderr(workdir: Path) -> None:
    code, out, err = _answer(["PreToolUse", "--agent", "claude"], b"{broken", StubGuard(), workdir)
    assert code == 2 and out == b""
    assert b"payload.json" in err and b"blocked to be safe" in err


def test_fail_open_is_passed_on(workdir: Path) -> None:
    argv = ["PreToolUse", "--agent", "claude", "--fail-open"]
    code, out, err = _answer(argv, b"{broken", StubGuard(), workdir)
    assert code == 0 and out == b"" and b"fail-open" in err


def test_a_lone_surrogate_in_the_payload_is_answered_not_crashed(workdir: Path) -> None:
    # JSON may escape a lone surrogate ("\\udcff"); the reply carries it back as the byte.
    data = _pre("rm \udcff")
    assert b"\\udcff" in data
    code, out, _ = _answer(["PreToolUse", "--agent", "claude"], data, _Recording(), workdir)
    assert code == 0 and b"no rm \xff" in out
    guard = StubGuard(decisions={"Bash": Decision.deny("test.deny", "x")})
    raw = json.dumps({"session_id": "s", "hook_event_name": "Nonsense\udcff"}).encode()
    code, out, err = _answer(["Nonsense\udcff", "--agent", "claude"], raw, guard, workdir)
    assert code == 2 and out == b"" and err


def test_the_workspace_option_picks_the_root(workdir: Path, tmp_path: Path) -> None:
    ws = workdir / "ws"
    (ws / ".git").mkdir(parents=True)
    seen: list[Path] = []

    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        seen.append(root)
        return StubGuard()

    args = parse_hook_args(["PreToolUse", "--agent", "claude", "--workspace", str(ws)])
    answer(args, _pre("ls"), request_id="r", deadline_at=time.monotonic() + 20,
           guard_factory=factory, env={})  # fmt: skip
    assert seen == [ws.resolve()]


def test_session_notes_carry_the_client_fields(workdir: Path) -> None:
    guard = StubGuard()
    start = {"session_id": "s", "hook_event_name": "SessionStart", "source": "resume",
             "cwd": "/w", "transcript_path": "/t.jsonl"}  # fmt: skip
    code, out, _ = _answer(
        ["SessionStart", "--agent", "claude"], json.dumps(start).encode(), guard, workdir
    )
    assert code == 0 and json.loads(out) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": guard.context}
    }
    prompt = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "fix it"}
    _answer(["UserPromptSubmit", "--agent", "claude"], json.dumps(prompt).encode(), guard, workdir)
    assert guard.notes[0] == (
        "session.start",
        {"event": "SessionStart", "client_session_id": "s", "source": "resume",
         "transcript_path": "/t.jsonl", "cwd": "/w"},
    )  # fmt: skip
    assert guard.notes[1] == (
        "prompt", {"event": "UserPromptSubmit", "client_session_id": "s", "prompt": "fix it"}
    )  # fmt: skip


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


def test_a_denied_shell_call_is_not_rewritten_to_run_contained(workdir: Path) -> None:
    guard = StubGuard(rewrite=True, root=str(workdir))
    _, out, _ = _answer(["PreToolUse", "--agent", "claude"], _pre("rm -rf build"), guard, workdir)
    reply = json.loads(out)["hookSpecificOutput"]
    assert reply["permissionDecision"] == "deny" and "updatedInput" not in reply
    _, out, _ = _answer(["PreToolUse", "--agent", "claude"], _pre("make"), guard, workdir)
    reply = json.loads(out)["hookSpecificOutput"]
    assert reply["permissionDecision"] == "allow"
    assert " exec --workspace " in reply["updatedInput"]["command"]
    edit = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Write",
            "tool_input": {"file_path": "a.txt", "content": "x"}}  # fmt: skip
    code, out, _ = _answer(
        ["PreToolUse", "--agent", "claude"], json.dumps(edit).encode(), guard, workdir
    )
    assert (code, out) == (0, b"")


def test_stop_checks_the_codex_transcript_only_for_codex_with_gates(workdir: Path) -> None:
    guard = StubGuard(required_gates=("pytest -q",))
    stop = {"session_id": "s", "hook_event_name": "Stop", "transcript_path": str(workdir / "none")}
    code, out, _ = _answer(["Stop", "--agent", "claude"], json.dumps(stop).encode(), guard, workdir)
    assert (code, out) == (0, b"")


def _errors(root: Path) -> list[dict[str, Any]]:
    from keel.journal import open_journal

    with open_journal(root) as journal:
        return [
            {"session": e.session_id, "agent": e.agent, **e.payload.data}  # type: ignore[union-attr]
            for e in journal.events(kinds=["error"])
        ]


def test_a_failure_is_journaled_and_logged_with_what_failed(workdir: Path) -> None:
    class Exploding(StubGuard):
        def decide(self, call: ToolCall, **_: Any) -> Decision:
            raise RuntimeError("injected fault")

    _answer(["PreToolUse", "--agent", "codex"], b"{broken", StubGuard(), workdir)
    _answer(["PreToolUse", "--agent", "claude"], _pre("ls"), Exploding(), workdir)
    errors = _errors(workdir)
    assert errors[0]["session"] == "codex-unknown-session" and errors[0]["agent"] == "codex"
    assert {k: errors[0][k] for k in ("event", "code", "fail_open")} == {
        "event": "PreToolUse", "code": "payload.json", "fail_open": False,
    }  # fmt: skip
    assert errors[1].pop("tool_use_id")  # derived from the call when the client gives none
    assert errors[1] == {
        "session": "s", "agent": "claude", "event": "PreToolUse", "code": "internal_error",
        "detail": "RuntimeError: injected fault", "fail_open": False, "client_session_id": "s",
    }  # fmt: skip
    text = (workdir / ".keel" / "hook-errors.jsonl").read_text()
    logged = [json.loads(line) for line in text.splitlines()]
    assert [sorted(entry) for entry in logged] == [
        ["agent", "code", "detail", "event", "fail_open", "ts"]
    ] * 2
    assert {k: logged[1][k] for k in ("agent", "event", "code", "detail", "fail_open")} == {
        "agent": "claude", "event": "PreToolUse", "code": "internal_error",
        "detail": "RuntimeError: injected fault", "fail_open": False,
    }  # fmt: skip


def test_a_missed_deadline_blocks_names_the_call_and_is_logged(workdir: Path) -> None:
    import threading

    release = threading.Event()
    daemons: list[bool] = []

    class Hanging(StubGuard):
        def decide(self, call: ToolCall, **_: Any) -> Decision:
            daemons.extend(t.daemon for t in threading.enumerate() if t.name == "keel-hook")
            release.wait(30)
            return Decision.allow("late", "too late")

    from keel.hook.runner import HookOptions, run_hook

    try:
        reply = run_hook("claude", "PreToolUse", _pre("ls"), workdir,
                         options=HookOptions(time.monotonic() + 0.2, False, "r"),
                         guard_factory=factory_for(Hanging()))  # fmt: skip
    finally:
        release.set()
    assert daemons == [True]  # a hung decision never keeps the hook process alive
    assert reply.exit_code == 2 and reply.stdout == ""
    assert reply.stderr == (
        "keel could not check this Bash call (hook.deadline: keel did not answer within its "
        "deadline); it is blocked to be safe.\n"
    )
    [logged] = [
        json.loads(x) for x in (workdir / ".keel" / "hook-errors.jsonl").read_text().splitlines()
    ]
    assert {k: logged[k] for k in ("agent", "event", "code", "detail", "fail_open")} == {
        "agent": "claude", "event": "PreToolUse", "code": "hook.deadline",
        "detail": "keel did not answer within its deadline", "fail_open": False,
    }  # fmt: skip


def test_an_unreadable_call_is_blocked_as_this_step(workdir: Path) -> None:
    _, _, err = _answer(["PreToolUse", "--agent", "claude"], b"{broken", StubGuard(), workdir)
    assert err.startswith(b"keel could not check this step (payload.json: ")
    assert err.endswith(b"; it is blocked to be safe.\n")


def test_the_guard_factory_gets_the_call_and_the_deadline(workdir: Path) -> None:
    seen: list[tuple[str, float]] = []

    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        seen.append((inp.session_id, deadline_at))
        return StubGuard()

    deadline = time.monotonic() + 20
    answer(parse_hook_args(["PreToolUse", "--agent", "claude"]), _pre("ls"), request_id="r",
           deadline_at=deadline, root=str(workdir), guard_factory=factory)  # fmt: skip
    assert seen == [("s", deadline)]


def _contained_line(agent: str, event: str, tool_input: dict[str, Any], workdir: Path) -> str:
    """The rewritten shell line the client gets back for an allowed shell call."""
    from keel.guard import uncontained

    tool = {"claude": "Bash", "codex": "Bash", "gemini": "run_shell_command"}[agent]
    data = {"session_id": "s", "hook_event_name": event, "tool_name": tool,
            "tool_input": tool_input}  # fmt: skip
    guard = StubGuard(rewrite=True, root=str(workdir))
    code, out, _ = _answer([event, "--agent", agent], json.dumps(data).encode(), guard, workdir)
    reply = json.loads(out)["hookSpecificOutput"]
    line = reply["updatedInput" if agent != "gemini" else "tool_input"]["command"]
    assert code == 0 and uncontained(line) == tool_input["command"]
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


def test_session_end_and_compaction_are_noted_with_their_reason(workdir: Path) -> None:
    guard = StubGuard()
    end = {"session_id": "s", "hook_event_name": "SessionEnd", "reason": "logout", "cwd": ""}
    code, out, err = _answer(
        ["SessionEnd", "--agent", "claude"], json.dumps(end).encode(), guard, workdir
    )
    assert (code, out, err) == (0, b"", b"")
    compact = {"session_id": "s", "hook_event_name": "PreCompact", "reason": ""}
    code, out, err = _answer(
        ["PreCompact", "--agent", "claude"], json.dumps(compact).encode(), guard, workdir
    )
    assert (code, out, err) == (0, b"", b"")  # compaction carries no context back
    assert guard.notes == [
        ("session.end", {"event": "SessionEnd", "client_session_id": "s", "reason": "logout"}),
        ("session.start", {"event": "PreCompact", "client_session_id": "s"}),
    ]


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
    code, out, _ = _answer(["Stop", "--agent", "codex"], json.dumps(stop).encode(), codex, workdir)
    reason = "keel: do not finish yet: the [gates] must pass: `pytest -q` exited with code 1"
    assert (code, json.loads(out)) == (0, {"decision": "block", "reason": reason})
    assert codex.given == [["`pytest -q` exited with code 1"]]
    claude = _Gates(required_gates=("pytest -q",))
    code, out, _ = _answer(
        ["Stop", "--agent", "claude"], json.dumps(stop).encode(), claude, workdir
    )
    assert (code, out, claude.given) == (0, b"", [[]])
    no_gates = _Gates()
    _answer(["Stop", "--agent", "codex"], json.dumps(stop).encode(), no_gates, workdir)
    assert no_gates.given == [[]]


def test_a_missed_deadline_fails_open_in_the_clients_own_silence(workdir: Path) -> None:
    import threading

    from keel.hook.runner import HookOptions, run_hook

    release = threading.Event()

    class Hanging(StubGuard):
        def decide(self, call: ToolCall, **_: Any) -> Decision:
            release.wait(30)
            return Decision.allow("late", "too late")

    data = {"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
            "tool_input": {"command": "ls"}}  # fmt: skip
    try:
        reply = run_hook("gemini", "BeforeTool", json.dumps(data), workdir,
                         options=HookOptions(time.monotonic() + 0.2, True, "r"),
                         guard_factory=factory_for(Hanging()))  # fmt: skip
    finally:
        release.set()
    assert (reply.exit_code, reply.stdout) == (0, "{}")
    assert reply.stderr == (
        "keel failed (hook.deadline: keel did not answer within its deadline); fail-open\n"
    )


def test_a_failing_keel_does_not_block_a_finish_already_continuing(workdir: Path) -> None:
    class Broken(StubGuard):
        def gate_finish(self, failures: Any = (), **_: Any) -> str | None:
            raise RuntimeError("gates broke")

    stop = {"session_id": "s", "hook_event_name": "Stop", "stop_hook_active": True}
    code, out, err = _answer(
        ["Stop", "--agent", "claude"], json.dumps(stop).encode(), Broken(), workdir
    )
    assert (code, out) == (0, b"")
    assert err == (
        b"keel could not check this step (internal_error: RuntimeError: gates broke); "
        b"it is blocked to be safe.\n"
    )


class _Exploding(StubGuard):
    def decide(self, call: ToolCall, **_: Any) -> Decision:
        raise RuntimeError(f"injected fault on {call.command}")


def test_a_crash_is_answered_with_the_call_and_the_exception(workdir: Path) -> None:
    code, out, err = _answer(["PreToolUse", "--agent", "claude"], _pre("ls"), _Exploding(), workdir)
    assert (code, out) == (2, b"")
    assert err == (
        b"keel could not check this Bash call (internal_error: RuntimeError: injected fault on "
        b"ls); it is blocked to be safe.\n"
    )
    gemini = {"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
              "tool_input": {"command": "ls"}}  # fmt: skip
    argv = ["BeforeTool", "--agent", "gemini", "--fail-open"]
    code, out, err = _answer(argv, json.dumps(gemini).encode(), _Exploding(), workdir)
    assert (code, out) == (0, b"{}\n")
    assert err == b"keel failed (internal_error: RuntimeError: injected fault on ls); fail-open\n"


def test_a_lone_surrogate_in_the_reason_reaches_stderr_as_its_byte(workdir: Path) -> None:
    code, _, err = _answer(
        ["PreToolUse", "--agent", "claude"], _pre("cat \udcff"), _Exploding(), workdir
    )
    assert code == 2 and b"injected fault on cat \xff)" in err


def test_the_client_project_dir_picks_the_root(workdir: Path) -> None:
    ws = workdir / "proj"
    (ws / ".git").mkdir(parents=True)
    seen: list[Path] = []

    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        seen.append(root)
        return StubGuard()

    args = parse_hook_args(["PreToolUse", "--agent", "claude"])
    answer(args, _pre("ls"), request_id="r", deadline_at=time.monotonic() + 20,
           guard_factory=factory, env={"CLAUDE_PROJECT_DIR": str(ws)})  # fmt: skip
    assert seen == [ws.resolve()]


def test_a_failure_after_the_commit_bound_is_logged_but_not_journaled(workdir: Path) -> None:
    from keel.hook.runner import HookOptions, run_hook

    # The commit bound (deadline - 0.25 s) has passed already; the deadline has not.
    options = HookOptions(time.monotonic() + 0.2, False, "r")
    reply = run_hook("claude", "PreToolUse", b"{broken", workdir, options=options,
                     guard_factory=factory_for(StubGuard()))  # fmt: skip
    assert reply.exit_code == 2
    assert _errors(workdir) == []
    logged = (workdir / ".keel" / "hook-errors.jsonl").read_text().splitlines()
    assert [json.loads(line)["code"] for line in logged] == ["payload.json"]


def test_a_failure_is_logged_even_where_no_workspace_exists_yet(workdir: Path) -> None:
    root = workdir / "gone" / "ws"
    _answer(["PreToolUse", "--agent", "claude"], b"{broken", StubGuard(), root)
    [entry] = (root / ".keel" / "hook-errors.jsonl").read_text().splitlines()
    assert json.loads(entry)["code"] == "payload.json"


def test_the_journaled_failure_is_traced_to_its_session(workdir: Path) -> None:
    from keel.core.events import trace_id_for
    from keel.journal import open_journal

    _answer(["PreToolUse", "--agent", "claude"], _pre("ls"), _Exploding(), workdir)
    with open_journal(workdir) as journal:
        [event] = journal.events(kinds=["error"])
    assert (event.session_id, event.agent, event.trace_id) == ("s", "claude", trace_id_for("s"))
