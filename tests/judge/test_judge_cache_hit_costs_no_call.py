"""A window judged before, with the same prompt and model, is answered from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from judge_helpers import verdict, window

from keel.core.errors import ModelError
from keel.journal import open_journal
from keel.judge import Judge, JudgeCache
from keel.models import ModelClient
from keel.models.testing import ScriptedModel


def test_a_second_judgement_of_the_same_window_makes_no_call(workdir: Path) -> None:
    model = ScriptedModel([verdict()], name="script:judge")
    with open_journal(workdir) as journal:
        judge = Judge(ModelClient(model, session_id="s1", journal=journal))
        first, second = judge.judge(window()), judge.judge(window())
        requests = list(journal.events(session_id="s1", kinds=("model.request",)))
    assert len(model.calls) == 1 and len(requests) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.verdict == first.verdict and second.cost_usd == 0.0
    assert judge.client.spend.calls == 1


def test_the_cache_on_disk_outlives_the_judge(workdir: Path) -> None:
    cache_dir = JudgeCache.for_workspace(workdir).directory
    assert cache_dir == workdir / ".keel" / "judge" / "cache"
    Judge(
        ModelClient(ScriptedModel([verdict()], name="m"), session_id="a"),
        cache=JudgeCache.for_workspace(workdir),
    ).judge(window())
    later = ScriptedModel([], name="m")  # no answers: any call would fail
    judgement = Judge(
        ModelClient(later, session_id="b"), cache=JudgeCache.for_workspace(workdir)
    ).judge(window())
    assert judgement.cached and later.calls == []
    assert judgement.verdict.category == "gaming"


def test_another_model_or_window_is_not_served_from_the_cache(workdir: Path) -> None:
    cache = JudgeCache.for_workspace(workdir)
    Judge(ModelClient(ScriptedModel([verdict()], name="m"), session_id="a"), cache=cache).judge(
        window()
    )
    other = ScriptedModel([], name="other")
    with pytest.raises(ModelError) as err:
        Judge(ModelClient(other, session_id="a"), cache=cache).judge(window())
    assert err.value.code == "model.script_exhausted" and len(other.calls) == 1
    same = ScriptedModel([], name="m")
    with pytest.raises(ModelError):
        Judge(ModelClient(same, session_id="a"), cache=cache).judge(window(task="Other task."))
    assert len(same.calls) == 1


def test_a_damaged_cache_file_is_a_miss(workdir: Path) -> None:
    cache = JudgeCache.for_workspace(workdir)
    judge = Judge(ModelClient(ScriptedModel([verdict()], name="m"), session_id="a"), cache=cache)
    judge.judge(window())
    assert cache.directory is not None
    (entry,) = cache.directory.glob("*.json")
    entry.write_text('{"verdict": "problem"}')
    fresh = ScriptedModel([verdict(confidence=0.8)], name="m")
    again = Judge(ModelClient(fresh, session_id="a"), cache=JudgeCache.for_workspace(workdir))
    assert again.judge(window()).verdict.confidence == 0.8 and len(fresh.calls) == 1


def test_the_window_hash_is_stable_and_content_addressed() -> None:
    assert window().hash == window().hash
    assert window().hash != window(steps=4).hash
    assert window().hash.startswith("sha256:") and len(window().hash) == 7 + 64
