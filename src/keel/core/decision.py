"""Decisions and guidance: closed sets with named constructors.

``Decision`` is what the guard answers for a tool call: ``allow``, ``ask`` or ``deny``, always
with the id of the rule that decided, a reason a person can read and, where there is one, a
suggestion of what to do instead. ``Guidance`` is what the monitor tells the agent, at one of
four levels (``GUIDANCE_LEVELS``, mildest first).

This module is on the hook path: nothing but ``keel.core.frozen`` is imported at run time.
"""

from __future__ import annotations

from keel.core.frozen import Frozen

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any, Literal

    Verdict = Literal["allow", "ask", "deny"]
    GuidanceLevel = Literal["hint", "correct", "replan", "stop"]
else:  # run-time stand-ins, so that modules may import the names; the checker sees Literals
    Verdict = GuidanceLevel = str

VERDICTS: tuple[Verdict, ...] = ("allow", "ask", "deny")
GUIDANCE_LEVELS: tuple[GuidanceLevel, ...] = ("hint", "correct", "replan", "stop")
"""The guidance ladder, mildest first; the one definition of the levels."""
GUIDANCE_RANK: dict[str, int] = {level: i for i, level in enumerate(GUIDANCE_LEVELS)}


class Decision(Frozen):
    """The answer for one tool call, command, path or URL."""

    __slots__ = ("decision", "reason", "rule", "suggestion")
    decision: Verdict
    rule: str
    reason: str
    suggestion: str | None

    def __init__(
        self, decision: Verdict, rule: str, reason: str, suggestion: str | None = None
    ) -> None:
        """A decision; prefer the named constructors ``allow``, ``ask`` and ``deny``."""
        if decision not in VERDICTS:
            raise ValueError(f"decision must be one of {VERDICTS}, not {decision!r}")
        self._init(decision=decision, rule=rule, reason=reason, suggestion=suggestion)

    @classmethod
    def allow(cls, rule: str, reason: str) -> Decision:
        """An allow, naming the rule that allowed it."""
        return cls("allow", rule, reason, None)

    @classmethod
    def ask(cls, rule: str, reason: str, suggestion: str | None = None) -> Decision:
        """Ask the user; clients that cannot ask treat this as deny."""
        return cls("ask", rule, reason, suggestion)

    @classmethod
    def deny(cls, rule: str, reason: str, suggestion: str | None = None) -> Decision:
        """A deny, with the rule, the reason and what to do instead."""
        return cls("deny", rule, reason, suggestion)

    @property
    def allowed(self) -> bool:
        """True only for ``allow``."""
        return self.decision == "allow"

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: exactly decision, rule, reason, suggestion."""
        return {
            "decision": self.decision,
            "rule": self.rule,
            "reason": self.reason,
            "suggestion": self.suggestion,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        """The inverse of :meth:`to_dict`; a ``ValueError`` for anything else."""
        try:
            return cls(data["decision"], data["rule"], data["reason"], data.get("suggestion"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a decision: {data!r}") from exc


class Guidance(Frozen):
    """What the monitor tells the agent: a level, a message and the detector behind it."""

    __slots__ = ("detector", "evidence", "level", "message")
    level: GuidanceLevel
    message: str
    detector: str
    evidence: dict[str, Any] | None

    def __init__(
        self,
        level: GuidanceLevel,
        message: str,
        detector: str,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        """Guidance at ``level`` (one of ``GUIDANCE_LEVELS``)."""
        if level not in GUIDANCE_RANK:
            raise ValueError(f"guidance level must be one of {GUIDANCE_LEVELS}, not {level!r}")
        self._init(level=level, message=message, detector=detector, evidence=evidence)

    def __hash__(self) -> int:
        """Hashable even with evidence (a dict): by level, message and detector."""
        return hash((self.level, self.message, self.detector))

    @property
    def rank(self) -> int:
        """0 for hint up to 3 for stop."""
        return GUIDANCE_RANK[self.level]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "level": self.level,
            "message": self.message,
            "detector": self.detector,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Guidance:
        """The inverse of :meth:`to_dict`; a ``ValueError`` for anything else."""
        try:
            return cls(data["level"], data["message"], data["detector"], data.get("evidence"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not guidance: {data!r}") from exc
