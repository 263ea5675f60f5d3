"""Over ``[judge]``'s budget a judgement is refused before it is sent, and journaled."""

from __future__ import annotations

from pathlib import Path

import pytest
from judge_helpers import OK, verdict, window

from keel.core.errors import BudgetExceeded
from keel.core.events import DataPayload
from keel.core.schema import JudgeConfig
from keel.journal import open_journal
from keel.judge import judge_client, judge_for
from keel.models import ModelInfo
from keel.models.testing import ScriptedModel


class _Unpriced(ScriptedModel):
    """The scripted model presenting itself as a paid API whose price keel does not know."""

    @property
    def info(self) -> ModelInfo:
        return ModelInfo("openai:x", "openai", "x", free=False)


def test_the_call_over_max_calls_is_refused_and_journaled(workdir: Path) -> None:
    model = ScriptedModel([OK, verdict()], name="script:judge")
    with open_journal(workdir) as journal:
        client = judge_client(model, JudgeConfig(max_calls=1), session_id="s1", journal=journal)
        judge = judge_for(client, JudgeConfig())
        judge.judge(window())
        with pytest.raises(BudgetExceeded) as err:
            judge.judge(window(steps=4))
        events = list(journal.events(session_id="s1", kinds=("model.request", "model.response")))
    assert err.value.code == "model.budget" and len(model.calls) == 1
    kinds = [e.kind for e in events]
    assert kinds == ["model.request", "model.response", "model.request"]
    refused = events[-1].payload
    assert isinstance(refused, DataPayload)
    assert refused.data["refused"]["code"] == "model.budget"
    assert events[0].agent == "keel.judge"


def test_the_budget_counts_the_calls_already_journaled(workdir: Path) -> None:
    with open_journal(workdir) as journal:
        first = judge_client(
            ScriptedModel([OK]), JudgeConfig(max_calls=1), session_id="s2", journal=journal
        )
        judge_for(first, JudgeConfig()).judge(window())
        later = ScriptedModel([OK])
        client = judge_client(later, JudgeConfig(max_calls=1), session_id="s2", journal=journal)
        with pytest.raises(BudgetExceeded):
            judge_for(client, JudgeConfig()).judge(window(steps=2))
    assert later.calls == []


def test_a_cost_budget_without_prices_refuses_every_call(workdir: Path) -> None:
    model = ScriptedModel([OK])
    settings = JudgeConfig(max_cost_usd=1.0)
    with open_journal(workdir) as journal:
        client = judge_client(model, settings, session_id="s3", journal=journal)
        model_is_free = client.prices
        assert model_is_free is not None  # scripted models are free: priced at 0
        judge_for(client, settings).judge(window())
    remote = _Unpriced([OK])
    with open_journal(workdir) as journal:
        client = judge_client(remote, settings, session_id="s4", journal=journal)
        with pytest.raises(BudgetExceeded) as err:
            judge_for(client, settings).judge(window())
    assert "price" in err.value.message and remote.calls == []
