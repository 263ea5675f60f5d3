"""Focused tests of ``keel.guard`` that kill mutmut survivors (issue 14, tests/MUTATION.md).

The guard is the one decision path: what users and agents rely on is the exact decision,
rule, reason and suggestion it answers, the journal events it writes in one transaction
(the call, the decision, the request's outcome, the session's state), that every internal
error is a deny, and the emergency stop. Everything runs in-process against a real SQLite
journal, the real policy, monitor, checkpoint store and sandbox registry.
"""

from __future__ import annotations

import hashlib
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision
from keel.core.events import Event, trace_id_for
from keel.core.stop import set_stop
from keel.guard import (
    INSIDE_WRAP,
    MAX_OUTPUT_JOURNALED,
    OPEN_CALL_TTL,
    STATE_FORMAT,
    Guard,
    SessionState,
    _as_written,  # pyright: ignore[reportPrivateUsage]
    contained_command,
    containment,
    is_contained,
    uncontained,
)
from keel.journal import open_journal

SESSION = "s-mut"
RETRY = "Retry; if it persists, run `keel status` and check keel.toml and .keel/."


def _open(root: Path, **kw: Any) -> Guard:
    kw.setdefault("monitor", False)
    kw.setdefault("checkpoints", False)
    kw.setdefault("agent", "tester")
    return Guard.open(root, session_id=SESSION, **kw)


def _events(root: Path, session: str = SESSION) -> list[Event]:
    with open_journal(root) as journal:
        return list(journal.events(session_id=session))


def _span(session: str, tool_use_id: str) -> str:
    key = f"{session}\0{tool_use_id}".encode()
    return hashlib.sha256(b"span\0" + key).hexdigest()[:16]


@pytest.fixture
def guard(workdir: Path) -> Iterator[Guard]:
    g = _open(workdir)
    try:
        yield g
    finally:
        g.close()


# -- the session's state record ------------------------------------------------------------


FULL_STATE: dict[str, Any] = {
    "format": STATE_FORMAT,
    "monitor": {"step": 4},
    "stop_blocks": 2,
    "calls": 7,
    "pending": {"derived-a": ["derived-a-1", "derived-a-2"]},
    "open_calls": {"t1": 1.0e12},
    "containment_broken": "curl evil",
    "frozen": {"t2": 5.5},
    "frozen_pids": [[11, 22], [33, 44]],
}


def test_a_new_state_is_empty() -> None:
    assert SessionState().to_dict() == {
        "format": 1,
        "monitor": None,
        "stop_blocks": 0,
        "calls": 0,
        "pending": {},
        "open_calls": {},
        "containment_broken": None,
        "frozen": {},
        "frozen_pids": [],
    }


def test_the_state_record_round_trips_every_field() -> None:
    state = SessionState.from_dict(FULL_STATE)
    assert state.to_dict() == FULL_STATE
    assert isinstance(state.stop_blocks, int) and isinstance(state.calls, int)


def test_a_record_with_strings_is_read_as_numbers() -> None:
    data = {
        **FULL_STATE,
        "stop_blocks": "2",
        "calls": "7",
        "open_calls": {"t1": "1e12"},
        "frozen": {"t2": "5.5"},
        "frozen_pids": [["11", "22"], ["33", "44"]],
        "containment_broken": 42,
    }
    got = SessionState.from_dict(data).to_dict()
    assert got == {**FULL_STATE, "containment_broken": "42"}


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {**FULL_STATE, "format": 2},
        {k: v for k, v in FULL_STATE.items() if k != "format"},
    ],
    ids=["none", "empty", "other-format", "no-format"],
)
def test_an_unknown_record_starts_afresh(data: dict[str, Any] | None) -> None:
    assert SessionState.from_dict(data).to_dict() == SessionState().to_dict()


def test_missing_fields_of_a_record_take_their_defaults() -> None:
    got = SessionState.from_dict({"format": STATE_FORMAT}).to_dict()
    assert got == SessionState().to_dict()


def test_an_empty_broken_command_is_no_broken_containment() -> None:
    state = SessionState.from_dict({"format": STATE_FORMAT, "containment_broken": ""})
    assert state.containment_broken is None


def test_stale_open_calls_and_empty_queues_are_not_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    import keel.guard as guard_module

    now = 1_000_000.0

    class Clock:
        @staticmethod
        def time() -> float:
            return now

    monkeypatch.setattr(guard_module, "time", Clock)
    state = SessionState()
    cutoff = now - OPEN_CALL_TTL
    state.open_calls = {"old": cutoff - 1, "edge": cutoff, "new": now}
    state.pending = {"derived-a": [], "derived-b": ["derived-b-1"]}
    got = state.to_dict()
    assert got["open_calls"] == {"edge": cutoff, "new": now}
    assert got["pending"] == {"derived-b": ["derived-b-1"]}


# -- building a guard -----------------------------------------------------------------------


def test_a_guard_built_by_hand_has_safe_defaults(workdir: Path) -> None:
    opened = _open(workdir, journal=False)
    g = Guard(workdir, opened.config, opened.policy, "sid")
    assert g.root == str(workdir) and isinstance(g.root, str)
    assert (g.agent, g.session_id) == ("keel", "sid")
    assert g.config is opened.config and g.policy is opened.policy
    assert (g.journal, g.monitor, g.checkpoints) == (None, None, None)
    assert g.lazy_checkpoints is False and g.owns_journal is True
    assert g.state_version == 0 and g.state.to_dict() == SessionState().to_dict()
    assert g.inside_sandbox is False
    assert g.contain is opened.policy.contained
    assert g.contain_reason == ("contained" if g.contain else "not contained")


def test_a_guard_keeps_the_state_it_is_given(workdir: Path) -> None:
    opened = _open(workdir, journal=False)
    state = SessionState.from_dict(FULL_STATE)
    g = Guard(workdir, opened.config, opened.policy, "sid", state=state, state_version=9)
    assert g.state is state and g.state_version == 9


def test_a_guard_keeps_the_parts_it_is_given(workdir: Path) -> None:
    from keel.monitor import Monitor
    from keel.workspace import Checkpoints

    opened = _open(workdir, journal=False)
    with open_journal(workdir) as journal:
        monitor = Monitor(opened.config)
        store = Checkpoints(workdir, journal=journal)
        g = Guard(
            workdir,
            opened.config,
            opened.policy,
            "sid",
            "agent-x",
            journal=journal,
            monitor=monitor,
            checkpoints=store,
            lazy_checkpoints=True,
            owns_journal=False,
        )
        assert (g.journal, g.monitor, g.checkpoints) == (journal, monitor, store)
        assert (g.agent, g.lazy_checkpoints, g.owns_journal) == ("agent-x", True, False)
        g.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w"))
        g.close()
        assert [e.kind for e in journal.events()] == ["tool.call", "checkpoint", "decision"]


