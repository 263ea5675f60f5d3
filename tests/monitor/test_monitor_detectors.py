"""Each detector on built call sequences, the ladder, replan/stop, gates and the state."""

from __future__ import annotations

from typing import Any

import pytest

from keel.config import KeelConfig, parse_config
from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Guidance
from keel.core.errors import PayloadError
from keel.core.events import DataPayload, Event, ToolCallPayload, ToolResultPayload
from keel.journal import MemoryJournal
from keel.monitor import Diagnostic, Monitor, MonitorState


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def make(toml: str = "", **kwargs: Any) -> Monitor:
    config = parse_config(toml) if toml else KeelConfig()
    return Monitor(config, clock=Clock(), **kwargs)


def bash(command: str, n: int = 0) -> ToolCall:
    return ToolCall("Bash", "exec", command=command, tool_use_id=f"t{n}", cwd="/w")


def ran(
    monitor: Monitor,
    call: ToolCall,
    output: str = "",
    ok: bool = True,
    exit_code: int | None = None,
) -> tuple[Guidance | None, Guidance | None]:
    """One call through the monitor; the result is delivered only when the call is allowed."""
    before = monitor.before_call(call)
    if before is not None and before.level != "hint":
        return before, None
    code = exit_code if exit_code is not None else (0 if ok else 1)
    result = ToolResult(call.tool, call.kind, ok, output, None, code, call.tool_use_id)
    return before, monitor.after_call(result)


def levels(monitor: Monitor) -> list[tuple[int, str, str]]:
    return [(d.step, d.detector, d.level) for d in monitor.drain()]


# ---------------------------------------------------------------------------------------------
# repeat


def test_identical_calls_hint_at_three_and_deny_at_five_gemini() -> None:
    m = make("[monitor]\nidentical_pairs = 10\n")
    seen = []
    for i in range(5):
        before, _ = ran(m, bash("cat setup.cfg", i), "[metadata]\nname = x\n")
        seen.append(before.level if before else None)
    assert seen == [None, None, "hint", None, "correct"]
    assert levels(m) == [(3, "repeat", "hint"), (5, "repeat", "correct")]


def test_four_identical_action_observation_pairs_are_stuck_openhands() -> None:
    m = make()
    post = [ran(m, bash("ls src", i), "a.py\nb.py\n")[1] for i in range(4)]
    assert post[:2] == [None, None]
    assert post[2] is not None and post[2].level == "hint"  # the pre-call hint, delivered again
    assert post[3] is not None and post[3].level == "correct" and post[3].detector == "repeat"
    assert "4 times in a row" in post[3].message


def test_repeat_within_window_not_consecutive() -> None:
    m = make("[monitor]\nrepeat_in_window = 4\n")
    for i in range(4):
        ran(m, bash("git log -1", 10 * i), "commit abc\n")
        ran(m, bash(f"echo {i}", 10 * i + 1), f"{i}\n")
    found = levels(m)
    assert found == [(7, "repeat", "hint")]


def test_polling_whose_output_changes_is_not_a_loop() -> None:
    m = make()
    for i in range(12):
        before, after = ran(
            m, bash("gh run view 42", i), f"status: in_progress ({i} of 12 jobs done)"
        )
        assert before is None and after is None
    assert m.drain() == []


def test_timing_noise_does_not_make_output_look_new() -> None:
    m = make()
    outputs = [f"1 failed in 0.{i}s\nWall time: {i}.2 seconds" for i in range(4)]
    post = [ran(m, bash("make check", i), outputs[i], ok=True)[1] for i in range(4)]
    assert post[3] is not None and post[3].detector == "repeat"


def test_waits_get_a_higher_threshold() -> None:
    m = make()
    for i in range(8):
        before, after = ran(m, bash("sleep 30 && kubectl get pods", i), "web-1 Pending")
        assert before is None and after is None, i
    before, _ = ran(m, bash("sleep 30 && kubectl get pods", 9), "web-1 Pending")
    assert before is not None and before.level == "hint"


def test_description_does_not_change_the_call_key() -> None:
    m = make("[monitor]\nidentical_pairs = 10\n")
    for i in range(3):
        call = ToolCall(
            "Bash",
            "exec",
            command="pytest -q",
            args={"command": "pytest -q", "description": f"try {i}"},
        )
        before, _ = ran(m, call, "3 passed")
    assert before is not None and before.detector == "repeat"


