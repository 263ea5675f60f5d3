"""What a plan run journals (every event in one trace, the plan as JSON data), and an invalid
plan that runs nothing and says why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from plan_engine_helpers import (
    CONFIG,
    EVIDENCE,
    Recorder,
    engine,
    fin,
    plan_events,
    probe_events,
    records,
)

from keel.core.events import ProbePayload
from keel.plan._engine import PlanEngine
from keel.plan._run import check_plan


def test_every_event_is_journaled_in_one_trace(root: Path) -> None:
    built, sink = engine(EVIDENCE, root, unsafe=True)
    report = built.run()
    assert sorted(e.kind for e in sink.events) == ["plan"] * 4 + ["probe"] * 4
    names = [e["event"] for e in plan_events(sink)]
    assert names == ["plan.start", "branch", "final_action", "plan.end"]
    first, *_, last = plan_events(sink)
    assert built.validation.plan is not None
    assert first == {
        "event": "plan.start", "goal": "find out",
        "plan": built.validation.plan.model_dump(mode="json"), "valid": True, "issues": [],
        "sandbox": "recorder", "unsafe": True,
    }  # fmt: skip
    assert last == {"event": "plan.end", "state": "completed", "facts": list(report.facts)}
    assert report.unsafe is True
    for event in sink.events:
        assert (event.session_id, event.trace_id, event.parent_span_id) == (
            "plan-test", built.trace_id, built.root_span,
        )  # fmt: skip
    probes = probe_events(sink)
    for record in report.probes:
        assert probes[record.step_id] == ProbePayload(
            record.step_id, record.function, record.args, True, record.value, None,
            record.backend, record.duration_ms,
        )  # fmt: skip


def test_the_journaled_plan_is_json_data(root: Path) -> None:
    """A plan given as Python data (a tuple in an argument) is journaled as JSON reads it."""
    built, sink = engine([fin("o", "output.result", [("a", 1)])], root)
    report = built.run()
    assert records(report)["o"]["output"] == '["a", 1]'
    (step,) = plan_events(sink)[0]["plan"]["steps"]
    assert step["action"]["args"] == [["a", 1]]


@pytest.mark.parametrize(
    ("data", "goal"),
    [
        ({"goal": "bad", "steps": [fin("a", "output.result", ["{{nope}}"])]}, "bad"),
        ("not a plan", "(unreadable plan)"),
    ],
)
def test_an_invalid_plan_runs_nothing_and_says_why(root: Path, data: Any, goal: str) -> None:
    runner = Recorder()
    built, sink = engine(data, root, runner)
    report = built.run()
    assert (report.state, report.goal, report.records, report.facts) == ("invalid", goal, (), ())
    assert report.issues == built.validation.issues and report.issues
    start, end = plan_events(sink)
    plan = built.validation.plan
    assert start == {
        "event": "plan.start", "goal": goal,
        "plan": plan.model_dump(mode="json") if plan else None, "valid": False,
        "issues": [i.to_dict() for i in report.issues], "sandbox": "recorder", "unsafe": False,
    }  # fmt: skip
    assert end == {"event": "plan.end", "state": "invalid", "facts": []}
    assert runner.calls == []


def test_a_run_without_a_journal_still_reports(root: Path) -> None:
    real = Path(os.path.realpath(root))
    validation = check_plan({"goal": "g", "steps": EVIDENCE}, config=CONFIG, workspace=real)
    report = PlanEngine(validation, real, Recorder(), CONFIG).run()
    assert report.state == "completed" and report.records
