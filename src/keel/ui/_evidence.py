"""The evidence tree of a plan run, rebuilt from its journal events.

A run is journaled as a ``plan`` event ``plan.start`` (with the plan itself), one ``probe``
event per evidence step, ``plan`` events for each branch taken, question asked and final
action, and ``plan.end`` with the verified facts. The tree follows the plan's own steps:
each evidence step shows what its probe found and the fact it established (the sentence
``keel plan run`` reports, from ``keel.plan.probe_fact``), each conditional the branch it took
and why, each final action whether it ran; steps the run never reached say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from keel.core.events import DataPayload, Event, ProbePayload
from keel.journal.timeline import describe

NOT_REACHED = "not reached"


@dataclass(frozen=True, slots=True)
class EvidenceBranch:
    """One branch of a conditional step: its steps, and whether the run took it."""

    label: str
    taken: bool
    steps: tuple[EvidenceNode, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "label": self.label,
            "taken": self.taken,
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(frozen=True, slots=True)
class EvidenceNode:
    """One step of a plan and what became of it."""

    step_id: str
    type: str
    description: str
    status: str
    """The probe's (ok, error, blocked), the branch (true, false, deferred), the action's
    (done, refused, failed, skipped, deferred), the question's, or ``not reached``."""
    summary: str
    fact: str | None = None
    detail: str | None = None
    branches: tuple[EvidenceBranch, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "step_id": self.step_id,
            "type": self.type,
            "description": self.description,
            "status": self.status,
            "summary": self.summary,
            "fact": self.fact,
            "detail": self.detail,
            "branches": [b.to_dict() for b in self.branches],
        }


@dataclass(frozen=True, slots=True)
class PlanEvidence:
    """One plan run: its goal, outcome, verified facts and step tree."""

    seq: int
    goal: str
    state: str | None
    """``completed``, ``needs_input``, ``failed``, ``invalid``; None while it runs."""
    facts: tuple[str, ...]
    issues: tuple[str, ...]
    steps: tuple[EvidenceNode, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "seq": self.seq,
            "goal": self.goal,
            "state": self.state,
            "facts": list(self.facts),
            "issues": list(self.issues),
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(slots=True)
class _Run:
    """What the events of one run said, by step id, while they are read."""

    seq: int
    start: dict[str, Any]
    state: str | None = None
    facts: tuple[str, ...] = ()
    probes: dict[str, Event] = field(default_factory=dict[str, Event])
    records: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])

    def note(self, data: dict[str, Any]) -> None:
        if data.get("event") == "plan.end":
            self.state = str(data.get("state"))
            self.facts = tuple(str(f) for f in data.get("facts") or [])
        elif data.get("event") in ("branch", "ask", "final_action"):
            self.records[str(data.get("step_id"))] = data

    def evidence(self) -> PlanEvidence:
        plan = self.start.get("plan")
        steps = plan.get("steps") if isinstance(plan, dict) else None
        issues = tuple(
            f"{i.get('severity', '')} {i.get('code', '')} at {i.get('path', '')}: "
            f"{i.get('message', '')}"
            for i in self.start.get("issues") or []
            if isinstance(i, dict)
        )
        return PlanEvidence(
            seq=self.seq,
            goal=str(self.start.get("goal") or ""),
            state=self.state,
            facts=self.facts,
            issues=issues,
            steps=self._nodes(steps if isinstance(steps, list) else []),
        )

    def _nodes(self, steps: list[Any]) -> tuple[EvidenceNode, ...]:
        return tuple(self._node(s) for s in steps if isinstance(s, dict))

    def _node(self, step: dict[str, Any]) -> EvidenceNode:
        step_id, kind = str(step.get("id", "")), str(step.get("type", ""))
        head = EvidenceNode(step_id, kind, str(step.get("description") or ""), NOT_REACHED, "")
        if kind == "evidence_collection":
            return _probe_node(head, step, self.probes.get(step_id))
        record = self.records.get(step_id)
        if kind == "conditional":
            return self._conditional(head, step, record)
        if kind == "ask":
            question = str(step.get("question") or "")
            if record is None:
                return replace(head, summary=question)
            answer = record.get("answer")
            detail = None if answer is None else f"answer: {_shown(answer)}"
            return replace(head, status=str(record.get("status")), summary=question, detail=detail)
        return _action_node(head, step, record)

    def _conditional(
        self, head: EvidenceNode, step: dict[str, Any], record: dict[str, Any] | None
    ) -> EvidenceNode:
        taken = str(record.get("branch")) if record else None
        branches = (
            EvidenceBranch("if true", taken == "true", self._nodes(step.get("true_branch") or [])),
            EvidenceBranch(
                "if false", taken == "false", self._nodes(step.get("false_branch") or [])
            ),
        )
        summary = f"condition {_shown(step.get('condition'))}"
        if record is None:
            return replace(head, summary=summary, branches=branches)
        reason = str(record.get("reason") or "")
        return replace(head, status=taken or "", summary=summary, detail=reason,
                        branches=branches)  # fmt: skip


def is_plan_start(event: Event) -> bool:
    """True for the event that opens a plan run."""
    payload = event.payload
    return (
        event.kind == "plan"
        and isinstance(payload, DataPayload)
        and payload.data.get("event") == "plan.start"
    )


def plan_evidence(events: Iterable[Event]) -> list[PlanEvidence]:
    """Every plan run in ``events`` (one session's, in journal order), oldest first."""
    runs: list[_Run] = []
    for event in events:
        payload = event.payload
        if isinstance(payload, ProbePayload) and runs:
            runs[-1].probes[payload.step_id] = event
        elif event.kind == "plan" and isinstance(payload, DataPayload):
            if is_plan_start(event):
                runs.append(_Run(event.seq, payload.data))
            elif runs:
                runs[-1].note(payload.data)
    return [run.evidence() for run in runs]


def _probe_node(head: EvidenceNode, step: dict[str, Any], event: Event | None) -> EvidenceNode:
    action = _mapping(step.get("action"))
    if event is None or not isinstance(event.payload, ProbePayload):
        return replace(head, summary=_call(action))
    payload = event.payload
    status = "ok" if payload.ok else _failure(payload.error)
    fact = _fact(payload, str(step.get("output_to") or "")) if status != "blocked" else None
    reason = (payload.error or {}).get("message") if status == "blocked" else None
    summary = describe(event).removeprefix(f"step {payload.step_id}: ")
    return replace(head, status=status, summary=summary, fact=fact, detail=reason)


def _action_node(
    head: EvidenceNode, step: dict[str, Any], record: dict[str, Any] | None
) -> EvidenceNode:
    action = _mapping(step.get("action"))
    if record is None:
        return replace(head, summary=_call(action))
    detail = record.get("output") or record.get("reason")
    summary = f"{record.get('function', '')}({_shown(record.get('args') or {})})"
    return replace(head, status=str(record.get("status")), summary=summary,
                    detail=None if detail is None else str(detail))  # fmt: skip


def _fact(payload: ProbePayload, output_to: str) -> str:
    from keel.plan import probe_fact
    from keel.probes import ProbeIssue, ProbeResult

    issue = ProbeIssue.from_dict(payload.error) if payload.error else None
    result = ProbeResult(payload.ok, payload.result, issue)
    return probe_fact(payload.function, payload.args, result, output_to)


def _failure(error: dict[str, Any] | None) -> str:
    return "blocked" if error and error.get("code") == "probe.blocked" else "error"


def _call(action: dict[str, Any]) -> str:
    return f"{action.get('function', '?')}({_shown(action.get('args') or [])})"


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
