"""When keel fails inside ``keel hook``: blocked (exit 2) or passed on with ``--fail-open``.

Each failure names the call and what failed, in each client's own reply; it is journaled
(traced to its session) and logged to ``.keel/hook-errors.jsonl``, also after the commit bound
and where no workspace exists yet; a missed deadline never keeps the hook process alive.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from adapter_helpers import StubGuard, factory_for
from runner_helpers import answer_for, pre_tool_use

from keel.core.calls import ToolCall
from keel.core.decision import Decision


def test_a_block_keeps_exit_2_and_the_reason_on_stderr(workdir: Path) -> None:
    code, out, err = answer_for(
        ["PreToolUse", "--agent", "claude"], b"{broken", StubGuard(), workdir
    )
    assert code == 2 and out == b""
    assert b"payload.json" in err and b"blocked to be safe" in err


def test_an_unreadable_call_is_blocked_as_this_step(workdir: Path) -> None:
    _, _, err = answer_for(["PreToolUse", "--agent", "claude"], b"{broken", StubGuard(), workdir)
    assert err.startswith(b"keel could not check this step (payload.json: ")
    assert err.endswith(b"; it is blocked to be safe.\n")


def test_fail_open_is_passed_on(workdir: Path) -> None:
    argv = ["PreToolUse", "--agent", "claude", "--fail-open"]
    code, out, err = answer_for(argv, b"{broken", StubGuard(), workdir)
    assert code == 0 and out == b"" and b"fail-open" in err


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

    answer_for(["PreToolUse", "--agent", "codex"], b"{broken", StubGuard(), workdir)
    answer_for(["PreToolUse", "--agent", "claude"], pre_tool_use("ls"), Exploding(), workdir)
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
        reply = run_hook("claude", "PreToolUse", pre_tool_use("ls"), workdir,
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
    code, out, err = answer_for(
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
    code, out, err = answer_for(
        ["PreToolUse", "--agent", "claude"], pre_tool_use("ls"), _Exploding(), workdir
    )
    assert (code, out) == (2, b"")
    assert err == (
        b"keel could not check this Bash call (internal_error: RuntimeError: injected fault on "
        b"ls); it is blocked to be safe.\n"
    )
    gemini = {"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
              "tool_input": {"command": "ls"}}  # fmt: skip
    argv = ["BeforeTool", "--agent", "gemini", "--fail-open"]
    code, out, err = answer_for(argv, json.dumps(gemini).encode(), _Exploding(), workdir)
    assert (code, out) == (0, b"{}\n")
    assert err == b"keel failed (internal_error: RuntimeError: injected fault on ls); fail-open\n"


def test_a_lone_surrogate_in_the_reason_reaches_stderr_as_its_byte(workdir: Path) -> None:
    code, _, err = answer_for(
        ["PreToolUse", "--agent", "claude"], pre_tool_use("cat \udcff"), _Exploding(), workdir
    )
    assert code == 2 and b"injected fault on cat \xff)" in err


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
    answer_for(["PreToolUse", "--agent", "claude"], b"{broken", StubGuard(), root)
    [entry] = (root / ".keel" / "hook-errors.jsonl").read_text().splitlines()
    assert json.loads(entry)["code"] == "payload.json"


def test_the_journaled_failure_is_traced_to_its_session(workdir: Path) -> None:
    from keel.core.events import trace_id_for
    from keel.journal import open_journal

    answer_for(["PreToolUse", "--agent", "claude"], pre_tool_use("ls"), _Exploding(), workdir)
    with open_journal(workdir) as journal:
        [event] = journal.events(kinds=["error"])
    assert (event.session_id, event.agent, event.trace_id) == ("s", "claude", trace_id_for("s"))