# ---------------------------------------------------------------------------------------------
# alternation


def test_a_b_alternation_over_six_calls_asks_for_a_new_plan_openhands() -> None:
    m = make()
    calls = [bash("cat a.py", 0), bash("cat b.py", 1)]
    results: list[Guidance | None] = []
    for i in range(6):
        call = calls[i % 2]
        results.append(ran(m, call, f"contents of {call.command}")[0])
    assert results[:5] == [None] * 5
    assert results[5] is not None and results[5].level == "replan"
    assert results[5].detector == "alternation"
    assert m.state.replan is not None
    assert "State a new plan (TodoWrite, ExitPlanMode, update_plan, write_todos)" in (
        results[5].message
    )


def test_a_replan_names_the_planning_tools_this_session_has() -> None:
    m = make('[monitor]\nplanning_tools = ["run_plan"]\n')
    calls = [bash("cat a.py", 0), bash("cat b.py", 1)]
    results = [ran(m, calls[i % 2], f"contents {i % 2}")[0] for i in range(6)]
    assert results[5] is not None and results[5].level == "replan"
    assert "State a new plan (run_plan)" in results[5].message
    assert "TodoWrite" not in results[5].message


def test_alternation_with_changing_results_is_fine() -> None:
    m = make()
    for i in range(8):
        call = bash("make", 0) if i % 2 == 0 else bash("cat build.log", 1)
        before, after = ran(m, call, f"build output {i}")
        assert before is None and after is None


# ---------------------------------------------------------------------------------------------
# failures


def test_same_failing_call_three_times_then_denied_openhands() -> None:
    m = make()
    posts = [
        ran(m, bash("npm run build", i), "error TS2304: Cannot find name 'x'.", ok=False)[1]
        for i in range(3)
    ]
    assert posts[:2] == [None, None]
    assert posts[2] is not None and posts[2].level == "correct" and posts[2].detector == "failure"
    before, _ = ran(m, bash("npm run build", 3), "", ok=False)
    assert before is not None and before.level == "correct"
    assert "already failed 3 times" in before.message


def test_same_error_from_different_calls_is_a_hint() -> None:
    m = make()
    error = "ModuleNotFoundError: No module named 'yaml'"
    for i, cmd in enumerate(["python a.py", "python b.py", "python c.py"]):
        _, after = ran(m, bash(cmd, i), f"Traceback...\n{error}", ok=False)
    assert (
        after is not None
        and after.level == "hint"
        and "same error appeared 3 times" in after.message
    )


def test_same_syntax_error_on_the_same_line_after_edits_openhands() -> None:
    m = make()
    error = '  File "app.py", line 12\n    def f(:\n          ^\nSyntaxError: invalid syntax'
    last = None
    for i in range(3):
        ran(
            m, ToolCall("Edit", "edit", paths=("app.py",), args={"i": i}, tool_use_id=f"e{i}"), "ok"
        )
        _, last = ran(m, bash("python app.py", 100 + i), error, ok=False)
    assert last is not None and last.detector == "failure"


def test_an_edit_resets_the_failing_call_count() -> None:
    m = make()
    for i in range(2):
        ran(m, bash("pytest -q", i), f"1 failed ({i})", ok=False)
    ran(m, ToolCall("Edit", "edit", paths=("src/x.py",), tool_use_id="e"), "updated")
    before, _ = ran(m, bash("pytest -q", 9), "1 failed (x)", ok=False)
    assert before is None


# ---------------------------------------------------------------------------------------------
# no progress, monologue


def test_no_information_gain_over_n_steps() -> None:
    m = make("[monitor]\nno_progress_steps = 4\n")
    files = ["a", "b", "c", "a", "b", "c", "a"]
    posts = []
    for i, name in enumerate(files):
        posts.append(
            ran(m, ToolCall("Read", "read", paths=(name,), tool_use_id=f"r{i}"), f"text {name}")[1]
        )
    assert posts[:6] == [None] * 6
    assert posts[6] is not None and posts[6].detector == "no_progress"


def test_monologue_three_identical_messages_openhands() -> None:
    m = make()
    found: list[Diagnostic] = []
    for _ in range(3):
        found += m.observe(Event("thought", "s", DataPayload({"text": "I will now fix the bug."})))
    assert [(d.detector, d.level) for d in found] == [("monologue", "hint")]


