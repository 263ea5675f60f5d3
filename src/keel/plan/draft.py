"""Plans written by a model: ``keel plan draft``.

:func:`draft_plan` asks a model for an evidence plan in keel's plan language and loops:

1. The first request holds a small, ranked context (:func:`draft_context`): the task, the
   probe registry's functions with one-line docs, a capped listing of the workspace (names
   only; names the task mentions first) and the pinned constraints of keel.toml. Every word
   around the data comes from the packaged ``plan_draft.*`` templates.
2. The answer is read as a plan: the arguments of a ``submit_plan`` tool call, or the message
   content as one JSON object (bare, or in one ```json fence).
3. The plan goes through the validator and the commitment lint (``keel plan validate``). The
   first draft with no error and no commitment finding is the result.
4. Otherwise the findings go back verbatim (code, JSON path, step, message with its
   suggestion), as the tool call's result or as the next user message, for up to
   ``max_rounds`` drafts in all.

Structured output is asked for with :func:`draft_schema`, a bounded form of the plan schema
(size limits, the function names as enums, a step-id pattern): small local models follow a
schema under a grammar only when it is bounded like this. The validator, not the schema, is
the judge: a draft the schema allowed can still be rejected.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from keel.core.root import GIT_MARKER, STATE_DIR
from keel.core.schema import KeelConfig
from keel.models._client import ModelClient
from keel.models._prompts import PromptTemplate, load_prompt
from keel.models._spec import sampling_of
from keel.models._types import (
    Message,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    Sampling,
    TemplateUse,
    Tool,
)
from keel.plan import ACTIONS, Issue, check_plan, read_plan_text
from keel.plan._model import ConditionOp
from keel.probes import PROBES

LISTING_CAP = 60
"""Workspace names shown to the model."""
LISTING_SCAN = 5000
"""Directory entries looked at, at most, to pick them."""
SKIP_DIRS = frozenset({GIT_MARKER, ".hg", ".svn", STATE_DIR, "node_modules", "__pycache__", ".venv",
                       "venv", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})  # fmt: skip
SUBMIT_TOOL = "submit_plan"
CONDITION_OPS: tuple[str, ...] = get_args(ConditionOp)

Source = Literal["tool_call", "content", "none"]


@dataclass(frozen=True, slots=True)
class DraftRound:
    """One draft: where the plan was found, the plan, and what the validator said."""

    number: int
    source: Source
    plan: Any
    """The parsed plan (None when the reply held none)."""
    issues: tuple[Issue, ...]
    """Errors and commitment findings; empty when the draft was accepted."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "round": self.number,
            "source": self.source,
            "plan": self.plan,
            "issues": [i.to_dict() for i in self.issues],
        }