@pytest.mark.parametrize("contained", [True, False])
def test_the_contain_reason_follows_the_policy(workdir: Path, contained: bool) -> None:
    from keel.policy import Policy

    opened = _open(workdir, journal=False)
    policy = Policy.from_config(opened.config, str(workdir), contained=contained)
    g = Guard(workdir, opened.config, policy, "sid")
    assert g.contain is contained
    assert g.contain_reason == ("contained" if contained else "not contained")


def test_open_defaults_journal_monitor_and_lazy_checkpoints(workdir: Path) -> None:
    g = Guard.open(workdir, session_id=SESSION)
    try:
        assert g.agent == "keel" and g.root == str(workdir)
        assert g.journal is not None and g.owns_journal is True
        assert g.monitor is not None
        assert g.lazy_checkpoints is True and g.checkpoints is None
        assert g.inside_sandbox is False
        contain, why = containment(g.config)
        assert (g.contain, g.contain_reason) == (contain, why)
        assert g.policy.contained is contain
        g.decide(ToolCall("Read", "read", paths=("a.txt",), tool_use_id="t1"))
    finally:
        g.close()
    call, decision = _events(workdir)
    assert call.agent == decision.agent == "keel"


def test_open_inside_the_sandbox_contains_without_rewriting(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[sandbox]\ncontain = "off"\n')
    g = _open(workdir, inside_sandbox=True, journal=False)
    assert (g.contain, g.contain_reason) == (True, INSIDE_WRAP)
    assert g.policy.contained is True
    assert g.inside_sandbox is True and g.rewrite is False


def test_open_reads_the_preset_and_root(workdir: Path) -> None:
    g = _open(workdir, preset="readonly", journal=False)
    assert g.root == str(workdir)
    write = g.decide(ToolCall("Write", "write", paths=(str(workdir / "a.txt"),)))
    assert write.decision == "deny"
    assert (
        _open(workdir, journal=False)
        .decide(ToolCall("Write", "write", paths=(str(workdir / "a.txt"),)))
        .allowed
    )


def test_open_without_a_journal_records_nothing(workdir: Path) -> None:
    g = _open(workdir, journal=False)
    assert g.journal is None and g.is_current() is True
    assert g.decide(ToolCall("Bash", "exec", command="ls")).allowed
    g.close()
    assert not (workdir / ".keel" / "journal.db").exists() or _events(workdir) == []


def test_open_with_a_deadline_still_opens_the_journal(workdir: Path) -> None:
    g = _open(workdir, wait_until=time.monotonic() + 30)
    try:
        assert g.journal is not None
        assert g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1")).allowed
    finally:
        g.close()
    assert [e.kind for e in _events(workdir)] == ["tool.call", "decision"]


def test_a_shared_journal_is_not_closed_by_the_guard(workdir: Path) -> None:
    with open_journal(workdir) as journal:
        g = _open(workdir, journal=journal)
        assert g.journal is journal and g.owns_journal is False
        g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
        g.close()
        assert [e.kind for e in journal.events()] == ["tool.call", "decision"]


def test_close_closes_an_owned_journal(workdir: Path) -> None:
    g = _open(workdir)
    journal = g.journal
    assert journal is not None
    g.close()
    from keel.core.errors import JournalError

    with pytest.raises(JournalError, match="is closed"):
        list(journal.events())
    _open(workdir, journal=False).close()  # no journal: nothing to close


# -- the decision ---------------------------------------------------------------------------


def test_the_emergency_stop_answers_exactly(guard: Guard, workdir: Path) -> None:
    set_stop(workdir, "incident 7")
    got = guard.decide(ToolCall("Read", "read", paths=("a.txt",), tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "stop.active",
        "reason": "emergency stop is set: incident 7",
        "suggestion": "Wait for the user to run `keel resume`.",
    }


def test_an_internal_error_is_an_exact_deny(guard: Guard) -> None:
    class Exploding:
        contained = False

        def check_call(self, call: ToolCall) -> Decision:
            raise RuntimeError("boom")

    guard.policy = Exploding()  # type: ignore[assignment]
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "internal_error",
        "reason": "keel could not decide this call (RuntimeError: boom); denied to be safe",
        "suggestion": RETRY,
    }


def test_the_policy_sees_the_call_itself(guard: Guard, workdir: Path) -> None:
    seen: list[ToolCall] = []
    real = guard.policy

    class Spy:
        contained = real.contained

        def check_call(self, call: ToolCall) -> Decision:
            seen.append(call)
            return real.check_call(call)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    guard.policy = Spy()  # type: ignore[assignment]
    call = ToolCall("Bash", "exec", command="git push --force origin main", tool_use_id="t1")
    got = guard.decide(call)
    assert seen == [call] and got == real.check_call(call) and got.decision == "deny"


class BrokenJournal:
    """A journal whose every write fails (a full disk)."""

    def append_many(self, events: object, **_: object) -> object:
        raise OSError("disk full")

    def answered(self, request_id: str) -> None:
        return None

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("tool", "what"), [("Bash", "this Bash call"), ("", "this call")])
def test_a_journal_that_fails_is_an_exact_deny(guard: Guard, tool: str, what: str) -> None:
    guard.journal = BrokenJournal()  # type: ignore[assignment]
    got = guard.decide(ToolCall(tool, "exec", command="ls", tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "internal_error",
        "reason": f"keel could not journal {what} (OSError: disk full); denied to be safe",
        "suggestion": RETRY,
    }


# -- what the journal records ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "subject"),
    [
        (ToolCall("Bash", "exec", command="ls -la", args={"command": "ls -la"}), "ls -la"),
        (ToolCall("Read", "read", paths=("a.txt", "b.txt")), "a.txt, b.txt"),
        (ToolCall("WebFetch", "network", url="http://127.0.0.1/x"), "http://127.0.0.1/x"),
        (ToolCall("mcp__x__y", "mcp", args={"n": 1}), None),
    ],
    ids=["command", "paths", "url", "nothing"],
)
def test_the_call_and_its_decision_are_journaled_exactly(
    workdir: Path, call: ToolCall, subject: str | None
) -> None:
    g = _open(workdir)
    call = call.replace(tool_use_id="tu-1", turn_id="turn-9")
    try:
        decision = g.decide(call, request_id="req-1")
        assert g.journal is not None
        assert g.journal.answered("req-1") == {"decision": decision.to_dict()}
    finally:
        g.close()
    events = _events(workdir)
    assert [e.kind for e in events] == ["tool.call", "decision"]
    ev_call, ev_dec = events
    for ev in events:
        assert (ev.session_id, ev.agent, ev.trace_id) == (SESSION, "tester", trace_id_for(SESSION))
    assert ev_call.span_id == _span(SESSION, "tu-1")
    assert ev_call.parent_span_id is None
    assert ev_dec.parent_span_id == ev_call.span_id and ev_dec.span_id != ev_call.span_id
    assert asdict(ev_call.payload) == {
        "tool": call.tool,
        "kind": call.kind,
        "command": call.command,
        "paths": list(call.paths),
        "url": call.url,
        "args": call.args,
        "tool_use_id": "tu-1",
        "turn_id": "turn-9",
    }
    assert asdict(ev_dec.payload) == {
        **decision.to_dict(),
        "tool_use_id": "tu-1",
        "subject": subject,
    }


