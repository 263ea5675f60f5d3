"""Every example in examples/ validates and runs to its documented outcome (the real CLI)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from plan_helpers import sandbox

from _support import keel
from keel.plan.examples import example_text, load_example

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
README = EXAMPLES / "README.md"
JUDGE = "judge"
"""examples/judge: the judge's labelled set, not a plan (tests/judge run it)."""
EVAL = "eval"
"""examples/eval: keel eval's suite, not a plan (tests/eval run it)."""


@dataclass(frozen=True)
class Outcome:
    """One documented run of an example: how the copy is changed first, and what comes out."""

    name: str
    exit_code: int
    state: str
    done: tuple[str, ...]
    """The final actions that ran (step ids)."""
    output: str | None = None
    """Text one of them reported (``output.result`` / ``ui.prompt_user``)."""
    files: dict[str, str] = field(default_factory=dict[str, str])
    """Files expected in the workspace afterwards, with their text."""
    absent: tuple[str, ...] = ()
    prepare: Callable[[Path], object] | None = None
    answers: bool = False


def _rename_sales(root: Path) -> None:
    csv = root / "data" / "input.csv"
    csv.write_text(csv.read_text().replace(",sales\n", ",revenue\n"))


OUTCOMES: dict[str, list[Outcome]] = {
    "config": [
        Outcome("as shipped", 0, "completed", ("step_3",),
                "Database host: db.internal"),
        Outcome("config.yaml deleted", 0, "completed", ("step_2c",),
                "config.yaml not found. Create a template?",
                prepare=lambda root: (root / "config.yaml").unlink()),
    ],
    "csv-report": [
        Outcome("as shipped", 0, "completed", ("step_4b",),
                files={"report.txt": "sales total: 400\n"}),
        Outcome("no sales column", 3, "needs_input", (), absent=("report.txt",),
                prepare=_rename_sales),
        Outcome("no sales column, answered", 0, "completed", ("step_4b",),
                files={"report.txt": "units total: 9\n"}, prepare=_rename_sales, answers=True),
    ],
    "missing-file": [
        Outcome("as shipped", 0, "completed", ("ask_first",),
                "This project has no CHANGELOG.md. Create one before adding entries?",
                absent=("CHANGELOG.md",)),
        Outcome("CHANGELOG.md created", 0, "completed", ("append",),
                files={"CHANGELOG.md": "# Changes\n- Document the example plans.\n"},
                prepare=lambda root: (root / "CHANGELOG.md").write_text("# Changes\n")),
    ],
}  # fmt: skip
CASES = [(name, o) for name, outcomes in OUTCOMES.items() for o in outcomes]


def example_dirs() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and p.name not in (JUDGE, EVAL))


def test_every_example_has_documented_outcomes() -> None:
    assert {p.name for p in example_dirs()} == set(OUTCOMES)
    readme = README.read_text(encoding="utf-8")
    for name, outcomes in OUTCOMES.items():
        assert f"## {name}:" in readme, name
        for outcome in outcomes:
            assert f"State: {outcome.state} (exit {outcome.exit_code})" in readme, outcome


def test_every_file_in_examples_is_a_plan_a_workspace_or_docs() -> None:
    """Nothing in examples/ escapes the tests: plans, answers, sample workspaces, README."""
    for path in EXAMPLES.rglob("*"):
        if path.is_dir():
            continue
        rel = path.relative_to(EXAMPLES).parts
        assert (
            rel == ("README.md",)
            or rel[0] in (JUDGE, EVAL)
            or (len(rel) == 2 and rel[1] in ("plan.json", "answers.json"))
            or (len(rel) > 2 and rel[1] == "workspace")
        ), path


