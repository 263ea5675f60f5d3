"""What the plan engine and its conditions promise, pinned exactly (issue 14, mutation survivors).

Conditions are evaluated in this process: true, false or *unknown* (missing evidence), with the
sentences the evidence report shows. Plans run with an in-process probe runner that records
what the engine asked of it (no sandbox: the engine's logic is what is tested here; the
sandboxed runs are in ``test_plan_engine.py``), and a list journal that keeps every event.
"""

from __future__ import annotations

import copy
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from keel.config import KeelConfig, LimitsConfig, ProbesConfig
from keel.core.events import DataPayload, DecisionPayload, Event, ProbePayload
from keel.plan import PlanReport
from keel.plan._conditions import Evaluation, condition_refs, evaluate, guards
from keel.plan._engine import PlanEngine
from keel.plan._model import Condition
from keel.plan._run import check_plan
from keel.plan._template import lookup
from keel.probes import BindError, ProbeIssue, ProbeResult, bind, check_types, execute

# -- conditions: three-valued evaluation and the report's sentences --------------------------

ENV: dict[str, Any] = {
    "ok": True,
    "no": False,
    "n": 7,
    "s": "abc",
    "lst": ["a", "b"],
    "obj": {"k": "v"},
    "nul": None,
    "big": "x" * 10_000 + "y",
}


def _eval(condition: dict[str, Any], env: dict[str, Any] | None = None) -> Evaluation:
    variables = ENV if env is None else env
    return evaluate(Condition.model_validate(condition), lambda ref: lookup(ref, variables))


def _c(op: str, *items: Any) -> dict[str, Any]:
    return {"op": op, "vars": list(items)}