def test_a_tool_call_breaks_a_monologue() -> None:
    m = make()
    found: list[Diagnostic] = []
    for i in range(4):
        found += m.observe(Event("thought", "s", DataPayload({"text": "Thinking."})))
        if i == 1:
            m.before_call(bash("ls", 1))
    assert found == []


# ---------------------------------------------------------------------------------------------
# budgets, scope, test weakening, drift


def test_step_budget_warns_then_stops() -> None:
    m = make("[limits]\nmax_steps = 5\n")
    got = [m.before_call(bash(f"echo {i}", i)) for i in range(6)]
    assert [g.level if g else None for g in got] == [None, None, None, "hint", None, "stop"]
    assert m.state.stopped is not None
    after_stop = m.before_call(ToolCall("Read", "read", paths=("a",)))
    assert after_stop is not None and after_stop.level == "stop"


def test_token_and_wall_time_budgets() -> None:
    m = make("[limits]\nmax_tokens = 1000\nmax_wall_seconds = 100\n")
    m.observe(
        Event(
            "model.response",
            "s",
            DataPayload({"usage": {"input_tokens": 700, "output_tokens": 400}}),
        )
    )
    got = m.before_call(bash("ls"))
    assert got is not None and got.level == "stop" and "tokens budget" in got.message
    m2 = make("[limits]\nmax_wall_seconds = 100\n")
    m2.observe(Event("tool.call", "s", ToolCallPayload("Bash", "exec", "ls"), ts=0.0))
    found = m2.observe(Event("tool.call", "s", ToolCallPayload("Bash", "exec", "pwd"), ts=500.0))
    assert [(d.detector, d.level) for d in found] == [("budget", "stop")]


def test_edit_outside_scope_is_denied() -> None:
    m = make('[scope]\ninclude = ["src/**", "tests/**"]\nexclude = ["src/vendor/**"]\n')
    assert m.before_call(ToolCall("Edit", "edit", paths=("/w/src/app.py",), cwd="/w")) is None
    denied = m.before_call(ToolCall("Write", "write", paths=("/w/README.md",), cwd="/w"))
    assert denied is not None and denied.level == "correct" and denied.detector == "scope"
    vendor = m.before_call(ToolCall("Edit", "edit", paths=("src/vendor/lib.py",), tool_use_id="v"))
    assert vendor is not None and vendor.detector == "scope"
    redirect = m.before_call(bash("echo x > docs/notes.md", 5))
    assert redirect is not None and redirect.detector == "scope"
    reads = m.before_call(ToolCall("Read", "read", paths=("/w/README.md",), cwd="/w"))
    assert reads is None or reads.detector != "scope"


def test_in_scope_callable_is_used() -> None:
    m = Monitor(KeelConfig(), in_scope=lambda path: path.startswith("lib/"))
    assert m.before_call(ToolCall("Edit", "edit", paths=("lib/a.py",))) is None
    got = m.before_call(ToolCall("Edit", "edit", paths=("app/a.py",)))
    assert got is not None and got.detector == "scope"


@pytest.mark.parametrize(
    ("call", "change"),
    [
        (bash("rm tests/test_api.py"), "deleted test file"),
        (bash("git rm -q tests/unit/test_x.py"), "deleted test file"),
        (
            ToolCall(
                "Edit",
                "edit",
                paths=("tests/test_calc.py",),
                args={
                    "old_string": "def test_a():\n    assert f() == 1",
                    "new_string": "def test_a():\n    f()",
                },
            ),
            "removed 1 assertion",
        ),
        (
            ToolCall(
                "MultiEdit",
                "edit",
                paths=("web/button.test.tsx",),
                args={
                    "edits": [
                        {
                            "old_string": "it('renders', () => {",
                            "new_string": "it.skip('renders', () => {",
                        }
                    ]
                },
            ),
            "skip marker",
        ),
        (
            ToolCall(
                "apply_patch",
                "edit",
                patch=(
                    "*** Begin Patch\n*** Update File: tests/test_io.py\n@@\n"
                    "+@pytest.mark.skip\n def test_read():\n*** End Patch\n"
                ),
            ),
            "skip marker",
        ),
        (
            ToolCall(
                "apply_patch",
                "edit",
                patch="*** Begin Patch\n*** Delete File: tests/test_io.py\n*** End Patch\n",
            ),
            "deleted test file",
        ),
    ],
)
def test_edits_that_weaken_tests_are_denied(call: ToolCall, change: str) -> None:
    got = make().before_call(call)
    assert got is not None and got.detector == "test_weakening" and got.level == "correct"
    assert change in got.message


