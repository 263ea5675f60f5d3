"""``keel eval`` on the shipped suite with scripted models: the figures, the results, the replay.

One evaluation (8 tasks x 2 arms x 2 repeats, real ``keel run`` processes, real journals) is
recorded for the module; the tests read its report, its results file and its kept runs, and
replay it. The expected figures are worked out by hand from the scripts (``eval_helpers``).
"""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import (
    EXAMPLES,
    REPEAT,
    STEP_TOKENS,
    TASKS,
    report_of,
    results_lines,
    run_eval,
)

from _support import keel
from keel.journal import read_journal

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The shipped suite evaluated once, locally, two runs at a time: (OUT, the report)."""
    base = tmp_path_factory.mktemp("eval")
    state = base / "state"
    state.mkdir(mode=0o700)
    out = base / "out"
    done = run_eval(out, "--jobs", "2", cwd=base, env={"KEEL_STATE_DIR": str(state)})
    yield out, report_of(done)
    shutil.rmtree(base, ignore_errors=True)


def expected_arm(arm: str) -> dict[str, Any]:
    """One arm's figures, from TASKS, over REPEAT repeats."""
    runs = len(TASKS) * REPEAT
    steps = sum(t["steps"] for t in TASKS.values()) * REPEAT
    successes = sum(t[arm] for t in TASKS.values()) * REPEAT
    traps = [t for t in TASKS.values() if t["trap"]]
    premature = len(traps) * REPEAT if arm == "keel" else 0
    caught = REPEAT * (
        len(traps) if arm == "keel" else sum(t.get("bare_caught", False) for t in traps)
    )
    correct = sum(t.get("correct", 0) for t in TASKS.values()) * REPEAT if arm == "keel" else 0
    trap_runs = len(traps) * REPEAT
    return {  # the report rounds its figures to 6 decimals
        "runs": runs,
        "errors": 0,
        "success": (successes, round(successes / runs, 6)),
        "steps": (steps, round(steps / runs, 6)),
        "tokens": (steps * STEP_TOKENS, round(steps * STEP_TOKENS / runs, 6)),
        "cost_usd": (0.0, 0.0),
        "premature_refused": (premature, round(premature / runs, 6)),
        "assumptions_caught": (caught, round(caught / trap_runs, 6), trap_runs),
        "guidance": {"hint": 0, "correct": correct, "replan": 0, "stop": 0},
        "outcomes": {"finished": runs},
    }


