"""Evidence steps, run by the engine with an in-process recording runner: the facts and the
branch each records, which probes go to the runner and which run here, failed and blocked probes,
a runner that fails or crashes, and how ready probes are batched (``test_plan_engine.py`` runs
plans in the real sandbox).
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import pytest
from plan_engine_helpers import (
    CONFIG,
    EVIDENCE,
    BatchRecorder,
    Canned,
    CannedBatch,
    Recorder,
    _c,
    cond,
    ev,
    fin,
    plan_events,
    probe_events,
    probe_record,
    records,
    run,
    without_duration,
)

from keel.config import ProbesConfig
from keel.core.events import ProbePayload
from keel.probes import ProbeIssue, ProbeResult


def test_evidence_records_facts_and_the_branch_taken(root: Path) -> None:
    runner = Recorder()
    report, _ = run(EVIDENCE, root, runner)
    found = records(report)
    assert without_duration(found["e1"]) == probe_record(
        "e1", "fs.exists", "ok1", {"path": "a.txt"}, True, "recorder"
    )
    assert without_duration(found["e2"]) == probe_record(
        "e2", "parse.json", "doc", {"path": "c.json"}, {"a": {"b": 7}}, "recorder"
    )
    nested = {"obj": {"a": {"b": 7}}, "path": "a.b", "default": None}
    assert without_duration(found["e3"]) == probe_record(
        "e3", "data.get_nested_value", "b", nested, 7, "host"
    )
    e4 = without_duration(found["e4"])
    assert (e4["backend"], e4["value"], e4["status"]) == ("host", True, "ok")
    assert found["c1"] == {"step_id": "c1", "value": True, "branch": "true",
                           "reason": "7 gt 5 is true"}  # fmt: skip
    assert found["f1"]["status"] == "done" and found["f1"]["output"] == 'b is 7 of {"b": 7}'
    assert "f2" not in found
    assert report.facts == (
        "a.txt exists",
        'c.json is valid JSON (an object with keys ["a"])',
        "'a.b' is 7",
        "out.txt is writable",
        "7 gt 5 is true",
    )
    assert (report.state, report.sandbox, report.goal, report.session_id) == (
        "completed", "recorder", "find out", "plan-test",
    )  # fmt: skip
    assert [r.step_id for r in report.records] == ["e1", "e2", "e3", "e4", "c1", "f1"]


def test_sandbox_probes_go_to_the_runner_host_probes_run_here(root: Path) -> None:
    runner = Recorder()
    run(EVIDENCE, root, runner)
    calls = sorted(runner.calls, key=lambda c: c[1]["function"])
    base = {"read_cap": 4321, "http_allow": ["example.org"]}
    assert [call[:4] for call in calls] == [
        ("run", {"function": "fs.exists", "args": {"path": "a.txt"}, "timeout": 11, **base},
         root, 11.0),
        ("run", {"function": "parse.json", "args": {"path": "c.json"}, "timeout": 7, **base},
         root, 7.0),
    ]  # fmt: skip
    assert all(thread.startswith("keel-probe_") for *_, thread in calls)


def test_false_branch_and_its_reason(root: Path) -> None:
    steps = copy.deepcopy(EVIDENCE)
    steps[-1]["condition"] = {"op": "gt", "vars": ["{{b}}", 7]}
    report, _ = run(steps, root)
    found = records(report)
    assert found["c1"] == {"step_id": "c1", "value": False, "branch": "false",
                           "reason": "7 gt 7 is false"}  # fmt: skip
    assert found["f2"]["output"] == "small" and "f1" not in found
    assert report.facts[-1] == "7 gt 7 is false"


@pytest.mark.parametrize(
    ("condition", "value", "branch", "reason"),
    [
        (_c("and", "{{ok1}}", "{{w}}"), True, "true", "ok1 is true; w is true"),
        (_c("and", True), True, "true", "condition is true"),
        (_c("or", False), False, "false", "condition is false"),
        (_c("and", "{{bad}}", "{{bad2}}"), None, "false", "unknown: no evidence for bad, bad2"),
        (_c("gt", "a", 1), None, "false", "unknown: no evidence for an operand"),
    ],
)
def test_a_branch_says_why_it_was_taken(
    root: Path, condition: dict[str, Any], value: bool | None, branch: str, reason: str
) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ok1"),
        ev("e2", "fs.writable", ["out.txt"], "w"),
        ev("e3", "parse.json", ["bad.json"], "bad"),
        ev("e4", "parse.json", ["bad.json"], "bad2"),
        cond("c", condition, [fin("t", "output.result", ["yes"])],
             [fin("f", "output.result", ["no"])]),
    ]  # fmt: skip
    report, sink = run(steps, root)
    expected = {"step_id": "c", "value": value, "branch": branch, "reason": reason}
    assert records(report)["c"] == expected
    assert {"event": "branch", **expected} in plan_events(sink)
    assert records(report)["t" if branch == "true" else "f"]["status"] == "done"


def test_failed_and_blocked_probes_leave_their_evidence_undefined(root: Path) -> None:
    json_error = "Expecting property name enclosed in double quotes (line 1, column 2)"
    json_error += " [json.syntax]"
    steps = [
        ev("e0", "parse.json", ["bad.json"], "key"),
        ev("e1", "parse.json", ["bad.json"], "doc"),
        ev("e2", "data.get_nested_value", ["{{doc}}", "{{key}}"], "x"),
        ev("e3", "data.value", ["{{x}}"], "y"),
        ev("e4", "parse.json", ["c.json"], "good"),
        ev("e5", "data.value", ["{{good.zz}}"], "z"),
        fin("f", "output.result", ["{{y}}"], {"op": "defined", "vars": ["{{y}}"]}),
    ]
    report, sink = run(steps, root)
    found = records(report)
    error = found["e1"]["error"]
    assert found["e1"]["status"] == "error" and error["code"] == "json.syntax"
    assert f"{error['message']} (line 1, column 2) [json.syntax]" == json_error
    both = f"e0 failed: {json_error}; e1 failed: {json_error}"
    blocked = {"function": "data.get_nested_value", "output_to": "x", "args": {},
               "status": "blocked", "value": None, "error": None, "notes": [],
               "duration_ms": None, "backend": None, "reason": both}  # fmt: skip
    assert found["e2"] == {"step_id": "e2", **blocked}
    assert found["e3"]["status"] == "blocked"
    assert found["e3"]["reason"] == f"e2 did not run ({both})"
    assert found["e5"]["reason"] == "{{good.zz}} is undefined"
    assert found["f"] == {"step_id": "f", "function": "output.result", "status": "skipped",
                          "args": {}, "output": None, "reason": "the condition is false",
                          "decision": None}  # fmt: skip
    assert report.facts == (
        f"parse.json on bad.json: {json_error}",
        'c.json is valid JSON (an object with keys ["a"])',
        "y is not defined",
    )
    assert report.state == "failed"
    probes = probe_events(sink)
    assert probes["e2"] == ProbePayload(
        "e2", "data.get_nested_value", {}, False, None,
        {"code": "probe.blocked", "message": both}, None, None,
    )  # fmt: skip
    assert probes["e1"].error == error and probes["e1"].ok is False


def test_a_default_value_is_reported_as_a_default(root: Path) -> None:
    steps = [
        ev("e1", "parse.json", ["c.json"], "doc"),
        ev("e2", "data.get_nested_value", ["{{doc}}", "a.zz", "dflt"], "v"),
        fin("f", "output.result", ["{{v}}"]),
    ]
    report, _ = run(steps, root)
    assert records(report)["e2"]["notes"] == ["'a.zz' is not present; the default 'dflt' is used"]
    assert report.facts[1] == "'a.zz' is not present; the default dflt is used"


def test_a_probe_argument_of_the_wrong_type_at_run_time_is_a_probe_error(root: Path) -> None:
    runner = Recorder()
    steps = [
        ev("e0", "data.value", [5], "v"),
        ev("e1", "fs.exists", ["{{v}}"], "ex"),
        ev("e2", "fs.exists", {"path": "{{v}}"}, "ex2"),
        fin("f", "output.result", ["x"], _c("or", "{{ex}}", "{{ex2}}")),
    ]
    report, _ = run(steps, root, runner)
    issue = {"code": "probe.arg_type", "message": "fs.exists: argument 'path' must be path, "
             "got int", "line": None, "column": None}  # fmt: skip
    found = records(report)
    for step_id, out, args in (("e1", "ex", {}), ("e2", "ex2", {"path": 5})):
        assert found[step_id] == {
            "step_id": step_id, "function": "fs.exists", "output_to": out, "args": args,
            "status": "error", "value": None, "error": issue, "notes": [], "duration_ms": None,
            "backend": None, "reason": None,
        }  # fmt: skip
    assert runner.calls == []  # never sent to the runner


def test_host_probes_look_at_the_workspace(root: Path) -> None:
    (root / "only-here").mkdir()
    report, _ = run([ev("e1", "fs.writable", ["only-here/new.txt"], "w"),
                     fin("f", "output.result", ["{{w}}"])], root)  # fmt: skip
    assert records(report)["f"]["output"] == "true"
    assert report.facts[0] == "only-here/new.txt is writable"


def test_a_probe_runners_crash_message_is_cut_at_500_characters(root: Path) -> None:
    runner = Canned({"fs.is_file": RuntimeError("x" * 600)})
    report, _ = run([ev("e1", "fs.is_file", ["a.txt"], "isf"),
                     fin("f", "output.result", ["{{isf}}"])], root, runner)  # fmt: skip
    message = records(report)["e1"]["error"]["message"]
    assert message == ("RuntimeError: " + "x" * 600)[:500]


def test_a_probe_runner_that_fails_without_an_error_or_crashes(root: Path) -> None:
    crashed = "RuntimeError: runner down"
    runner = Canned(
        {"fs.exists": ProbeResult(False), "fs.is_file": RuntimeError("runner down"),
         "parse.json": ProbeResult(True, {"k": 1}, None, ("a note",), 1.5, "elsewhere")}
    )  # fmt: skip
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ev("e2", "fs.is_file", ["a.txt"], "isf"),
        ev("e3", "parse.json", ["c.json"], "doc"),
        ev("e4", "data.value", ["{{ex}}"], "v1"),
        ev("e5", "data.value", ["{{isf}}"], "v2"),
        fin("f", "output.result", ["{{doc.k}}"]),
    ]
    report, sink = run(steps, root, runner)
    found = records(report)
    assert found["e1"]["status"] == "error" and found["e1"]["error"] is None
    assert found["e1"]["args"] == {"path": "a.txt"}
    assert found["e4"]["reason"] == "e1 failed: error"
    assert found["e2"] == {
        "step_id": "e2", "function": "fs.is_file", "output_to": "isf", "args": {},
        "status": "error", "value": None,
        "error": {"code": "probe.internal", "message": crashed, "line": None, "column": None},
        "notes": [], "duration_ms": None, "backend": None, "reason": None,
    }  # fmt: skip
    assert found["e5"]["reason"] == f"e2 failed: {crashed} [probe.internal]"
    assert found["e3"] == {
        "step_id": "e3", "function": "parse.json", "output_to": "doc", "args": {"path": "c.json"},
        "status": "ok", "value": {"k": 1}, "error": None, "notes": ["a note"],
        "duration_ms": 1.5, "backend": "elsewhere", "reason": None,
    }  # fmt: skip
    assert found["f"]["output"] == "1"
    crash_fact = f"fs.is_file on fs.is_file: {crashed} [probe.internal]"  # no args were bound
    assert report.facts[:2] == ("fs.exists on a.txt: failed", crash_fact)
    probes = probe_events(sink)
    assert probes["e3"] == ProbePayload("e3", "parse.json", {"path": "c.json"}, True, {"k": 1},
                                        None, "elsewhere", 1.5)  # fmt: skip
    assert probes["e1"] == ProbePayload("e1", "fs.exists", {"path": "a.txt"}, False, None, None,
                                        None, None)  # fmt: skip
    assert set(probes) == {"e1", "e3", "e4", "e5"}  # a crashed probe is recorded, not journaled


def test_a_batch_runner_that_crashes_fails_every_probe_of_the_batch(root: Path) -> None:
    runner = CannedBatch({})
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ev("e2", "fs.is_file", ["a.txt"], "isf"),
        fin("f", "output.result", ["done"], _c("or", "{{ex}}", "{{isf}}")),
    ]
    report, _ = run(steps, root, runner)
    issue = {"code": "probe.internal", "message": "RuntimeError: the batch runner broke",
             "line": None, "column": None}  # fmt: skip
    assert [(p.step_id, p.status, p.error) for p in report.probes] == [
        ("e1", "error", ProbeIssue.from_dict(issue)),
        ("e2", "error", ProbeIssue.from_dict(issue)),
    ]
    assert records(report)["f"]["reason"] == "no evidence for ex, isf"


class ShortBatch(BatchRecorder):
    """A broken batch runner: one result short."""

    def run_many(
        self, requests: list[dict[str, Any]], *, workspace: Path, timeout: float
    ) -> list[ProbeResult]:
        return super().run_many(requests, workspace=workspace, timeout=timeout)[:-1]


def test_a_batch_with_a_missing_result_fails_every_probe_in_it(root: Path) -> None:
    """No result is matched to the wrong probe: the whole batch is an internal error."""
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ev("e2", "fs.is_file", ["a.txt"], "isf"),
        fin("f", "output.result", ["done"], _c("or", "{{ex}}", "{{isf}}")),
    ]
    report, _ = run(steps, root, ShortBatch())
    assert [(p.status, p.value) for p in report.probes] == [("error", None), ("error", None)]
    errors = [p.error for p in report.probes]
    assert all(e is not None and e.code == "probe.internal" for e in errors)
    assert all(e is not None and e.message.startswith("ValueError: zip()") for e in errors)
    assert records(report)["f"]["reason"] == "no evidence for ex, isf"


def test_ready_probes_are_batched_up_to_max_parallel(root: Path) -> None:
    runner = BatchRecorder()
    config = CONFIG.replace(probes=ProbesConfig(max_parallel=2))
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "v1", timeout=9),
        ev("e2", "fs.is_file", ["a.txt"], "v2"),
        ev("e3", "fs.is_dir", ["a.txt"], "v3"),
        ev("e4", "fs.writable", ["a.txt"], "v4"),
        fin("f", "output.result", ["{{v1}} {{v2}} {{v3}} {{v4}}"]),
    ]
    report, _ = run(steps, root, runner, config=config)
    assert records(report)["f"]["output"] == "true true false true"
    plain = {"read_cap": 1_000_000, "http_allow": []}
    assert [c[:4] for c in runner.calls] == [
        ("run_many", [
            {"function": "fs.exists", "args": {"path": "a.txt"}, "timeout": 9, **plain},
            {"function": "fs.is_file", "args": {"path": "a.txt"}, "timeout": 11, **plain},
        ], root, 11.0),
        ("run", {"function": "fs.is_dir", "args": {"path": "a.txt"}, "timeout": 11, **plain},
         root, 11.0),
    ]  # fmt: skip
    assert [p.backend for p in report.probes] == ["recorder", "recorder", "recorder", "host"]


def test_one_probe_at_a_time_is_never_batched(root: Path) -> None:
    runner = BatchRecorder()
    config = CONFIG.replace(probes=ProbesConfig(max_parallel=1))
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "v1"),
        ev("e2", "fs.is_file", ["a.txt"], "v2"),
        ev("e3", "fs.is_dir", ["a.txt"], "v3"),
        fin("f", "output.result", ["{{v1}} {{v2}} {{v3}}"]),
    ]
    report, _ = run(steps, root, runner, config=config)
    assert records(report)["f"]["output"] == "true true false"
    assert [c[0] for c in runner.calls] == ["run", "run", "run"]
    assert [c[1]["function"] for c in runner.calls] == ["fs.exists", "fs.is_file", "fs.is_dir"]


def test_a_probe_that_waits_for_another_is_run_on_its_own(root: Path) -> None:
    runner = BatchRecorder()
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "v1"),
        ev("e2", "fs.exists", ["{{v1}}.txt"], "v2"),
        ev("e3", "fs.is_file", ["c.json"], "v3"),
        fin("f", "output.result", ["{{v1}} {{v2}} {{v3}}"]),
    ]
    report, _ = run(steps, root, runner)
    assert records(report)["f"]["output"] == "true false true"
    shapes = sorted((c[0], len(c[1]) if c[0] == "run_many" else 1) for c in runner.calls)
    assert shapes == [("run", 1), ("run", 1), ("run", 1)]  # e1, then e2 after it; e3 after e2
    assert records(report)["e2"]["args"] == {"path": "true.txt"}


class Overlap(Recorder):
    """The first probe waits (a little) for the second to start: only possible in parallel."""

    def __init__(self) -> None:
        super().__init__()
        self.second = threading.Event()
        self.log: list[str] = []

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> ProbeResult:
        first = request["function"] == "fs.exists"
        self.log.append(f"start {request['function']}")
        if first:
            self.second.wait(0.5)
        else:
            self.second.set()
        self.log.append(f"end {request['function']}")
        return super().run(request, workspace=workspace, timeout=timeout)


def test_max_parallel_one_runs_one_probe_at_a_time(root: Path) -> None:
    runner = Overlap()
    config = CONFIG.replace(probes=ProbesConfig(max_parallel=1))
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "v1"),
        ev("e2", "fs.is_file", ["a.txt"], "v2"),
        fin("f", "output.result", ["{{v1}} {{v2}}"]),
    ]
    report, _ = run(steps, root, runner, config=config)
    assert records(report)["f"]["output"] == "true true"
    assert runner.log == ["start fs.exists", "end fs.exists", "start fs.is_file", "end fs.is_file"]