def test_a_denied_call_is_journaled_with_its_rule_and_suggestion(
    guard: Guard, workdir: Path
) -> None:
    set_stop(workdir, "why")
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    guard.close()
    dec = _events(workdir)[-1]
    assert dec.kind == "decision"
    assert asdict(dec.payload) == {**got.to_dict(), "tool_use_id": "t1", "subject": "ls"}
    assert got.suggestion is not None


def test_args_that_are_not_json_are_journaled_as_text(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("mcp__x__y", "mcp", args={"when": Path("/x"), "n": (1, 2)}))
    guard.close()
    assert _events(workdir)[0].payload.args == {"when": "/x", "n": [1, 2]}  # pyright: ignore[reportAttributeAccessIssue]


def test_a_call_without_an_id_gets_a_random_span(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    guard.close()
    first, dec1, second, _ = _events(workdir)
    for span in (first.span_id, second.span_id):
        assert len(span) == 16 and int(span, 16) >= 0
    assert first.span_id != second.span_id
    assert dec1.parent_span_id == first.span_id


def test_a_request_is_answered_once(guard: Guard, workdir: Path) -> None:
    first = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r")
    set_stop(workdir, "later")  # the same request asked again gets the committed answer
    again = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r")
    assert first.allowed and again == first
    other = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t2"), request_id="q")
    assert other.rule == "stop.active"
    guard.close()
    assert [e.kind for e in _events(workdir)] == ["tool.call", "decision"] * 2


class _Forgetful:
    """The real journal, except that it cannot tell whether a request was answered."""

    def __init__(self, journal: Any) -> None:
        self._journal = journal

    def answered(self, request_id: str) -> None:
        raise OSError("cannot read")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def test_a_request_answered_by_another_process_gets_that_answer(workdir: Path) -> None:
    first = _open(workdir)
    committed = first.decide(
        ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r"
    )
    first.close()
    set_stop(workdir, "later")
    second = _open(workdir)
    assert second.journal is not None
    second.journal = _Forgetful(second.journal)  # type: ignore[assignment]
    try:
        again = second.decide(
            ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), request_id="r"
        )
        assert again == committed and again.allowed
        guidance = second.observe(
            ToolResult("Bash", "exec", True, tool_use_id="t1"), request_id="r"
        )
        assert guidance is None
    finally:
        second.close()
    assert [e.kind for e in _events(workdir)] == ["tool.call", "decision"]


def test_a_repeated_request_changes_nothing_in_the_session(guard: Guard, workdir: Path) -> None:
    call = ToolCall("run_shell_command", "exec", command="ls", tool_use_id="derived-x")
    assert guard.decide(call, request_id="r").allowed
    assert guard.decide(call, request_id="r").allowed  # answered already: not numbered again
    guard.decide(call)
    guard.close()
    ids = [e.payload.tool_use_id for e in _events(workdir) if e.kind == "tool.call"]  # pyright: ignore[reportAttributeAccessIssue]
    assert ids == ["derived-x-1", "derived-x-2"]


# -- containment ------------------------------------------------------------------------------


def _always(workdir: Path) -> Guard:
    (workdir / "keel.toml").write_text('[sandbox]\ncontain = "always"\n')
    g = _open(workdir)
    g.contain, g.contain_reason = False, "no bwrap here"
    return g


def test_contain_always_without_a_sandbox_answers_exactly(workdir: Path) -> None:
    g = _always(workdir)
    try:
        got = g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
        assert got.to_dict() == {
            "decision": "deny",
            "rule": "sandbox.unavailable",
            "reason": '[sandbox] contain = "always" but no sandbox works here: no bwrap here',
            "suggestion": "Run `keel sandbox check`, or set [sandbox] contain = "
            '"auto" in keel.toml.',
        }
        # only shell commands need the sandbox; a denied command keeps the policy's rule
        assert g.decide(ToolCall("Read", "read", paths=("a.txt",))).allowed
        denied = g.decide(ToolCall("Bash", "exec", command="git push --force origin main"))
        assert denied.decision == "deny" and denied.rule != "sandbox.unavailable"
        g.contain = True
        assert g.decide(ToolCall("Bash", "exec", command="ls")).allowed
    finally:
        g.close()


def test_contain_auto_without_a_sandbox_allows_shell_commands(guard: Guard) -> None:
    guard.contain = False
    assert guard.config.sandbox.contain == "auto"
    assert guard.decide(ToolCall("Bash", "exec", command="ls")).allowed


def test_a_bypassed_sandbox_answers_exactly(guard: Guard, workdir: Path) -> None:
    guard.contain = True
    long = "echo " + "x" * 300
    guard.observe(
        ToolResult(
            "Bash", "exec", True, tool_use_id="t0", call=ToolCall("Bash", "exec", command=long)
        )
    )
    assert guard.state.containment_broken == long[:200]
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "sandbox.bypassed",
        "reason": "the client ran a shell command outside keel's sandbox in this session "
        f"({long[:200]}); every later shell command is denied",
        "suggestion": "Start a new session; check the client's version and keel doctor.",
    }
    denied = guard.decide(ToolCall("Bash", "exec", command="git push --force origin main"))
    assert denied.rule != "sandbox.bypassed"  # the policy's own deny comes first
    guard.close()
    errors = [e for e in _events(workdir) if e.kind == "error"]
    assert [e.payload.data for e in errors] == [  # pyright: ignore[reportAttributeAccessIssue]
        {"event": "sandbox.bypassed", "command": long, "tool": "Bash"}
    ]
    again = _open(workdir)  # the next hook process of the session remembers it
    assert again.state.containment_broken == long[:200]
    again.close()


@pytest.mark.parametrize(
    ("rewrite", "result"),
    [
        (False, ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command="ls"))),
        (True, ToolResult("Bash", "exec", True)),
        (True, ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command=""))),
        (True, ToolResult("Read", "read", True, call=ToolCall("Bash", "exec", command="ls"))),
        (True, "contained"),
    ],
    ids=["not-rewriting", "no-call", "no-command", "not-exec", "contained"],
)
def test_no_bypass_is_seen_where_there_is_none(
    guard: Guard, workdir: Path, rewrite: bool, result: ToolResult | str
) -> None:
    guard.contain = rewrite
    if isinstance(result, str):
        line = contained_command(str(workdir), "ls")
        result = ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command=line))
    guard.observe(result)
    assert guard.state.containment_broken is None
    assert guard.decide(ToolCall("Bash", "exec", command="ls")).allowed


