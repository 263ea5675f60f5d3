"""Each arm key lands where it says: keel.toml over the repository's own, or the run's model."""

from __future__ import annotations

import tomllib

import pytest
from eval_helpers import EXAMPLES, SCRIPTS

from keel.config import parse_config
from keel.eval import load_suite, parse_arms, plan, to_toml
from keel.eval._runner import MODEL_DIR

SUITE = load_suite(EXAMPLES, ("read-only-target", "wrong-key"))
REPO_TOML = {"sandbox": {"read_only": ["deploy/**"]}}
"""read-only-target's own keel.toml; wrong-key has none."""


def layout(arm: str, model: str = f"script:{SCRIPTS}") -> dict[str, tuple[str, dict, list]]:
    """task -> (model spec, keel.toml as data, model files) for one arm."""
    evaluation = plan(SUITE, parse_arms([arm]), model, 1)
    return {
        s.task: (
            s.model,
            tomllib.loads(s.keel_toml) if s.keel_toml is not None else {"<own>": True},
            [name for name, _ in s.model_files],
        )
        for s in evaluation.specs
    }


@pytest.mark.parametrize(
    ("arm", "section"),
    [
        ("a=guidance=off", {"monitor": {"enabled": False}}),
        ("a=guidance=on", {"monitor": {"enabled": True}}),
        ("a=require_plan=false", {"agent": {"require_plan": False}}),
        ("a=preset=strict", {"policy": {"preset": "strict"}}),
        ("a=max_steps=7", {"agent": {"max_steps": 7}}),
        ("a=judge=local", {"judge": {"model": "local"}}),
    ],
)
def test_a_setting_is_written_over_the_repository_s_keel_toml(arm: str, section: dict) -> None:
    got = layout(arm)
    assert got["read-only-target"][1] == {**REPO_TOML, **section}
    assert got["wrong-key"][1] == section


def test_an_arm_without_settings_leaves_the_repository_s_keel_toml_alone() -> None:
    got = layout("plain")
    assert {t: v[1] for t, v in got.items()} == {t: {"<own>": True} for t in got}


def test_each_task_gets_its_own_script_which_travels_with_the_run() -> None:
    got = layout("a")
    for task, (model, _, files) in got.items():
        assert model == f"script:{MODEL_DIR}/model-{task}.json"
        assert files == [f"model-{task}.json"]


def test_model_and_judge_on_use_the_arm_s_model() -> None:
    got = layout(f"a=model=script:{SCRIPTS / 'wrong-key.json'},judge=on")
    model, config, files = got["read-only-target"]
    assert model == f"script:{MODEL_DIR}/model-read-only-target.json"
    assert config == {**REPO_TOML, "judge": {"model": model}}
    assert files == ["model-read-only-target.json"]


def test_judge_off_removes_a_configured_judge() -> None:
    data = {"judge": {"model": "local", "min_confidence": 0.5}, "agent": {"max_steps": 3}}
    from keel.eval._arms import merged_config

    assert merged_config(data, parse_arms(["a=judge=off"])[0].overrides) == {
        "judge": {"min_confidence": 0.5},
        "agent": {"max_steps": 3},
    }


def test_the_toml_writer_round_trips_keel_toml_shapes() -> None:
    data = {
        "policy": {"preset": "strict", "allow": ["docker compose ps"]},
        "judge": {"model": "local", "when": {"every_n_steps": 2}, "categories": {"drift": False}},
        "constraints": [
            {"id": "no-migrations", "text": 'Never "edit" migrations.', "protect": ["**/m/**"]},
            {"text": "second"},
        ],
        "model": {"temperature": 0.5, "seed": 3},
    }
    text = to_toml(data)
    assert tomllib.loads(text) == data
    parse_config(text)  # and keel reads it
