"""``keel eval`` with the embedded ``local`` model, end to end on two tasks, as CI runs it.

Needs ``keel[local]`` (``scripts/install-local-model.sh``): skipped when it is missing, failed
when ``KEEL_REQUIRE_ALL=1`` (CI). One model call of keel run's prompt takes the small model
about a minute on 2 cores, so each run is one step (``max_steps=1``) and the two run one after
the other. The model is weak: the test checks that the evaluation ran, journaled and can be
replayed, never whether the model solved the task.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_helpers import EXAMPLES, results_lines

from _support import keel, require_local_model

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

TASKS = ("add-greeting", "wrong-column")


def test_keel_eval_with_the_local_model(workdir: Path) -> None:
    require_local_model()
    out = workdir / "out"
    chosen = [a for task in TASKS for a in ("--task", task)]
    done = keel(
        "eval", str(EXAMPLES), "--model", "local", *chosen, "--arm", "local=max_steps=1",
        "--jobs", "1", "--out", str(out), "--json", cwd=workdir, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    (arm,) = report["arms"]
    assert (arm["arm"], arm["model"], arm["runs"], arm["errors"]) == ("local", "local", 2, 0)
    assert arm["cost_usd"]["total"] == 0.0  # the embedded model is free
    assert report["tasks"] == list(TASKS) and report["trap_tasks"] == ["wrong-column"]

    header, *runs = results_lines(out)
    assert header["model"] == "local" and len(runs) == 2
    for run in runs:
        # one real model call, journaled with its tokens; the check ran after it
        assert run["error"] is None and run["session_id"], run
        assert run["steps"] == 1 and run["tokens"] > 0, run
        assert run["outcome"] in ("finished", "failed", "needs_input"), run
        assert isinstance(run["check_exit"], int) and run["success"] is (run["check_exit"] == 0)
        assert (out / run["workspace"] / ".keel" / "journal.db").is_file()

    # the recorded runs replay with no model at all
    replayed = keel("eval", "--replay", str(out), "--json", cwd=workdir, timeout=900)
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    statuses = [r["status"] for r in json.loads(replayed.stdout)["runs"]]
    assert statuses == ["identical", "identical"]
