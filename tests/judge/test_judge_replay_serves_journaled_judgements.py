"""A journaled judgement is served again by ``ReplayModel`` (``replay:SESSION``), no model."""

from __future__ import annotations

from pathlib import Path

from judge_helpers import verdict, window

from keel.journal import open_journal
from keel.judge import Judge
from keel.models import ModelClient
from keel.models.testing import ReplayModel, ScriptedModel


def test_replay_answers_the_same_request_with_the_recorded_verdict(workdir: Path) -> None:
    with open_journal(workdir) as journal:
        live = Judge(
            ModelClient(ScriptedModel([verdict(confidence=0.8)]), session_id="s", journal=journal)
        )
        recorded = live.judge(window())
        kinds = ("model.request", "model.response")
        replay = ReplayModel.from_events(journal.events(session_id="s", kinds=kinds))
    again = Judge(ModelClient(replay, session_id="r")).judge(window())
    assert again.verdict == recorded.verdict and len(replay.calls) == 1
