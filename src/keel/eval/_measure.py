"""What one run did, read from its journal: the figures ``keel eval`` reports beside success.

- **premature writes refused**: ``decision`` events with rule ``agent.premature_commitment``
  (a writing tool before a plan held: refused inside ``Guard.decide``, nothing changed);
- **the first write**: the first ``after`` checkpoint of one of the agent's calls that lists
  changed files (the guard's own record of what a call changed on disk);
- **a broken assumption caught before any write**: a plan condition that came out false
  (``plan`` event ``branch`` with ``value: false``) before the first write, or in a run that
  never wrote;
- **guidance by level**: the ``guidance`` events the monitor delivered (``hint``,
  ``correct``, ``replan``, ``stop``);
- **steps**: the agent's answered model calls (``model.response`` events without an error);
  **tokens** and **cost**: those of every model call of the session, the judge's included
  (``cost_usd`` is None when a call's cost is unknown: a model without prices).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from keel.agent.replay import JUDGE_AGENT
from keel.core.events import CheckpointPayload, DataPayload, DecisionPayload, Event, GuidancePayload

PREMATURE_RULE = "agent.premature_commitment"
LEVELS = ("hint", "correct", "replan", "stop")


@dataclass(slots=True)
class Figures:
    """The journal's figures of one run."""

    premature_refused: int = 0
    failed_conditions: int = 0
    """Plan conditions that came out false before the first write."""
    first_write_step: int | None = None
    """The step (model call) of the first call that changed a file; None: nothing written."""
    guidance: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0))
    steps: int = 0
    tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def assumption_caught(self) -> bool:
        """A plan condition came out false before anything was written."""
        return self.failed_conditions > 0


def run_session(events: Iterable[Event]) -> str | None:
    """The ``keel run`` session among ``events`` (the first that started an agent run)."""
    for event in events:
        data = _data(event)
        if event.kind == "session.start" and data.get("event") == "agent.start":
            return event.session_id
    return None


def measure(events: Iterable[Event]) -> Figures:
    """The figures of one session's events, in journal order."""
    figures = Figures()
    step = 0
    for event in events:
        payload = event.payload
        data = _data(event)
        match event.kind:
            case "model.response":
                judge = event.agent == JUDGE_AGENT
                step += 0 if judge else 1
                _count_call(figures, data, judge=judge)
            case "decision" if isinstance(payload, DecisionPayload):
                if payload.rule == PREMATURE_RULE:
                    figures.premature_refused += 1
            case "plan" if data.get("event") == "branch" and data.get("value") is False:
                if figures.first_write_step is None:
                    figures.failed_conditions += 1
            case "checkpoint" if isinstance(payload, CheckpointPayload):
                if figures.first_write_step is None and _wrote(payload):
                    figures.first_write_step = step
            case "guidance" if isinstance(payload, GuidancePayload):
                level = payload.level if payload.level in LEVELS else "other"
                figures.guidance[level] = figures.guidance.get(level, 0) + 1
            case _:
                pass
    return figures


def _count_call(figures: Figures, data: dict[str, Any], *, judge: bool) -> None:
    if data.get("error"):
        return
    figures.steps += 0 if judge else 1
    usage = data.get("usage") or {}
    figures.tokens += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    cost = data.get("cost_usd")
    if cost is None or figures.cost_usd is None:
        figures.cost_usd = None
    else:
        figures.cost_usd += float(cost)


def _wrote(payload: CheckpointPayload) -> bool:
    agent_call = str(payload.tool_use_id or "").startswith("s")
    return agent_call and payload.detail.get("kind") == "after" and bool(payload.files)


def _data(event: Event) -> dict[str, Any]:
    return event.payload.data if isinstance(event.payload, DataPayload) else {}
