"""A condition that names a variable without ``{{ }}`` is an error, never "condition is true"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plan_helpers import run

from keel.plan import validate_plan


def has_file_plan(condition: dict[str, Any]) -> dict[str, Any]:
    """The reported plan: check a file, branch on it, say something only when it exists."""
    return {
        "goal": "say whether notes.txt exists",
        "steps": [
            {
                "id": "check",
                "type": "evidence_collection",
                "action": {"function": "fs.exists", "args": ["notes.txt"]},
                "output_to": "has_file",
            },
            {
                "id": "branch",
                "type": "conditional",
                "condition": condition,
                "true_branch": [
                    {
                        "id": "found",
                        "type": "final_action",
                        "action": {"function": "output.result", "args": ["notes.txt is there"]},
                    }
                ],
                "false_branch": [
                    {
                        "id": "missing",
                        "type": "final_action",
                        "action": {"function": "output.result", "args": ["no notes.txt"]},
                    }
                ],
            },
        ],
    }


def found(plan: dict[str, Any]) -> list[tuple[str, str, str | None, str]]:
    return [(i.code, i.path, i.step_id, i.message) for i in validate_plan(plan).errors]


@pytest.mark.parametrize("written", ["has_file", "$has_file", "${has_file}", "{has_file}"])
def test_bare_variable_in_a_truth_test_is_an_error_with_a_suggestion(written: str) -> None:
    [(code, path, step, message)] = found(has_file_plan({"op": "and", "vars": [written]}))
    assert (code, path, step) == ("plan.bare_variable", "$.steps[1].condition.vars[0]", "branch")
    assert 'did you mean "{{has_file}}"?' in message
    assert "always true" in message


def test_bare_variable_inside_not_and_comparisons() -> None:
    nested = {"op": "not", "vars": [{"op": "or", "vars": ["has_file"]}]}
    [(code, path, _, _)] = found(has_file_plan(nested))
    assert (code, path) == ("plan.bare_variable", "$.steps[1].condition.vars[0].vars[0]")
    compare = {"op": "equals", "vars": ["$has_file", True]}
    [(code, path, _, message)] = found(has_file_plan(compare))
    assert (code, path) == ("plan.bare_variable", "$.steps[1].condition.vars[0]")
    assert 'did you mean "{{has_file}}"?' in message
    dotted = {"op": "equals", "vars": ["has_file.size", 3]}
    assert 'did you mean "{{has_file.size}}"?' in found(has_file_plan(dotted))[0][3]


def test_literal_text_tested_for_truth_is_an_error() -> None:
    [(code, _, _, message)] = found(has_file_plan({"op": "and", "vars": ["has_fil"]}))
    assert code == "plan.literal_condition"
    assert 'did you mean "{{has_file}}"?' in message
    [(code, _, _, message)] = found(has_file_plan({"op": "or", "vars": ["the file is there"]}))
    assert code == "plan.literal_condition" and "always true" in message


def test_defined_with_a_bare_name_suggests_the_reference() -> None:
    [(code, _, _, message)] = found(has_file_plan({"op": "defined", "vars": ["has_file"]}))
    assert code == "plan.condition" and 'did you mean "{{has_file}}"?' in message


def test_literal_text_in_comparisons_stays_valid() -> None:
    """Text that is not a variable of the plan is a literal, as the seed's CSV plan needs."""
    for condition in (
        {"op": "and", "vars": ["{{has_file}}"]},
        {"op": "equals", "vars": ["{{has_file}}", True]},
        {"op": "in", "vars": ["sales", ["sales", "{{has_file}}"]]},
        {"op": "equals", "vars": ["$HOME", "{{has_file}}"]},
        {"op": "and", "vars": [True, {"op": "defined", "vars": ["{{has_file}}"]}]},
    ):
        assert validate_plan(has_file_plan(condition)).ok, condition


def test_bare_ref_forms() -> None:
    from keel.plan._template import bare_ref

    assert bare_ref("x") is not None and bare_ref("$x.a.0") is not None
    assert bare_ref("{{x}}") is None and bare_ref("two words") is None
    assert bare_ref("销售额") is None and bare_ref("$") is None and bare_ref(3) is None


def test_bare_variable_plan_runs_nothing(workdir: Path) -> None:
    """At run time the reported plan is invalid: no "condition is true" for a missing file."""
    report = run(has_file_plan({"op": "and", "vars": ["has_file"]}), workdir)
    assert report.state == "invalid" and report.exit_code == 1
    assert report.records == ()
    fixed = run(has_file_plan({"op": "and", "vars": ["{{has_file}}"]}), workdir)
    assert [(a.step_id, a.output) for a in fixed.actions] == [("missing", "no notes.txt")]
