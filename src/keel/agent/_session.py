"""Starting, resuming and ending a run: the guard, the model client, the journal records.

A run is one journal session (``run-<hex>``). It starts with a checkpoint of the whole
workspace (so ``keel rollback --session ID`` undoes it all) and a ``session.start`` record
(the task, the model, the step limit); every phase change is a ``plan`` event
``agent.phase``; it ends with ``session.end``: ``agent.end`` with the outcome, or
``agent.suspended`` with everything ``--resume`` needs when it waits for the user's answer.
With ``[export] otlp_endpoint`` set, the run's events are pushed as OpenTelemetry spans while it
runs (``keel.journal.push``: read back from the journal on a thread of its own).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.agent._loop import EXIT_CODES, Agent, AgentState, Ended, Outcome, View
from keel.agent._phases import PhaseRules, Phases, Transition
from keel.config import KeelConfig, config_for
from keel.core.errors import UsageError
from keel.core.events import DataPayload
from keel.guard import Guard
from keel.journal.push import LivePush, push_session
from keel.models import Model, client_for, open_model

START_LABEL = "keel run: start"
PUSH_POLL = 1.0
"""Seconds between two looks of the live push (``[export]``) for the run's new events."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run: the model, limits, and how to reach the user."""

    model: str | None = None
    base_url: str | None = None
    max_steps: int | None = None
    ask: Callable[[str], str | None] | None = None
    """Asks the user a question (None: non-interactive, the run suspends with exit 3)."""
    view: View | None = None
    judge_model: str | None = None
    """A model spec for the judge instead of ``[judge] model`` (``keel replay`` serves the
    recording's judgements: ``replay:SESSION@ROOT``)."""


