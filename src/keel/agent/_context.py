"""The request the agent sends each step: small, ranked, and always in the same shape.

In order, within ``[agent] context_tokens`` (estimated as ``keel.models`` budgets do):

1. the system prompt (``agent.system``);
2. the pinned zone, always the first user message: the task and the constraints from
   keel.toml (``Guard.session_context``), re-sent in every request;
3. the repository map, ranked (``keel.agent._repomap``), in ``[agent] repo_map_tokens``;
4. deterministic summaries of older turns (tool, arguments, a truncated result) once the
   window would overflow;
5. the rolling window of recent turns, verbatim (an assistant message and its tool results
   are never split);
6. the state: the current phase, the step, the tools allowed now, the last evidence report
   and keel's guidance.

Nothing is lost: every turn stays in the journal, only left out of the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from keel.agent._execute import shown
from keel.models import (
    CHARS_PER_TOKEN,
    Message,
    ModelRequest,
    PromptTemplate,
    Sampling,
    Tool,
    estimate_tokens,
    load_prompt,
)

EVIDENCE_CHARS = 4000


@cache
def prompt(template_id: str) -> PromptTemplate:
    """The agent's packaged template ``template_id`` (``keel/agent/prompts/<id>.md``)."""
    return load_prompt(template_id, "keel.agent")


def tokens(text: str) -> int:
    """Estimated tokens of ``text``, as ``keel.models``' budgets estimate them."""
    return estimate_tokens(text)


@dataclass(slots=True)
class Turn:
    """One step of the conversation: the model's message and the results of its calls."""

    step: int
    assistant: Message
    results: list[Message] = field(default_factory=list[Message])
    summary: list[str] = field(default_factory=list[str])
    """One line per call: tool, arguments, a truncated result (for when it is left out)."""

    def messages(self) -> list[Message]:
        """The turn as chat messages."""
        return [self.assistant, *self.results]

    def size(self) -> int:
        """Estimated tokens of the turn."""
        return sum(
            tokens(m.content) + sum(tokens(c.arguments) for c in m.tool_calls)
            for m in self.messages()
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for a suspended run)."""
        return {
            "step": self.step,
            "assistant": self.assistant.to_dict(),
            "results": [m.to_dict() for m in self.results],
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        """Rebuild from :meth:`to_dict`."""
        return cls(
            int(data["step"]),
            Message.from_dict(data["assistant"]),
            [Message.from_dict(m) for m in data.get("results") or ()],
            [str(s) for s in data.get("summary") or ()],
        )


def summary_line(step: int, tool: str, args: dict[str, Any], result: str) -> str:
    """A deterministic one-line summary of a call."""
    return f"step {step}: {tool} {shown(args, 120)} -> {shown(result, 160)}"


@dataclass(frozen=True, slots=True)
class State:
    """What the state message says."""

    phase: str
    step: int
    max_steps: int
    allowed: str
    evidence: str
    guidance: str


def build_request(
    *,
    task: str,
    constraints: str,
    repo_map: str,
    turns: list[Turn],
    state: State,
    tools: tuple[Tool, ...],
    sampling: Sampling,
    budget: int,
) -> ModelRequest:
    """The request for this step, within ``budget`` tokens (the window shrinks first)."""
    system, pinned, mapped = prompt("agent.system"), prompt("agent.pinned"), prompt("agent.map")
    summary_t, state_t = prompt("agent.summary"), prompt("agent.state")
    head = [
        Message.system(system.render()),
        Message.user(pinned.render(task=task, constraints=constraints or "(none)")),
    ]
    if repo_map:
        head.append(Message.user(mapped.render(map=repo_map)))
    evidence = state.evidence or "(none yet)"
    if len(evidence) > EVIDENCE_CHARS:
        evidence = evidence[:EVIDENCE_CHARS] + "\n… (cut; keel's journal has it all)"
    tail = Message.user(
        state_t.render(
            phase=state.phase,
            step=str(state.step),
            max_steps=str(state.max_steps),
            allowed=state.allowed,
            evidence=evidence,
            guidance=state.guidance or "(none)",
        )
    )
    fixed = sum(tokens(m.content) for m in [*head, tail]) + tokens(
        str([t.to_dict() for t in tools])
    )
    window, older = _window(turns, budget - fixed)
    middle: list[Message] = []
    if older:
        lines = [line for turn in older for line in turn.summary]
        room = max(0, budget - fixed - sum(t.size() for t in window)) * CHARS_PER_TOKEN
        text = _fit_lines(lines, room)
        middle.append(Message.user(summary_t.render(lines=text)))
    messages = [*head, *middle, *(m for turn in window for m in turn.messages()), tail]
    uses = [
        system.use,
        pinned.use,
        *([mapped.use] if repo_map else []),
        *([summary_t.use] if older else []),
        state_t.use,
    ]
    return ModelRequest(tuple(messages), tools, "auto", sampling=sampling, templates=tuple(uses))


def _window(turns: list[Turn], room: int) -> tuple[list[Turn], list[Turn]]:
    """The newest turns that fit in ``room`` tokens (at least the last), and the older ones."""
    kept: list[Turn] = []
    used = 0
    for turn in reversed(turns):
        size = turn.size()
        if kept and used + size > room * 3 // 4:
            break
        kept.append(turn)
        used += size
    kept.reverse()
    return kept, turns[: len(turns) - len(kept)]


def _fit_lines(lines: list[str], room_chars: int) -> str:
    """The newest summary lines that fit, with a count of those left out."""
    chosen: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > room_chars:
            break
        chosen.append(line)
        used += len(line) + 1
    chosen.reverse()
    left = len(lines) - len(chosen)
    prefix = [f"({left} earlier steps left out)"] if left else []
    return "\n".join(prefix + chosen)