def test_inside_keel_wrap_nothing_is_a_bypass(guard: Guard) -> None:
    guard.contain, guard.inside_sandbox = True, True
    guard.observe(ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command="ls")))
    assert guard.state.containment_broken is None


def test_containment_off_and_auto() -> None:
    """``containment`` for a config: off never contains; otherwise the exec backend decides."""
    from keel.config import parse_config
    from keel.sandbox.exec.contain import exec_backend

    off = parse_config('[sandbox]\ncontain = "off"\n')
    assert containment(off) == (False, '[sandbox] contain = "off"')  # type: ignore[arg-type]
    for backend in ("auto", "landlock"):
        auto = parse_config(f'[sandbox]\nbackend = "{backend}"\n')
        name, reason = exec_backend(backend)
        assert containment(auto) == (name is not None, reason)  # type: ignore[arg-type]


def test_a_contained_command_round_trips(workdir: Path) -> None:
    from keel.sandbox.exec.contain import exec_argv

    for command in ("ls -la", "--", "a -- b", "echo 'x y'"):
        line = contained_command(str(workdir), command)
        assert shlex.split(line) == exec_argv(str(workdir), ["bash", "-c", command])
        assert uncontained(line) == command and is_contained(line)
    timed = contained_command(str(workdir), "ls", timeout=5)
    assert shlex.split(timed) == exec_argv(str(workdir), ["bash", "-c", "ls"], timeout=5)
    assert uncontained(timed) == "ls"


def test_other_lines_are_not_contained(workdir: Path) -> None:
    from keel.sandbox.exec.contain import LAUNCHER

    py, ws, li = sys.executable, str(workdir), ["-I", "-S", LAUNCHER]
    good = [py, *li, "exec", "--workspace", ws, "--", "bash", "-c", "ls"]
    assert uncontained(shlex.join(good)) == "ls"
    bad = [
        [py, "-I", "-s", LAUNCHER, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, "-S", "-I", LAUNCHER, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, "-S", LAUNCHER, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, *li, "run", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, "-I", "-S", "/tmp/other.py", "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, *li, "exec", "--workspace", ws, "--", "sh", "-c", "ls"],
        [py, *li, "exec", "--workspace", ws, "--", "bash", "-C", "ls"],
        [py, *li, "exec", "--workspace", ws, "--", "bash", "-c", "ls", "x"],
        [py, *li, "exec", "--workspace", ws, "bash", "-c", "ls", "x"],
        [py, *li, "exec", "--", "bash", "-c"],
        [*li, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
    ]
    for words in bad:
        assert uncontained(shlex.join(words)) is None, words
        assert not is_contained(shlex.join(words))
    assert uncontained("echo 'unclosed") is None
    short = [py, *li, "exec", "--", "bash", "-c", "ls"]  # nine words are enough
    assert uncontained(shlex.join(short)) == "ls"


def test_a_result_is_seen_as_the_agent_wrote_it(workdir: Path) -> None:
    line = contained_command(str(workdir), "pytest -q")
    with_args = ToolCall("Bash", "exec", command=line, args={"command": line, "timeout": 5})
    got = _as_written(ToolResult("Bash", "exec", True, output="o", call=with_args))
    assert got.call is not None and got.call.command == "pytest -q"
    assert got.call.args == {"command": "pytest -q", "timeout": 5}
    assert (got.output, got.tool) == ("o", "Bash")
    no_args = ToolCall("Bash", "exec", command=line, args={"cmd": line})
    got = _as_written(ToolResult("Bash", "exec", True, call=no_args))
    assert got.call is not None and got.call.command == "pytest -q"
    assert got.call.args == {"cmd": line}
    plain = ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command="ls"))
    assert _as_written(plain) is plain
    bare = ToolResult("Bash", "exec", True)
    assert _as_written(bare) is bare
    empty = ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command=""))
    assert _as_written(empty) is empty


# -- observing ------------------------------------------------------------------------------


