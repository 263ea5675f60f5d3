"""The bounded view of a trajectory the judge is shown, and its stable hash.

A :class:`Window` holds the task (the first user prompt), the pinned constraints
(``[[constraints]]`` texts), the latest plan (a ``plan`` event or a planning tool's call),
and the last ``last`` tool calls up to a step, each with the agent's text before it, the call (edits
summarised as their changed lines) and its result (head and tail). Every part has a character
bound, so a window's size does not grow with the run. At the end of a run it also holds the
agent's final message and whether it claimed to be done.

Steps are numbered as ``keel monitor scan`` numbers them: the 1-based index of the tool call.
:attr:`Window.hash` is the SHA-256 of the window's canonical JSON: the same view of the same
run hashes the same on any machine, which is what the judge's cache keys on.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keel.core.events import (
    DataPayload,
    Event,
    ToolCallPayload,
    ToolResultPayload,
    canonical_json,
)

TASK_CHARS = 2000
PLAN_CHARS = 1200
THOUGHT_CHARS = 300
ACTION_CHARS = 600
RESULT_CHARS = 500
DIFF_LINES = 8
"""Changed lines shown of one edit (the rest counted)."""
PLANNING_TOOLS = frozenset({"TodoWrite", "ExitPlanMode", "update_plan", "write_todos"})


@dataclass(frozen=True, slots=True)
class WindowStep:
    """One tool call as the judge sees it."""

    number: int
    """The 1-based index of the call in the run."""
    thought: str
    """The agent's text just before the call (bounded)."""
    action: str
    """The call: the command, or the tool, its paths and (for edits) the changed lines."""
    result: str
    """What the call returned (head and tail), or empty when no result was recorded."""
    ok: bool | None
    """Whether the call succeeded; None when no result was recorded."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "number": self.number,
            "thought": self.thought,
            "action": self.action,
            "result": self.result,
            "ok": self.ok,
        }


@dataclass(frozen=True, slots=True)
class Window:
    """A bounded view of a trajectory up to a step."""

    task: str
    constraints: tuple[str, ...]
    plan: str
    steps: tuple[WindowStep, ...]
    total_steps: int
    """Tool calls in the run up to this point (the window shows the last of them)."""
    finished: bool
    """The run ended here with the agent claiming it was done."""
    final_message: str
    """The agent's last message, when the window reaches the end of the run."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what the hash is taken of)."""
        return {
            "task": self.task,
            "constraints": list(self.constraints),
            "plan": self.plan,
            "steps": [s.to_dict() for s in self.steps],
            "total_steps": self.total_steps,
            "finished": self.finished,
            "final_message": self.final_message,
        }

    @property
    def hash(self) -> str:
        """``sha256:<hex>`` of the canonical JSON of the window."""
        body = canonical_json(self.to_dict()).encode("utf-8")
        return "sha256:" + hashlib.sha256(body).hexdigest()

    @property
    def step_numbers(self) -> frozenset[int]:
        """The numbers of the steps shown (what a verdict's evidence may point at)."""
        return frozenset(s.number for s in self.steps)

    def render(self) -> str:
        """The window as the text the judge's prompt carries."""
        lines = [f"TASK:\n{self.task or '(no task recorded)'}", ""]
        if self.constraints:
            lines += ["CONSTRAINTS:", *(f"- {c}" for c in self.constraints), ""]
        lines += [f"PLAN:\n{self.plan or '(no plan recorded)'}", ""]
        first = self.steps[0].number if self.steps else self.total_steps + 1
        shown = f"steps {first}-{self.total_steps}" if self.steps else "no steps"
        lines.append(f"TRAJECTORY ({shown} of {self.total_steps}):")
        for step in self.steps:
            lines += _render_step(step)
        if self.final_message or self.finished:
            claim = "the agent claims it is done" if self.finished else "the run stopped"
            lines += ["", f"END ({claim}):", self.final_message or "(no final message)"]
        return "\n".join(lines) + "\n"


def _render_step(step: WindowStep) -> list[str]:
    status = {True: "ok", False: "failed", None: "no result"}[step.ok]
    lines = [f"[step {step.number}]"]
    if step.thought:
        lines.append(f"  agent: {_indent(step.thought)}")
    lines.append(f"  call: {_indent(step.action)}")
    lines.append(f"  result ({status}): {_indent(step.result) if step.result else '-'}")
    return lines


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