@pytest.mark.parametrize("directory", example_dirs(), ids=lambda p: p.name)
def test_every_plan_validates(directory: Path, workdir: Path) -> None:
    workspace = workdir / "ws"
    shutil.copytree(directory / "workspace", workspace)
    result = keel("plan", "validate", str(directory / "plan.json"), "--json",
                  "-w", str(workspace), cwd=workspace)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["valid"] is True and verdict["issues"] == []
    strict = keel("plan", "validate", str(directory / "plan.json"), "--strict",
                  "-w", str(workspace), cwd=workspace)  # fmt: skip
    assert strict.returncode == 0, strict.stdout


@pytest.mark.parametrize(("name", "outcome"), CASES, ids=[f"{n}: {o.name}" for n, o in CASES])
def test_example_runs_to_its_documented_outcome(name: str, outcome: Outcome, workdir: Path) -> None:
    sandbox()
    directory = EXAMPLES / name
    workspace = workdir / "ws"
    shutil.copytree(directory / "workspace", workspace)
    if outcome.prepare is not None:
        outcome.prepare(workspace)
    args = ["plan", "run", str(directory / "plan.json"), "--json", "-w", str(workspace)]
    if outcome.answers:
        args += ["--answers", str(directory / "answers.json")]
    result = keel(*args, cwd=workspace)
    assert result.returncode == outcome.exit_code, result.stdout + result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["state"] == outcome.state
    assert report["sandbox"] not in (None, "none-unsafe")
    done = [a for a in report["actions"] if a["status"] == "done"]
    assert tuple(a["step_id"] for a in done) == outcome.done, report["actions"]
    if outcome.output is not None:
        assert outcome.output in [a["output"] for a in done]
    for rel, text in outcome.files.items():
        assert (workspace / rel).read_text(encoding="utf-8") == text
    for rel in outcome.absent:
        assert not (workspace / rel).exists()


def test_text_report_says_what_the_readme_says(workdir: Path) -> None:
    sandbox()
    workspace = workdir / "ws"
    shutil.copytree(EXAMPLES / "config" / "workspace", workspace)
    result = keel("plan", "run", str(EXAMPLES / "config" / "plan.json"), "-w", str(workspace),
                  cwd=workspace)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    line = "final output.result: done - Database host: db.internal"
    assert line in result.stdout and line in README.read_text(encoding="utf-8")
    assert "State: completed (exit 0)" in result.stdout


def test_config_example_is_the_seeds_plan_in_english() -> None:
    """Same ids, step types, functions, variables and conditions as the seed's config plan."""

    def shape(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: shape(v) for k, v in item.items() if k not in ("description", "goal")}
        if isinstance(item, list):
            return [shape(v) for v in item]
        if isinstance(item, str) and "{{" not in item and not item.isascii():
            return "<text>"
        return item

    mine = json.loads((EXAMPLES / "config" / "plan.json").read_text(encoding="utf-8"))
    seed = load_example("config_plan")
    for plan in (mine, seed):  # the messages differ by language only
        plan["steps"][1]["false_branch"][0]["action"]["args"] = ["<text>"]
        plan["steps"][2]["action"]["args"] = ["<text>"]
    assert shape(mine) == shape(seed)


def test_the_seeds_own_plan_runs_unchanged_in_the_config_workspace(workdir: Path) -> None:
    """The seed's config plan, byte for byte as keel ships it, gives the same answer."""
    sandbox()
    workspace = workdir / "ws"
    shutil.copytree(EXAMPLES / "config" / "workspace", workspace)
    seed = workdir / "seed_plan.json"
    seed.write_text(example_text("config_plan"), encoding="utf-8")
    shared = REPO.parent / "shared" / "seeds" / "config_plan.json"
    if shared.is_file():  # the seed itself, where this checkout sits beside it
        assert json.loads(shared.read_text(encoding="utf-8")) == load_example("config_plan")
    result = keel("plan", "run", str(seed), "--json", "-w", str(workspace), cwd=workspace)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    done = [(a["step_id"], a["output"]) for a in report["actions"] if a["status"] == "done"]
    assert done == [("step_3", "数据库主机为：db.internal")]