def test_a_result_is_journaled_exactly(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    output = "é" * (MAX_OUTPUT_JOURNALED + 10)
    result = ToolResult(
        "Bash", "exec", False, output=output, error="bad", exit_code=3, tool_use_id="t1"
    )
    assert guard.observe(result, request_id="o1") is None
    assert guard.journal is not None and guard.journal.answered("o1") == {"guidance": None}
    guard.close()
    call, _, got = _events(workdir)
    assert got.kind == "tool.result" and got.parent_span_id == call.span_id == _span(SESSION, "t1")
    assert (got.session_id, got.agent, got.trace_id) == (SESSION, "tester", trace_id_for(SESSION))
    assert asdict(got.payload) == {
        "tool": "Bash",
        "ok": False,
        "output": output[:MAX_OUTPUT_JOURNALED],
        "error": "bad",
        "exit_code": 3,
        "tool_use_id": "t1",
        "output_hash": "sha256:" + hashlib.sha256(output.encode()).hexdigest(),
    }


def test_a_result_without_output_or_id(guard: Guard, workdir: Path) -> None:
    guard.observe(ToolResult("Read", "read", True))
    guard.close()
    (got,) = _events(workdir)
    assert got.parent_span_id is None and len(got.span_id) > 0
    assert got.payload.output == ""  # pyright: ignore[reportAttributeAccessIssue]
    assert got.payload.output_hash == "sha256:" + hashlib.sha256(b"").hexdigest()  # pyright: ignore[reportAttributeAccessIssue]


def test_a_result_with_a_lone_surrogate_is_hashed(guard: Guard, workdir: Path) -> None:
    guard.observe(ToolResult("Read", "read", True, output="a\udcffb"))
    guard.close()
    want = hashlib.sha256("a\udcffb".encode("utf-8", "replace")).hexdigest()
    assert _events(workdir)[0].payload.output_hash == "sha256:" + want  # pyright: ignore[reportAttributeAccessIssue]


def test_a_result_is_observed_once_per_request(guard: Guard, workdir: Path) -> None:
    result = ToolResult("Bash", "exec", True, output="x", tool_use_id="t1")
    assert guard.observe(result, request_id="o") is None
    assert guard.observe(result, request_id="o") is None
    guard.close()
    assert [e.kind for e in _events(workdir)] == ["tool.result"]


def test_a_journal_failure_after_the_call_is_raised(guard: Guard) -> None:
    guard.journal = BrokenJournal()  # type: ignore[assignment]
    with pytest.raises(OSError, match="disk full"):
        guard.observe(ToolResult("Bash", "exec", True))
    with pytest.raises(OSError, match="disk full"):
        guard.gate_finish()
    with pytest.raises(OSError, match="disk full"):
        guard.note("prompt", {"text": "hi"})


# -- finishing --------------------------------------------------------------------------------


def _gates(events: list[Event]) -> list[tuple[str, Any]]:
    return [(e.kind, asdict(e.payload)) for e in events if e.kind in ("gate", "error")]


def test_without_a_monitor_the_session_may_finish(guard: Guard, workdir: Path) -> None:
    guard.state.stop_blocks = 2
    assert guard.gate_finish(request_id="f1") is None
    assert guard.state.stop_blocks == 0
    assert guard.may_finish() == (True, "the gates allow finishing")
    guard.close()
    gate = {"command": "finish", "passed": True, "exit_code": None, "detail": "no monitor"}
    assert _gates(_events(workdir)) == [("gate", gate), ("gate", gate)]


def test_gate_failures_block_finishing_at_most_max_blocks_times(
    guard: Guard, workdir: Path
) -> None:
    why = "the [gates] must pass: pytest -q failed; ruff failed"
    block = f"keel: do not finish yet: {why}"
    failures = ["pytest -q failed", "ruff failed"]
    assert guard.config.gates.max_blocks == 3
    got = [guard.gate_finish(failures) for _ in range(5)]
    assert got == [block, block, block, None, block]
    assert guard.state.stop_blocks == 1
    assert guard.may_finish() == (True, "the gates allow finishing")
    guard.close()
    failed = ("gate", {"command": "finish", "passed": False, "exit_code": None, "detail": why})
    gave_up = ("error", {"data": {"gate": "gave_up", "blocks": 3, "why": why}})
    assert _gates(_events(workdir))[:6] == [failed, failed, failed, failed, gave_up, failed]


def test_a_finish_request_is_answered_once(guard: Guard, workdir: Path) -> None:
    block = guard.gate_finish(["x failed"], request_id="f")
    assert block is not None and guard.gate_finish(request_id="f") == block
    assert guard.journal is not None and guard.journal.answered("f") == {"block": block}
    assert guard.state.stop_blocks == 1
    guard.close()
    assert [e.kind for e in _events(workdir)] == ["gate"]


def test_a_finish_answered_by_another_process_gets_that_answer(workdir: Path) -> None:
    first = _open(workdir)
    block = first.gate_finish(["x failed"], request_id="f")
    first.close()
    second = _open(workdir)
    assert second.journal is not None
    second.journal = _Forgetful(second.journal)  # type: ignore[assignment]
    try:
        assert block is not None and second.gate_finish(request_id="f") == block
        second.note("prompt", {"text": "hi"}, request_id="f")  # answered: nothing written
    finally:
        second.close()
    assert [e.kind for e in _events(workdir)] == ["gate"]


def test_the_monitor_blocks_finishing_until_the_gates_ran(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[gates]\nrequired = ["pytest -q"]\n')
    g = _open(workdir, monitor=True)
    try:
        g.decide(ToolCall("Write", "write", paths=(str(workdir / "a.py"),), tool_use_id="w"))
        g.observe(ToolResult("Write", "write", True, tool_use_id="w"))
        block = g.gate_finish()
        assert block is not None and block.startswith("keel: do not finish yet: ")
        assert "pytest -q" in block and g.state.stop_blocks == 1
    finally:
        g.close()
    kinds = [e.kind for e in _events(workdir)]
    assert kinds[-2:] == ["diagnostic", "gate"]


def test_a_note_is_journaled_once(guard: Guard, workdir: Path) -> None:
    guard.note("prompt", {"text": "hi"}, request_id="n")
    guard.note("prompt", {"text": "again"}, request_id="n")
    guard.close()
    (got,) = _events(workdir)
    assert (got.kind, asdict(got.payload)) == ("prompt", {"data": {"text": "hi"}})


# -- the monitor ------------------------------------------------------------------------------


def test_the_monitor_denies_a_call_repeated_too_often(workdir: Path) -> None:
    g = _open(workdir, monitor=True)
    try:
        for n in range(4):
            assert g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id=f"t{n}")).allowed
            g.observe(ToolResult("Bash", "exec", True, output="x", tool_use_id=f"t{n}"))
        got = g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t4"))
        assert (got.decision, got.rule) == ("deny", "monitor.repeat")
        assert "`ls` was called 5 times in a row" in got.reason
        assert got.suggestion == "Change your approach instead of repeating the same call."
    finally:
        g.close()
    events = _events(workdir)
    call, result = ["tool.call", "decision"], ["tool.result"]
    assert [e.kind for e in events] == [
        *call, *result, *call, *result,
        "tool.call", "diagnostic", "decision", *result, "guidance",  # a hint on the 3rd
        *call, *result, "diagnostic", "guidance",  # correct after the 4th
        "tool.call", "guidance", "decision",  # the 5th is denied
    ]  # fmt: skip
    diag, guidance = events[7], events[-2]
    assert asdict(guidance.payload) == {
        "level": "correct",
        "message": got.reason,
        "detector": "repeat",
        "tool_use_id": "t4",
    }
    assert diag.payload.detector == "repeat" and diag.payload.level == "hint"  # pyright: ignore[reportAttributeAccessIssue]
    assert (diag.session_id, diag.agent) == (SESSION, "tester")


