"""``keel judge eval`` with the embedded ``local`` model, end to end, as CI runs it (issue 25).

Needs ``keel[local]`` (``scripts/install-local-model.sh``). Skipped when it is missing, failed
when ``KEEL_REQUIRE_ALL=1`` (CI). The whole shipped set is 36 checkpoints at about 4 s a call
on 2 cores, so the test judges ``--limit 5 --every 2``: one case of every label (the four
categories and benign), 10 checkpoints. The model is weak (it answers ``ok`` to nearly
everything): the test checks what the eval did, never how good the verdicts are. It runs the
real ``keel`` command, so a crash of the native library is a failed exit code.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from judge_helpers import DATASET

from _support import keel, require_local_model
from keel.judge import CATEGORIES

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

CHECKPOINTS = {
    "gaming-test-edit": [2, 4],
    "drift-refactor": [2, 4, 5],
    "hijack-ci-log": [2, 3],
    "false-success": [2, 3],
    "honest-network": [2],
}
"""The subset ``--limit 5`` picks (the first case of each label) and its steps at ``--every 2``
(every second step, and the last)."""
REFUSED = {"judge.evidence"}
"""The one error a valid verdict may still get: evidence at a step the judge was not shown.
The grammar keeps the answer to the schema (never ``judge.malformed`` or ``judge.schema``);
it cannot know which steps a window shows."""


def _labels() -> dict[str, tuple[str, int]]:
    """Each case's label in the shipped set: (category, first step), or (``benign``, 0)."""
    labels: dict[str, tuple[str, int]] = {}
    for line in DATASET.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("//"):
            case = json.loads(line)
            label = case["label"]
            labels[case["id"]] = (
                ("benign", 0) if label == "benign" else (label["category"], label["step"])
            )
    return labels


def test_keel_judge_eval_with_the_local_model(workdir: Path) -> None:
    require_local_model()
    done = keel(
        "judge", "eval", str(DATASET), "--model", "local", "--limit", "5", "--every", "2",
        "--json", cwd=workdir, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-3000:]}"
    data = json.loads(done.stdout)
    labels = _labels()

    assert data["model"] == "local"
    assert (data["cases"], data["dataset_cases"]) == (len(CHECKPOINTS), len(labels))
    runs = {r["id"]: r for r in data["runs"]}
    assert {i: [c["step"] for c in r["checks"]] for i, r in runs.items()} == CHECKPOINTS
    chosen = Counter(labels[i][0] for i in runs)
    assert set(chosen) == {*CATEGORIES, "benign"} == {c for c, _ in labels.values()}

    # Every category of the shipped set, scored over exactly the cases labelled with it.
    assert [s["category"] for s in data["categories"]] == list(CATEGORIES)
    for score in data["categories"]:
        category = score["category"]
        # a negative: a case with a checkpoint where the category was not (yet) true
        negatives = sum(
            1 for i, steps in CHECKPOINTS.items()
            if labels[i][0] != category or steps[0] < labels[i][1]
        )  # fmt: skip
        assert (score["positives"], score["negatives"]) == (chosen[category], negatives)
        assert score["hits"] + score["misses"] == score["positives"]
        assert 0 <= score["false_alarms"] <= score["negatives"]
        for rate in ("miss_rate", "false_alarm_rate"):
            assert isinstance(score[rate], float) and 0.0 <= score[rate] <= 1.0, (category, rate)

    # One real call per checkpoint, each answered by the model: no cache, no script, and every
    # answer a verdict under the schema (or one refused for citing a step it was not shown).
    checks = [c for r in runs.values() for c in r["checks"]]
    scheduled = sum(len(steps) for steps in CHECKPOINTS.values())
    assert (data["calls"], data["cached"], len(checks)) == (scheduled, 0, scheduled)
    assert set(data["errors"]) <= REFUSED, data["errors"]
    answered = [c for c in checks if c["error"] is None]
    assert answered, "the local model gave no valid verdict"
    for check in answered:
        assert not check["cached"] and check["latency_ms"] > 0, check
        assert check["verdict"]["verdict"] in ("ok", "problem")
        assert 0.0 <= check["verdict"]["confidence"] <= 1.0
    assert all(c["verdict"] is None for c in checks if c["error"] is not None)

    # The embedded model is free; its latency was measured.
    assert data["cost_usd"] == 0.0
    assert data["latency_ms"] > 0 and data["latency_p95_ms"] > 0
    assert data["latency_ci"]["low"] > 0 and data["latency_ci"]["high"] > 0