def test_test_weakening_is_off_when_the_task_is_about_tests() -> None:
    m = make("[monitor]\ntask_is_about_tests = true\n")
    assert m.before_call(bash("rm tests/test_api.py")) is None


def test_adding_tests_is_not_weakening() -> None:
    call = ToolCall(
        "Edit",
        "edit",
        paths=("tests/test_calc.py",),
        args={
            "old_string": "def test_a():\n    assert f() == 1",
            "new_string": "def test_a():\n    assert f() == 1\n    assert g() == 2",
        },
    )
    assert make().before_call(call) is None


def test_plan_drift_and_a_new_plan() -> None:
    m = make()
    m.observe(Event("plan", "s", DataPayload({"steps": ["Fix rounding in src/shop/pricing.py"]})))
    assert (
        m.before_call(ToolCall("Read", "read", paths=("src/shop/pricing.py",), tool_use_id="p"))
        is None
    )
    got = None
    for i, name in enumerate(
        ["docs/a.md", "docs/b.md", "ci/c.yml", "docs/d.md", "tools/e.sh", "docs/f.md"]
    ):
        got = m.before_call(ToolCall("Read", "read", paths=(name,), tool_use_id=f"d{i}"))
    assert got is not None and got.detector == "plan_drift" and got.level == "hint"
    todo = ToolCall(
        "TodoWrite",
        "other",
        args={"todos": [{"content": "Update docs/faq.md", "status": "in_progress"}]},
    )
    assert m.before_call(todo) is None
    assert m.before_call(ToolCall("Read", "read", paths=("docs/faq.md",))) is None
    assert m.state.drift == 0


# ---------------------------------------------------------------------------------------------
# the ladder


def test_loop_ladder_hint_correct_replan_stop_in_order() -> None:
    m = make()
    order: list[str] = []
    for i in range(14):
        before, after = ran(m, bash("grep -rn TODO src", i), "src/a.py:3: # TODO")
        for g in (before, after):
            if g is not None and (not order or order[-1] != g.level):
                order.append(g.level)
    assert order == ["hint", "correct", "replan", "stop"]
    assert [d.level for d in m.drain()] == ["hint", "correct", "replan", "stop"]


def test_cooldown_keeps_a_repeated_hint_quiet() -> None:
    m = make("[monitor]\nno_progress_steps = 2\ncooldown_steps = 5\n")
    for i in range(7):
        ran(
            m,
            ToolCall("Read", "read", paths=("a",), args={"n": i % 3}, tool_use_id=f"r{i}"),
            "same",
        )
    assert [(d.detector, d.level) for d in m.drain()] == [("no_progress", "hint")]


def test_a_problem_that_returns_after_guidance_escalates_one_level() -> None:
    m = make("[monitor]\nno_progress_steps = 2\ncooldown_steps = 1\n")
    for i in range(9):
        ran(
            m,
            ToolCall("Read", "read", paths=("a",), args={"n": i % 3}, tool_use_id=f"r{i}"),
            "same",
        )
    assert [d.level for d in m.drain() if d.detector == "no_progress"] == [
        "hint",
        "correct",
        "replan",
        "stop",
    ]


def test_highest_level_wins_on_one_call() -> None:
    m = make('[scope]\ninclude = ["src/**"]\n[limits]\nmax_steps = 1\n')
    m.before_call(bash("ls"))
    got = m.before_call(
        ToolCall("Write", "write", paths=("tests/test_a.py",), args={"content": ""})
    )
    assert got is not None and got.level == "stop"
    assert {d.detector for d in m.drain()} >= {"budget", "scope", "test_weakening"}


def test_replan_denies_non_reads_until_a_plan_is_stated() -> None:
    m = make()
    m.state.replan, m.state.replan_detector = "loop", "alternation"
    assert m.before_call(ToolCall("Read", "read", paths=("a.py",))) is None
    assert m.before_call(bash("git diff --stat", 1)) is None
    denied = m.before_call(ToolCall("Edit", "edit", paths=("a.py",)))
    assert denied is not None and denied.level == "replan"
    assert m.before_call(bash("pytest -q", 2)) is not None
    m.observe(Event("plan", "s", DataPayload({"text": "1. fix a.py\n2. run tests"})))
    assert m.before_call(ToolCall("Edit", "edit", paths=("a.py",), tool_use_id="x")) is None