def test_a_policy_deny_is_not_handed_to_the_monitor(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[scope]\ninclude = ["src/**"]\n')
    g = _open(workdir, monitor=True)
    try:
        got = g.decide(ToolCall("Write", "write", paths=("/etc/passwd",), tool_use_id="w1"))
        assert got.decision == "deny" and not got.rule.startswith("monitor.")
        assert g.monitor is not None and g.monitor.state.step == 0
    finally:
        g.close()
    assert [e.kind for e in _events(workdir)] == ["tool.call", "decision"]


def test_a_hint_allows_the_call_and_comes_with_its_result(workdir: Path) -> None:
    call = ToolCall("Bash", "exec", command="ls", tool_use_id="t")
    for n in (1, 2):  # two hook processes: the streak is in the session's state
        g = _open(workdir, monitor=True)
        assert g.decide(call.replace(tool_use_id=f"t{n}")).allowed
        assert g.observe(ToolResult("Bash", "exec", True, output="x", tool_use_id=f"t{n}")) is None
        g.close()
    g = _open(workdir, monitor=True)
    try:
        assert g.decide(call.replace(tool_use_id="t3")).allowed
        guidance = g.observe(
            ToolResult("Bash", "exec", True, output="x", tool_use_id="t3"), request_id="o3"
        )
        assert guidance is not None and guidance.level == "hint"
        assert guidance.detector == "repeat" and "3 times in a row" in guidance.message
        assert g.journal is not None
        assert g.journal.answered("o3") == {"guidance": guidance.to_dict()}
        again = g.observe(ToolResult("Bash", "exec", True, tool_use_id="t3"), request_id="o3")
        assert again == guidance
    finally:
        g.close()
    last = [e for e in _events(workdir) if e.kind == "guidance"]
    assert [asdict(e.payload) for e in last] == [
        {"level": "hint", "message": guidance.message, "detector": "repeat", "tool_use_id": "t3"}
    ]


def test_the_session_state_is_stored_with_each_transaction(workdir: Path) -> None:
    g = _open(workdir, monitor=True)
    try:
        assert g.state_version == 0 and g.is_current()
        g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
        assert g.state_version == 1 and g.is_current()
        assert g.journal is not None and g.monitor is not None
        stored = g.journal.session_state(SESSION)
        assert stored is not None and stored == (1, g.state.to_dict())
        assert stored[1]["monitor"] == g.monitor.state.to_dict() and stored[1]["monitor"]
        other = _open(workdir, monitor=True)
        try:
            assert other.state_version == 1 and other.state.to_dict() == g.state.to_dict()
            assert other.monitor is not None
            assert other.monitor.state.to_dict() == g.monitor.state.to_dict()
            other.decide(ToolCall("Bash", "exec", command="pwd", tool_use_id="t2"))
            assert not g.is_current()
            g.reload_state()
            assert g.is_current() and g.state_version == 2
            assert g.monitor.state.to_dict() == other.monitor.state.to_dict()
            assert g.state.to_dict() == other.state.to_dict()
        finally:
            other.close()
    finally:
        g.close()


def test_reloading_keeps_no_monitor_when_there_is_none(guard: Guard) -> None:
    guard.reload_state()
    assert guard.monitor is None and guard.state_version == 0
    Guard(guard.root, guard.config, guard.policy, "x").reload_state()  # no journal: nothing


# -- checkpoints ------------------------------------------------------------------------------


def test_a_change_gets_a_before_and_an_after_checkpoint(workdir: Path) -> None:
    g = _open(workdir, checkpoints=True)
    try:
        path = str(workdir / "a.txt")
        assert g.decide(ToolCall("Write", "write", paths=(path,), tool_use_id="w1")).allowed
        assert list(g.state.open_calls) == ["w1"]
        Path(path).write_text("new\n")
        g.observe(ToolResult("Write", "write", True, tool_use_id="w1"))
        assert g.state.open_calls == {}
        g.observe(ToolResult("Write", "write", True, tool_use_id="w1"))  # only once
    finally:
        g.close()
    events = _events(workdir)
    kinds = [e.kind for e in events]
    assert kinds == [
        "tool.call",
        "checkpoint",
        "decision",
        "tool.result",
        "checkpoint",
        "tool.result",
    ]
    before: Any = events[1].payload
    after: Any = events[4].payload
    assert (before.tool_use_id, before.label) == ("w1", "Write")
    assert before.detail["kind"] == "before" and after.detail["kind"] == "after"
    assert after.tool_use_id == "w1"


@pytest.mark.parametrize(
    ("call", "checkpointed"),
    [
        (ToolCall("Bash", "exec", command="touch x", tool_use_id="c"), True),
        (ToolCall("Edit", "edit", paths=("a.txt",), tool_use_id="c"), True),
        (ToolCall("Bash", "exec", command="ls", tool_use_id="c"), False),
        (ToolCall("Read", "read", paths=("a.txt",), tool_use_id="c"), False),
        (ToolCall("Bash", "exec", command="git push --force origin main", tool_use_id="c"), False),
    ],
    ids=["exec", "edit", "read-only-exec", "read", "denied"],
)
def test_what_gets_a_checkpoint(workdir: Path, call: ToolCall, checkpointed: bool) -> None:
    g = _open(workdir, checkpoints=True)
    try:
        g.decide(call)
        assert ("c" in g.state.open_calls) is checkpointed
    finally:
        g.close()
    kinds = [e.kind for e in _events(workdir)]
    assert kinds == (
        ["tool.call", "checkpoint", "decision"] if checkpointed else ["tool.call", "decision"]
    )


def test_without_checkpoints_nothing_is_snapshot(guard: Guard, workdir: Path) -> None:
    guard.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w"))
    guard.observe(ToolResult("Write", "write", True, tool_use_id="w"))
    assert guard.checkpoints is None and guard.state.open_calls == {}
    guard.close()
    assert [e.kind for e in _events(workdir)] == ["tool.call", "decision", "tool.result"]


class _BrokenStore:
    def create(self, **_: object) -> object:
        raise OSError("no space")

    def after_call(self, **_: object) -> object:
        raise OSError("no space")


def test_a_checkpoint_that_fails_is_an_exact_deny(guard: Guard, workdir: Path) -> None:
    guard.checkpoints = _BrokenStore()  # type: ignore[assignment]
    got = guard.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "internal_error",
        "reason": "keel could not take a checkpoint before this call (OSError: no space); "
        "denied to be safe",
        "suggestion": RETRY,
    }
    assert guard.state.open_calls == {}


def test_an_after_checkpoint_that_fails_is_journaled(guard: Guard, workdir: Path) -> None:
    guard.state.open_calls["w"] = time.time()
    guard.checkpoints = _BrokenStore()  # type: ignore[assignment]
    guard.observe(ToolResult("Write", "write", True, tool_use_id="w"))
    guard.close()
    result, error = _events(workdir)
    assert result.kind == "tool.result" and error.kind == "error"
    assert asdict(error.payload) == {
        "data": {"event": "checkpoint.after_failed", "detail": "OSError: no space"}
    }


# -- numbered calls (clients that send no tool-use id) --------------------------------------


def test_calls_without_an_id_are_numbered_and_matched_in_order(guard: Guard, workdir: Path) -> None:
    call = ToolCall("run_shell_command", "exec", command="ls", tool_use_id="derived-q")
    assert guard.decide(call).allowed and guard.decide(call).allowed
    assert guard.state.pending == {"derived-q": ["derived-q-1", "derived-q-2"]}
    set_stop(workdir, "x")
    assert not guard.decide(call).allowed  # denied: nothing to match a result to
    assert guard.state.pending == {"derived-q": ["derived-q-1", "derived-q-2"]}
    for _ in range(3):
        guard.observe(ToolResult("run_shell_command", "exec", True, tool_use_id="derived-q"))
    assert guard.state.pending == {} and guard.state.calls == 3
    guard.close()
    events = _events(workdir)
    calls = [e.payload.tool_use_id for e in events if e.kind == "tool.call"]  # pyright: ignore[reportAttributeAccessIssue]
    results = [e for e in events if e.kind == "tool.result"]
    assert calls == ["derived-q-1", "derived-q-2", "derived-q-3"]
    assert [e.payload.tool_use_id for e in results] == ["derived-q-1", "derived-q-2", "derived-q"]  # pyright: ignore[reportAttributeAccessIssue]
    spans = {e.payload.tool_use_id: e.span_id for e in events if e.kind == "tool.call"}  # pyright: ignore[reportAttributeAccessIssue]
    assert [r.parent_span_id for r in results[:2]] == [spans["derived-q-1"], spans["derived-q-2"]]


