"""Running plans in this process, for the plan engine's tests.

A probe runner that records what the engine asked of it (no sandbox: the engine's logic is what
is tested), a list journal that keeps every event, a policy that allows everything, and step
builders.
"""

from __future__ import annotations

import copy
import os
import threading
from pathlib import Path
from typing import Any

from keel.config import KeelConfig, LimitsConfig, ProbesConfig
from keel.core.events import DataPayload, Event, ProbePayload
from keel.plan import PlanReport
from keel.plan._engine import PlanEngine
from keel.plan._run import check_plan
from keel.probes import ProbeResult, execute


def _c(op: str, *items: Any) -> dict[str, Any]:
    """A condition: ``op`` over ``items``."""
    return {"op": op, "vars": list(items)}


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
