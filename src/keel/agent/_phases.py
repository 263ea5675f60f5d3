"""The agent's phases, a state machine in code, and the policy layer that enforces them.

- ``understand``: read-only tools (and commands the policy finds read-only);
- ``plan``: entered by ``run_plan``; a plan whose conditions hold opens ``implement``, one
  whose evidence contradicts an assumption keeps the run here;
- ``implement``: adds ``apply_patch``, ``write_file`` and commands that change files;
- ``verify``: entered on ``finish``; the gates pass (``done``) or the run goes back to
  ``implement``.

A writing tool before ``implement`` is *premature commitment*: :class:`PhaseRules`, a rule the
run's guard asks before its policy (``Guard(pre_rules=...)``), denies it inside
``Guard.decide`` (rule ``agent.premature_commitment``), so it is refused, journaled and
checkpoint-free like any deny, and nothing changes on disk. ``[agent] require_plan = false``
lets a writing tool open ``implement`` straight from ``understand``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from keel.agent._tools import CONTROL_TOOLS, WRITE_TOOLS, argument_problem
from keel.core.calls import ToolCall
from keel.core.decision import Decision

if TYPE_CHECKING:
    from keel.policy import Policy

Phase = Literal["understand", "plan", "implement", "verify", "done"]
PREMATURE = "agent.premature_commitment"


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of phase, and why."""

    step: int
    before: Phase
    after: Phase
    why: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (as journaled)."""
        return {"step": self.step, "from": self.before, "to": self.after, "why": self.why}


@dataclass(slots=True)
class Phases:
    """The current phase and every transition so far."""

    require_plan: bool = True
    phase: Phase = "understand"
    history: list[Transition] = field(default_factory=list[Transition])

    def move(self, to: Phase, why: str, step: int) -> Transition | None:
        """Go to ``to``; the transition, or None when already there."""
        if to == self.phase:
            return None
        change = Transition(step, self.phase, to, why)
        self.phase = to
        self.history.append(change)
        return change

    def may_write(self) -> bool:
        """Whether writing tools are allowed now."""
        return self.phase == "implement" or (not self.require_plan and self.phase != "verify")

    def premature(self, call: ToolCall, read_only: bool) -> str | None:
        """Why ``call`` commits too early, or None (``read_only``: a command changes nothing)."""
        if self.may_write():
            return None
        writing = call.tool in WRITE_TOOLS or (call.tool == "run" and not read_only)
        if not writing:
            return None
        what = "a command that can change files" if call.tool == "run" else f"{call.tool}"
        return (
            f"{what} is not allowed in phase {self.phase!r}: nothing was changed. First check "
            "the assumptions the task makes (files, columns, keys, names) with run_plan: an "
            "evidence plan of read-only probes with conditions; when its conditions hold, "
            "the run enters 'implement' and writing tools are allowed."
        )


@dataclass(frozen=True, slots=True)
class PhaseRules:
    """The agent's rules, which the guard asks before its policy: tools, arguments, phase.

    So the agent's refusals take the one decision path (journaled with their rule ids); a
    call these rules leave alone is the policy's.
    """

    phases: Phases

    def check(self, call: ToolCall, policy: Policy) -> Decision | None:
        """The agent's decision for ``call``, or None to leave it to ``policy``."""
        problem = argument_problem(call.tool, call.args)
        if problem is not None:
            return Decision.deny("agent.bad_call", problem, "Call one of the tools as described.")
        read_only = call.tool == "run" and policy.is_read_only(call.command or "", call.cwd)
        why = self.phases.premature(call, read_only)
        if why is not None:
            return Decision.deny(PREMATURE, why, "Run a plan (run_plan) that checks it first.")
        if call.tool in CONTROL_TOOLS:
            return Decision.allow("agent.tool", f"{call.tool} is one of keel's own tools")
        return None
