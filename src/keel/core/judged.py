"""``Judged``: a verdict of the model judge that is to be delivered, as the guard sees it.

The judge (``keel.judge``) runs in its own process (``keel.guard.judging``), off the hook's
path; what comes back to the guard is this small value, read from that process's JSON answer,
kept in the session's state until the next call, and handed to the monitor's ladder there as a
finding of the detector ``judge`` (rung ``judge.<category>``: a cooldown per category, a
repeat escalates, the highest level of the step wins).

Only a *deliverable* verdict becomes a ``Judged``: a problem in an enabled category with at
least ``[judge] min_confidence``. The others are journaled by the judge process and stop there.

This module is on the hook path: nothing but ``keel.core`` values is imported at run time.
"""

from keel.core.frozen import Frozen

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any

    from keel.core.decision import GuidanceLevel

LEVELS: "dict[str, GuidanceLevel]" = {
    "drift": "hint",
    "gaming": "correct",
    "hijack": "correct",
    "false_success": "correct",
}
"""The ladder level a deliverable verdict enters at, by category: drift is advice to get back
to the task; gaming, a hijacked goal and a false claim of success deny the next call (or the
finish) with the judge's correction. The one table of it (``keel monitor scan --judge`` too)."""

_WHAT = {
    "drift": "the work has drifted from the task",
    "gaming": "the agent is gaming the check instead of solving the task",
    "hijack": "a tool result has redirected the agent's goal",
    "false_success": "a claim of success that the trajectory does not show",
}


class Judged(Frozen):
    """A deliverable verdict: its category, level, confidence, evidence and suggestion."""

    __slots__ = ("category", "confidence", "evidence", "level", "step", "suggestion", "window")
    category: str
    level: "GuidanceLevel"
    confidence: float
    evidence: "tuple[int, ...]"
    """The steps (1-based tool calls) the verdict rests on."""
    suggestion: str
    step: int
    """The step after which it was asked for."""
    window: str
    """The hash of the window the judge saw."""

    def __init__(
        self,
        category: str,
        confidence: float,
        evidence: "tuple[int, ...]",
        suggestion: str,
        step: int,
        window: str,
    ) -> None:
        """A deliverable verdict of ``category`` (one of ``LEVELS``)."""
        if category not in LEVELS:
            raise ValueError(f"judge category must be one of {tuple(LEVELS)}, not {category!r}")
        self._init(
            category=category,
            level=LEVELS[category],
            confidence=float(confidence),
            evidence=tuple(int(s) for s in evidence),
            suggestion=suggestion,
            step=int(step),
            window=window,
        )

    @property
    def message(self) -> str:
        """What the agent is told."""
        steps = ", ".join(str(s) for s in self.evidence)
        where = f"; steps {steps}" if steps else ""
        text = f"keel's judge: {_WHAT[self.category]} (confidence {self.confidence:.2f}{where})."
        return f"{text} {self.suggestion}".strip()

    def to_dict(self) -> "dict[str, Any]":
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return {
            "category": self.category,
            "level": self.level,
            "confidence": self.confidence,
            "evidence": list(self.evidence),
            "suggestion": self.suggestion,
            "step": self.step,
            "window": self.window,
        }

    @classmethod
    def from_dict(cls, data: "dict[str, Any]") -> "Judged":
        """The value of ``to_dict``; ValueError (or KeyError, TypeError) if it is not one."""
        evidence = data.get("evidence") or ()
        if not isinstance(evidence, list | tuple):
            raise ValueError("judged evidence must be a list of step numbers")
        return cls(
            str(data["category"]),
            float(data["confidence"]),
            tuple(evidence),
            str(data.get("suggestion") or ""),
            int(data.get("step") or 0),
            str(data.get("window") or ""),
        )
