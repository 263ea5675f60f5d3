from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from plan_helpers import csv_repo, example, sandbox
from typer.testing import CliRunner

from keel.cli.plan import register


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = {}

    register(app)
    return app


def invoke(*args: str) -> Any:
    return CliRunner().invoke(make_app(), list(args))


def write_plan(path: Path, plan: Any) -> str:
    path.write_text(json.dumps(plan, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_schema() -> None:
    result = invoke("plan", "schema")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "keel plan"


def test_functions() -> None:
    result = invoke("plan", "functions", "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 0
    assert any(
        p["name"] == "fs.exists" and "filesystem.check_exists" in p["aliases"]
        for p in data["probes"]
    )
    assert "file.append" in invoke("plan", "functions").stdout


def test_validate_exit_codes(workdir: Path) -> None:
    good = write_plan(workdir / "good.json", example("config_plan"))
    result = invoke("plan", "validate", good, "-w", str(workdir))
    assert result.exit_code == 0 and "valid" in result.stdout
    bad_plan = example("config_plan")
    bad_plan["steps"][1]["true_branch"][0]["action"]["function"] = "parsing.load_yml"
    bad_plan["steps"][2]["action"]["args"] = ["{{db_hots}}"]
    bad = write_plan(workdir / "bad.json", bad_plan)
    result = invoke("plan", "validate", bad, "--json", "-w", str(workdir))
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["valid"] is False
    paths = {(i["code"], i["path"], i["step_id"]) for i in data["issues"]}
    assert (
        "plan.unknown_function",
        "$.steps[1].true_branch[0].action.function",
        "step_2a",
    ) in paths
    assert ("plan.undefined_variable", "$.steps[2].action.args[0]", "step_3") in paths
    text = invoke("plan", "validate", bad, "-w", str(workdir))
    assert text.exit_code == 1 and "$.steps[1].true_branch[0].action.function" in text.stdout
    (workdir / "broken.json").write_text("{not json")
    assert (
        invoke("plan", "validate", str(workdir / "broken.json"), "-w", str(workdir)).exit_code == 2
    )
    assert (
        invoke("plan", "validate", str(workdir / "absent.json"), "-w", str(workdir)).exit_code == 2
    )
    lint = write_plan(
        workdir / "lint.json",
        {
            "goal": "g",
            "steps": [
                {
                    "id": "w",
                    "type": "final_action",
                    "action": {"function": "file.write", "args": ["a.txt", "x"]},
                }
            ],
        },
    )
    # `plan run` refuses a final action the commitment lint flags, so validate fails it too
    flagged = invoke("plan", "validate", lint, "-w", str(workdir))
    assert flagged.exit_code == 1 and "would refuse" in flagged.stdout
    assert invoke("plan", "validate", lint, "--strict", "-w", str(workdir)).exit_code == 1
    # a warning on a probe (no final action is refused) fails only with --strict
    column = write_plan(
        workdir / "column.json",
        {
            "goal": "g",
            "steps": [
                {
                    "id": "a",
                    "type": "evidence_collection",
                    "action": {"function": "parse.csv_sum", "args": ["d.csv", "sales"]},
                    "output_to": "t",
                }
            ],
        },
    )
    assert invoke("plan", "validate", column, "-w", str(workdir)).exit_code == 0
    assert invoke("plan", "validate", column, "--strict", "-w", str(workdir)).exit_code == 1


def test_run_completed_needs_input_and_answers(workdir: Path) -> None:
    sandbox()
    csv_repo(workdir)
    plan = write_plan(workdir / "csv.json", example("csv_report_plan"))
    first = invoke("plan", "run", plan, "--json", "-w", str(workdir))
    assert first.exit_code == 3, first.output
    report = json.loads(first.stdout)
    assert report["state"] == "needs_input"
    assert (
        report["questions"][0]["output_to"] == "column"
        and report["questions"][0]["status"] == "pending"
    )
    answers = workdir / "answers.json"
    answers.write_text(json.dumps({"column": "营收"}, ensure_ascii=False), encoding="utf-8")
    second = invoke("plan", "run", plan, "--answers", str(answers), "-w", str(workdir))
    assert second.exit_code == 0, second.output
    assert "Verified facts:" in second.stdout and "营收" in second.stdout
    assert (workdir / "report.txt").read_text(encoding="utf-8") == "营收 总和：400\n"
    assert (workdir / ".keel" / "journal.db").exists()


def test_questions_are_answered_on_the_command_line(workdir: Path) -> None:
    sandbox()
    csv_repo(workdir)
    plan = write_plan(workdir / "csv.json", example("csv_report_plan"))
    answers = workdir / "answers.json"
    answers.write_text(json.dumps({"column": "nope"}), encoding="utf-8")
    done = invoke(
        "plan", "run", plan, "--answers", str(answers), "--answer", "column=营收",
        "-w", str(workdir),
    )  # fmt: skip
    assert done.exit_code == 0, done.output  # --answer wins over the file
    assert (workdir / "report.txt").read_text(encoding="utf-8") == "营收 总和：400\n"
    bad = invoke("plan", "run", plan, "--answer", "column", "--json", "-w", str(workdir))
    assert bad.exit_code == 2 and "VAR=VALUE" in bad.output
    from keel.cli.plan import _answer_words

    words = ["n=3", "ok=true", "none=null", "xs=[1, 2]", "text=a b", "eq=a=b", "empty="]
    assert _answer_words(words) == {
        "n": 3, "ok": True, "none": None, "xs": [1, 2], "text": "a b", "eq": "a=b", "empty": "",
    }  # fmt: skip


def test_run_failure_and_bad_input(workdir: Path) -> None:
    sandbox()
    (workdir / "config.yaml").write_text("database: [oops\n")
    plan = write_plan(workdir / "config.json", example("config_plan"))
    result = invoke("plan", "run", plan, "-w", str(workdir))
    assert result.exit_code == 1 and "yaml.syntax" in result.stdout
    invalid = write_plan(workdir / "invalid.json", {"goal": "x", "steps": []})
    result = invoke("plan", "run", invalid, "--json", "-w", str(workdir))
    assert result.exit_code == 1 and json.loads(result.stdout)["state"] == "invalid"
    (workdir / "answers.json").write_text("[1]")
    result = invoke(
        "plan", "run", plan, "--answers", str(workdir / "answers.json"), "-w", str(workdir)
    )
    assert result.exit_code == 2
