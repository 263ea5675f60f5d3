"""The plan engine: probes in the sandbox, concurrently; conditions pick branches; commit last.

The walker goes through the steps in order. An evidence step is submitted at once to a thread
pool (each probe is a sandboxed subprocess) and waits inside its thread only for the steps its
arguments name, so independent probes run in parallel. Conditions, questions and final actions
wait for exactly the evidence they read. Missing evidence (a probe failed, a branch did not
define it) is unknown, never a value: it makes a condition take the false branch and keeps a
final action from running. Questions are answered from ``answers``, by ``prompt``, or left
pending: then no final action runs and the state is ``needs_input``.

Write and run actions go through ``Guard.decide`` (the stop, then the policy) and are refused
when the commitment lint flagged them. An action that writes is checkpointed as an agent's
call is: a ``before`` checkpoint once the policy allows it (none can be taken: refused), an
``after`` one when it is done, both in the plan's session, so ``keel diff --session`` and
``keel rollback --session`` reach what a plan wrote. A plan the lint flagged
(``ValidationResult.refusals``) still collects and reports its evidence, but none of its
final actions that write or run goes through (a plan that fails leaves nothing half done)
and its state is ``failed`` whether or not the flagged actions were reached, so the same plan
fails the same way in ``keel plan validate`` and ``keel plan run``. Every plan, probe,
branch, question and final action is journaled; events are appended from the walker's thread
only.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from keel.core.calls import ToolCall
from keel.core.decision import Decision
from keel.core.events import (
    DataPayload,
    DecisionPayload,
    Event,
    EventKind,
    ProbePayload,
    new_span_id,
    new_trace_id,
)
from keel.core.schema import KeelConfig
from keel.plan._actions import ActionSpec, resolve_action
from keel.plan._commit import Committer
from keel.plan._conditions import evaluate
from keel.plan._facts import probe_fact, shown
from keel.plan._model import AskStep, ConditionalStep, EvidenceStep, FinalActionStep, Step
from keel.plan._report import (
    ActionRecord,
    BranchRecord,
    PlanReport,
    ProbeRecord,
    QuestionRecord,
    Record,
    RunState,
)
from keel.plan._runners import BatchRunner, ProbeRunner
from keel.plan._template import UNDEFINED, Ref, lookup, refs_in, render, whole_ref
from keel.plan._validate import ValidationResult
from keel.probes import BindError, ProbeIssue, ProbeResult, bind, check_types, execute, resolve

if TYPE_CHECKING:
    from keel.guard import Guard

Prompt = Callable[[str, list[Any] | None], Any]


class ActionPolicy(Protocol):
    """The part of ``keel.policy.Policy`` final actions need."""

    def check_path(self, path: str, op: Any) -> Decision:
        """Judge a path for an operation."""
        ...

    def check_command(self, line: str) -> Decision:
        """Judge a shell command line."""
        ...


class CheckpointStore(Protocol):
    """The part of ``keel.workspace.Checkpoints`` final actions that write need."""

    def create(
        self, *, session_id: str | None, tool_use_id: str | None, label: str | None, journal: bool
    ) -> Any:
        """The ``before`` checkpoint of a call."""
        ...

    def after_call(self, session_id: str | None, tool_use_id: str | None, *, journal: bool) -> Any:
        """The ``after`` checkpoint of a call."""
        ...


class EventSink(Protocol):
    """The part of ``keel.journal.Journal`` the engine needs."""

    def append(self, event: Event) -> Event:
        """Store one event."""
        ...


@dataclass(frozen=True, slots=True)
class _Job:
    step: EvidenceStep
    deps: dict[str, Future[_Binding]]
    binding: Future[_Binding]
    record: Future[ProbeRecord]


@dataclass(frozen=True, slots=True)
class _Binding:
    value: Any
    reason: str | None = None
    awaiting: bool = False


def _bound(value: Any) -> Future[_Binding]:
    future: Future[_Binding] = Future()
    future.set_result(_Binding(value))
    return future


@dataclass(slots=True)
class PlanEngine:
    """Runs one validated plan against a workspace."""

    validation: ValidationResult
    workspace: Path
    runner: ProbeRunner
    config: KeelConfig = field(default_factory=KeelConfig)
    policy: ActionPolicy | None = None
    journal: EventSink | None = None
    exec_sandbox: Any = None
    """A ``keel.sandbox.Sandbox`` for ``command.run`` (mode ``exec``); none refuses commands."""
    answers: Mapping[str, Any] = field(default_factory=dict[str, Any])
    prompt: Prompt | None = None
    session_id: str = field(default_factory=lambda: f"plan-{uuid.uuid4().hex[:12]}")
    unsafe: bool = False
    trace_id: str = field(default_factory=new_trace_id)
    root_span: str = field(default_factory=new_span_id)
    checkpoints: CheckpointStore | None = None
    """Where actions that write are checkpointed, before and after (a ``Checkpoints``)."""
    lazy_checkpoints: bool = False
    """Without ``checkpoints``, open the workspace's own store on the first write; neither:
    no checkpoints."""
    _env: dict[str, Future[_Binding]] = field(default_factory=dict[str, "Future[_Binding]"])
    _slots: list[Record | Future[ProbeRecord]] = field(default_factory=list[Any])
    _events: list[Event] = field(default_factory=list[Event])
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _facts_for: dict[int, tuple[str, ...]] = field(default_factory=dict[int, tuple[str, ...]])
    _pending_questions: int = 0
    _pool: ThreadPoolExecutor | None = None
    _batch: list[_Job] = field(default_factory=list["_Job"])

    def run(self) -> PlanReport:
        """Run the plan; an invalid plan runs nothing."""
        plan = self.validation.plan
        goal = plan.goal if plan else "(unreadable plan)"
        self._emit(
            "plan",
            {
                "event": "plan.start",
                "goal": goal,
                "plan": plan.model_dump(mode="json") if plan else None,
                "valid": self.validation.ok,
                "issues": [i.to_dict() for i in self.validation.issues],
                "sandbox": self.runner.name,
                "unsafe": self.unsafe,
            },
        )
        if plan is None or not self.validation.ok:
            return self._finish(goal, "invalid", [])
        workers = max(1, self.config.probes.max_parallel)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="keel-probe") as pool:
            self._pool = pool
            self._walk(plan.steps)
            records = [self._settle(slot) for slot in self._slots]
        self._pool = None
        return self._finish(goal, self._state(records), records)

    # -- walking ---------------------------------------------------------------------------

    def _walk(self, steps: list[Step]) -> None:
        for step in steps:
            if not isinstance(step, EvidenceStep):
                self._dispatch()
            match step:
                case EvidenceStep():
                    self._submit(step)
                case ConditionalStep():
                    self._conditional(step)
                case AskStep():
                    self._ask(step)
                case FinalActionStep():
                    self._final(step)
            self._flush()
        self._dispatch()

    def _submit(self, step: EvidenceStep) -> None:
        """Queue a probe: ready sandbox probes share one sandboxed runner (a batch)."""
        spec = resolve(step.action.function)
        assert spec is not None  # validated
        deps = {r.var: self._env[r.var] for r in refs_in(step.action.args) if r.var in self._env}
        job = _Job(step, deps, Future(), Future())
        self._env[step.output_to] = job.binding
        self._slots.append(job.record)
        ready = all(f.done() for f in deps.values())
        if spec.where == "sandbox" and ready and isinstance(self.runner, BatchRunner):
            self._batch.append(job)
            if len(self._batch) >= max(1, self.config.probes.max_parallel):
                self._dispatch()
            return
        self._dispatch()  # earlier probes start first, so waiting never deadlocks the pool
        assert self._pool is not None
        self._pool.submit(self._run_jobs, [job])

    def _dispatch(self) -> None:
        if self._batch and self._pool is not None:
            jobs, self._batch = self._batch, []
            self._pool.submit(self._run_jobs, jobs)

    def _run_jobs(self, jobs: list[_Job]) -> None:
        """Run one probe, or a batch in one sandboxed runner; every future is always set."""
        try:
            prepared = [(job, self._prepare(job)) for job in jobs]
            calls = [(job, req) for job, req in prepared if isinstance(req, dict)]
            results = self._call_all([req for _, req in calls])
            by_job = {id(job): result for (job, _), result in zip(calls, results, strict=True)}
            for job, req in prepared:
                if isinstance(req, dict):
                    self._conclude(job, req, by_job[id(job)])
                else:
                    self._settle_job(job, *req)
        except Exception as exc:  # fail closed: a bug is an error, never a hang
            issue = ProbeIssue("probe.internal", f"{type(exc).__name__}: {exc}"[:500])
            for job in jobs:
                step = job.step
                if not job.record.done():
                    job.record.set_result(
                        ProbeRecord(
                            step.id, step.action.function, step.output_to, {}, "error", error=issue
                        )
                    )
                if not job.binding.done():
                    reason = f"{step.id} failed: {issue.describe()}"
                    job.binding.set_result(_Binding(UNDEFINED, reason))

    def _prepare(self, job: _Job) -> dict[str, Any] | tuple[ProbeRecord, _Binding]:
        """The probe request, or the outcome when the probe cannot run (missing input, bad args)."""
        step = job.step
        spec = resolve(step.action.function)
        assert spec is not None  # validated
        snapshot = {var: future.result() for var, future in job.deps.items()}
        values = {var: b.value for var, b in snapshot.items() if b.value is not UNDEFINED}
        args, missing = render(step.action.args, lambda ref: lookup(ref, values))
        if missing:
            why = "; ".join(sorted({_why_missing(m, snapshot) for m in missing}))
            awaiting = any(snapshot[m.var].awaiting for m in missing if m.var in snapshot)
            record = ProbeRecord(step.id, spec.name, step.output_to, {}, "blocked", reason=why)
            return record, _Binding(UNDEFINED, f"{step.id} did not run ({why})", awaiting)
        try:
            bound = bind(spec.params, args, spec.name)
            check_types(spec.params, bound, spec.name)
        except BindError as exc:
            bad = args if isinstance(args, dict) else {}
            result = ProbeResult.failure(exc.code, exc.message)
            return self._outcome(step, spec.name, bad, result)
        limit = step.timeout or self.config.limits.probe_timeout_seconds
        return {
            "function": spec.name,
            "args": bound,
            "read_cap": self.config.probes.read_cap_bytes,
            "timeout": limit,
            "http_allow": list(self.config.probes.http_allow),
            "where": spec.where,
        }

    def _call_all(self, requests: list[dict[str, Any]]) -> list[ProbeResult]:
        if not requests:
            return []
        if len(requests) > 1 and isinstance(self.runner, BatchRunner):
            limit = max(float(r["timeout"]) for r in requests)
            clean = [{k: v for k, v in r.items() if k != "where"} for r in requests]
            return self.runner.run_many(clean, workspace=self.workspace, timeout=limit)
        return [self._call(r) for r in requests]

    def _call(self, request: dict[str, Any]) -> ProbeResult:
        where = request.pop("where")
        if where == "host":
            return execute(dict(request, workspace=str(self.workspace)), backend="host")
        return self.runner.run(request, workspace=self.workspace, timeout=float(request["timeout"]))

    def _conclude(self, job: _Job, request: dict[str, Any], result: ProbeResult) -> None:
        self._settle_job(
            job, *self._outcome(job.step, request["function"], request["args"], result)
        )

    def _outcome(
        self, step: EvidenceStep, function: str, args: dict[str, Any], result: ProbeResult
    ) -> tuple[ProbeRecord, _Binding]:
        record = ProbeRecord(
            step.id, function, step.output_to, args, "ok" if result.ok else "error", result.value,
            result.error, result.notes, result.duration_ms, result.backend,
        )  # fmt: skip
        if result.ok:
            return record, _Binding(result.value)
        reason = f"{step.id} failed: {result.error.describe() if result.error else 'error'}"
        return record, _Binding(UNDEFINED, reason)

    def _settle_job(self, job: _Job, record: ProbeRecord, binding: _Binding) -> None:
        job.record.set_result(record)
        job.binding.set_result(binding)
        self._emit_probe(record)

    def _lookup(self, awaiting: set[str]) -> Callable[[Ref], Any]:
        def find(ref: Ref) -> Any:
            future = self._env.get(ref.var)
            if future is None:
                return UNDEFINED
            binding = future.result()
            if binding.awaiting:
                awaiting.add(ref.var)
            return (
                lookup(ref, {ref.var: binding.value})
                if binding.value is not UNDEFINED
                else UNDEFINED
            )

        return find

    def _conditional(self, step: ConditionalStep) -> None:
        awaiting: set[str] = set()
        result = evaluate(step.condition, self._lookup(awaiting))
        facts = tuple(result.facts)
        if awaiting & result.missing:
            reason = f"waits for input: {', '.join(sorted(awaiting))}"
            self._record(BranchRecord(step.id, None, "deferred", reason), facts)
            return
        branch = "true" if result.value is True else "false"
        if result.value is None:
            reason = f"unknown: no evidence for {', '.join(sorted(result.missing)) or 'an operand'}"
        else:
            reason = "; ".join(facts) or f"condition is {str(result.value).lower()}"
        self._record(BranchRecord(step.id, result.value, branch, reason), facts)
        self._walk(step.true_branch if branch == "true" else step.false_branch)

    def _ask(self, step: AskStep) -> None:
        awaiting: set[str] = set()
        find = self._lookup(awaiting)
        question, _ = render(step.question, find)
        choices = self._choices(step, find)
        answer: Any = UNDEFINED
        source: str | None = None
        if step.output_to in self.answers:
            answer, source = self.answers[step.output_to], "answers"
        elif step.id in self.answers:
            answer, source = self.answers[step.id], "answers"
        elif self.prompt is not None:
            try:
                answer, source = self.prompt(str(question), choices), "prompt"
            except EOFError:
                answer = UNDEFINED
        status = "answered"
        if answer is UNDEFINED or answer is None:
            status, answer = "pending", None
        elif choices is not None and answer not in choices:
            status = "rejected"
        record = QuestionRecord(
            step.id, step.output_to, str(question), status, choices, answer, source
        )
        facts = (
            (f"the user chose {step.output_to} = {shown(answer)}",) if status == "answered" else ()
        )
        self._record(record, facts)
        if status == "answered":
            self._env[step.output_to] = _bound(answer)
            return
        self._pending_questions += 1
        waiting: Future[_Binding] = Future()
        waiting.set_result(_Binding(UNDEFINED, f"waits for an answer to {step.id}", awaiting=True))
        self._env[step.output_to] = waiting

    def _choices(self, step: AskStep, find: Callable[[Ref], Any]) -> list[Any] | None:
        if step.choices is None:
            return None
        if isinstance(step.choices, str):
            ref = whole_ref(step.choices)
            value = find(ref) if ref else UNDEFINED
            return list(value) if isinstance(value, list) else None
        return list(step.choices)

    def _final(self, step: FinalActionStep) -> None:
        spec = resolve_action(step.action.function)
        assert spec is not None  # validated
        name = spec.name
        if self._pending_questions:
            self._record(
                ActionRecord(step.id, name, "deferred", reason="a question is not answered yet")
            )
            return
        facts: tuple[str, ...] = ()
        if step.condition is not None:
            awaiting: set[str] = set()
            result = evaluate(step.condition, self._lookup(awaiting))
            facts = tuple(result.facts)
            if result.value is not True:
                why = (
                    "the condition is false"
                    if result.value is False
                    else (f"no evidence for {', '.join(sorted(result.missing)) or 'the condition'}")
                )
                self._record(ActionRecord(step.id, name, "skipped", reason=why), facts)
                return
        args, missing = render(step.action.args, self._lookup(set()))
        if missing:
            why = f"{', '.join(sorted({m.text for m in missing}))} undefined"
            self._record(ActionRecord(step.id, name, "skipped", reason=why), facts)
            return
        self._commit(step, spec, args, facts)

    def _commit(
        self, step: FinalActionStep, spec: ActionSpec, args: Any, facts: tuple[str, ...]
    ) -> None:
        try:
            bound = bind(spec.params, args, spec.name)
            check_types(spec.params, bound, spec.name)
        except BindError as exc:
            self._record(ActionRecord(step.id, spec.name, "failed", reason=exc.message), facts)
            return
        findings = self.validation.commitment_findings(step.id)
        record = None if findings else self._held_back(step.id, spec, bound)
        if record is None:
            before: list[Any] = []
            committer = Committer(
                self.workspace,
                self._decider(step.id, spec, before) if self.policy is not None else None,
                self.policy,
                self.exec_sandbox,
                self.config,
                self._decision,
            )
            record = committer.commit(step.id, spec, bound, findings)
            if before:
                self._checkpoint_after(step.id)
        self._record(record, facts)
        self._emit("plan", {"event": "final_action", **record.to_dict()})

    def _held_back(self, step_id: str, spec: ActionSpec, args: Any) -> ActionRecord | None:
        """The refusal of a write or command in a plan whose lint flagged another action."""
        flagged = sorted({i.step_id for i in self.validation.refusals if i.step_id})
        if spec.effect == "none" or not flagged:
            return None
        why = (
            f"the commitment lint flagged final action(s) {', '.join(flagged)} of this plan: "
            "it cannot succeed as written, so none of its writes or commands run"
        )
        return ActionRecord(step_id, spec.name, "refused", args, reason=why)

    def _decider(
        self, step_id: str, spec: ActionSpec, before: list[Any]
    ) -> Callable[[ToolCall], Decision]:
        """``Guard.decide``; for an action that writes, a checkpoint once it is allowed.

        The checkpoint is taken before the first path is written (kept in ``before``); when
        none can be taken the action is denied, as the guard denies an agent's call.
        """
        checkpointed = spec.effect == "write" and (
            self.checkpoints is not None or self.lazy_checkpoints
        )

        def decide(call: ToolCall) -> Decision:
            decision = self._guard().decide(call)  # raising: the committer denies (fail closed)
            if not decision.allowed or not checkpointed or before:
                return decision
            try:
                cp = self._store().create(
                    session_id=self.session_id, tool_use_id=step_id, label=spec.name,
                    journal=False,
                )  # fmt: skip
            except Exception as exc:  # fail closed: no undo point, no write
                return Decision.deny(
                    "internal_error",
                    f"keel could not take a checkpoint before this action "
                    f"({type(exc).__name__}: {exc}); denied to be safe",
                    "Run `keel status` and check .keel/.",
                )
            before.append(cp)
            self._emit_checkpoint(cp)
            return decision

        return decide

    def _checkpoint_after(self, step_id: str) -> None:
        """The ``after`` checkpoint of an action that got a ``before`` one (or why it failed)."""
        try:
            cp = self._store().after_call(self.session_id, step_id, journal=False)
        except Exception as exc:  # the action ran; losing "after" must not lose its record
            detail = f"{type(exc).__name__}: {exc}"
            self._emit("error", {"event": "checkpoint.after_failed", "detail": detail})
            return
        self._emit_checkpoint(cp)

    def _store(self) -> CheckpointStore:
        if self.checkpoints is None:
            from keel.workspace import Checkpoints

            self.checkpoints = Checkpoints(self.workspace)
        return self.checkpoints

    def _emit_checkpoint(self, cp: Any) -> None:
        from keel.workspace.checkpoints import checkpoint_payload

        event = Event(
            "checkpoint", self.session_id, checkpoint_payload(cp), trace_id=self.trace_id,
            parent_span_id=self.root_span,
        )  # fmt: skip
        with self._lock:
            self._events.append(event)

    def _guard(self) -> Guard:
        """The plan session's guard: the stop, then the policy (the engine journals)."""
        from keel.guard import Guard

        return Guard(self.workspace, self.config, self.policy, self.session_id, "plan")  # pyright: ignore[reportArgumentType]

    # -- bookkeeping -----------------------------------------------------------------------

    def _record(self, record: Record, facts: tuple[str, ...] = ()) -> None:
        self._slots.append(record)
        self._facts_for[id(record)] = facts
        if isinstance(record, BranchRecord | QuestionRecord):
            self._emit(
                "plan",
                {
                    "event": "branch" if isinstance(record, BranchRecord) else "ask",
                    **record.to_dict(),
                },
            )

    def _settle(self, slot: Record | Future[ProbeRecord]) -> Record:
        return slot.result() if isinstance(slot, Future) else slot

    def _state(self, records: list[Record]) -> RunState:
        if self.validation.refusals:
            return "failed"  # the plan as written cannot commit: as `keel plan validate` says
        if self._pending_questions:
            return "needs_input"
        actions = [r for r in records if isinstance(r, ActionRecord)]
        if any(a.status in ("refused", "failed") for a in actions):
            return "failed"
        return "completed" if any(a.status == "done" for a in actions) else "failed"

    def _finish(self, goal: str, state: RunState, records: list[Record]) -> PlanReport:
        facts: list[str] = []
        for record in records:
            if isinstance(record, ProbeRecord) and record.status != "blocked":
                result = ProbeResult(
                    record.status == "ok", record.value, record.error, record.notes
                )
                facts.append(probe_fact(record.function, record.args, result, record.output_to))
            facts.extend(self._facts_for.get(id(record), ()))
        unique = tuple(dict.fromkeys(facts))
        refused = tuple(sorted({i.step_id for i in self.validation.refusals if i.step_id}))
        report = PlanReport(goal, state, self.runner.name, tuple(records), unique,
                            self.validation.issues, self.session_id, self.unsafe,
                            refused)  # fmt: skip
        self._emit("plan", {"event": "plan.end", "state": state, "facts": list(unique)})
        self._flush()
        return report

    def _emit(self, kind: EventKind, data: dict[str, Any]) -> None:
        event = Event(
            kind,
            self.session_id,
            DataPayload(data),
            trace_id=self.trace_id,
            parent_span_id=self.root_span,
        )
        with self._lock:
            self._events.append(event)

    def _emit_probe(self, record: ProbeRecord) -> None:
        payload = ProbePayload(
            step_id=record.step_id, function=record.function, args=record.args,
            ok=record.status == "ok", result=record.value,
            error=record.error.to_dict() if record.error else _blocked(record),
            sandbox=record.backend, duration_ms=record.duration_ms,
        )  # fmt: skip
        event = Event(
            "probe", self.session_id, payload, trace_id=self.trace_id, parent_span_id=self.root_span
        )
        with self._lock:
            self._events.append(event)

    def _decision(self, decision: Decision, subject: str) -> None:
        payload = DecisionPayload(
            decision.decision, decision.rule, decision.reason, decision.suggestion, subject=subject
        )
        event = Event(
            "decision",
            self.session_id,
            payload,
            trace_id=self.trace_id,
            parent_span_id=self.root_span,
        )
        with self._lock:
            self._events.append(event)
        self._flush()

    def _flush(self) -> None:
        """Append queued events; called from the walker's thread only (SQLite is per-thread)."""
        with self._lock:
            events, self._events = self._events, []
        if self.journal is not None:
            for event in events:
                self.journal.append(event)


def _why_missing(ref: Ref, snapshot: dict[str, _Binding]) -> str:
    binding = snapshot.get(ref.var)
    if binding is not None and binding.reason:
        return binding.reason
    return f"{{{{{ref.text}}}}} is undefined"


def _blocked(record: ProbeRecord) -> dict[str, Any] | None:
    if record.status != "blocked":
        return None
    return {"code": "probe.blocked", "message": record.reason}