# (condition, value, facts, missing)
EVALUATIONS: list[tuple[dict[str, Any], bool | None, list[str], set[str]]] = [
    # and / or / not: Kleene logic; a bare {{var}} reads as "var is ..."
    (_c("and", "{{ok}}", "{{ok}}"), True, ["ok is true", "ok is true"], set()),
    (_c("and", "{{ok}}", "{{no}}"), False, ["ok is true", "no is false"], set()),
    (_c("and", "{{ok}}", "{{gone}}"), None, ["ok is true"], {"gone"}),
    (_c("and", "{{gone}}", "{{no}}"), False, ["no is false"], {"gone"}),
    (_c("and", "{{obj.k}}"), True, ["obj.k is v"], set()),
    (_c("and", "{{obj.zz}}"), None, [], {"obj"}),
    (_c("and", True), True, [], set()),
    (_c("and", ""), False, [], set()),
    (_c("and", "x{{no}}"), True, [], set()),
    (_c("and", "x{{gone}}"), None, [], {"gone"}),
    (_c("and"), True, [], set()),
    (_c("or", "{{no}}", "{{ok}}"), True, ["no is false", "ok is true"], set()),
    (_c("or", "{{no}}", "{{no}}"), False, ["no is false", "no is false"], set()),
    (_c("or", "{{no}}", "{{gone}}"), None, ["no is false"], {"gone"}),
    (_c("or", "{{gone}}", "{{ok}}"), True, ["ok is true"], {"gone"}),
    (_c("or"), False, [], set()),
    (_c("not", "{{ok}}"), False, ["ok is true"], set()),
    (_c("not", "{{no}}"), True, ["no is false"], set()),
    (_c("not", "{{gone}}"), None, [], {"gone"}),
    (_c("not"), None, [], set()),
    (_c("and", _c("not", "{{no}}"), _c("or", "{{gone}}", "{{ok}}")), True,
     ["no is false", "ok is true"], {"gone"}),
    (_c("and", _c("not", "{{gone}}")), None, [], {"gone"}),
    # defined / exists: missing evidence is a plain false, never unknown
    (_c("defined", "{{nul}}"), True, ["nul is defined"], set()),
    (_c("exists", "{{nul}}"), False, ["nul is not present"], set()),
    (_c("exists", "{{obj.k}}"), True, ["obj.k is present"], set()),
    (_c("defined", "{{gone}}"), False, ["gone is not defined"], set()),
    (_c("exists", "{{gone}}"), False, ["gone is not present"], set()),
    (_c("defined", "{{ok}}", "{{gone}}"), False, ["ok is defined", "gone is not defined"], set()),
    (_c("defined", "{{gone}}", "{{ok}}"), False, ["gone is not defined", "ok is defined"], set()),
    (_c("defined", "{{ok}}", "{{n}}"), True, ["ok is defined", "n is defined"], set()),
    (_c("exists", "lit"), True, ["lit is present"], set()),
    (_c("exists", None), False, ["null is not present"], set()),
    # comparisons and their sentences
    (_c("equals", "{{n}}", 7), True, ["'7' equals '7'"], set()),
    (_c("equals", "{{s}}", "abd"), False, ["'abc' does not equal 'abd'"], set()),
    (_c("not_equals", "{{s}}", "abd"), True, ["'abc' does not equal 'abd'"], set()),
    (_c("not_equals", "{{s}}", "abc"), False, ["'abc' equals 'abc'"], set()),
    (_c("in", "b", "{{lst}}"), True, ["'b' is among [\"a\", \"b\"]"], set()),
    (_c("in", "z", "{{lst}}"), False, ["'z' is not among [\"a\", \"b\"]"], set()),
    (_c("in", "b", "{{s}}"), True, ["'b' is in 'abc'"], set()),
    (_c("in", "z", "{{s}}"), False, ["'z' is not in 'abc'"], set()),
    (_c("in", "k", "{{obj}}"), True, ["'k' is in '{\"k\": \"v\"}'"], set()),
    (_c("in", "z", "{{obj}}"), False, ["'z' is not in '{\"k\": \"v\"}'"], set()),
    (_c("contains", "{{s}}", "b"), True, ["abc does contain 'b'"], set()),
    (_c("contains", "{{s}}", "z"), False, ["abc does not contain 'z'"], set()),
    (_c("contains", "{{lst}}", "a"), True, ["[\"a\", \"b\"] does contain 'a'"], set()),
    (_c("contains", "{{lst}}", "z"), False, ["[\"a\", \"b\"] does not contain 'z'"], set()),
    (_c("contains", "{{obj}}", "k"), True, ["{\"k\": \"v\"} does contain 'k'"], set()),
    (_c("contains", "{{s}}", 5), None, ["cannot compare abc contains 5"], set()),
    (_c("contains", "{{n}}", 5), None, ["cannot compare 7 contains 5"], set()),
    (_c("in", 5, "{{s}}"), None, ["cannot compare 5 in abc"], set()),
    (_c("gt", "{{n}}", 5), True, ["7 gt 5 is true"], set()),
    (_c("gt", "{{n}}", 7), False, ["7 gt 7 is false"], set()),
    (_c("ge", "{{n}}", 7), True, ["7 ge 7 is true"], set()),
    (_c("ge", "{{n}}", 8), False, ["7 ge 8 is false"], set()),
    (_c("lt", "{{n}}", 7), False, ["7 lt 7 is false"], set()),
    (_c("lt", "{{n}}", 8), True, ["7 lt 8 is true"], set()),
    (_c("le", "{{n}}", 7), True, ["7 le 7 is true"], set()),
    (_c("le", "{{n}}", 6), False, ["7 le 6 is false"], set()),
    (_c("gt", "a", 1), None, ["cannot compare a gt 1"], set()),
    (_c("matches", "{{s}}", "^a.c$"), True, ["'abc' does match /^a.c$/"], set()),
    (_c("matches", "{{s}}", "z"), False, ["'abc' does not match /z/"], set()),
    (_c("matches", "{{n}}", "7"), None, ["cannot compare 7 matches 7"], set()),
    (_c("matches", "{{s}}", "("), None, ["cannot compare abc matches ("], set()),
    (_c("matches", "{{s}}", "a" * 501), None, [f"cannot compare abc matches {'a' * 501}"], set()),
    (_c("matches", "{{s}}", "abc|" + "z" * 496), True, [f"'abc' does match /abc|{'z' * 496}/"],
     set()),  # a pattern of exactly MAX_PATTERN (500) characters is still used
    (_c("matches", "{{big}}", "y"), False, ["'" + "x" * 10_000 + "y' does not match /y/"], set()),
    # missing operands make a comparison unknown; so does a wrong number of operands
    (_c("equals", "{{gone}}", 1), None, [], {"gone"}),
    (_c("equals", 1, "{{gone}}"), None, [], {"gone"}),
    (_c("equals", "x{{gone}}", "x{{gone}}"), None, [], {"gone"}),
    (_c("equals", 1), None, [], set()),
    (_c("equals", 1, 1, 1), None, [], set()),
    (_c("equals", _c("and", "{{ok}}"), True), True, ["ok is true", "'true' equals 'true'"], set()),
    (_c("equals", _c("and", "{{no}}"), False), True, ["no is false", "'false' equals 'false'"],
     set()),
    (_c("equals", _c("and", "{{gone}}"), True), None, [], {"gone"}),
]  # fmt: skip


@pytest.mark.parametrize(("condition", "value", "facts", "missing"), EVALUATIONS)
def test_a_condition_is_true_false_or_unknown_with_its_sentences(
    condition: dict[str, Any], value: bool | None, facts: list[str], missing: set[str]
) -> None:
    result = _eval(condition)
    assert (result.value, result.facts, result.missing) == (value, facts, missing)


