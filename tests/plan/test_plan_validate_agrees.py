"""``keel plan validate`` and ``keel plan run`` judge a plan the same way (real processes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plan_helpers import sandbox

from _support import keel


def ev(id_: str, function: str, args: list[Any], out: str) -> dict[str, Any]:
    return {"id": id_, "type": "evidence_collection",
            "action": {"function": function, "args": args}, "output_to": out}  # fmt: skip


def final(id_: str, function: str, args: list[Any], condition: Any = None) -> dict[str, Any]:
    step: dict[str, Any] = {"id": id_, "type": "final_action",
                            "action": {"function": function, "args": args}}  # fmt: skip
    if condition is not None:
        step["condition"] = condition
    return step


UNGUARDED_WRITE_NOT_REACHED = {
    "goal": "write out.txt when in.txt exists, else say so",
    "steps": [
        ev("look", "fs.exists", ["in.txt"], "present"),
        {
            "id": "branch",
            "type": "conditional",
            "condition": {"op": "and", "vars": ["{{present}}"]},
            "true_branch": [final("write", "file.write", ["out.txt", "x\n"])],
            "false_branch": [final("say", "output.result", ["in.txt is missing"])],
        },
    ],
}
UNGUARDED_WRITE_REACHED = {
    "goal": "write out.txt",
    "steps": [final("write", "file.write", ["out.txt", "x\n"])],
}
GUARDED_WRITE = {
    "goal": "write out.txt when it is writable",
    "steps": [
        ev("check", "fs.writable", ["out.txt"], "ok"),
        final("write", "file.write", ["out.txt", "x\n"], {"op": "and", "vars": ["{{ok}}"]}),
    ],
}
PROBE_WARNING_ONLY = {
    "goal": "sum a column without checking the headers (a warning, nothing refused)",
    "steps": [
        ev("sum", "parse.csv_sum", ["d.csv", "n"], "total"),
        final("say", "output.result", ["{{total}}"], {"op": "defined", "vars": ["{{total}}"]}),
    ],
}
GUARDED_THEN_UNGUARDED = {
    "goal": "write first.txt (checked), then second.txt (not checked)",
    "steps": [
        ev("check", "fs.writable", ["first.txt"], "ok"),
        final("first", "file.write", ["first.txt", "1\n"], {"op": "and", "vars": ["{{ok}}"]}),
        final("second", "file.write", ["second.txt", "2\n"]),
    ],
}
BARE_VARIABLE = {
    "goal": "branch on a bare name",
    "steps": [
        ev("look", "fs.exists", ["in.txt"], "present"),
        final("say", "output.result", ["yes"], {"op": "and", "vars": ["present"]}),
    ],
}


@pytest.mark.parametrize(
    ("plan", "code", "state"),
    [
        (UNGUARDED_WRITE_NOT_REACHED, 1, "failed"),
        (UNGUARDED_WRITE_REACHED, 1, "failed"),
        (GUARDED_WRITE, 0, "completed"),
        (PROBE_WARNING_ONLY, 0, "completed"),
        (GUARDED_THEN_UNGUARDED, 1, "failed"),
        (BARE_VARIABLE, 1, "invalid"),
    ],
    ids=[
        "unguarded-not-reached",
        "unguarded-reached",
        "guarded",
        "probe-warning",
        "guarded-then-unguarded",
        "bare-name",
    ],
)
def test_validate_exits_as_run_does(
    workdir: Path, plan: dict[str, Any], code: int, state: str
) -> None:
    sandbox()
    (workdir / "d.csv").write_text("n\n1\n2\n")
    path = workdir / "plan.json"
    path.write_text(json.dumps(plan))
    checked = keel("plan", "validate", str(path), "--json", "-w", str(workdir), cwd=workdir)
    ran = keel("plan", "run", str(path), "--json", "-w", str(workdir), cwd=workdir)
    assert checked.returncode == code, checked.stdout + checked.stderr
    assert ran.returncode == code, ran.stdout + ran.stderr
    verdict = json.loads(checked.stdout)
    assert verdict["exit_code"] == code and verdict["valid"] is (code == 0)
    report = json.loads(ran.stdout)
    assert report["state"] == state
    assert report["refused"] == verdict["refused"]
    if plan is UNGUARDED_WRITE_NOT_REACHED:
        assert verdict["refused"] == ["write"]
        assert [a["step_id"] for a in report["actions"]] == ["say"]  # evidence still reported
    assert not (workdir / "out.txt").exists() or plan is GUARDED_WRITE


def test_text_output_names_the_refused_actions(workdir: Path) -> None:
    sandbox()
    path = workdir / "plan.json"
    path.write_text(json.dumps(UNGUARDED_WRITE_NOT_REACHED))
    checked = keel("plan", "validate", str(path), "-w", str(workdir), cwd=workdir)
    assert "commitment.no_writable_evidence" in checked.stdout
    assert "would refuse them and exit 1" in checked.stdout
    ran = keel("plan", "run", str(path), "-w", str(workdir), cwd=workdir)
    assert "Refused by the commitment lint: write" in ran.stdout
    assert "State: failed (exit 1)" in ran.stdout


def test_a_flagged_plan_writes_nothing_at_all(workdir: Path) -> None:
    """The guarded write of a plan the lint flagged is held back too: nothing half done."""
    sandbox()
    path = workdir / "plan.json"
    path.write_text(json.dumps(GUARDED_THEN_UNGUARDED))
    ran = keel("plan", "run", str(path), "--json", "-w", str(workdir), cwd=workdir)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    assert report["refused"] == ["second"]
    actions = {a["step_id"]: a for a in report["actions"]}
    assert actions["first"]["status"] == actions["second"]["status"] == "refused"
    assert "flagged final action(s) second" in actions["first"]["reason"]
    assert [p["step_id"] for p in report["probes"]] == ["check"]  # the evidence is reported
    assert not (workdir / "first.txt").exists() and not (workdir / "second.txt").exists()
