"""The plan language: pydantic models of the seed article's JSON format, with JSON Schema.

A plan is ``{"goal", "steps": [...]}``; each step has an ``id``, a ``type`` and an optional
``description``:

- ``evidence_collection``: ``action`` ``{"function", "args"}`` runs a probe; its value goes to
  ``output_to``; optional ``timeout`` in seconds.
- ``conditional``: ``condition`` picks ``true_branch`` or ``false_branch``.
- ``ask``: ``question`` for the user; the answer goes to ``output_to`` (``choices`` optional).
- ``final_action``: ``action`` commits (output, prompt, write, patch, command), only when its
  optional ``condition`` holds.

A condition is ``{"op", "vars": [...]}``; operands are conditions, ``{{var}}``/``{{var.path}}``
templates or literals. Models are frozen and reject unknown keys, so a typo is an error.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ConditionOp = Literal[
    "and",
    "or",
    "not",
    "defined",
    "exists",
    "equals",
    "not_equals",
    "in",
    "contains",
    "gt",
    "ge",
    "lt",
    "le",
    "matches",
]
VarName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
StepId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")]
Scalar = str | int | float | bool | None


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Condition(_Frozen):
    """``{"op": ..., "vars": [...]}``: a test over evidence."""

    op: ConditionOp
    vars: list[Condition | Scalar | list[Any]] = Field(default_factory=list)
    """Operands: nested conditions, ``{{var}}`` templates or literal values."""


class Action(_Frozen):
    """A call of a registered function: a probe or a final action."""

    function: str = Field(min_length=1, max_length=100)
    """A probe such as ``fs.exists`` / ``filesystem.check_exists``, or a final action such as
    ``output.result`` or ``file.append`` (``keel plan functions`` lists them all)."""
    args: list[Any] | dict[str, Any] = Field(default_factory=list)
    """Positional (a list) or named (an object); strings may hold ``{{var}}`` templates."""


class _Step(_Frozen):
    id: StepId
    description: str | None = None


class EvidenceStep(_Step):
    """Run a probe and keep its value."""

    type: Literal["evidence_collection"]
    action: Action
    output_to: VarName
    timeout: float | None = Field(default=None, gt=0, le=300)


class ConditionalStep(_Step):
    """Choose a branch by a condition over the evidence so far."""

    type: Literal["conditional"]
    condition: Condition
    true_branch: list[Step] = Field(default_factory=list)
    false_branch: list[Step] = Field(default_factory=list)


class AskStep(_Step):
    """Ask the user; the answer is a variable like any evidence."""

    type: Literal["ask"]
    question: str = Field(min_length=1, max_length=2000)
    output_to: VarName
    choices: list[Scalar] | str | None = None
    """Allowed answers: a list, or a ``{{var}}`` template naming one (e.g. CSV headers)."""


class FinalActionStep(_Step):
    """Commit: output a result, prompt the user, write, patch or run a command."""

    type: Literal["final_action"]
    condition: Condition | None = None
    action: Action


Step = Annotated[
    EvidenceStep | ConditionalStep | AskStep | FinalActionStep, Field(discriminator="type")
]


class Plan(_Frozen):
    """A plan: a goal and its steps."""

    goal: str = Field(min_length=1, max_length=2000)
    steps: list[Step] = Field(min_length=1)


Condition.model_rebuild()
ConditionalStep.model_rebuild()
Plan.model_rebuild()


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of a plan."""
    schema = Plan.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "keel plan"
    return schema
