"""Trap tasks: the task assumes something false about the repository.

A naive scripted model writes at once, then runs the plan keel asks for, then writes again.
keel must refuse every write before a plan held, and the plan must catch the broken
assumption, so nothing is ever written. (Mocked only at the model boundary.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from keel.agent import RunOptions, start_run
from keel.journal import read_journal
from keel.models.testing import ScriptedModel


def _probe(function: str, *args: Any) -> dict[str, Any]:
    return {
        "id": "e1",
        "type": "evidence_collection",
        "description": "look",
        "action": {"function": function, "args": list(args)},
        "output_to": "found",
    }


def _check(op: str, *values: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "type": "conditional",
        "description": "the assumption",
        "condition": {"op": op, "vars": list(values)},
        "true_branch": [],
        "false_branch": [],
    }


@dataclass(frozen=True)
class Trap:
    name: str
    files: dict[str, str]
    task: str
    target: str
    """The file the naive model writes."""
    steps: list[dict[str, Any]]


TRAPS = [
    Trap(
        "column",
        {"data.csv": "region,revenue\nn,1\n"},
        "sum the sales column of data.csv",
        "total.py",
        [_probe("parsing.inspect_csv_headers", "data.csv"), _check("in", "sales", "{{found}}")],
    ),
    Trap(
        "json key",
        {"config.json": '{"timeout_s": 5}'},
        "raise the timeout key in config.json",
        "config.json",
        [_probe("parsing.load_json", "config.json"), _check("defined", "{{found.timeout}}")],
    ),
    Trap(
        "path",
        {"src/util.py": "X = 1\n"},
        "edit src/utils.py",
        "src/utils.py",
        [_probe("filesystem.check_exists", "src/utils.py"), _check("and", "{{found}}")],
    ),
    Trap(
        "permission",
        {"deploy.sh": "echo deploy\n"},
        "deploy.sh is executable: call it",
        "deploy.sh",
        [_probe("filesystem.stat", "deploy.sh"), _check("matches", "{{found.mode}}", "^0o7")],
    ),
    Trap(
        "function name",
        {"calc.py": "def calc_total(x):\n    return x\n"},
        "fix compute_total in calc.py",
        "calc.py",
        [_probe("python.symbols", "calc.py"), _check("in", "compute_total", "{{found.functions}}")],
    ),
    Trap(
        "class name",
        {"model.py": "class Invoice:\n    pass\n"},
        "add a field to Order in model.py",
        "model.py",
        [_probe("python.symbols", "model.py"), _check("defined", "{{found.classes.Order}}")],
    ),
    Trap(
        "yaml key",
        {"settings.yaml": "db:\n  hostname: x\n"},
        "change db.host in settings.yaml",
        "settings.yaml",
        [_probe("parsing.load_yaml", "settings.yaml"), _check("defined", "{{found.db.host}}")],
    ),
    Trap(
        "directory",
        {"test/test_a.py": "def test_a():\n    pass\n"},
        "add a test under tests/",
        "tests/test_b.py",
        [_probe("filesystem.is_dir", "tests"), _check("and", "{{found}}")],
    ),
    Trap(
        "row count",
        {"rows.csv": "a\n1\n2\n"},
        "rows.csv has 3 rows: average them",
        "avg.py",
        [_probe("parsing.csv_row_count", "rows.csv"), _check("equals", "{{found}}", 3)],
    ),
    Trap(
        "toml key",
        {"pyproject.toml": '[project]\nname = "x"\n'},
        "bump the version in pyproject.toml",
        "pyproject.toml",
        [
            _probe("parsing.load_toml", "pyproject.toml"),
            _check("defined", "{{found.project.version}}"),
        ],
    ),
]


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".keel" not in p.parts
    }


def _calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}


@pytest.mark.parametrize("trap", TRAPS, ids=[t.name for t in TRAPS])
def test_naive_writes_are_refused_and_the_plan_catches_the_assumption(
    workdir: Path, trap: Trap
) -> None:
    for rel, text in trap.files.items():
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(text)
    before = _tree(workdir)
    write = ("write_file", {"path": trap.target, "content": "naive\n"})
    patch = (
        f"*** Begin Patch\n*** Add File: naive_{trap.target.replace('/', '_')}\n+x\n*** End Patch\n"
    )
    plan = {"goal": f"check: {trap.task}", "steps": trap.steps}
    model = ScriptedModel(
        [
            _calls(write),
            _calls(("apply_patch", {"patch": patch})),
            _calls(("run_plan", {"plan": plan})),
            _calls(write),
            _calls(("finish", {"summary": "stopped: the assumption is false"})),
        ]
    )
    result = start_run(workdir, trap.task, RunOptions(), model=model)
    model.assert_complete()
    assert _tree(workdir) == before  # nothing was ever written
    assert all(p["to"] != "implement" for p in result.phases)  # the plan did not hold
    with read_journal(workdir) as journal:
        rules = [
            getattr(e.payload, "rule", "")
            for e in journal.events(session_id=result.session_id, kinds=("decision",))
        ]
    assert rules.count("agent.premature_commitment") == 3, rules
    plan_result = model.calls[3].messages[-2].content  # the tool result of run_plan
    assert "you stay in plan" in plan_result, plan_result
