"""A final action whose condition is *unknown* never runs (issue 14, survivor 5).

Unknown is not false: a probe failed, so the evidence the condition reads does not exist. Every
argument of the action here is a literal, so nothing else keeps it from running: only the
engine's rule that an unknown condition never commits. The effect is checked on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plan_helpers import by_id, run

BROKEN_YAML = "database: [unclosed\n"

# Each is unknown when ``cfg`` is missing (its probe failed) and ``ok`` is true.
UNKNOWN = [
    {"op": "and", "vars": ["{{ok}}", "{{cfg}}"]},
    {"op": "or", "vars": [{"op": "not", "vars": ["{{ok}}"]}, "{{cfg}}"]},
    {"op": "not", "vars": ["{{cfg}}"]},
    {"op": "equals", "vars": ["{{cfg}}", "{{cfg}}"]},
    {"op": "not_equals", "vars": ["{{cfg.database}}", "nothing"]},
    {"op": "and", "vars": ["{{ok}}", {"op": "contains", "vars": ["{{cfg}}", "database"]}]},
]


def _plan(condition: dict[str, Any]) -> dict[str, Any]:
    return {
        "goal": "write only on evidence",
        "steps": [
            {
                "id": "y",
                "type": "evidence_collection",
                "output_to": "cfg",
                "action": {"function": "parsing.safe_load_yaml", "args": ["config.yaml"]},
            },
            {
                "id": "w",
                "type": "evidence_collection",
                "output_to": "ok",
                "action": {"function": "fs.writable", "args": ["out.txt"]},
            },
            {
                "id": "f",
                "type": "final_action",
                "condition": {"op": "and", "vars": ["{{ok}}", condition]},
                "action": {"function": "file.write", "args": ["out.txt", "committed\n"]},
            },
        ],
    }


@pytest.mark.parametrize("condition", UNKNOWN, ids=[str(c) for c in UNKNOWN])
def test_a_final_action_on_an_unknown_condition_does_not_run(
    workdir: Path, condition: dict[str, Any]
) -> None:
    (workdir / "config.yaml").write_text(BROKEN_YAML)
    report = run(_plan(condition), workdir)
    assert report.issues == (), report.issues  # a valid plan: only the evidence is missing
    steps = by_id(report)
    assert steps["y"].status == "error" and steps["w"].status == "ok"
    action = steps["f"]
    assert action.status == "skipped", action
    assert "no evidence for cfg" in (action.reason or ""), action.reason
    assert not (workdir / "out.txt").exists()
    assert report.state == "failed" and report.exit_code == 1


def test_the_same_plan_commits_when_the_evidence_is_there(workdir: Path) -> None:
    """The control: with a readable config the condition is true and the file is written."""
    (workdir / "config.yaml").write_text("database: {host: db}\n")
    report = run(_plan(UNKNOWN[0]), workdir)
    assert by_id(report)["f"].status == "done"
    assert (workdir / "out.txt").read_text() == "committed\n"
    assert report.state == "completed"