@pytest.mark.parametrize(
    "call",
    [
        ToolCall(
            "TodoWrite", "other", args={"todos": [{"content": "fix a.py", "status": "pending"}]}
        ),
        ToolCall(
            "update_plan", "other", args={"plan": [{"step": "fix a.py", "status": "in_progress"}]}
        ),
        ToolCall("ExitPlanMode", "other", args={"plan": "1. fix a.py"}),
    ],
)
def test_planning_tools_state_a_new_plan(call: ToolCall) -> None:
    m = make()
    m.state.replan = "loop"
    assert m.before_call(call) is None
    assert m.state.replan is None and m.state.plan_steps


def test_a_user_prompt_clears_a_stop() -> None:
    m = make()
    m.state.stopped = "loop"
    assert m.before_call(bash("ls")) is not None
    m.observe(Event("prompt", "s", DataPayload({"text": "try something else"})))
    assert m.before_call(bash("ls", 2)) is None


# ---------------------------------------------------------------------------------------------
# gates


def test_may_finish_needs_gates_after_the_last_edit_and_never_traps() -> None:
    m = make('[gates]\nrequired = ["pytest -q"]\nmax_blocks = 2\n')
    ran(m, ToolCall("Edit", "edit", paths=("a.py",), tool_use_id="e1"), "ok")
    ok, why = m.may_finish()
    assert not ok and "`pytest -q` has not run" in why
    ran(m, bash("cd /w && pytest -q", 2), "1 failed", ok=False)
    ok, why = m.may_finish()
    assert not ok and "failed at step 2" in why
    ok, why = m.may_finish()
    assert ok and "after 2 blocks" in why
    assert [d.detector for d in m.drain()] == ["unverified_finish", "unverified_finish"]


def test_gate_passing_after_the_edit_allows_finishing() -> None:
    m = make('[gates]\nrequired = ["pytest -q", "ruff check ."]\n')
    ran(m, bash("pytest -q", 1), "5 passed")
    ran(m, ToolCall("Edit", "edit", paths=("a.py",), tool_use_id="e"), "ok")
    ran(m, bash("pytest -q 2>&1", 3), "5 passed")
    ok, why = m.may_finish()
    assert (
        not ok
        and "`ruff check .` has not run" in why
        and "pytest" not in why.split("has not run")[0][:-20]
    )
    m.note_gate("ruff check .", True)
    assert m.may_finish()[0]


def test_gate_run_before_the_edit_does_not_count() -> None:
    m = make('[gates]\nrequired = ["pytest -q"]\n')
    ran(m, bash("pytest -q", 1), "5 passed")
    ran(m, bash("sed -i s/a/b/ src/x.py", 2), "")
    ok, why = m.may_finish()
    assert not ok and "before the edit at step 2" in why


def test_piped_or_masked_gate_runs_do_not_count() -> None:
    m = make('[gates]\nrequired = ["pytest -q"]\n')
    ran(m, bash("pytest -q || true", 1), "1 failed")
    ran(m, bash("pytest -q | tail -1", 2), "1 failed")
    assert not m.may_finish()[0]


def test_no_gates_means_may_finish_and_a_stopped_session_may_finish() -> None:
    assert make().may_finish() == (True, "no [gates] are configured")
    m = make('[gates]\nrequired = ["pytest -q"]\n')
    m.state.stopped = "loop"
    assert m.may_finish()[0]


def test_claim_without_gate_is_diagnosed_by_observe() -> None:
    m = make('[gates]\nrequired = ["pytest -q"]\n')
    m.observe(
        Event("tool.call", "s", ToolCallPayload("Edit", "edit", paths=["a.py"], tool_use_id="e"))
    )
    m.observe(Event("tool.result", "s", ToolResultPayload("Edit", True, "ok", tool_use_id="e")))
    found = m.observe(Event("session.end", "s", DataPayload({"claim": True})))
    assert [(d.detector, d.level) for d in found] == [("unverified_finish", "correct")]


# ---------------------------------------------------------------------------------------------
# state, journal