# (condition, positive, variables proven defined)
GUARDS: list[tuple[dict[str, Any] | None, bool, set[str]]] = [
    (None, True, set()),
    (None, False, set()),
    (_c("and", "{{a}}", "{{b}}"), True, {"a", "b"}),
    (_c("and", "{{a}}", "{{b}}"), False, set()),
    (_c("and", "{{a}}", "{{a.x}}"), False, {"a"}),
    (_c("or", "{{a}}", "{{b}}"), True, set()),
    (_c("or", "{{a}}", "{{a}}"), True, {"a"}),
    (_c("or", "{{a}}", "{{b}}"), False, {"a", "b"}),
    (_c("and"), True, set()),
    (_c("or"), True, set()),
    (_c("and", "x{{a}}", "{{b}} and {{c}}"), True, {"a", "b", "c"}),
    (_c("not", _c("defined", "{{a}}")), True, set()),
    (_c("not", _c("defined", "{{a}}")), False, {"a"}),
    (_c("not", "{{a}}"), True, {"a"}),
    (_c("not"), True, set()),
    (_c("defined", "{{a}}", "lit", "x{{b}}", "{{c.d}}"), True, {"a", "c"}),
    (_c("exists", "{{a}}"), True, {"a"}),
    (_c("defined", "{{a}}"), False, set()),
    (_c("exists", "{{a}}"), False, set()),
    (_c("and", _c("defined", "{{a}}"), _c("exists", "{{b}}")), True, {"a", "b"}),
    (_c("or", _c("defined", "{{a}}"), _c("equals", "{{a}}", "{{b}}")), True, {"a"}),
    (_c("equals", _c("and", "{{x}}", "{{y}}"), "{{z.w}} {{v}}"), True, {"x", "y", "z", "v"}),
    (_c("equals", _c("and", _c("or", "{{x}}"), "{{y}}"), 1), False, {"x", "y"}),
]
COMPARISONS = ("equals", "not_equals", "in", "contains", "gt", "ge", "lt", "le", "matches")
GUARDS += [(_c(op, "{{a.b}}", "x{{c}}"), True, {"a", "c"}) for op in COMPARISONS]


@pytest.mark.parametrize(("condition", "positive", "proven"), GUARDS)
def test_guards_are_the_variables_a_condition_proves_defined(
    condition: dict[str, Any] | None, positive: bool, proven: set[str]
) -> None:
    parsed = Condition.model_validate(condition) if condition is not None else None
    assert guards(parsed, positive) == frozenset(proven)


def test_guards_by_default_are_what_a_true_condition_proves() -> None:
    condition = Condition.model_validate(_c("defined", "{{a}}"))
    assert guards(condition) == frozenset({"a"})


def test_condition_refs_are_every_variable_read() -> None:
    assert condition_refs(None) == set()
    nested = _c("or", _c("defined", "{{a.x}}"), _c("equals", "{{b}}", "p {{c}} q"), "{{d}}")
    assert condition_refs(Condition.model_validate(nested)) == {"a", "b", "c", "d"}


# -- plans: a recording in-process runner, a list journal ------------------------------------

CONFIG = KeelConfig(
    probes=ProbesConfig(
        read_cap_bytes=4321, http_allow=["example.org"], max_parallel=8, command_timeout_seconds=33
    ),
    limits=LimitsConfig(probe_timeout_seconds=11, plan_max_steps=20),
)


class Recorder:
    """Runs probes in this process and keeps every request the engine made."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Path, float, str]] = []
        self.lock = threading.Lock()

    @property
    def name(self) -> str:
        return "recorder"

    def _keep(self, how: str, request: Any, workspace: Path, timeout: float) -> None:
        with self.lock:
            thread = threading.current_thread().name
            self.calls.append((how, copy.deepcopy(request), workspace, timeout, thread))

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> ProbeResult:
        self._keep("run", request, workspace, timeout)
        return execute(dict(request, workspace=str(workspace)), backend=self.name)


class BatchRecorder(Recorder):
    """A ``BatchRunner``: ready probes come in batches."""

    def run_many(
        self, requests: list[dict[str, Any]], *, workspace: Path, timeout: float
    ) -> list[ProbeResult]:
        self._keep("run_many", requests, workspace, timeout)
        return [execute(dict(r, workspace=str(workspace)), backend=self.name) for r in requests]


class Canned(Recorder):
    """Answers each probe function with a fixed result (or raises)."""

    def __init__(self, results: dict[str, ProbeResult | Exception]) -> None:
        super().__init__()
        self.results = results

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> ProbeResult:
        self._keep("run", request, workspace, timeout)
        result = self.results[request["function"]]
        if isinstance(result, Exception):
            raise result
        return result


class CannedBatch(Canned):
    def run_many(
        self, requests: list[dict[str, Any]], *, workspace: Path, timeout: float
    ) -> list[ProbeResult]:
        raise RuntimeError("the batch runner broke")


class Sink:
    """A journal that keeps events in a list."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def append(self, event: Event) -> Event:
        self.events.append(event)
        return event