def test_calls_with_an_id_are_not_numbered(guard: Guard) -> None:
    guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="toolu-1"))
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert guard.state.calls == 0 and guard.state.pending == {}
    guard.observe(ToolResult("Bash", "exec", True, tool_use_id="derived-none"))
    assert guard.state.pending == {}


# -- freezing contained commands while a client file tool acts -------------------------------


def _proc_state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


@pytest.fixture
def contained(workdir: Path) -> Iterator[int]:
    """A process registered as a running contained command of the workspace."""
    from keel.sandbox.os._registry import dumps, start_time

    proc = subprocess.Popen(["sleep", "60"])
    try:
        start = start_time(proc.pid)
        folder = workdir / ".keel" / "exec"
        folder.mkdir(parents=True, exist_ok=True)
        record = {"pid": proc.pid, "start": start, "processes": [[proc.pid, start]]}
        (folder / f"{proc.pid}.json").write_text(dumps(record))
        yield proc.pid
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()


def _read(guard: Guard, tid: str) -> Decision:
    return guard.decide(ToolCall("Read", "read", paths=("a.txt",), tool_use_id=tid))


def test_a_file_tool_freezes_contained_commands_until_its_result(
    guard: Guard, contained: int
) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed and _read(guard, "r2").allowed
    assert _proc_state(contained) == "T"
    assert set(guard.state.frozen) == {"r1", "r2"}
    assert len(guard.state.frozen_pids) == 1 and guard.state.frozen_pids[0][0] == contained
    guard.observe(ToolResult("Read", "read", True, tool_use_id="r1"))
    assert _proc_state(contained) == "T"  # r2 is still in flight
    guard.observe(ToolResult("Read", "read", True, tool_use_id="other"))
    assert _proc_state(contained) == "T"
    guard.observe(ToolResult("Read", "read", True, tool_use_id="r2"))
    assert _proc_state(contained) != "T" and guard.state.frozen_pids == []


def test_a_denied_file_tool_leaves_nothing_frozen(
    guard: Guard, workdir: Path, contained: int
) -> None:
    guard.contain = True
    set_stop(workdir, "x")
    assert not _read(guard, "r1").allowed
    assert _proc_state(contained) != "T" and guard.state.frozen == {}


@pytest.mark.parametrize(
    ("contain", "inside", "call"),
    [
        (False, False, ToolCall("Read", "read", paths=("a.txt",), tool_use_id="r")),
        (True, True, ToolCall("Read", "read", paths=("a.txt",), tool_use_id="r")),
        (True, False, ToolCall("Bash", "exec", command="ls", tool_use_id="r")),
    ],
    ids=["not-contained", "inside-wrap", "shell"],
)
def test_what_does_not_freeze(
    guard: Guard, contained: int, contain: bool, inside: bool, call: ToolCall
) -> None:
    guard.contain, guard.inside_sandbox = contain, inside
    assert guard.decide(call).allowed
    assert _proc_state(contained) != "T" and guard.state.frozen == {}


def test_a_freeze_whose_result_never_came_ends(guard: Guard, contained: int) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed and _proc_state(contained) == "T"
    guard.state.frozen["r1"] -= 31  # FREEZE_TTL passed
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert guard.state.frozen == {} and _proc_state(contained) != "T"


def test_a_recent_freeze_is_kept(guard: Guard, contained: int) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed
    guard.state.frozen["r1"] -= 25
    guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert "r1" in guard.state.frozen and _proc_state(contained) == "T"


@pytest.mark.parametrize("end", ["finish", "note"])
def test_the_end_of_a_turn_thaws_everything(guard: Guard, contained: int, end: str) -> None:
    guard.contain = True
    assert _read(guard, "r1").allowed and _proc_state(contained) == "T"
    if end == "finish":
        guard.gate_finish()
    else:
        guard.note("prompt", {"text": "next"})
    assert guard.state.frozen == {} and guard.state.frozen_pids == []
    assert _proc_state(contained) != "T"


# -- deadlines, ids and more of the session's bookkeeping -----------------------------------


def test_nothing_is_committed_after_the_callers_deadline(guard: Guard, workdir: Path) -> None:
    from keel.core.errors import JournalError

    past = time.monotonic() - 1
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"), commit_by=past)
    assert (got.decision, got.rule) == ("deny", "internal_error")
    assert got.reason.startswith("keel could not journal this Bash call (JournalError: ")
    with pytest.raises(JournalError):
        guard.observe(ToolResult("Bash", "exec", True, tool_use_id="t1"), commit_by=past)
    with pytest.raises(JournalError):
        guard.gate_finish(commit_by=past)
    with pytest.raises(JournalError):
        guard.note("prompt", {"text": "hi"}, commit_by=past)
    guard.close()
    assert _events(workdir) == []


def test_a_repeated_result_request_matches_no_second_call(guard: Guard, workdir: Path) -> None:
    call = ToolCall("run_shell_command", "exec", command="ls", tool_use_id="derived-z")
    guard.decide(call)
    guard.decide(call)
    result = ToolResult("run_shell_command", "exec", True, tool_use_id="derived-z")
    guard.observe(result, request_id="o")
    guard.observe(result, request_id="o")
    assert guard.state.pending == {"derived-z": ["derived-z-2"]}


def test_an_id_with_dashes_is_not_a_numbered_id(guard: Guard) -> None:
    call = ToolCall("Bash", "exec", command="ls", tool_use_id="call-0001-0002")
    assert guard.decide(call).allowed
    assert guard.state.pending == {} and guard.state.calls == 0


def test_an_id_that_is_not_valid_unicode_gets_its_span(guard: Guard, workdir: Path) -> None:
    tid = "t\udcff1"
    assert guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id=tid)).allowed
    guard.close()
    key = f"{SESSION}\0{tid}".encode("utf-8", "replace")
    span = hashlib.sha256(b"span\0" + key).hexdigest()[:16]
    assert _events(workdir)[0].span_id == span


def test_each_commit_moves_the_state_version_by_one(guard: Guard) -> None:
    for n in (1, 2, 3):
        guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id=f"t{n}"))
        assert guard.state_version == n and guard.is_current()


