"""The judge's verdicts on the monitor's one ladder: the highest level wins, a cooldown per
category, a repeat escalates, a finish refused once per verdict; read back by ``monitor scan``."""

from __future__ import annotations

from keel.config import KeelConfig, parse_config
from keel.core.calls import ToolCall, ToolResult
from keel.core.events import DataPayload, Event
from keel.core.judged import Judged
from keel.monitor import Monitor


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def make(toml: str = "") -> Monitor:
    return Monitor(parse_config(toml) if toml else KeelConfig(), clock=Clock())


def judged(category: str = "gaming", step: int = 1) -> Judged:
    return Judged(category, 0.9, (step,), "Restore the test.", step, f"sha256:w{step}")


def read(n: int) -> ToolCall:
    return ToolCall("Read", "read", paths=[f"/w/f{n}.py"], tool_use_id=f"t{n}", cwd="/w")


def step(monitor: Monitor, n: int):  # one distinct, successful read
    call = read(n)
    before = monitor.before_call(call)
    if before is None or before.level == "hint":
        result = ToolResult("Read", "read", True, f"out {n}", None, None, call.tool_use_id)
        monitor.after_call(result)
    return before


def test_a_gaming_verdict_denies_the_next_call_with_the_judges_words() -> None:
    monitor = make()
    step(monitor, 1)
    monitor.land(judged())
    guidance = step(monitor, 2)
    assert guidance is not None and guidance.level == "correct" and guidance.detector == "judge"
    assert "gaming the check" in guidance.message and "Restore the test." in guidance.message
    assert [(d.detector, d.level) for d in monitor.drain()] == [("judge", "correct")]
    assert step(monitor, 3) is None  # delivered once: the next call is the agent's own again


def test_drift_is_a_hint_and_the_call_still_runs() -> None:
    monitor = make()
    monitor.land(judged("drift"))
    guidance = step(monitor, 1)
    assert guidance is not None and guidance.level == "hint"
    assert "drifted from the task" in guidance.message


def test_the_higher_of_a_rule_and_the_judge_wins() -> None:
    monitor = make("[monitor]\nrepeat_hint = 2\n")
    step(monitor, 1)
    monitor.land(judged("drift"))  # hint, as the repeat rule's finding
    again = monitor.before_call(read(1))  # the same read again: the repeat rule's hint
    assert again is not None and again.level == "hint"
    found = {d.detector for d in monitor.drain()}
    assert found == {"repeat", "judge"}  # both journaled as diagnostics
    monitor.land(judged("gaming"))
    denied = monitor.before_call(read(1))  # the repeat rule's hint meets the judge's correct
    assert denied is not None and (denied.level, denied.detector) == ("correct", "judge")


def test_a_category_in_its_cooldown_is_not_new_and_a_repeat_after_it_escalates() -> None:
    monitor = make("[monitor]\ncooldown_steps = 2\n")
    monitor.land(judged("drift", 1))
    assert step(monitor, 1) is not None  # the hint
    monitor.land(judged("drift", 2))
    monitor.drain()
    assert step(monitor, 2) is None  # within the cooldown: quiet
    assert monitor.drain() == []
    step(monitor, 3)
    step(monitor, 4)
    monitor.land(judged("drift", 5))
    escalated = step(monitor, 5)  # after the cooldown the same finding climbs one rung
    assert escalated is not None and escalated.level == "correct"


def test_each_category_climbs_its_own_rung() -> None:
    monitor = make()
    monitor.land(judged("drift"))
    step(monitor, 1)
    monitor.land(judged("gaming"))
    guidance = step(monitor, 2)
    assert guidance is not None and guidance.level == "correct"  # not drift's escalation
    assert set(monitor.state.ladder) == {"judge.drift", "judge.gaming"}


def test_a_landed_correction_refuses_one_finish_and_is_consumed() -> None:
    monitor = make()
    step(monitor, 1)
    monitor.land(judged("false_success"))
    allowed, why = monitor.may_finish()
    assert not allowed and "claim of success" in why
    assert monitor.may_finish()[0]  # the verdict refused one finish; no trap


def test_a_drift_hint_never_refuses_the_finish() -> None:
    monitor = make()
    step(monitor, 1)
    monitor.land(judged("drift"))
    assert monitor.may_finish()[0]


def test_landed_verdicts_survive_the_state_record() -> None:
    from keel.monitor import MonitorState

    monitor = make()
    monitor.land(judged())
    again = Monitor(KeelConfig(), state=MonitorState.from_dict(monitor.state.to_dict()))
    guidance = again.before_call(read(1))
    assert guidance is not None and guidance.detector == "judge"


def test_a_recorded_judgement_is_read_back_by_a_scan() -> None:
    monitor = make()
    data = {"status": "deliverable", "judged": judged().to_dict()}
    monitor.observe(Event("judgement", "s", DataPayload(data)))
    monitor.observe(Event("judgement", "s", DataPayload({"status": "below_threshold"})))
    guidance = monitor.before_call(read(1))
    assert guidance is not None and guidance.detector == "judge"
    assert len([d for d in monitor.drain() if d.detector == "judge"]) == 1


def test_the_same_verdict_on_the_same_window_lands_once() -> None:
    monitor = make()
    step(monitor, 1)
    monitor.land(judged("false_success", 1))
    assert not monitor.may_finish()[0]
    monitor.land(judged("false_success", 1))  # the cached verdict of an unchanged trajectory
    assert monitor.may_finish()[0]
    monitor.land(judged("false_success", 2))  # a new window: a new verdict
    assert not monitor.may_finish()[0]