def test_the_per_arm_figures_are_the_hand_computed_ones(
    recorded: tuple[Path, dict[str, Any]],
) -> None:
    _, report = recorded
    assert report["runs"] == len(TASKS) * 2 * REPEAT
    assert report["tasks"] == sorted(TASKS)
    assert report["trap_tasks"] == sorted(t for t, v in TASKS.items() if v["trap"])
    assert report["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95, "unit": "task"}
    arms = {a["arm"]: a for a in report["arms"]}
    assert list(arms) == ["keel", "bare"]
    assert arms["bare"]["settings"] == {"require_plan": "false", "guidance": "off"}
    for name, arm in arms.items():
        want = expected_arm(name)
        got = {
            "runs": arm["runs"],
            "errors": arm["errors"],
            **{k: (arm[k]["total"], arm[k]["value"])
               for k in ("success", "steps", "tokens", "cost_usd", "premature_refused")},
            "assumptions_caught": (arm["assumptions_caught"]["total"],
                                   arm["assumptions_caught"]["value"],
                                   arm["assumptions_caught"]["trap_runs"]),
            "guidance": arm["guidance"],
            "outcomes": arm["outcomes"],
        }  # fmt: skip
        assert got == want, name
        for key in ("success", "steps", "tokens", "premature_refused", "assumptions_caught"):
            ci, value = arm[key]["ci"], arm[key]["value"]
            assert ci["low"] <= value <= ci["high"], (name, key, ci, value)
    # every keel run succeeded and caught its trap: the intervals cannot be wider than a point
    assert arms["keel"]["success"]["ci"] == {"low": 1.0, "high": 1.0}
    assert arms["keel"]["assumptions_caught"]["ci"] == {"low": 1.0, "high": 1.0}
    assert arms["bare"]["premature_refused"]["ci"] == {"low": 0.0, "high": 0.0}


def test_the_paired_comparison_is_per_task(recorded: tuple[Path, dict[str, Any]]) -> None:
    _, report = recorded
    (comparison,) = report["comparisons"]
    worse = [t for t, v in TASKS.items() if v["keel"] and not v["bare"]]
    traps = [t for t, v in TASKS.items() if v["trap"]]
    assert (comparison["baseline"], comparison["arm"], comparison["tasks"]) == (
        "keel", "bare", len(TASKS),
    )  # fmt: skip
    success = comparison["success"]
    assert success["difference"] == pytest.approx(-len(worse) / len(TASKS))
    assert (success["better"], success["worse"], success["same"]) == (
        0, len(worse), len(TASKS) - len(worse),
    )  # fmt: skip
    assert success["ci"]["low"] <= success["difference"] <= success["ci"]["high"] < 0
    assert comparison["steps"]["difference"] == 0.0
    assert comparison["steps"]["ci"] == {"low": 0.0, "high": 0.0}
    assert comparison["premature_refused"]["difference"] == pytest.approx(-len(traps) / len(TASKS))
    per_task = {t: {a: (c["successes"], c["runs"]) for a, c in arms.items()}
                for t, arms in report["per_task"].items()}  # fmt: skip
    assert per_task == {
        t: {"keel": (REPEAT * v["keel"], REPEAT), "bare": (REPEAT * v["bare"], REPEAT)}
        for t, v in TASKS.items()
    }


def test_results_stream_to_json_lines_and_each_run_keeps_its_journal(
    recorded: tuple[Path, dict[str, Any]],
) -> None:
    out, report = recorded
    header, *runs = results_lines(out)
    assert header["kind"] == "eval" and header["runs"] == len(runs) == report["runs"]
    assert header["suite"] == str(EXAMPLES)
    assert [a["name"] for a in header["arms"]] == ["keel", "bare"]
    assert {r["run_id"] for r in runs} == {
        f"{t}/{a}/{r}" for t in TASKS for a in ("keel", "bare") for r in range(REPEAT)
    }
    for run in runs:
        task = TASKS[run["task"]]
        assert run["kind"] == "run" and run["error"] is None, run
        assert run["success"] is task[run["arm"]], run
        assert (run["check_exit"] == 0) is run["success"], run
        assert run["steps"] == task["steps"] and run["tokens"] == task["steps"] * STEP_TOKENS
        workspace = out / run["workspace"]
        assert workspace == out / "runs" / run["run_id"] / "workspace"
        with read_journal(workspace) as journal:
            kinds = [e.kind for e in journal.events(session_id=run["session_id"])]
        assert kinds[:2] == ["checkpoint", "session.start"] and kinds[-1] == "session.end"
        assert kinds.count("model.response") == task["steps"]
    (report_md,) = [p for p in out.iterdir() if p.name == "report.md"]
    assert "| keel |" in report_md.read_text() and (out / "report.json").is_file()
    assert json.loads((out / "report.json").read_text())["runs"] == report["runs"]


def test_an_arm_sets_keel_toml_over_the_repository_s_own(
    recorded: tuple[Path, dict[str, Any]],
) -> None:
    out, _ = recorded
    runs = out / "runs" / "read-only-target"
    shipped = (EXAMPLES / "tasks" / "read-only-target" / "repo" / "keel.toml").read_text()
    assert (runs / "keel" / "0" / "workspace" / "keel.toml").read_text() == shipped
    bare = tomllib.loads((runs / "bare" / "0" / "workspace" / "keel.toml").read_text())
    assert bare == {
        "sandbox": {"read_only": ["deploy/**"]},
        "agent": {"require_plan": False},
        "monitor": {"enabled": False},
    }
    # the check's files arrive after the run, where the agent never saw them
    assert (runs / "keel" / "0" / "workspace" / ".eval-check" / "check.py").is_file()


def test_replay_finds_every_recorded_run_identical(recorded: tuple[Path, dict[str, Any]]) -> None:
    out, report = recorded
    done = keel("eval", "--replay", str(out), "--jobs", "2", "--json", cwd=out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["identical"] is True and len(data["runs"]) == report["runs"]
    for run in data["runs"]:
        task = TASKS[run["run_id"].split("/")[0]]
        assert (run["status"], run["model_calls"]) == ("identical", task["steps"]), run


def test_replay_on_a_changed_suite_names_the_first_divergence(
    recorded: tuple[Path, dict[str, Any]], workdir: Path
) -> None:
    out, _ = recorded
    suite = workdir / "suite"
    shutil.copytree(EXAMPLES, suite)
    config = suite / "tasks" / "wrong-key" / "repo" / "config.json"
    config.write_text(config.read_text().replace('"timeout_s": 5', '"timeout_s": 7'))
    done = keel("eval", "--replay", str(out / "results.jsonl"), str(suite), "--json", cwd=workdir)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    runs = {r["run_id"]: r for r in json.loads(done.stdout)["runs"]}
    diverged = {i for i, r in runs.items() if r["status"] == "diverged"}
    # arm keel reads config.json in its first plan; arm bare overwrote it at step 1 unread
    assert diverged == {f"wrong-key/keel/{r}" for r in range(REPEAT)}
    assert all(r["status"] == "identical" for i, r in runs.items() if i not in diverged)
    divergence = runs["wrong-key/keel/0"]["divergence"]
    assert (divergence["step"], divergence["phase"], divergence["what"]) == (
        2, "plan", "tool result",
    )  # fmt: skip
    assert divergence["pointer"] == "/output"
    assert '"timeout_s": 5' in divergence["recorded"] and '"timeout_s": 7' in divergence["new"]
    text = keel("eval", "--replay", str(out), str(suite), cwd=workdir)
    assert text.returncode == 1
    assert "diverged   wrong-key/keel/0: step 2 (plan), tool result /output" in text.stdout
    assert f"{len(runs) - len(diverged)} of {len(runs)} runs identical" in text.stdout