@dataclass(frozen=True, slots=True)
class DraftResult:
    """Every round of one drafting session, and the accepted plan if there is one."""

    session_id: str
    model: str
    rounds: tuple[DraftRound, ...]
    spend: dict[str, Any] = field(default_factory=dict[str, Any])

    @property
    def ok(self) -> bool:
        """True when the last draft validated."""
        return bool(self.rounds) and not self.rounds[-1].issues and self.rounds[-1].plan is not None

    @property
    def plan(self) -> Any:
        """The accepted plan, or None."""
        return self.rounds[-1].plan if self.ok else None

    @property
    def last_issues(self) -> tuple[Issue, ...]:
        """What was wrong with the last draft."""
        return self.rounds[-1].issues if self.rounds else ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``valid``, the plan, the rounds, the session and the spend."""
        return {
            "valid": self.ok,
            "plan": self.plan,
            "rounds": [r.to_dict() for r in self.rounds],
            "issues": [i.to_dict() for i in self.last_issues],
            "session_id": self.session_id,
            "model": self.model,
            "spend": self.spend,
        }


def draft_plan(
    task: str,
    *,
    client: ModelClient,
    config: KeelConfig,
    workspace: Path,
    max_rounds: int = 3,
    sampling: Sampling | None = None,
    on_round: Callable[[DraftRound], None] | None = None,
) -> DraftResult:
    """Ask ``client``'s model for a plan for ``task`` until one validates or rounds run out.

    ``on_round`` is told about each draft as it is judged (the CLI prints progress with it).

    Raises:
        ModelError: a call failed after its retries, or a budget refused it (the rounds so far
            are in the journal).
    """
    info = client.model.info
    schema = draft_schema(config.limits.plan_max_steps, config.limits.plan_max_depth)
    system, user = load_prompt("plan_draft.system"), load_prompt("plan_draft.user")
    messages: list[Message] = [
        Message.system(system.render(condition_ops=", ".join(CONDITION_OPS))),
        Message.user(user.render(**draft_context(task, config, workspace))),
    ]
    uses: list[TemplateUse] = [system.use, user.use]
    tools: tuple[Tool, ...] = ()
    if info.supports_tools and info.structured != "json_object":
        tools = (Tool(SUBMIT_TOOL, "Submit the plan for keel to validate and run.", schema),)
    output = OutputSchema("keel_plan", schema) if info.structured != "off" else None
    chosen = sampling or sampling_of(config.model)
    rounds: list[DraftRound] = []
    for number in range(1, max(1, max_rounds) + 1):
        request = ModelRequest(
            tuple(messages), tools, "auto" if tools else None, output,
            chosen, tuple(uses),
        )  # fmt: skip
        response = client.complete(request)
        source, plan, problem = extract_plan(response)
        if plan is None:
            issue = Issue("error", "draft.no_plan", problem or "no plan", "$")
            rounds.append(DraftRound(number, source, None, (issue,)))
            if on_round is not None:
                on_round(rounds[-1])
            feedback = load_prompt("plan_draft.unparsed")
            text = feedback.render(problem=problem or "no plan")
        else:
            issues = findings(plan, config, workspace)
            rounds.append(DraftRound(number, source, plan, issues))
            if on_round is not None:
                on_round(rounds[-1])
            if not issues:
                break
            feedback = load_prompt("plan_draft.feedback")
            text = feedback.render(issues="\n".join(i.describe() for i in issues))
        turns, used = _continue(response, text)
        for template in (feedback, *used):
            if template.use not in uses:
                uses.append(template.use)
        messages.extend(turns)
    result = DraftResult(client.session_id, info.name, tuple(rounds), client.spend.to_dict())
    client.note(
        "plan",
        {"event": "plan.draft", "task": task, "valid": result.ok, "rounds": len(rounds),
         "plan": result.plan, "issues": [i.to_dict() for i in result.last_issues]},
    )  # fmt: skip
    return result


def findings(plan: Any, config: KeelConfig, workspace: Path) -> tuple[Issue, ...]:
    """What keeps ``plan`` from passing ``keel plan validate``.

    Its errors, then the commitment lint's findings on final actions the engine would refuse.
    """
    result = check_plan(plan, config=config, workspace=workspace)
    refused = tuple(i for i in result.refusals if i not in result.errors)
    return result.errors + refused


def _continue(
    response: ModelResponse, feedback: str
) -> tuple[list[Message], tuple[PromptTemplate, ...]]:
    """The model's answer and keel's feedback as the next turns, and the templates used.

    Each tool call gets its result (the feedback for ``submit_plan``); when the plan came as
    content, the feedback is a user turn.
    """
    answer = response.message()
    if not response.tool_calls:
        return [answer, Message.user(feedback)], ()
    unknown = load_prompt("plan_draft.unknown_tool")
    replies = [
        Message.tool(c.id, feedback if c.name == SUBMIT_TOOL else unknown.render(name=c.name))
        for c in response.tool_calls
    ]
    if not any(c.name == SUBMIT_TOOL for c in response.tool_calls):
        replies.append(Message.user(feedback))
    used = (unknown,) if any(c.name != SUBMIT_TOOL for c in response.tool_calls) else ()
    return [answer, *replies], used


_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)```", re.S)


def extract_plan(response: ModelResponse) -> tuple[Source, Any, str | None]:
    """``(source, plan, problem)``: the plan from a ``submit_plan`` call or the content."""
    for call in response.tool_calls:
        if call.name != SUBMIT_TOOL:
            continue
        try:
            data = call.parsed()
        except ValueError as exc:
            return "tool_call", None, f"the submit_plan arguments are not JSON: {exc}"
        if isinstance(data, dict) and "steps" not in data and isinstance(data.get("plan"), dict):
            data = data["plan"]
        return "tool_call", data, None
    text = response.content.strip()
    if not text:
        return "none", None, "the reply was empty"
    if not text.startswith("{"):
        fences = _FENCE.findall(text)
        if len(fences) != 1:
            what = "no JSON object" if not fences else f"{len(fences)} fenced blocks"
            return "content", None, f"the reply holds {what}; send exactly one plan"
        text = fences[0].strip()
    try:
        return "content", read_plan_text(text), None
    except Exception as exc:
        return "content", None, str(getattr(exc, "message", exc))


def draft_context(task: str, config: KeelConfig, workspace: Path) -> dict[str, str]:
    """The placeholders of ``plan_draft.user``: task, functions, listing, constraints."""
    names, total = workspace_listing(workspace, task)
    note = f"; {len(names)} of {total}" if total > len(names) else ""
    constraints = [f"- {c.text}" for c in config.constraints]
    return {
        "task": task.strip(),
        "functions": "\n".join(function_lines()),
        "listing": "\n".join(names) or "(empty)",
        "listing_note": note,
        "constraints": "\n".join(constraints) or "(none)",
    }


def function_lines() -> list[str]:
    """``name(params) -> type: summary`` for each probe, then each final action."""
    lines = []
    for spec in PROBES:
        params = ", ".join(p.name + ("" if p.required else "?") for p in spec.params)
        lines.append(f"- {spec.name}({params}) -> {spec.returns}: {spec.summary}")
    for action in ACTIONS:
        params = ", ".join(p.name + ("" if p.required else "?") for p in action.params)
        lines.append(f"- {action.name}({params}) [final action]: {action.summary}")
    return lines


def workspace_listing(root: Path, task: str = "", cap: int = LISTING_CAP) -> tuple[list[str], int]:
    """Up to ``cap`` workspace paths (directories end in ``/``), and how many were seen.

    Ranked: paths whose name the task mentions, then shallow before deep, then by name.
    Version control, keel's own state, caches and virtual environments are left out; links
    are not followed.
    """
    seen = list(_walk(root))
    words = {w.lower() for w in re.findall(r"[\w.-]{3,}", task)}

    def rank(path: str) -> tuple[int, int, str]:
        name = path.rstrip("/").rsplit("/", 1)[-1].lower()
        mentioned = name in words or path.rstrip("/").lower() in words
        return (0 if mentioned else 1, path.count("/") - path.endswith("/"), path)

    return sorted(seen, key=rank)[:cap], len(seen)


def _walk(root: Path) -> Iterator[str]:
    pending = [""]
    budget = LISTING_SCAN
    while pending and budget > 0:
        rel = pending.pop(0)
        try:
            with os.scandir(root / rel if rel else root) as entries:
                items = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue
        for entry in items:
            budget -= 1
            if budget < 0:
                return
            path = f"{rel}{entry.name}"
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in SKIP_DIRS:
                    continue
                pending.append(path + "/")
                yield path + "/"
            else:
                yield path


def draft_schema(max_steps: int = 10, max_depth: int = 3) -> dict[str, Any]:
    """A bounded JSON Schema of a plan, for structured output: sizes, enums and patterns.

    Shared shapes are ``$defs``; branches nest at most ``max_depth`` levels and conditions
    two, by one definition per level rather than by recursion, so a grammar stays finite.
    """
    text = {"type": "string", "maxLength": 300}
    step_id = {"type": "string", "pattern": "^[A-Za-z0-9_]{1,24}$"}
    var = {"type": "string", "pattern": "^[a-z_][a-z0-9_]{0,31}$"}
    scalar = {"anyOf": [text, {"type": "number"}, {"type": "boolean"}]}
    args = {"type": "array", "maxItems": 4, "items": _ref("scalar")}
    operands = {"anyOf": [_ref("scalar"), _ref("inner_condition")]}
    defs: dict[str, Any] = {
        "scalar": scalar,
        "inner_condition": _object(
            {"op": {"enum": list(CONDITION_OPS)},
             "vars": {"type": "array", "minItems": 1, "maxItems": 4, "items": _ref("scalar")}},
            ["op", "vars"],
        ),
        "condition": _object(
            {"op": {"enum": list(CONDITION_OPS)},
             "vars": {"type": "array", "minItems": 1, "maxItems": 4, "items": operands}},
            ["op", "vars"],
        ),
        "evidence": _object(
            {"id": step_id, "type": {"const": "evidence_collection"}, "output_to": var,
             "action": _object({"function": {"enum": [p.name for p in PROBES]}, "args": args},
                               ["function", "args"])},
            ["id", "type", "action", "output_to"],
        ),
        "final": _object(
            {"id": step_id, "type": {"const": "final_action"}, "condition": _ref("condition"),
             "action": _object({"function": {"enum": [a.name for a in ACTIONS]}, "args": args},
                               ["function", "args"])},
            ["id", "type", "action"],
        ),
        "ask": _object(
            {"id": step_id, "type": {"const": "ask"}, "question": text, "output_to": var},
            ["id", "type", "question", "output_to"],
        ),
    }  # fmt: skip
    depth = max(1, max_depth)
    for level in range(1, depth + 1):
        kinds = [_ref("evidence"), _ref("final"), _ref("ask")]
        if level > 1:
            inner = _ref(f"steps{level - 1}")
            defs[f"conditional{level}"] = _object(
                {"id": step_id, "type": {"const": "conditional"}, "condition": _ref("condition"),
                 "true_branch": inner, "false_branch": inner},
                ["id", "type", "condition", "true_branch", "false_branch"],
            )  # fmt: skip
            kinds.append(_ref(f"conditional{level}"))
        defs[f"steps{level}"] = {"type": "array", "maxItems": max_steps, "items": {"anyOf": kinds}}
    schema = _object(
        {"goal": {"type": "string", "maxLength": 200},
         "steps": {**defs[f"steps{depth}"], "minItems": 1}},
        ["goal", "steps"],
    )  # fmt: skip
    schema["$defs"] = defs
    return schema


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def plan_text(plan: Any) -> str:
    """A plan as the JSON text ``--out`` writes."""
    return json.dumps(plan, indent=2, ensure_ascii=False) + "\n"
