"""When the guard asks the model judge, and what it does with the verdicts that land.

The judge runs elsewhere (``keel.guard.judging``); here the seam is a recording double, so
each test pins one rule of the guard's side: a finding at ``on_finding`` or every
``every_n_steps`` results schedules a judgement (background) or marks it due for the next
result (inline); a landed verdict meets the monitor's ladder at the next call; notes are
journaled; the finish asks and waits; and a judge that fails never changes an answer.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from guard_helpers import events_of, open_guard

from keel.core.calls import ToolCall, ToolResult
from keel.core.events import DataPayload, GuidancePayload
from keel.core.judged import Judged
from keel.guard.judging import MARGIN, JudgeJob

JUDGE = """[policy]
preset = "developer"

[monitor]
repeat_hint = 2

[judge]
model = "openai:judge-mini"
timeout_seconds = 7

[judge.when]
on_finding = "hint"
every_n_steps = {every}
on_finish = {finish}
"""


class Double:
    """A ``Judging`` that records what the guard asks and hands back scripted verdicts."""

    def __init__(self, *, background: bool = True, fail: bool = False) -> None:
        self.background = background
        self.fail = fail
        self.jobs: list[tuple[JudgeJob, float | None]] = []
        self.takes: list[float | None] = []
        self.landed: list[Judged] = []
        self.notes: list[dict[str, Any]] = []
        self.land_on_schedule: list[Judged] = []

    def schedule(self, job: JudgeJob, *, deadline_at: float | None = None) -> None:
        if self.fail:
            raise RuntimeError("the judge broke: " + "x" * 400)
        self.jobs.append((job, deadline_at))
        self.landed += self.land_on_schedule

    def take(
        self, session_id: str, *, wait_until: float | None = None
    ) -> tuple[tuple[Judged, ...], tuple[dict[str, Any], ...]]:
        self.takes.append(wait_until)
        out = (tuple(self.landed), tuple(self.notes))
        self.landed, self.notes = [], []
        return out


def gaming(step: int = 2, category: str = "gaming") -> Judged:
    return Judged(category, 0.9, (step,), "Put the assertion back.", step, f"sha256:{step}")


def workspace(root: Path, *, every: int = 0, finish: bool = False) -> Path:
    (root / "keel.toml").write_text(JUDGE.format(every=every, finish=str(finish).lower()))
    return root


def read(n: int, path: str = "a.py") -> ToolCall:
    return ToolCall("Read", "read", paths=[path], tool_use_id=f"t{n}", cwd=None)


def result(call: ToolCall) -> ToolResult:
    return ToolResult(call.tool, call.kind, True, "same", None, None, call.tool_use_id, call=call)


def run(guard: Any, call: ToolCall) -> Any:
    decision = guard.decide(call)
    if decision.allowed:
        guard.observe(result(call))
    return decision


def guard_for(root: Path, double: Double, **kw: Any) -> Any:
    return open_guard(root, monitor=True, judging=double, **kw)


def test_without_a_judge_model_the_seam_is_never_used(workdir: Path) -> None:
    (workdir / "keel.toml").write_text("[monitor]\nrepeat_hint = 2\n")
    double = Double()
    guard = guard_for(workdir, double)
    assert guard.judging is None
    run(guard, read(1))
    run(guard, read(2))
    assert double.jobs == [] and double.takes == []


def test_a_rule_finding_schedules_one_judgement_after_the_decision(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workdir_ := workspace(workdir), double)
    run(guard, read(1))
    assert double.jobs == []  # no finding yet
    run(guard, read(2))  # the repeat rule's hint at the second equal read
    ((job, deadline),) = double.jobs
    assert (job.session_id, job.agent, job.step, job.triggers) == ("s-guard", "tester", 2,
                                                                    ("finding",))  # fmt: skip
    assert job.finishing is False and job.timeout == 12.0 and deadline is None
    assert len(double.takes) == 2  # every decision looks for landed verdicts
    assert events_of(workdir_)  # journaled as usual


def test_every_n_steps_counts_results_not_decisions(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workspace(workdir, every=2), double)
    for n in range(1, 5):
        run(guard, read(n, f"f{n}.py"))
    assert [(j.step, j.triggers) for j, _ in double.jobs] == [
        (2, ("every_n_steps",)), (4, ("every_n_steps",))
    ]  # fmt: skip


def test_every_step_asks_once_per_result_never_at_the_decision(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workspace(workdir, every=1), double)
    for n in range(1, 4):
        run(guard, read(n, f"f{n}.py"))
    assert [(j.step, j.triggers) for j, _ in double.jobs] == [
        (1, ("every_n_steps",)), (2, ("every_n_steps",)), (3, ("every_n_steps",))
    ]  # fmt: skip


def test_the_finish_asks_for_the_finish_only_whatever_every_n_steps_says(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workspace(workdir, every=1, finish=True), double)
    guard.gate_finish(commit_by=time.monotonic() + 20)
    assert [j.triggers for j, _ in double.jobs] == [("finish",)]


def test_the_judges_own_verdict_does_not_ask_the_judge_again(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workspace(workdir), double)
    run(guard, read(1, "x.py"))
    double.landed = [gaming(1, "drift")]  # a hint: the call still runs
    run(guard, read(2, "y.py"))
    assert double.jobs == []


def test_a_landed_verdict_denies_the_next_call_with_its_guidance(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workdir_ := workspace(workdir), double)
    run(guard, read(1, "x.py"))
    double.landed = [gaming(1)]
    double.notes = [{"status": "skipped", "step": 1, "reason": "deadline"}]
    denied = guard.decide(read(2, "y.py"))
    assert not denied.allowed and denied.rule == "monitor.judge"
    assert "Put the assertion back." in denied.reason
    assert denied.suggestion == (
        "Do what the judge suggests, or explain to the user why its finding is wrong."
    )
    events = events_of(workdir_)
    notes = [e.payload for e in events if e.kind == "judgement"]
    assert notes == [DataPayload({"status": "skipped", "step": 1, "reason": "deadline"})]
    guidance = [e.payload for e in events if isinstance(e.payload, GuidancePayload)]
    assert [(g.level, g.detector) for g in guidance] == [("correct", "judge")]
    assert guard.decide(read(3, "z.py")).allowed  # delivered once


def test_inline_a_finding_waits_for_the_next_result_and_its_verdict_is_kept(
    workdir: Path,
) -> None:
    double = Double(background=False)
    double.land_on_schedule = [gaming(2)]
    guard = guard_for(workspace(workdir), double)
    run(guard, read(1))
    second = read(2)
    assert guard.decide(second).allowed
    assert double.jobs == [] and guard.state.judge_due == ["finding"]
    before = time.monotonic()
    guard.observe(result(second), commit_by=before + 30)
    ((job, deadline),) = double.jobs
    assert job.triggers == ("finding",) and deadline == before + 30
    assert guard.state.judge_due == []
    reopened = guard_for(workdir, Double(background=False))  # the next hook process
    denied = reopened.decide(read(3, "z.py"))
    assert not denied.allowed and denied.rule == "monitor.judge"


def test_inline_a_due_finding_and_every_n_steps_are_asked_together(workdir: Path) -> None:
    double = Double(background=False)
    guard = guard_for(workspace(workdir, every=2), double)
    run(guard, read(1))
    run(guard, read(2))  # the finding at decide, every_n_steps at the result
    assert [j.triggers for j, _ in double.jobs] == [("finding", "every_n_steps")]


def test_the_finish_asks_the_judge_and_waits_until_just_before_the_deadline(
    workdir: Path,
) -> None:
    double = Double()
    guard = guard_for(workspace(workdir, finish=True), double)
    run(guard, read(1))
    double.land_on_schedule = [gaming(1, "false_success")]
    by = time.monotonic() + 20
    block = guard.gate_finish(commit_by=by)
    ((job, deadline),) = double.jobs
    assert job.finishing and job.triggers == ("finish",) and deadline == by
    assert double.takes[-1] == by - MARGIN
    assert block is not None and "claim of success" in block
    assert guard.gate_finish() is None  # once per verdict


def test_without_on_finish_the_finish_only_collects_what_landed(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workspace(workdir), double)
    run(guard, read(1, "x.py"))
    double.landed = [gaming(1, "gaming")]
    assert guard.gate_finish(commit_by=time.monotonic() + 20) is not None
    assert double.jobs == [] and double.takes[-1] is None


def test_the_finish_without_a_deadline_waits_at_most_the_judges_time(workdir: Path) -> None:
    double = Double()
    guard = guard_for(workspace(workdir, finish=True), double)
    start = time.monotonic()
    guard.gate_finish()
    (wait,) = double.takes[-1:]
    assert wait is not None and start + 12.0 <= wait <= time.monotonic() + 12.0


def test_inline_the_finish_runs_what_was_due_with_it(workdir: Path) -> None:
    double = Double(background=False)
    guard = guard_for(workspace(workdir, finish=True), double)
    run(guard, read(1))
    guard.decide(read(2))  # a finding; its result never comes
    guard.gate_finish(commit_by=time.monotonic() + 20)
    assert [j.triggers for j, _ in double.jobs] == [("finding", "finish")]
    assert guard.state.judge_due == []


@pytest.mark.parametrize("phase", ["observe", "finish"])
def test_a_judge_that_fails_never_changes_an_answer(workdir: Path, phase: str) -> None:
    double = Double(fail=True)
    guard = guard_for(workdir_ := workspace(workdir, finish=True), double)
    run(guard, read(1))
    if phase == "observe":
        assert run(guard, read(2)).allowed
        assert guard.decide(read(3, "z.py")).allowed
    else:
        assert guard.gate_finish(commit_by=time.monotonic() + 20) is None
    errors = [e.payload for e in events_of(workdir_) if e.kind == "judgement"]
    assert len(errors) == 1 and isinstance(errors[0], DataPayload)
    assert errors[0].data["error"] == f"judge.{'schedule' if phase == 'observe' else 'finish'}"
    assert errors[0].data["status"] == "error"
    message = errors[0].data["message"]
    assert message.startswith("RuntimeError: the judge broke: xxx") and len(message) == 300


def test_inline_judging_is_made_only_when_a_model_is_set(workdir: Path) -> None:
    from keel.guard.judging import SubprocessJudging

    guard = open_guard(workspace(workdir), monitor=True, judging="inline")
    assert isinstance(guard.judging, SubprocessJudging) and not guard.judging.background
    (workdir / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    assert open_guard(workdir, monitor=True, judging="inline").judging is None


def test_without_a_monitor_nothing_is_asked_or_landed(workdir: Path) -> None:
    double = Double()
    guard = open_guard(workspace(workdir), monitor=False, judging=double)
    guard.decide(read(1))
    guard.gate_finish()
    assert double.jobs == [] and double.takes == []