class AllowAll:
    """A stand-in policy that allows every path and command."""

    contained = False

    def check_call(self, call: Any) -> Any:
        from keel.core.decision import Decision

        return Decision.allow("test.allow", "allowed by the test")

    def check_path(self, path: str, op: Any) -> Any:
        return self.check_call(None)

    def check_command(self, line: str) -> Any:
        return self.check_call(None)


def ev(step_id: str, function: str, args: Any, out: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": step_id,
        "type": "evidence_collection",
        "output_to": out,
        "action": {"function": function, "args": args},
        **extra,
    }


def fin(step_id: str, function: str, args: Any, condition: Any = None) -> dict[str, Any]:
    step: dict[str, Any] = {
        "id": step_id,
        "type": "final_action",
        "action": {"function": function, "args": args},
    }
    if condition is not None:
        step["condition"] = condition
    return step


def cond(step_id: str, condition: Any, true: Any = (), false: Any = ()) -> dict[str, Any]:
    return {
        "id": step_id,
        "type": "conditional",
        "condition": condition,
        "true_branch": list(true),
        "false_branch": list(false),
    }


def ask(step_id: str, question: str, out: str, choices: Any = None) -> dict[str, Any]:
    step: dict[str, Any] = {"id": step_id, "type": "ask", "question": question, "output_to": out}
    if choices is not None:
        step["choices"] = choices
    return step


def engine(
    steps: list[dict[str, Any]] | Any,
    root: Path,
    runner: Any = None,
    *,
    config: KeelConfig = CONFIG,
    **kwargs: Any,
) -> tuple[PlanEngine, Sink]:
    data = {"goal": "find out", "steps": steps} if isinstance(steps, list) else steps
    real = Path(os.path.realpath(root))
    validation = check_plan(data, config=config, workspace=real)
    sink = Sink()
    built = PlanEngine(
        validation, real, runner if runner is not None else Recorder(), config, journal=sink,
        session_id="plan-test", **kwargs,
    )  # fmt: skip
    return built, sink


def run(steps: Any, root: Path, runner: Any = None, **kwargs: Any) -> tuple[PlanReport, Sink]:
    built, sink = engine(steps, root, runner, **kwargs)
    return built.run(), sink


def records(report: PlanReport) -> dict[str, dict[str, Any]]:
    return {r.step_id: r.to_dict() for r in report.records}


def plan_events(sink: Sink) -> list[dict[str, Any]]:
    return [e.payload.data for e in sink.events if isinstance(e.payload, DataPayload)]


def probe_events(sink: Sink) -> dict[str, ProbePayload]:
    return {
        e.payload.step_id: e.payload for e in sink.events if isinstance(e.payload, ProbePayload)
    }


def probe_record(
    step_id: str, function: str, out: str, args: dict[str, Any], value: Any, backend: str
) -> dict[str, Any]:
    return {
        "step_id": step_id, "function": function, "output_to": out, "args": args,
        "status": "ok", "value": value, "error": None, "notes": [], "backend": backend,
        "reason": None,
    }  # fmt: skip


def without_duration(record: dict[str, Any]) -> dict[str, Any]:
    assert isinstance(record.pop("duration_ms"), float)
    return record


@pytest.fixture
def root(workdir: Path) -> Path:
    (workdir / "a.txt").write_text("hello")
    (workdir / "c.json").write_text('{"a": {"b": 7}}')
    (workdir / "bad.json").write_text("{")
    (workdir / "d.csv").write_text("x,y\n1,2\n")
    return Path(os.path.realpath(workdir))


EVIDENCE = [
    ev("e1", "fs.exists", ["a.txt"], "ok1"),
    ev("e2", "parse.json", ["c.json"], "doc", timeout=7),
    ev("e3", "data.get_nested_value", ["{{doc}}", "a.b"], "b"),
    ev("e4", "fs.writable", ["out.txt"], "w"),
    cond(
        "c1",
        {"op": "gt", "vars": ["{{b}}", 5]},
        [fin("f1", "output.result", ["b is {{b}} of {{doc.a}}"])],
        [fin("f2", "output.result", ["small"])],
    ),
]


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
    config = CONFIG.model_copy(update={"probes": ProbesConfig(max_parallel=2)})
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
    config = CONFIG.model_copy(update={"probes": ProbesConfig(max_parallel=1)})
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
    config = CONFIG.model_copy(update={"probes": ProbesConfig(max_parallel=1)})
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "v1"),
        ev("e2", "fs.is_file", ["a.txt"], "v2"),
        fin("f", "output.result", ["{{v1}} {{v2}}"]),
    ]
    report, _ = run(steps, root, runner, config=config)
    assert records(report)["f"]["output"] == "true true"
    assert runner.log == ["start fs.exists", "end fs.exists", "start fs.is_file", "end fs.is_file"]