def test_without_checkpoints_an_open_call_gets_no_after_checkpoint(
    guard: Guard, workdir: Path
) -> None:
    guard.state.open_calls["w"] = time.time()  # left by a process that took checkpoints
    guard.observe(ToolResult("Write", "write", True, tool_use_id="w"))
    guard.observe(ToolResult("Bash", "exec", True, tool_use_id="w"))
    assert guard.checkpoints is None and "w" in guard.state.open_calls
    guard.close()
    assert [e.kind for e in _events(workdir)] == ["tool.result", "tool.result"]


def test_a_file_tool_without_an_id_is_frozen_until_its_result(guard: Guard, contained: int) -> None:
    guard.contain = True
    assert guard.decide(ToolCall("Read", "read", paths=("a.txt",))).allowed
    assert guard.state.frozen.keys() == {""} and _proc_state(contained) == "T"
    guard.observe(ToolResult("Read", "read", True))
    assert guard.state.frozen == {} and _proc_state(contained) != "T"


def test_the_monitor_judges_scope_as_the_policy_does(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[scope]\ninclude = ["src/**"]\n')
    (workdir / "src").mkdir()
    g = _open(workdir, monitor=True)
    try:
        inside = str(workdir / "src" / "a.py")
        assert g.decide(ToolCall("Write", "write", paths=(inside,), tool_use_id="w1")).allowed
        touch = ToolCall("Bash", "exec", command="touch src/b.py", cwd=str(workdir))
        assert g.decide(touch).allowed
        assert g.decide(ToolCall("Bash", "exec", command="touch src/c.py")).allowed
    finally:
        g.close()


# -- session-4 survivors: answers from another process, checkpoints and their deadlines -----


def test_a_result_answered_by_another_process_gets_that_guidance(workdir: Path) -> None:
    call = ToolCall("Bash", "exec", command="ls", tool_use_id="t")
    first = _open(workdir, monitor=True)
    try:
        for n in (1, 2, 3):
            assert first.decide(call.replace(tool_use_id=f"t{n}")).allowed
            guidance = first.observe(
                ToolResult("Bash", "exec", True, output="x", tool_use_id=f"t{n}"),
                request_id=f"o{n}",
            )
    finally:
        first.close()
    assert guidance is not None and guidance.level == "hint"
    second = _open(workdir, monitor=True)
    assert second.journal is not None
    second.journal = _Forgetful(second.journal)  # type: ignore[assignment]
    try:  # the commit finds the request answered: the answer is the committed guidance
        again = second.observe(
            ToolResult("Bash", "exec", True, output="x", tool_use_id="t3"), request_id="o3"
        )
    finally:
        second.close()
    assert again == guidance


def test_a_repeated_note_leaves_the_file_tools_in_flight_frozen(guard: Guard) -> None:
    guard.note("prompt", {"text": "hi"}, request_id="n")
    guard.state.frozen["r1"] = time.time()  # a file tool is in flight now
    guard.note("prompt", {"text": "hi"}, request_id="n")  # answered already: changes nothing
    assert list(guard.state.frozen) == ["r1"]


def test_a_call_without_an_id_gets_its_after_checkpoint(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    g = _open(workdir, checkpoints=True)
    try:
        path = str(workdir / "a.txt")
        assert g.decide(ToolCall("Write", "write", paths=(path,))).allowed
        assert list(g.state.open_calls) == [""]
        Path(path).write_text("new\n")
        g.observe(ToolResult("Write", "write", True))
        assert g.state.open_calls == {}
    finally:
        g.close()
    assert [e.kind for e in _events(workdir)] == [
        "tool.call",
        "checkpoint",
        "decision",
        "tool.result",
        "checkpoint",
    ]
    taken = Checkpoints(workdir).history()
    assert [(cp.kind, cp.session_id) for cp in taken] == [("before", SESSION), ("after", SESSION)]


def test_a_stale_git_lock_found_by_the_guard_is_journaled(workdir: Path) -> None:
    g = _open(workdir, checkpoints=True)
    try:
        assert g.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w1")).allowed
        (workdir / ".keel" / "checkpoints" / "keel-index.lock").write_text("")  # a killed git
        assert g.decide(ToolCall("Write", "write", paths=("b.txt",), tool_use_id="w2")).allowed
    finally:
        g.close()
    errors = [e for e in _events(workdir) if e.kind == "error"]
    assert [(e.session_id, e.payload.data["event"]) for e in errors] == [  # pyright: ignore[reportAttributeAccessIssue]
        (SESSION, "checkpoint.lock_recovered")
    ]


def _while_the_store_is_held(workdir: Path, act: Any) -> Any:
    """``act()`` while another keel process holds the checkpoint store.

    The store is let go only after ``act`` returned, or (if it waits for the store instead of
    giving up at its deadline) after a long grace: then ``act`` finishes late, and its answer
    shows that it waited.
    """
    import threading

    from keel.workspace import Checkpoints, _lock

    store = Checkpoints(workdir)
    store.create()
    fd = _lock.acquire(store.git_dir / _lock.LOCK_NAME)
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(act()))
    try:
        worker.start()
        worker.join(timeout=10)
    finally:
        _lock.release(fd)
    worker.join()
    return got[0]


def test_the_before_checkpoint_gives_up_at_the_callers_deadline(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    g = _open(workdir, journal=False, checkpoints=True)
    past = time.monotonic() - 1
    call = ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w")
    got = _while_the_store_is_held(workdir, lambda: g.decide(call, commit_by=past))
    assert (got.decision, got.rule) == ("deny", "internal_error")
    assert got.reason.startswith(
        "keel could not take a checkpoint before this call (WorkspaceError: "
    )
    assert g.state.open_calls == {}
    assert [cp.kind for cp in Checkpoints(workdir).history()] == ["manual"]


def test_the_after_checkpoint_gives_up_at_the_callers_deadline(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    g = _open(workdir, journal=False, checkpoints=True)
    g.state.open_calls["w"] = time.time()
    past = time.monotonic() - 1
    result = ToolResult("Write", "write", True, tool_use_id="w")
    assert _while_the_store_is_held(workdir, lambda: g.observe(result, commit_by=past)) is None
    assert g.state.open_calls == {}
    assert [cp.kind for cp in Checkpoints(workdir).history()] == ["manual"]


def test_a_command_is_read_only_where_it_runs(workdir: Path) -> None:
    from keel.policy import Policy

    opened = _open(workdir, journal=False)
    at_root = Guard("/", opened.config, Policy.from_config(opened.config, "/"), "sid")
    to_null = ToolCall("Bash", "exec", command="ls > ~+/null", cwd="/dev")  # /dev/null
    assert not at_root.needs_checkpoint(to_null)
    assert at_root.needs_checkpoint(to_null.replace(cwd="/"))  # /null: a file
    assert not opened.needs_checkpoint(ToolCall("Bash", "exec", tool_use_id="c"))  # no command