def window_of(
    events: Iterable[Event],
    *,
    upto: int | None = None,
    last: int = 12,
    constraints: Sequence[str] = (),
) -> Window:
    """The window of a run's events after step ``upto`` (None: the whole run).

    Events after the ``upto``-th tool call's result (from the next call on) are left out; a
    window of the whole run includes the agent's final message and its claim.
    """
    builder = _Builder()
    for event in events:
        if event.kind == "tool.call" and upto is not None and builder.count >= upto:
            builder.cut = True
            break
        builder.add(event)
    shown = builder.steps[-last:] if last > 0 else []
    return Window(
        task=_clip(builder.task, TASK_CHARS),
        constraints=tuple(_clip(c, 300) for c in constraints),
        plan=_clip(builder.plan, PLAN_CHARS),
        steps=tuple(shown),
        total_steps=builder.count,
        finished=builder.claimed and not builder.cut,
        final_message="" if builder.cut else _clip(builder.trailing, THOUGHT_CHARS * 2),
    )


class _Builder:
    """Folds events into steps, remembering the task, the plan and the agent's text."""

    def __init__(self) -> None:
        self.task = ""
        self.plan = ""
        self.steps: list[WindowStep] = []
        self.count = 0
        self.claimed = False
        self.cut = False
        self.trailing = ""
        """The agent's text since the last call."""
        self._open: dict[str, int] = {}

    def add(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, ToolCallPayload):
            self._call(payload)
        elif isinstance(payload, ToolResultPayload):
            self._result(payload)
        elif isinstance(payload, DataPayload):
            self._data(event.kind, payload.data)

    def _data(self, kind: str, data: Mapping[str, Any]) -> None:
        text = _text(data)
        if kind == "prompt" and text and not self.task:
            self.task = text
        elif kind == "session.start" and data.get("task") and not self.task:
            self.task = str(data["task"])  # keel run records its task when it starts
        elif kind == "thought" and text:
            self.trailing = f"{self.trailing}\n{text}".strip()
        elif kind == "plan":
            self.plan = text or _json(data)
        elif kind == "session.end":
            self.claimed = bool(data.get("claim"))

    def _call(self, call: ToolCallPayload) -> None:
        self.count += 1
        if call.tool in PLANNING_TOOLS:
            self.plan = _json(call.args)
        step = WindowStep(self.count, _clip(self.trailing, THOUGHT_CHARS), _action(call), "", None)
        self.trailing = ""
        self.claimed = False
        self._open[call.tool_use_id or f"#{self.count}"] = len(self.steps)
        self.steps.append(step)

    def _result(self, result: ToolResultPayload) -> None:
        key = result.tool_use_id or f"#{self.count}"
        index = self._open.pop(key, None)
        if index is None:
            return
        step = self.steps[index]
        text = result.output or result.error or ""
        if result.exit_code is not None:
            text = f"exit {result.exit_code}: {text}"
        self.steps[index] = WindowStep(
            step.number, step.thought, step.action, _clip(text, RESULT_CHARS), result.ok
        )


def _text(data: Mapping[str, Any]) -> str:
    for key in ("text", "prompt", "content", "message"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _action(call: ToolCallPayload) -> str:
    """The call in one line, an edit with its changed lines."""
    if call.command:
        return _clip(f"{call.tool}: {call.command}", ACTION_CHARS)
    where = ", ".join(call.paths) or call.url or ""
    head = f"{call.tool}({where})" if where else call.tool
    diff = _diff_summary(call.args) if call.kind in ("write", "edit") else ""
    if diff:
        return _clip(f"{head}\n{diff}", ACTION_CHARS)
    rest = {k: v for k, v in call.args.items() if k not in ("file_path", "path")}
    return _clip(f"{head} {_json(rest)}" if rest else head, ACTION_CHARS)


def _diff_summary(args: Mapping[str, Any]) -> str:
    """An edit's changed lines: ``-N +M lines`` and the first ``DIFF_LINES`` of them."""
    old, new = args.get("old_string"), args.get("new_string")
    if isinstance(old, str) and isinstance(new, str):
        changed = [
            line
            for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
    elif isinstance(args.get("content"), str):
        changed = ["+" + line for line in str(args["content"]).splitlines()]
    else:
        patch = next((v for v in args.values() if isinstance(v, str) and "\n" in v), "")
        changed = [
            line
            for line in patch.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
    if not changed:
        return ""
    removed = sum(1 for line in changed if line.startswith("-"))
    shown = [f"  {line[:120]}" for line in changed[:DIFF_LINES]]
    more = len(changed) - DIFF_LINES
    tail = [f"  ... {more} more changed line(s)"] if more > 0 else []
    summary = f"-{removed} +{len(changed) - removed} lines"
    return "\n".join([summary, *shown, *tail])


def _clip(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail around a marker."""
    text = text.strip()
    if len(text) <= limit:
        return text
    keep = (limit - len(f" [...{len(text)} chars...] ")) // 2
    if keep <= 0:
        return text[:limit]
    return f"{text[:keep]} [...{len(text) - 2 * keep} chars...] {text[-keep:]}"