# -- questions -------------------------------------------------------------------------------

QUESTION = [
    ev("e1", "parse.csv_headers", ["d.csv"], "cols"),
    ask("q1", "Which of {{cols}}?", "col", "{{cols}}"),
    ev("e2", "parse.csv_sum", ["d.csv", "{{col}}"], "total"),
    cond("c1", _c("gt", "{{total}}", 0), [fin("f1", "output.result", ["sum {{total}}"])]),
    fin("f2", "output.result", ["done"]),
]


def _question(
    status: str, answer: Any = None, source: str | None = None, choices: Any = ("x", "y")
) -> dict[str, Any]:
    return {"step_id": "q1", "output_to": "col", "question": 'Which of ["x", "y"]?',
            "status": status, "choices": list(choices) if choices is not None else None,
            "answer": answer, "source": source}  # fmt: skip


def test_an_unanswered_question_defers_what_depends_on_it(root: Path) -> None:
    report, sink = run(QUESTION, root)
    found = records(report)
    assert found["q1"] == _question("pending")
    assert found["e2"]["status"] == "blocked"
    assert found["e2"]["reason"] == "waits for an answer to q1"
    assert found["c1"] == {"step_id": "c1", "value": None, "branch": "deferred",
                           "reason": "waits for input: total"}  # fmt: skip
    deferred = "a question is not answered yet"
    assert found["f2"] == {"step_id": "f2", "function": "output.result", "status": "deferred",
                           "args": {}, "output": None, "reason": deferred,
                           "decision": None}  # fmt: skip
    assert "f1" not in found
    assert (report.state, report.exit_code) == ("needs_input", 3)
    assert report.facts == ('d.csv has columns ["x", "y"]',)
    assert {"event": "ask", **_question("pending")} in plan_events(sink)


@pytest.mark.parametrize(
    ("answers", "question", "reason"),
    [
        ({}, "And for {{col}} or true?", "waits for input: col, more"),
        ({"col": "a"}, "And for a or true?", "waits for input: more"),
    ],
)
def test_questions_that_wait_for_each_other(
    root: Path, answers: dict[str, Any], question: str, reason: str
) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ask("q1", "Which?", "col"),
        ask("q2", "And for {{col}} or {{ex}}?", "more"),
        cond("c", _c("and", "{{ex}}", "{{col}}", "{{more}}"), [fin("t", "output.result", ["x"])]),
        fin("f", "output.result", ["y"]),
    ]
    report, _ = run(steps, root, answers=answers)
    found = records(report)
    assert (found["q2"]["question"], found["q2"]["status"]) == (question, "pending")
    assert found["c"] == {"step_id": "c", "value": None, "branch": "deferred", "reason": reason}
    if answers:
        assert report.facts == ("a.txt exists", "the user chose col = a", "ex is true", "col is a")
    else:
        assert report.facts == ("a.txt exists", "ex is true")
    assert (report.state, found["f"]["status"]) == ("needs_input", "deferred")


@pytest.mark.parametrize(
    ("answers", "column", "total"),
    [({"col": "y"}, "y", 2), ({"q1": "x"}, "x", 1), ({"col": "y", "q1": "x"}, "y", 2)],
)
def test_an_answer_is_evidence(
    root: Path, answers: dict[str, Any], column: str, total: int
) -> None:
    asked: list[Any] = []
    report, sink = run(QUESTION, root, answers=answers, prompt=lambda q, c: asked.append(q))
    found = records(report)
    assert found["q1"] == _question("answered", column, "answers")
    assert found["e2"]["args"] == {"path": "d.csv", "column": column}
    assert found["c1"]["branch"] == "true"
    assert found["f1"]["output"] == f"sum {total}" and found["f2"]["status"] == "done"
    assert f"the user chose col = {column}" in report.facts
    assert report.state == "completed" and asked == []
    assert {"event": "ask", **_question("answered", column, "answers")} in plan_events(sink)


