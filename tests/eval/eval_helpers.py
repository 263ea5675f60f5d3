"""Shared pieces of the ``keel eval`` tests: the shipped suite, running it, the figures by hand."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from _support import keel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "eval"
SCRIPTS = EXAMPLES / "scripts"
ARMS = ("keel", "bare=require_plan=false,guidance=off")
"""The arms the tests compare: keel as the repositories configure it, and keel with neither
evidence plans required nor the monitor's guidance."""
REPEAT = 2
STEP_TOKENS = 1000 + 100
"""Every step of the shipped scripts reports 1000 input and 100 output tokens."""

# Each task of the shipped suite, worked out from its script (examples/eval/scripts):
#   steps: model calls (every script ends with finish, and keel never ends a run early here);
#   keel / bare: whether the check passes in each arm;
#   premature: writes keel refused before a plan held (arm keel: the naive first write of
#     every trap; arm bare has no such rule);
#   caught: a plan condition came out false before the first write (traps only). In arm bare
#     the naive write comes first and lands, except in read-only-target, where the policy
#     refuses it ([sandbox] read_only = deploy/**) and the plan then finds deploy/ read-only;
#   guidance: fix-last runs a failing test 4 times: keel's monitor gives a `correct` at the
#     third failure and denies the fourth call with another (arm bare: the monitor is off).
TASKS: dict[str, dict[str, Any]] = {
    "add-greeting": {"steps": 3, "trap": False, "keel": True, "bare": True},
    "fix-last": {"steps": 8, "trap": False, "keel": True, "bare": True, "correct": 2},
    "missing-dependency": {"steps": 5, "trap": True, "keel": True, "bare": False},
    "read-only-target": {"steps": 3, "trap": True, "keel": True, "bare": True, "bare_caught": True},
    "wrong-column": {"steps": 5, "trap": True, "keel": True, "bare": False},
    "wrong-function": {"steps": 5, "trap": True, "keel": True, "bare": False},
    "wrong-key": {"steps": 5, "trap": True, "keel": True, "bare": False},
    "wrong-path": {"steps": 5, "trap": True, "keel": True, "bare": False},
}


def run_eval(
    out: Path, *extra: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``keel eval`` of the shipped suite with the scripted model and both arms, ``--json``."""
    arms = [a for arm in ARMS for a in ("--arm", arm)]
    return keel(
        "eval", str(EXAMPLES), "--model", f"script:{SCRIPTS}", *arms, "--repeat", str(REPEAT),
        "--out", str(out), "--json", *extra, cwd=cwd, env=env, timeout=timeout,
    )  # fmt: skip


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The report ``keel eval --json`` printed; the evaluation must have succeeded."""
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout)


def without_times(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs between two evaluations of a deterministic model."""
    kept = {k: v for k, v in report.items() if k not in ("out", "results", "records")}
    kept["arms"] = [{k: v for k, v in a.items() if k != "wall_seconds"} for a in report["arms"]]
    return kept


def results_lines(out: Path) -> list[dict[str, Any]]:
    """The lines of ``OUT/results.jsonl``."""
    text = (out / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]
