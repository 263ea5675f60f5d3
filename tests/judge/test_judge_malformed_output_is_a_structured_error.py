"""An answer that is not a valid verdict is a ``JudgeError`` with a stable code, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_helpers import verdict, window

from keel.core.errors import JudgeError, ModelError
from keel.journal import open_journal
from keel.judge import VERDICT_SCHEMA, Judge
from keel.judge._verdict import SUBMIT_TOOL
from keel.models import ModelClient
from keel.models.testing import ScriptedModel

GOOD: dict[str, Any] = verdict()["json"]


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("The agent looks fine to me.", "judge.malformed"),
        ('{"verdict": "problem", ', "judge.malformed"),
        ({"json": [GOOD]}, "judge.malformed"),
        ({"json": {**GOOD, "confidence": 1.5}}, "judge.schema"),
        ({"json": {k: v for k, v in GOOD.items() if k != "evidence"}}, "judge.schema"),
        ({"json": {**GOOD, "extra": 1}}, "judge.schema"),
        ({"json": {**GOOD, "category": "laziness"}}, "judge.schema"),
        ({"json": {**GOOD, "verdict": "ok"}}, "judge.schema"),
        ({"json": {**GOOD, "evidence": [9]}}, "judge.evidence"),
        ({"json": {**GOOD, "evidence": ["three"]}}, "judge.schema"),
    ],
)
def test_malformed_answers(answer: Any, code: str) -> None:
    judge = Judge(ModelClient(ScriptedModel([answer]), session_id="s"))
    with pytest.raises(JudgeError) as err:
        judge.judge(window())
    assert err.value.code == code
    assert err.value.to_dict()["code"] == code
    assert isinstance(err.value, ModelError)


def test_a_malformed_answer_is_journaled_and_not_cached(workdir: Path) -> None:
    model = ScriptedModel(["not json", verdict()])
    with open_journal(workdir) as journal:
        judge = Judge(ModelClient(model, session_id="s", journal=journal))
        with pytest.raises(JudgeError):
            judge.judge(window())
        assert judge.judge(window()).verdict.category == "gaming"  # asked again, not cached
        responses = list(journal.events(session_id="s", kinds=("model.response",)))
    assert len(responses) == 2 and len(model.calls) == 2


def test_a_fenced_answer_and_a_tool_call_are_read() -> None:
    fenced = "Here it is:\n```json\n" + json.dumps(GOOD) + "\n```\n"
    call = {"tool_calls": [{"name": SUBMIT_TOOL, "arguments": GOOD}]}
    for answer in (fenced, call, "Verdict: " + json.dumps(GOOD) + " (done)"):
        judge = Judge(ModelClient(ScriptedModel([answer]), session_id="s"))
        assert judge.judge(window()).verdict.evidence == (1,)


def test_the_schema_is_sent_as_structured_output() -> None:
    model = ScriptedModel([verdict()])
    Judge(ModelClient(model, session_id="s")).judge(window())
    (request,) = model.calls
    assert request.output is not None
    sent = request.output.schema
    assert {k: v for k, v in sent.items() if k != "properties"} == {
        k: v for k, v in VERDICT_SCHEMA.items() if k != "properties"
    }
    # evidence may cite only the steps shown (the window of three steps)
    assert sent["properties"]["evidence"]["items"] == {"type": "integer", "enum": [1, 2, 3]}
    others = {k: v for k, v in sent["properties"].items() if k != "evidence"}
    assert others == {k: v for k, v in VERDICT_SCHEMA["properties"].items() if k != "evidence"}
    assert VERDICT_SCHEMA["additionalProperties"] is False
    assert set(VERDICT_SCHEMA["required"]) == set(GOOD)