@dataclass(slots=True)
class RunResult:
    """How a run ended, and what it did."""

    session_id: str
    outcome: Outcome
    reason: str
    question: str | None = None
    steps: int = 0
    tool_calls: int = 0
    model_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = 0.0
    gates: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    files_changed: list[str] = field(default_factory=list[str])
    phases: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    answered_by: str = "model"
    """``model``, or ``rule`` when a rule answered before any model call."""
    output: str = ""
    """What a rule printed (the tests' output, the diff)."""

    @property
    def exit_code(self) -> int:
        """0 finished with the gates passed, 3 needs input, 1 otherwise."""
        return EXIT_CODES[self.outcome]

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object."""
        return {
            "session_id": self.session_id,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "question": self.question,
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "model_calls": self.model_calls,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "gates": self.gates,
            "files_changed": self.files_changed,
            "phases": self.phases,
            "answered_by": self.answered_by,
            "output": self.output,
            "rollback": f"keel rollback --session {self.session_id}",
        }


def agent_config(root: Path) -> KeelConfig:
    """keel.toml for a run: ``run_plan`` counts as stating a plan for the monitor."""
    config = config_for(root)
    tools = [*config.monitor.planning_tools, "run_plan"]
    return config.replace(monitor=config.monitor.replace(planning_tools=tools))


def open_guard(
    root: Path, config: KeelConfig, session_id: str, phases: Phases, judge_model: str | None = None
) -> Guard:
    """The run's guard: keel's one decision path, with the phase rules before the policy.

    With ``[judge] model`` set, the judge runs beside the loop (``keel.guard.judging``): a
    judgement asked for after a call runs while the model writes its next turn, and its
    verdict is delivered with the next call (``settle``: waited for, so a replay finds it at
    the same step).
    """
    from keel.guard.judging import SubprocessJudging

    rules = (PhaseRules(phases),)
    judging = SubprocessJudging(root, background=True, settle=True, model=judge_model)
    return Guard.open(
        root, session_id=session_id, agent="keel", config=config, pre_rules=rules,
        judging=judging,
    )  # fmt: skip


def live_push(root: Path, config: KeelConfig, session_id: str) -> LivePush | None:
    """The run's traces pushed while it runs (``[export] otlp_endpoint``); None: not set.

    Off the loop's path: a thread reads the journaled events every ``PUSH_POLL`` seconds and
    the SDK's batch thread sends them; ``close()`` sends the rest when the run ends. A failure
    is journaled, never raised.
    """
    return push_session(root, config.export, session_id, poll=PUSH_POLL)


def new_session_id() -> str:
    """A fresh run session id."""
    return f"run-{uuid.uuid4().hex[:12]}"


def start(
    root: Path,
    task: str,
    options: RunOptions,
    *,
    model: Model | None = None,
    session_id: str | None = None,
    answers: list[str] | None = None,
    command_prefix: tuple[str, ...] = (),
) -> RunResult:
    """Run ``task`` in ``root`` from the beginning."""
    config = agent_config(root)
    session = session_id or new_session_id()
    phases = Phases(require_plan=config.agent.require_plan)
    max_steps = options.max_steps or config.agent.max_steps
    chosen = model or open_model(
        options.model, config.model, base_url=options.base_url, workspace=root
    )
    guard = open_guard(root, config, session, phases, options.judge_model)
    push = live_push(root, config, session)
    try:
        guard.checkpointer().create(session_id=session, label=START_LABEL)
        guard.note(
            "session.start",
            {
                "event": "agent.start",
                "task": task,
                "model": chosen.info.name,
                "max_steps": max_steps,
            },
        )
        client = client_for(chosen, config.model, session_id=session, journal=guard.journal)
        agent = Agent(
            root,
            config,
            guard,
            client,
            phases,
            AgentState(task),
            max_steps=max_steps,
            ask=options.ask,
            answers=answers,
            command_prefix=command_prefix,
            view=options.view,
        )
        return _finish(root, agent, agent.run())
    finally:
        guard.close()
        if push is not None:
            push.close()


def resume(root: Path, session_id: str, answer: str, options: RunOptions) -> RunResult:
    """Continue a run that asked the user a question, with the user's ``answer``.

    Raises:
        UsageError: the session is not waiting for an answer (``usage.resume``).
    """
    config = agent_config(root)
    record, start_record = suspended(root, session_id)
    phases = Phases(require_plan=bool(record.get("require_plan", True)))
    for item in record.get("history") or ():
        phases.history.append(Transition(int(item["step"]), item["from"], item["to"], item["why"]))
    state = AgentState.from_dict(record["state"])
    phases.phase = state.phase  # pyright: ignore[reportAttributeAccessIssue]
    max_steps = options.max_steps or int(start_record.get("max_steps") or config.agent.max_steps)
    model = open_model(
        options.model or str(start_record.get("model") or "") or None,
        config.model,
        base_url=options.base_url,
        workspace=root,
    )
    guard = open_guard(root, config, session_id, phases, options.judge_model)
    push = live_push(root, config, session_id)
    try:
        guard.note("session.start", {"event": "agent.resume"})
        client = client_for(model, config.model, session_id=session_id, journal=guard.journal)
        agent = Agent(
            root,
            config,
            guard,
            client,
            phases,
            state,
            max_steps=max_steps,
            ask=options.ask,
            view=options.view,
        )
        agent.answer(answer)
        return _finish(root, agent, agent.run())
    finally:
        guard.close()
        if push is not None:
            push.close()


def suspended(root: Path, session_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The suspension record of a run waiting for an answer, and its start record."""
    from keel.journal import open_journal

    with open_journal(root) as journal:
        events = list(journal.events(session_id=session_id, kinds=("session.start", "session.end")))
    starts = [_data(e.payload) for e in events if _data(e.payload).get("event") == "agent.start"]
    marks = [
        _data(e.payload)
        for e in events
        if _data(e.payload).get("event") in ("agent.suspended", "agent.end", "agent.resume")
    ]
    if not starts or not marks or marks[-1].get("event") != "agent.suspended":
        raise UsageError(
            f"session {session_id!r} is not a keel run waiting for an answer",
            code="usage.resume",
        )
    return marks[-1], starts[0]


def _data(payload: Any) -> dict[str, Any]:
    return payload.data if isinstance(payload, DataPayload) else {}


def _finish(root: Path, agent: Agent, ended: Ended) -> RunResult:
    guard = agent.guard
    if ended.outcome == "needs_input":
        guard.note("session.end", {**agent.suspend_record(), "question": ended.question})
    else:
        guard.note(
            "session.end", {"event": "agent.end", "outcome": ended.outcome, "reason": ended.reason}
        )
    agent.view.close()
    spend = agent.client.spend
    return RunResult(
        guard.session_id,
        ended.outcome,
        ended.reason,
        ended.question,
        agent.state.step,
        agent.state.tool_calls,
        spend.calls,
        spend.tokens,
        spend.cost_usd,
        agent.state.gates,
        files_changed(root, guard.session_id),
        [t.to_dict() for t in agent.phases.history],
    )


def files_changed(root: Path, session_id: str) -> list[str]:
    """What changed since the session's first checkpoint (as ``keel diff --session``)."""
    from keel.core.errors import KeelError
    from keel.workspace import Checkpoints

    try:
        cps = Checkpoints(root)
        return [c.path for c in cps.diff(cps.resolve(session_id=session_id), patch=False).changes]
    except KeelError:
        return []
