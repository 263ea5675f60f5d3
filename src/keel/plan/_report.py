"""The evidence report: what was checked, what was found, which branches ran, what committed.

``facts`` is the list of verified sentences a later code-generation step receives instead of
assumptions ("data/input.csv exists", "data/input.csv has columns [...]", "'sales' is not
among [...]").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from keel.plan._facts import shown
from keel.plan._validate import Issue
from keel.probes import ProbeIssue

RunState = Literal["completed", "needs_input", "failed", "invalid"]
ProbeStatus = Literal["ok", "error", "blocked"]
Branch = Literal["true", "false", "deferred"]
QuestionStatus = Literal["answered", "pending", "rejected"]
ActionStatus = Literal["done", "refused", "failed", "skipped", "deferred"]


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One evidence step as it ran."""

    step_id: str
    function: str
    output_to: str
    args: dict[str, Any]
    status: ProbeStatus
    value: Any = None
    error: ProbeIssue | None = None
    notes: tuple[str, ...] = ()
    duration_ms: float | None = None
    backend: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "step_id": self.step_id,
            "function": self.function,
            "output_to": self.output_to,
            "args": self.args,
            "status": self.status,
            "value": self.value,
            "error": self.error.to_dict() if self.error else None,
            "notes": list(self.notes),
            "duration_ms": self.duration_ms,
            "backend": self.backend,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class BranchRecord:
    """A conditional: its value and the branch taken."""

    step_id: str
    value: bool | None
    branch: Branch
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "step_id": self.step_id,
            "value": self.value,
            "branch": self.branch,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """An ask step: the question as shown, and the answer if there is one."""

    step_id: str
    output_to: str
    question: str
    status: QuestionStatus
    choices: list[Any] | None = None
    answer: Any = None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "step_id": self.step_id,
            "output_to": self.output_to,
            "question": self.question,
            "status": self.status,
            "choices": self.choices,
            "answer": self.answer,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """A final action: done, refused (and why), failed, skipped or deferred."""

    step_id: str
    function: str
    status: ActionStatus
    args: dict[str, Any] = field(default_factory=dict[str, Any])
    output: str | None = None
    reason: str | None = None
    decision: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "step_id": self.step_id,
            "function": self.function,
            "status": self.status,
            "args": self.args,
            "output": self.output,
            "reason": self.reason,
            "decision": self.decision,
        }


Record = ProbeRecord | BranchRecord | QuestionRecord | ActionRecord


@dataclass(frozen=True, slots=True)
class PlanReport:
    """Everything a plan run found and did."""

    goal: str
    state: RunState
    sandbox: str | None
    records: tuple[Record, ...] = ()
    facts: tuple[str, ...] = ()
    issues: tuple[Issue, ...] = ()
    session_id: str | None = None
    unsafe: bool = False
    refused: tuple[str, ...] = ()
    """Final actions the commitment lint flagged: the run fails, whether it reached them or not."""

    @property
    def probes(self) -> tuple[ProbeRecord, ...]:
        """The evidence steps, in plan order."""
        return tuple(r for r in self.records if isinstance(r, ProbeRecord))

    @property
    def branches(self) -> tuple[BranchRecord, ...]:
        """The conditionals, in plan order."""
        return tuple(r for r in self.records if isinstance(r, BranchRecord))

    @property
    def questions(self) -> tuple[QuestionRecord, ...]:
        """The ask steps reached."""
        return tuple(r for r in self.records if isinstance(r, QuestionRecord))

    @property
    def actions(self) -> tuple[ActionRecord, ...]:
        """The final actions reached."""
        return tuple(r for r in self.records if isinstance(r, ActionRecord))

    @property
    def exit_code(self) -> int:
        """0 when a final action ran, 3 when input is needed, 1 otherwise."""
        return {"completed": 0, "needs_input": 3}.get(self.state, 1)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (``keel plan run --json``)."""
        return {
            "goal": self.goal,
            "state": self.state,
            "exit_code": self.exit_code,
            "sandbox": self.sandbox,
            "unsafe": self.unsafe,
            "session_id": self.session_id,
            "probes": [r.to_dict() for r in self.probes],
            "branches": [r.to_dict() for r in self.branches],
            "questions": [r.to_dict() for r in self.questions],
            "actions": [r.to_dict() for r in self.actions],
            "facts": list(self.facts),
            "issues": [i.to_dict() for i in self.issues],
            "refused": list(self.refused),
        }


def render_text(report: PlanReport) -> str:
    """The report for people: checks, branches, questions, actions, facts, state."""
    lines = [
        f"Plan: {report.goal}",
        f"Sandbox: {report.sandbox or '-'}{'  (UNSAFE: no isolation)' if report.unsafe else ''}",
    ]
    if report.issues:
        lines.append("Validation:")
        lines += [f"  {i.describe()}" for i in report.issues]
    lines.append("Checked:")
    for record in report.records:
        lines += _record_lines(record)
    if report.facts:
        lines.append("Verified facts:")
        lines += [f"  - {f}" for f in report.facts]
    pending = [q for q in report.questions if q.status != "answered"]
    if pending:
        lines.append("Input needed:")
        lines += [f"  {q.output_to}: {q.question}" for q in pending]
    if report.refused:
        lines.append(
            f"Refused by the commitment lint: {', '.join(report.refused)} (the plan cannot "
            "succeed as written; guard those final actions with conditions over evidence)"
        )
    lines.append(f"State: {report.state} (exit {report.exit_code})")
    return "\n".join(lines)


def _record_lines(record: Record) -> list[str]:
    match record:
        case ProbeRecord():
            args = ", ".join(shown(v) for v in record.args.values())
            head = f"  [{record.step_id}] {record.function}({args})"
            if record.status == "ok":
                out = [f"{head} -> {shown(record.value)}"]
            elif record.status == "error" and record.error:
                out = [f"{head} -> error: {record.error.describe()}"]
            else:
                out = [f"{head} -> not run: {record.reason}"]
            return out + [f"      note: {n}" for n in record.notes]
        case BranchRecord():
            value = _tri(record.value)
            return [
                f"  [{record.step_id}] condition is {value} -> {record.branch} ({record.reason})"
            ]
        case QuestionRecord():
            tail = (
                f"answered {shown(record.answer)} ({record.source})"
                if record.status == "answered"
                else record.status
            )
            return [f"  [{record.step_id}] ask {record.output_to}: {record.question} -> {tail}"]
        case ActionRecord():
            detail = record.output if record.status == "done" else record.reason
            tail = f" - {detail}" if detail else ""
            return [f"  [{record.step_id}] final {record.function}: {record.status}{tail}"]


def _tri(value: bool | None) -> str:
    return "unknown" if value is None else str(value).lower()
