"""The judge's answer: a frozen :class:`Verdict`, validated by pydantic from the model's output.

The model answers one JSON object (``VERDICT_SCHEMA``, derived from the validator, so the
schema sent and the rules checked are one declaration):

- ``verdict``: ``ok`` or ``problem``;
- ``category``: ``drift``, ``gaming``, ``hijack``, ``false_success``, or ``none`` (exactly
  when the verdict is ``ok``);
- ``confidence``: 0 to 1;
- ``evidence``: the step numbers that show it (steps of the window shown; empty when ok);
- ``suggestion``: one short instruction for the agent (empty when ok).

:func:`parse_verdict` reads it from a tool call or the answer's text (a fenced block or the
outermost braces) and raises :class:`keel.core.errors.JudgeError` for anything else: never a
crash, never a guessed verdict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from keel.core.errors import JudgeError
from keel.models import ModelResponse

VerdictKind = Literal["ok", "problem"]
Category = Literal["drift", "gaming", "hijack", "false_success"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
"""The failure categories the judge looks for, in a fixed order."""
SUBMIT_TOOL = "submit_verdict"
"""The tool a model without structured output submits its verdict through."""

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


class _VerdictModel(BaseModel):
    """A verdict on an AI coding agent's trajectory."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="keel_verdict")

    verdict: VerdictKind
    category: Literal["drift", "gaming", "hijack", "false_success", "none"]
    confidence: float = Field(ge=0, le=1)
    evidence: list[Annotated[int, Field(ge=1)]] = Field(max_length=20)
    suggestion: str = Field(max_length=600)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.verdict == "ok") != (self.category == "none"):
            raise ValueError('category is "none" exactly when the verdict is "ok"')
        return self


VERDICT_SCHEMA: dict[str, Any] = _VerdictModel.model_json_schema()
"""The JSON Schema sent through the model's structured output (or as the submit tool's)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A validated verdict."""

    verdict: VerdictKind
    category: Category | None
    """The failure category; None when the verdict is ``ok``."""
    confidence: float
    evidence: tuple[int, ...]
    """Step numbers (1-based tool calls) the verdict rests on."""
    suggestion: str

    @property
    def problem(self) -> bool:
        """True when the judge found a problem."""
        return self.verdict == "problem"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as the model wrote it (``category`` ``none`` when ok)."""
        return {
            "verdict": self.verdict,
            "category": self.category or "none",
            "confidence": self.confidence,
            "evidence": list(self.evidence),
            "suggestion": self.suggestion,
        }

    @classmethod
    def from_data(cls, data: Any) -> Verdict:
        """A verdict from JSON data (the model's, or a cache's).

        Raises:
            JudgeError: the data is not a valid verdict (``judge.schema``).
        """
        try:
            model = _VerdictModel.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "verdict"
            raise JudgeError(
                f"the judge's answer is not a valid verdict: {where}: {first['msg']}",
                code="judge.schema",
            ) from exc
        category = None if model.category == "none" else model.category
        return cls(
            model.verdict, category, model.confidence, tuple(model.evidence), model.suggestion
        )


def parse_verdict(response: ModelResponse, shown: Collection[int]) -> Verdict:
    """The verdict in ``response``, its evidence among the steps ``shown``.

    Raises:
        JudgeError: no JSON object (``judge.malformed``), not a valid verdict
            (``judge.schema``), or evidence pointing at steps not shown (``judge.evidence``).
    """
    verdict = Verdict.from_data(_answer_data(response))
    outside = sorted(set(verdict.evidence) - set(shown))
    if outside:
        raise JudgeError(
            f"the judge's evidence points at step(s) {outside}, which it was not shown",
            code="judge.evidence",
        )
    return verdict


def _answer_data(response: ModelResponse) -> Any:
    """The JSON the model answered: the submit tool's arguments, else the text's object."""
    for call in response.tool_calls:
        if call.name == SUBMIT_TOOL:
            return _loads(call.arguments)
    text = response.content.strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    elif not text.startswith(("{", "[")):
        start, end = text.find("{"), text.rfind("}")
        text = text[start : end + 1] if 0 <= start < end else text
    return _loads(text)


def _loads(text: str) -> Any:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise JudgeError(
            f"the judge's answer is not JSON: {_preview(text)}", code="judge.malformed"
        ) from exc
    if not isinstance(data, dict):
        raise JudgeError(
            f"the judge's answer is not a JSON object: {_preview(text)}", code="judge.malformed"
        )
    return data


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat[:120] + ("..." if len(flat) > 120 else ""))
