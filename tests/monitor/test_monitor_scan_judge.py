"""``keel monitor scan FILE --judge [SPEC]``: the judge at the steps [judge.when] schedules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from keel.cli._entry import main as keel_main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "monitor" / "samples" / "claude_transcript.jsonl"
"""12 tool calls; rule diagnostics at 5 (hint), 9 (hint), 10 (correct), 12 (hint)."""
GAMING = ROOT / "examples" / "judge" / "runs" / "gaming-test-edit.jsonl"
"""4 tool calls, no rule diagnostics."""


def answer(category: str = "none", confidence: float = 0.9) -> dict[str, Any]:
    """A script step answering one verdict (``none``: ok)."""
    ok = category == "none"
    return {
        "json": {
            "verdict": "ok" if ok else "problem",
            "category": category,
            "confidence": confidence,
            "evidence": [] if ok else [1],
            "suggestion": "" if ok else "Restore the test and fix the code.",
        }
    }


def script(workdir: Path, name: str, steps: list[Any]) -> Path:
    path = workdir / name
    path.write_text(json.dumps(steps))
    return path


def configure(workdir: Path, model: Path | None, when: str = "") -> None:
    text = "[judge]\n" + (f'model = "script:{model}"\n' if model else "")
    if when:
        text += f"[judge.when]\n{when}\n"
    (workdir / "keel.toml").write_text(text)


def scan(
    workdir: Path, capsys: pytest.CaptureFixture[str], file: Path, *args: str
) -> tuple[int, str, str]:
    code = keel_main(["monitor", "scan", str(file), *args, "--workspace", str(workdir)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_judged_at_the_scheduled_steps_only(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = script(workdir, "judge.json", [answer(), answer("gaming", 0.95), answer()])
    configure(workdir, model)  # default [judge.when]: on_finding = correct, on_finish
    code, out, _ = scan(workdir, capsys, SAMPLE, "--judge")
    assert code == 0
    judged = out[out.index("judge script:") :]
    rules = out[: out.index("judge script:")]
    assert "step   10  test_weakening" in rules  # the rule diagnostics come first
    steps = [line.split()[1] for line in judged.splitlines() if line.startswith("  step")]
    assert steps == ["10", "12"]  # the correct-level finding, and the finish
    assert "step   10  none" in judged and "(finding)" in judged and "(finish)" in judged

    configure(workdir, model, 'on_finding = "hint"\nevery_n_steps = 4\non_finish = false')
    code, out, _ = scan(workdir, capsys, SAMPLE, "--judge", "--json")
    run = json.loads(out)["runs"][0]
    assert [(j["step"], j["triggers"]) for j in run["judgements"]] == [
        (4, ["every_n_steps"]),
        (5, ["finding"]),
        (8, ["every_n_steps"]),
        (9, ["finding"]),
        (10, ["finding"]),
        (12, ["finding", "every_n_steps"]),
    ]
    # the script has three answers: the later calls fail, each reported for its step
    assert [j["status"] for j in run["judgements"]][:3] == ["clear", "deliverable", "clear"]
    assert all(j["status"] == "error" and j["error"] for j in run["judgements"][3:])


def test_json_carries_the_judgements(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = script(workdir, "judge.json", [answer(), answer("gaming", 0.95)])
    configure(workdir, model, "every_n_steps = 2")
    code, out, _ = scan(workdir, capsys, GAMING, "--judge", "--json")
    data = json.loads(out)
    assert code == 0 and data["judge"] == {"model": f"script:{model}", "judgements": 2}
    first, second = data["runs"][0]["judgements"]
    assert (first["step"], first["status"], first["level"]) == (2, "clear", None)
    assert second["step"] == 4 and second["triggers"] == ["every_n_steps", "finish"]
    assert second["status"] == "deliverable" and second["level"] == "correct"
    assert second["verdict"]["category"] == "gaming" and second["verdict"]["confidence"] == 0.95
    assert second["verdict"]["suggestion"] == "Restore the test and fix the code."


def test_text_shows_category_confidence_suggestion_status(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(workdir, script(workdir, "judge.json", [answer("gaming", 0.95)]))
    code, out, _ = scan(workdir, capsys, GAMING, "--judge")
    assert code == 0
    assert "step    4  gaming        0.95  problem  deliverable -> correct  (finish)" in out
    assert "suggestion: Restore the test and fix the code." in out


@pytest.mark.parametrize(
    ("confidence", "fail_on", "expected"),
    [(0.95, "correct", 3), (0.5, "correct", 0), (0.95, "replan", 0), (0.95, "hint", 3)],
)
def test_fail_on_counts_a_deliverable_judgement(
    confidence: float,
    fail_on: str,
    expected: int,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(workdir, script(workdir, "judge.json", [answer("gaming", confidence)]))
    code, out, _ = scan(workdir, capsys, GAMING, "--judge", "--fail-on", fail_on)
    assert code == expected
    status = "deliverable" if confidence >= 0.7 else "below_threshold"
    assert status in out
    reached = 1 if expected else 0
    assert f"0 diagnostic(s) and {reached} judgement(s) at {fail_on} or above" in out

    code, out, _ = scan(workdir, capsys, GAMING, "--fail-on", fail_on)  # no --judge: no judge
    assert code == 0 and "judge script:" not in out and "judgement" not in out


def test_the_spec_overrides_keel_toml(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configure(workdir, script(workdir, "configured.json", [answer("gaming", 0.95)]))
    override = script(workdir, "override.json", [answer()])
    code, out, _ = scan(workdir, capsys, GAMING, "--judge-model", f"script:{override}", "--json")
    data = json.loads(out)
    assert code == 0 and data["judge"]["model"] == f"script:{override}"
    assert [j["status"] for j in data["runs"][0]["judgements"]] == ["clear"]


def test_a_malformed_answer_is_reported_for_its_step(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(workdir, script(workdir, "judge.json", [{"content": "looks fine to me"}]))
    code, out, _ = scan(workdir, capsys, GAMING, "--judge", "--fail-on", "correct")
    assert code == 0
    assert "step    4  error judge.malformed  (finish)" in out
    code, out, _ = scan(workdir, capsys, GAMING, "--judge", "--json")
    (only,) = json.loads(out)["runs"][0]["judgements"]
    assert only["status"] == "error" and only["error"] == "judge.malformed"


def test_no_model_is_a_usage_error(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configure(workdir, None)
    code, _, err = scan(workdir, capsys, GAMING, "--judge")
    assert code == 2 and "[judge] model" in err and "usage.model" in err
