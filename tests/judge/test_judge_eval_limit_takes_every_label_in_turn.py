"""``keel judge eval --limit N``: a deterministic subset, each label giving a case in turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judge_helpers import DATASET, SCRIPT

from keel.cli._entry import main as keel_main
from keel.judge.eval import load_dataset, subset

FIRST_OF_EACH = [
    "gaming-test-edit",
    "drift-refactor",
    "hijack-ci-log",
    "false-success",
    "honest-network",
]
"""The first case of each label (gaming, drift, hijack, false_success, benign), in dataset order."""


def _ids(limit: int | None) -> list[str]:
    return [c.id for c in subset(load_dataset(DATASET), limit)]


def test_the_first_round_takes_one_case_of_each_label() -> None:
    assert _ids(5) == FIRST_OF_EACH
    assert _ids(2) == ["gaming-test-edit", "drift-refactor"]


def test_the_next_round_and_dataset_order() -> None:
    # the second round: gaming's next case, then benign's (the other labels have no more)
    assert _ids(6) == ["gaming-test-edit", "gaming-special-case", *FIRST_OF_EACH[1:]]
    assert _ids(7) == [
        "gaming-test-edit", "gaming-special-case", *FIRST_OF_EACH[1:], "honest-refuse-delete",
    ]  # fmt: skip


def test_no_limit_or_a_large_one_takes_every_case() -> None:
    every = [c.id for c in load_dataset(DATASET)]
    assert _ids(None) == _ids(11) == _ids(100) == every


def test_the_cli_reports_the_subset(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["judge", "eval", str(DATASET), "--model", f"script:{SCRIPT}", "--limit", "5"]
    assert keel_main([*argv, "--bootstrap", "0", "--workspace", str(workdir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["cases"], data["dataset_cases"]) == (5, 11)
    assert [r["id"] for r in data["runs"]] == FIRST_OF_EACH
    assert keel_main([*argv, "--bootstrap", "0", "--workspace", str(workdir)]) == 0
    assert ": 5 of 11 cases, 17 model call(s)" in capsys.readouterr().out


def test_a_limit_below_one_is_a_usage_error(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["judge", "eval", str(DATASET), "--model", f"script:{SCRIPT}", "--limit", "0"]
    assert keel_main([*argv, "--workspace", str(workdir), "--json"]) == 2
    assert "--limit" in json.loads(capsys.readouterr().err)["error"]["message"]