def test_an_answer_outside_the_choices_is_rejected(root: Path) -> None:
    report, _ = run(QUESTION, root, answers={"col": "z"})
    found = records(report)
    assert found["q1"] == _question("rejected", "z", "answers")
    assert found["e2"]["reason"] == "waits for an answer to q1"
    assert found["f2"]["status"] == "deferred"
    assert report.state == "needs_input"
    assert not any(f.startswith("the user chose") for f in report.facts)


def test_the_prompt_is_asked_with_the_rendered_question_and_choices(root: Path) -> None:
    asked: list[Any] = []

    def prompt(question: str, choices: list[Any] | None) -> Any:
        asked.append((question, choices))
        return "x"

    report, _ = run(QUESTION, root, prompt=prompt)
    assert asked == [('Which of ["x", "y"]?', ["x", "y"])]
    assert records(report)["q1"] == _question("answered", "x", "prompt")
    assert records(report)["f1"]["output"] == "sum 1"


def _eof(question: str, choices: list[Any] | None) -> Any:
    raise EOFError


@pytest.mark.parametrize(
    ("prompt", "source"), [(_eof, None), (lambda q, c: None, "prompt")], ids=["eof", "none"]
)
def test_no_answer_from_the_prompt_is_pending(root: Path, prompt: Any, source: Any) -> None:
    report, _ = run(QUESTION, root, prompt=prompt)
    assert records(report)["q1"] == _question("pending", None, source)
    assert report.state == "needs_input"


@pytest.mark.parametrize(
    ("choices", "answer", "shown", "status"),
    [
        (None, "anything", None, "answered"),
        (["x", "y"], "y", ["x", "y"], "answered"),
        (["x", "y"], "z", ["x", "y"], "rejected"),
        ("{{n}}", "anything", None, "answered"),
        ("{{cols}}", "z", ["x", "y"], "rejected"),
    ],
)
def test_choices_are_a_list_a_list_variable_or_anything(
    root: Path, choices: Any, answer: str, shown: Any, status: str
) -> None:
    steps = [
        ev("e1", "parse.csv_headers", ["d.csv"], "cols"),
        ev("e2", "data.length", ["{{cols}}"], "n"),
        ask("q1", "Which?", "col", choices),
        fin("f", "output.result", ["{{col}}"]),
    ]
    report, _ = run(steps, root, answers={"col": answer})
    question = records(report)["q1"]
    assert (question["choices"], question["status"], question["answer"]) == (shown, status, answer)
    assert records(report)["f"]["status"] == ("done" if status == "answered" else "deferred")


# -- final actions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "reason", "facts"),
    [
        (_c("and", "{{ex}}", "{{no}}"), "the condition is false", ["ex is true", "no is false"]),
        (_c("and", "{{ex}}", "{{bad}}", "{{bad2}}"), "no evidence for bad, bad2", ["ex is true"]),
        (_c("gt", "{{ex}}", "a"), "no evidence for the condition", ["cannot compare true gt a"]),
    ],
)
def test_a_final_action_runs_only_on_a_true_condition(
    root: Path, condition: dict[str, Any], reason: str, facts: list[str]
) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ev("e2", "fs.exists", ["none.txt"], "no"),
        ev("e3", "parse.json", ["bad.json"], "bad"),
        ev("e4", "parse.json", ["bad.json"], "bad2"),
        fin("f", "output.result", ["ran"], condition),
    ]
    report, sink = run(steps, root)
    assert records(report)["f"] == {"step_id": "f", "function": "output.result",
                                    "status": "skipped", "args": {}, "output": None,
                                    "reason": reason, "decision": None}  # fmt: skip
    assert list(report.facts[-len(facts) :]) == facts
    assert report.state == "failed"
    assert not any(e.get("event") == "final_action" for e in plan_events(sink))


def test_a_final_action_with_undefined_arguments_is_skipped(root: Path) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ev("e2", "parse.json", ["bad.json"], "bad"),
        ev("e3", "parse.json", ["c.json"], "doc"),
        fin("f", "output.result", ["{{bad}} {{doc.zz}} {{bad}}"], _c("and", "{{ex}}")),
    ]
    report, _ = run(steps, root)
    action = records(report)["f"]
    assert (action["status"], action["reason"]) == ("skipped", "bad, doc.zz undefined")
    assert report.facts[-1] == "ex is true"


def test_a_done_action_is_recorded_and_journaled_with_its_facts(root: Path) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        fin("f", "output.result", ["found {{ex}}"], _c("and", "{{ex}}")),
    ]
    report, sink = run(steps, root)
    expected = {"step_id": "f", "function": "output.result", "status": "done",
                "args": {"message": "found true"}, "output": "found true", "reason": None,
                "decision": None}  # fmt: skip
    assert records(report)["f"] == expected
    assert report.facts == ("a.txt exists", "ex is true")
    assert {"event": "final_action", **expected} in plan_events(sink)


