"""Only a problem verdict, in an enabled category, at or above the threshold is deliverable."""

from __future__ import annotations

from pathlib import Path

import pytest
from judge_helpers import OK, verdict, window

from keel.core.events import DataPayload
from keel.core.schema import JudgeWhen
from keel.journal import open_journal
from keel.judge import Judge, due
from keel.models import ModelClient
from keel.models.testing import ScriptedModel


def _judge(answer: dict[str, object], **options: object) -> Judge:
    return Judge(ModelClient(ScriptedModel([answer]), session_id="s"), **options)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("confidence", "status"),
    [(0.69, "below_threshold"), (0.7, "deliverable"), (0.95, "deliverable")],
)
def test_the_threshold_decides(confidence: float, status: str) -> None:
    judgement = _judge(verdict(confidence=confidence), min_confidence=0.7).judge(window())
    assert judgement.status == status
    assert judgement.deliverable is (status == "deliverable")


def test_a_below_threshold_verdict_is_still_journaled(workdir: Path) -> None:
    with open_journal(workdir) as journal:
        judge = Judge(
            ModelClient(ScriptedModel([verdict(confidence=0.4)]), session_id="s", journal=journal)
        )
        judgement = judge.judge(window())
        (response,) = journal.events(session_id="s", kinds=("model.response",))
    assert not judgement.deliverable and judgement.status == "below_threshold"
    assert isinstance(response.payload, DataPayload)
    assert '"confidence": 0.4' in response.payload.data["content"]


def test_ok_verdicts_and_switched_off_categories_are_not_delivered() -> None:
    assert _judge(OK).judge(window()).status == "clear"
    off = _judge(verdict("gaming", 0.99), categories=("drift", "hijack"))
    assert off.judge(window()).status == "category_off"


def test_the_prompt_defines_only_the_enabled_categories() -> None:
    model = ScriptedModel([OK])
    Judge(ModelClient(model, session_id="s"), categories=("hijack",)).judge(window())
    system = model.calls[0].messages[0].content
    assert "- hijack:" in system and "- gaming:" not in system
    ids = [t.id for t in model.calls[0].templates]
    assert "judge.example.hijack" in ids and "judge.example.gaming" not in ids


def test_when_a_judgement_is_due() -> None:
    when = JudgeWhen(on_finding="correct", every_n_steps=5, on_finish=False)
    assert due(when, step=10)
    assert not due(when, step=7)
    assert not due(when, step=7, finding="hint")
    assert due(when, step=7, finding="correct") and due(when, step=7, finding="stop")
    assert not due(when, step=7, finishing=True)
    assert due(JudgeWhen(), step=3, finishing=True)
    assert not due(JudgeWhen(on_finding="off"), step=3, finding="stop")
