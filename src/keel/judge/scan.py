"""``keel monitor scan --judge``: the model judge over the runs of a recorded file.

For each run of a :class:`keel.monitor.scan.ScanReport`, the judge is asked at the steps
``[judge.when]`` schedules (:func:`keel.judge.due`): a step where the scan's own rule
diagnostics reach ``on_finding``, every ``every_n_steps``-th step, and the run's last step
(the finish, when ``on_finish``). Each time it sees the window of the run up to that step
(:func:`keel.judge.window_of`, with ``[[constraints]]`` pinned), as ``keel judge eval`` does.

A call that fails (a malformed answer, a refused or failed call) is recorded for its step
with its error code, never raised.

**Levels.** A deliverable judgement counts for ``--fail-on`` at a ladder level:
``drift`` is a ``hint`` (advice to get back to the task); ``gaming``, ``hijack`` and
``false_success`` are ``correct`` (the live hook would deny the call with a correction).
A judgement that is not deliverable (clear, below threshold, category off) has no level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keel.core.decision import GUIDANCE_RANK
from keel.core.errors import ModelError
from keel.core.judged import LEVELS
from keel.guard.judging import due as triggers_of
from keel.judge._window import window_of

if TYPE_CHECKING:
    from keel.core.decision import GuidanceLevel
    from keel.core.schema import JudgeWhen
    from keel.judge._judge import Judge, Judgement
    from keel.monitor.scan import RunScan, ScanReport


@dataclass(frozen=True, slots=True)
class StepJudgement:
    """The judge's answer at one scheduled step of a run."""

    step: int
    triggers: tuple[str, ...]
    """Why the step was judged: ``finding``, ``every_n_steps``, ``finish``."""
    judgement: Judgement | None
    """None when the call failed (``error``)."""
    error: str | None
    """The error's code (``judge.malformed``, ``model.budget``...)."""
    message: str | None
    """The error's message."""

    @property
    def level(self) -> GuidanceLevel | None:
        """The ladder level of a deliverable judgement (:data:`LEVELS`), else None."""
        j = self.judgement
        if j is None or not j.deliverable or j.verdict.category is None:
            return None
        return LEVELS.get(j.verdict.category)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        j = self.judgement
        return {
            "step": self.step,
            "triggers": list(self.triggers),
            "status": j.status if j else "error",
            "deliverable": bool(j and j.deliverable),
            "level": self.level,
            "verdict": j.verdict.to_dict() if j else None,
            "cached": j.cached if j else False,
            "cost_usd": j.cost_usd if j else None,
            "error": self.error,
            "message": self.message,
        }


def schedule(run: RunScan, when: JudgeWhen) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """The steps ``[judge.when]`` schedules in ``run``, each with its triggers."""
    highest: dict[int, GuidanceLevel] = {}
    for d in run.diagnostics:
        if d.step not in highest or GUIDANCE_RANK[d.level] > GUIDANCE_RANK[highest[d.step]]:
            highest[d.step] = d.level
    planned: list[tuple[int, tuple[str, ...]]] = []
    for step in range(min(1, run.steps), run.steps + 1):
        fired = triggers_of(when, step=step, finding=highest.get(step), finishing=step == run.steps)
        if fired:
            planned.append((step, fired))
    return tuple(planned)


def judge_run(
    run: RunScan,
    judge: Judge,
    when: JudgeWhen,
    *,
    window_steps: int = 12,
    constraints: Sequence[str] = (),
) -> tuple[StepJudgement, ...]:
    """Judge ``run`` at its scheduled steps; a failed call is recorded, never raised."""
    found: list[StepJudgement] = []
    for step, triggers in schedule(run, when):
        window = window_of(run.recorded, upto=step, last=window_steps, constraints=constraints)
        try:
            judgement = judge.judge(window)
        except ModelError as exc:
            found.append(StepJudgement(step, triggers, None, exc.code, exc.message))
            continue
        found.append(StepJudgement(step, triggers, judgement, None, None))
    return tuple(found)


def judge_report(
    report: ScanReport,
    judge: Judge,
    when: JudgeWhen,
    *,
    window_steps: int = 12,
    constraints: Sequence[str] = (),
) -> tuple[tuple[StepJudgement, ...], ...]:
    """The judgements of every run of ``report``, in the order of its runs."""
    return tuple(
        judge_run(run, judge, when, window_steps=window_steps, constraints=constraints)
        for run in report.runs
    )


def render_judgements(
    report: ScanReport, judgements: Sequence[Sequence[StepJudgement]], model: str
) -> str:
    """The judgements as plain text, one block per run, after the rule diagnostics."""
    total = sum(len(j) for j in judgements)
    lines = [f"judge {model}: {total} judgement{'s' if total != 1 else ''}"]
    for run, found in zip(report.runs, judgements, strict=True):
        lines.append(f"session {run.session_id}:")
        for s in found:
            why = ",".join(s.triggers)
            j = s.judgement
            if j is None:
                lines.append(f"  step {s.step:>4}  error {s.error}  ({why})  {s.message}")
                continue
            v = j.verdict
            level = f" -> {s.level}" if s.level else ""
            lines.append(
                f"  step {s.step:>4}  {v.category or 'none':<13} {v.confidence:.2f}  "
                f"{v.verdict:<7}  {j.status}{level}  ({why})"
            )
            if v.suggestion:
                lines.append(f"             suggestion: {v.suggestion}")
        if not found:
            lines.append("  nothing scheduled")
    return "\n".join(lines) + "\n"


def at_or_above(
    judgements: Sequence[Sequence[StepJudgement]], level: GuidanceLevel
) -> tuple[StepJudgement, ...]:
    """The deliverable judgements whose level is ``level`` or higher on the ladder."""
    floor = GUIDANCE_RANK[level]
    return tuple(
        s
        for found in judgements
        for s in found
        if s.level is not None and GUIDANCE_RANK[s.level] >= floor
    )