def _write_steps(path: str, content: Any = "new\n") -> list[dict[str, Any]]:
    return [
        ev("w", "fs.writable", [path], "ok"),
        ev("v", "data.value", [content], "text"),
        fin("f", "file.write", [path, "{{text}}"], _c("and", "{{ok}}")),
    ]


def test_a_write_asks_the_policy_and_journals_the_decision(root: Path) -> None:
    built, sink = engine(_write_steps("out.txt"), root, policy=AllowAll())
    report = built.run()
    action = records(report)["f"]
    assert action["status"] == "done" and action["output"] == "wrote 4 bytes to out.txt"
    assert (root / "out.txt").read_text() == "new\n"
    decisions = [e for e in sink.events if e.kind == "decision"]
    assert [e.payload for e in decisions] == [
        DecisionPayload("allow", "test.allow", "allowed by the test", None, subject="out.txt")
    ]
    assert {(e.session_id, e.trace_id, e.parent_span_id) for e in sink.events} == {
        ("plan-test", built.trace_id, built.root_span)
    }
    assert {"event": "final_action", **action} in plan_events(sink)
    assert report.state == "completed"


def test_a_write_the_policy_denies_is_refused_with_the_policy_reason(root: Path) -> None:
    from keel.policy import Policy

    report, sink = run(_write_steps(".env"), root, policy=Policy.from_config(CONFIG, root))
    action = records(report)["f"]
    assert action["status"] == "refused" and not (root / ".env").exists()
    decision = action["decision"]
    assert action["reason"] == f"policy: {decision['reason']} [{decision['rule']}]"
    (event,) = [e for e in sink.events if e.kind == "decision"]
    assert event.payload == DecisionPayload(
        decision["decision"], decision["rule"], decision["reason"], decision["suggestion"],
        subject=".env",
    )  # fmt: skip
    assert report.state == "failed"


def test_the_emergency_stop_refuses_a_write(root: Path) -> None:
    from keel.core.stop import set_stop

    set_stop(root, "incident")
    report, _ = run(_write_steps("out.txt"), root, policy=AllowAll())
    action = records(report)["f"]
    assert action["status"] == "refused" and "emergency stop" in action["reason"]
    assert not (root / "out.txt").exists()


def test_without_a_policy_a_write_is_refused(root: Path) -> None:
    report, sink = run(_write_steps("out.txt"), root)
    action = records(report)["f"]
    assert (action["status"], action["reason"]) == ("refused", "no policy is available")
    assert not (root / "out.txt").exists()
    assert not [e for e in sink.events if e.kind == "decision"]
    assert report.state == "failed"


