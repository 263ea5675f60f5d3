"""Decisions and guidance: closed sets with named constructors.

``Decision`` is what the guard answers for a tool call: ``allow``, ``ask`` or ``deny``, always
with the id of the rule that decided, a reason a person can read and, where there is one, a
suggestion of what to do instead. ``strictest`` combines several: deny beats ask beats allow.

This module is on the hook path: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Verdict = Literal["allow", "ask", "deny"]
GuidanceLevel = Literal["hint", "correct", "replan", "stop"]

_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
GUIDANCE_RANK: dict[str, int] = {"hint": 0, "correct": 1, "replan": 2, "stop": 3}


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one tool call, command, path or URL."""

    decision: Verdict
    rule: str
    reason: str
    suggestion: str | None = None

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

    @property
    def rank(self) -> int:
        """0 for allow, 1 for ask, 2 for deny."""
        return _RANK[self.decision]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: exactly decision, rule, reason, suggestion."""
        return {
            "decision": self.decision,
            "rule": self.rule,
            "reason": self.reason,
            "suggestion": self.suggestion,
        }


def strictest(decisions: list[Decision] | tuple[Decision, ...]) -> Decision | None:
    """The strictest of several decisions (deny > ask > allow); the first wins a tie."""
    best: Decision | None = None
    for d in decisions:
        if best is None or d.rank > best.rank:
            best = d
    return best


@dataclass(frozen=True, slots=True)
class Guidance:
    """What the monitor tells the agent: a level, a message and the detector behind it."""

    level: GuidanceLevel
    message: str
    detector: str
    evidence: dict[str, Any] | None = None

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
