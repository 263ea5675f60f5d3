"""``[judge]`` in keel.toml: defaults, and bad values named by file, line and key."""

from __future__ import annotations

import pytest

from keel import config
from keel.core import schema
from keel.core.errors import ConfigError
from keel.models._spec import BACKENDS


def test_the_defaults_are_off() -> None:
    judge = config.parse_config('[policy]\npreset = "developer"\n').judge
    assert judge.model is None and judge.min_confidence == 0.7
    assert judge.when.on_finding == "correct" and judge.when.on_finish
    assert all(judge.categories.to_dict().values())


def test_a_full_section() -> None:
    text = (
        '[judge]\nmodel = "openai:gpt-4.1-mini"\nmin_confidence = 0.8\nmax_calls = 5\n'
        "max_cost_usd = 0.5\ntimeout_seconds = 10\n\n"
        '[judge.when]\non_finding = "replan"\nevery_n_steps = 10\non_finish = false\n\n'
        "[judge.categories]\ndrift = false\n"
    )
    judge = config.parse_config(text).judge
    assert (judge.model, judge.min_confidence, judge.max_calls) == ("openai:gpt-4.1-mini", 0.8, 5)
    assert (judge.when.on_finding, judge.when.every_n_steps) == ("replan", 10)
    assert not judge.categories.drift and judge.categories.gaming


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ('[judge]\nmodel = "gpt-4"\n', 2, "judge.model"),
        ('[judge]\nmodel = "openai:"\n', 2, "judge.model"),
        ("[judge]\n\nmin_confidence = 1.5\n", 3, "judge.min_confidence"),
        ("[judge]\nmin_confidence = -0.1\n", 2, "judge.min_confidence"),
        ("[judge]\nmax_calls = -1\n", 2, "judge.max_calls"),
        ("[judge]\ntimeout_seconds = 0\n", 2, "judge.timeout_seconds"),
        ('[judge.when]\non_finding = "loud"\n', 2, "judge.when.on_finding"),
        ("[judge.when]\nevery_n_steps = -2\n", 2, "judge.when.every_n_steps"),
        ('[judge.categories]\ngaming = "yes please"\n', 2, "judge.categories.gaming"),
        ("[judge.categories]\nlaziness = true\n", 2, "judge.categories.laziness"),
        ("[judge]\nwhen_finished = true\n", 2, "judge.when_finished"),
    ],
)
def test_bad_values_name_the_file_line_and_key(text: str, line: int, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        config.parse_config(text, "/w/keel.toml")
    assert (err.value.file, err.value.line, err.value.key) == ("/w/keel.toml", line, key)
    assert err.value.code == "config.schema"
    assert str(err.value).startswith(f"/w/keel.toml:{line}:")


def test_every_model_backend_is_a_valid_judge_model() -> None:
    assert BACKENDS is schema.MODEL_BACKENDS  # one list
    for backend in BACKENDS:
        spec = backend if backend == "local" else f"{backend}:x"
        assert config.validate(schema.JudgeConfig, {"model": spec}).model == spec
    assert config.validate(schema.JudgeConfig, {"model": ""}).model is None