class FakeSandbox:
    """Stands in for the exec sandbox: records the command, says it printed ``hi``."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def run(self, argv: list[str], *, workspace: Path, mode: str, timeout: float) -> Any:
        from types import SimpleNamespace

        self.calls.append((argv, workspace, mode, timeout))
        return SimpleNamespace(stdout=b"hi\n", stderr=b"", exit_code=0, timed_out=False)


def test_a_command_runs_in_the_exec_sandbox_with_the_configured_timeout(root: Path) -> None:
    box = FakeSandbox()
    steps = [
        ev("w", "cmd.which", ["cat"], "cat"),
        fin("r", "command.run", ["cat a.txt"], _c("exists", "{{cat}}")),
    ]
    report, sink = run(steps, root, policy=AllowAll(), exec_sandbox=box)
    action = records(report)["r"]
    assert (action["status"], action["output"]) == ("done", "hi\n")
    assert box.calls == [(["/bin/sh", "-c", "cat a.txt"], root, "exec", 33.0)]
    decisions = [e.payload for e in sink.events if isinstance(e.payload, DecisionPayload)]
    assert [(d.decision, d.subject) for d in decisions] == [("allow", "cat a.txt")]


class PathDenier(AllowAll):
    """Allows every call, but denies each path a patch touches (the patcher's own check)."""

    def check_path(self, path: str, op: Any) -> Any:
        from keel.core.decision import Decision

        return Decision.deny("test.deny", f"no patches to {path}")


def test_a_patch_is_checked_path_by_path_by_the_policy_too(root: Path) -> None:
    (root / "app.py").write_text("x = 1\n")
    patch = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    steps = [
        ev("w", "fs.writable", ["app.py"], "ok"),
        fin("p", "patch.apply", [patch], _c("and", "{{ok}}")),
    ]
    report, _ = run(steps, root, policy=PathDenier())
    action = records(report)["p"]
    assert action["status"] == "failed" and "no patches to app.py" in action["reason"]
    assert (root / "app.py").read_text() == "x = 1\n"
    allowed, _ = run(steps, root, policy=AllowAll())
    assert records(allowed)["p"]["status"] == "done"
    assert (root / "app.py").read_text() == "x = 2\n"


def test_arguments_of_the_wrong_type_at_run_time_fail_the_action(root: Path) -> None:
    from keel.plan._actions import resolve_action

    write = resolve_action("file.write")
    assert write is not None
    with pytest.raises(BindError) as caught:
        check_types(write.params, bind(write.params, ["out.txt", 5], write.name), write.name)
    report, _ = run(_write_steps("out.txt", 5), root, policy=AllowAll())
    action = records(report)["f"]
    assert (action["status"], action["reason"]) == ("failed", caught.value.message)
    assert not (root / "out.txt").exists()
    assert report.state == "failed"
    assert report.facts[-1] == "ok is true"


def test_a_plan_the_lint_flagged_commits_no_write(root: Path) -> None:
    steps = [
        ev("e1", "fs.writable", ["out.txt"], "ok"),
        fin("f1", "file.write", ["a.txt", "x"]),
        fin("f2", "file.write", ["out.txt", "y"], _c("and", "{{ok}}")),
        fin("f3", "output.result", ["z"]),
    ]
    report, _ = run(steps, root, policy=AllowAll())
    found = records(report)
    assert found["f1"]["status"] == "refused"
    assert found["f1"]["reason"] == (
        "commitment lint: file.write writes 'a.txt' but no condition over this step checks "
        "fs.writable('a.txt')"
    )
    assert found["f2"] == {
        "step_id": "f2", "function": "file.write", "status": "refused",
        "args": {"path": "out.txt", "content": "y"}, "output": None,
        "reason": "the commitment lint flagged final action(s) f1 of this plan: it cannot "
                  "succeed as written, so none of its writes or commands run",
        "decision": None,
    }  # fmt: skip
    assert found["f3"]["status"] == "done"
    assert (report.state, report.refused) == ("failed", ("f1",))
    assert (root / "a.txt").read_text() == "hello" and not (root / "out.txt").exists()


def test_every_action_the_lint_flagged_is_named_in_the_refusal(root: Path) -> None:
    steps = [
        ev("e1", "fs.writable", ["out.txt"], "ok"),
        fin("f1", "file.write", ["a.txt", "x"]),
        fin("f2", "file.write", ["b.txt", "y"]),
        fin("f3", "file.write", ["out.txt", "z"], _c("and", "{{ok}}")),
    ]
    report, _ = run(steps, root, policy=AllowAll())
    assert records(report)["f3"]["reason"] == (
        "the commitment lint flagged final action(s) f1, f2 of this plan: it cannot "
        "succeed as written, so none of its writes or commands run"
    )
    assert report.refused == ("f1", "f2")
    assert not (root / "b.txt").exists() and not (root / "out.txt").exists()


def test_a_flagged_plan_fails_even_when_the_flagged_action_is_not_reached(root: Path) -> None:
    steps = [
        ev("e1", "fs.exists", ["none.txt"], "ex"),
        cond("c", _c("and", "{{ex}}"), [fin("f1", "file.write", ["a.txt", "x"])]),
        fin("f3", "output.result", ["z"]),
    ]
    report, _ = run(steps, root, policy=AllowAll())
    assert records(report)["f3"]["status"] == "done"
    assert (report.state, report.refused) == ("failed", ("f1",))


@pytest.mark.parametrize(
    ("finals", "state"),
    [
        ([fin("a", "output.result", ["x"])], "completed"),
        ([fin("a", "output.result", ["x"], _c("and", "{{no}}"))], "failed"),
        ([], "failed"),
        ([fin("a", "output.result", ["x"]), fin("b", "file.write", ["a.txt", "x"],
                                                _c("and", "{{ok}}"))], "failed"),
        ([fin("a", "output.result", ["x"], _c("and", "{{no}}")),
          fin("b", "output.result", ["y"])], "completed"),
        ([fin("a", "output.result", ["x"]), fin("b", "file.write", ["a.txt", "{{five}}"],
                                                _c("and", "{{ok}}"))], "failed"),
    ],
)  # fmt: skip
def test_the_state_of_a_run(root: Path, finals: list[dict[str, Any]], state: str) -> None:
    steps = [
        ev("e1", "fs.exists", ["none.txt"], "no"),
        ev("e2", "fs.writable", ["a.txt"], "ok"),
        ev("e3", "data.value", [5], "five"),
    ]
    report, _ = run(steps + finals, root)  # no policy: a write is refused (or fails: {{five}})
    assert report.state == state
    assert report.facts[:3] == ("none.txt does not exist", "a.txt is writable", "five = 5")


# -- the journal -----------------------------------------------------------------------------


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