def test_state_round_trips_between_processes_and_stays_bounded() -> None:
    config = KeelConfig()
    state: MonitorState | None = None
    for i in range(600):
        monitor = Monitor(config, MonitorState.from_json(state.to_json()) if state else None)
        call = bash(f"cat file{i}.txt", i)
        monitor.before_call(call)
        monitor.after_call(ToolResult("Bash", "exec", True, f"content {i}", tool_use_id=f"t{i}"))
        state = monitor.state
    assert state is not None
    assert len(state.to_json()) < 40_000
    assert len(state.seen) == config.monitor.seen_cap
    assert len(state.recent) <= 21


def test_state_carries_a_loop_across_processes() -> None:
    config = KeelConfig()
    text = MonitorState().to_json()
    levels_seen = []
    for i in range(5):
        monitor = Monitor(config, MonitorState.from_json(text))
        got = monitor.before_call(bash("ls -la", i))
        if got is None or got.level == "hint":
            monitor.after_call(ToolResult("Bash", "exec", True, "a b c", tool_use_id=f"t{i}"))
        levels_seen.append(got.level if got else None)
        text = monitor.state.to_json()
    assert levels_seen[2] == "hint" and levels_seen[4] == "correct"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"version": 99}',
        '{"version": 1, "bogus": 1}',
        '{"version": 1, "recent": [[1]]}',
        '{"version": 1, "ladder": {"repeat": "x"}}',
        '{"version": 1, "ladder": {"repeat": ["loud", 3]}}',
        '{"version": 1, "seen": {"ab": "x"}}',
        '{"version": 1, "gates": {"pytest -q": [1]}}',
        '{"version": 1, "step": "3"}',
    ],
)
def test_bad_state_is_a_payload_error(text: str) -> None:
    with pytest.raises(PayloadError) as info:
        MonitorState.from_json(text)
    assert info.value.code == "payload.monitor_state"


def test_journal_receives_diagnostics_and_guidance() -> None:
    journal = MemoryJournal()
    m = make(journal=journal, session_id="s1")
    for i in range(5):
        ran(m, bash("cat x", i), "x")
    kinds = [e.kind for e in journal.events()]
    assert kinds.count("diagnostic") == 2 and kinds.count("guidance") >= 3
    diag = next(journal.events(kinds=["diagnostic"]))
    assert diag.session_id == "s1" and diag.payload.detector == "repeat"  # pyright: ignore[reportAttributeAccessIssue]


def test_disabled_monitor_says_nothing() -> None:
    m = make("[monitor]\nenabled = false\n[limits]\nmax_steps = 1\n")
    for i in range(10):
        assert ran(m, bash("ls", i), "same") == (None, None)


def test_current_guidance_for_reinjection() -> None:
    m = make()
    assert m.current_guidance() is None
    for i in range(3):
        ran(m, bash("ls", i), "same")
    current = m.current_guidance()
    assert current is not None and current.level == "hint"
    for i in range(3, 8):
        ran(m, bash(f"echo {i}", i), str(i))
    assert m.current_guidance() is None
    m.state.replan = "loop"
    current = m.current_guidance()
    assert current is not None and current.level == "replan"


def test_each_budget_warns_once_without_escalating_the_other() -> None:
    m = make("[limits]\nmax_steps = 10\nmax_tokens = 1000\n")
    got = [m.before_call(bash(f"echo {i}", i)) for i in range(8)]
    assert [g.level for g in got if g] == ["hint"]
    m.note_tokens(900)
    later = m.before_call(bash("echo late", 99))
    assert later is not None and later.level == "hint" and "tokens" in later.message


def test_a_successful_change_allows_retrying_a_failed_call() -> None:
    m = make()
    for i in range(3):
        ran(m, bash("python app.py", i), "ModuleNotFoundError: No module named 'yaml'", ok=False)
    assert m.before_call(bash("python app.py", 3)) is not None
    ran(m, bash("pip install pyyaml", 4), "Successfully installed PyYAML-6.0")
    assert m.before_call(bash("python app.py", 5)) is None


def test_journal_diagnostics_only_when_the_caller_journals_guidance() -> None:
    journal = MemoryJournal()
    m = make(journal=journal, session_id="s1", journal_guidance=False)
    for i in range(5):
        ran(m, bash("cat x", i), "x")
    assert {e.kind for e in journal.events()} == {"diagnostic"}
