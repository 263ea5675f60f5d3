from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from keel.core.errors import PlanError
from keel.plan import PlanLimits, plan_schema, read_plan_text, validate_plan
from keel.plan.examples import EXAMPLES, example_text, load_example

SEED = Path(__file__).resolve().parents[2] / ".." / "shared" / "seeds" / "config_plan.json"


def ev(id_: str, function: str, args: Any, out: str) -> dict[str, Any]:
    return {
        "id": id_,
        "type": "evidence_collection",
        "action": {"function": function, "args": args},
        "output_to": out,
    }


def final(id_: str, function: str, args: Any, condition: Any = None) -> dict[str, Any]:
    step: dict[str, Any] = {
        "id": id_,
        "type": "final_action",
        "action": {"function": function, "args": args},
    }
    if condition is not None:
        step["condition"] = condition
    return step


def cond(
    id_: str, condition: Any, true: list[Any], false: list[Any] | None = None
) -> dict[str, Any]:
    return {
        "id": id_,
        "type": "conditional",
        "condition": condition,
        "true_branch": true,
        "false_branch": false or [],
    }


def issues(plan: Any, **kwargs: Any) -> set[tuple[str, str, str | None]]:
    return {(i.code, i.path, i.step_id) for i in validate_plan(plan, **kwargs).issues}


def test_seed_plans_are_valid_unchanged() -> None:
    for name in EXAMPLES:
        result = validate_plan(load_example(name))
        assert result.ok and result.issues == (), name
    if SEED.is_file():
        assert json.loads(SEED.read_text()) == load_example("config_plan")
    assert (
        json.loads(example_text("config_plan"))["steps"][0]["action"]["function"]
        == "filesystem.check_exists"
    )


def test_schema_export() -> None:
    schema = plan_schema()
    assert schema["title"] == "keel plan"
    text = json.dumps(schema)
    for kind in ("evidence_collection", "conditional", "ask", "final_action"):
        assert kind in text


def test_structure_errors_have_json_paths() -> None:
    plan = {
        "goal": "g",
        "steps": [
            ev("a", "fs.exists", ["x"], "v"),
            {"id": "b", "type": "bogus"},
            cond(
                "c",
                {"op": "nope", "vars": []},
                [{"id": "d", "type": "evidence_collection", "action": {"function": "fs.exists"}}],
            ),
            {
                "id": "e",
                "type": "final_action",
                "action": {"function": "output.result", "args": []},
                "extra": 1,
            },
        ],
    }
    found = issues(plan)
    assert ("plan.schema", "$.steps[1]", "b") in found
    assert ("plan.schema", "$.steps[2].condition.op", "c") in found
    assert ("plan.schema", "$.steps[2].true_branch[0].output_to", "d") in found
    assert ("plan.schema", "$.steps[3].extra", "e") in found
    assert ("plan.schema", "$.goal", None) in issues({"steps": []}) or (
        "plan.schema",
        "$.goal",
        None,
    ) in issues({"steps": [1]})


def test_each_semantic_error_kind() -> None:
    plan = {
        "goal": "g",
        "steps": [
            ev("s1", "fs.exist", ["x"], "a"),
            ev("s2", "fs.exists", ["x", "y"], "b"),
            ev("s3", "fs.exists", [3], "c"),
            ev("s1", "fs.exists", ["x"], "d"),
            ev("s5", "data.length", ["{{nothing}}"], "e"),
            cond(
                "s6",
                {"op": "and", "vars": ["{{b}}"]},
                [ev("s7", "fs.exists", {"path": "../../etc/passwd"}, "f")],
            ),
            final("s8", "output.result", ["{{f}}"]),
            final("s9", "output.result", ["{{ bad"]),
            final("s10", "fs.exists", ["x"]),
        ],
    }
    found = issues(plan)
    assert ("plan.unknown_function", "$.steps[0].action.function", "s1") in found
    assert ("plan.arg_count", "$.steps[1].action.args", "s2") in found
    assert ("plan.arg_type", "$.steps[2].action.args[0]", "s3") in found
    assert ("plan.duplicate_id", "$.steps[3].id", "s1") in found
    assert ("plan.undefined_variable", "$.steps[4].action.args[0]", "s5") in found
    assert ("plan.path_outside", "$.steps[5].true_branch[0].action.args.path", "s7") in found
    assert ("plan.maybe_undefined", "$.steps[6].action.args[0]", "s8") in found
    assert ("plan.bad_template", "$.steps[7].action.args[0]", "s9") in found
    assert ("plan.unknown_function", "$.steps[8].action.function", "s10") in found


def test_arg_types_follow_producers() -> None:
    plan = {
        "goal": "g",
        "steps": [
            ev("a", "fs.exists", ["x"], "flag"),
            ev("b", "data.keys", ["{{flag}}"], "k"),
            ev("c", "fs.read_text", ["{{flag}}"], "t"),
            ev("d", "fs.read_text", {"path": "x", "nope": 1}, "u"),
        ],
    }
    found = issues(plan)
    assert ("plan.arg_type", "$.steps[2].action.args[0]", "c") in found
    assert ("plan.arg_name", "$.steps[3].action.args.nope", "d") in found
    assert not any(i[2] == "b" for i in found)  # data.keys takes any value


def test_defined_guard_and_branch_merging() -> None:
    ok = {
        "goal": "g",
        "steps": [
            ev("a", "fs.exists", ["x"], "e"),
            cond(
                "b",
                {"op": "and", "vars": ["{{e}}"]},
                [ev("c", "fs.read_text", ["x"], "t")],
                [ev("d", "data.value", ["none"], "t")],
            ),
            final("f", "output.result", ["{{t}}"]),
        ],
    }
    assert validate_plan(ok).ok
    half = json.loads(json.dumps(ok))
    half["steps"][1]["false_branch"] = []
    assert ("plan.maybe_undefined", "$.steps[2].action.args[0]", "f") in issues(half)
    half["steps"][2]["condition"] = {"op": "defined", "vars": ["{{t}}"]}
    assert validate_plan(half).ok
    half["steps"][2]["condition"] = {"op": "not", "vars": [{"op": "defined", "vars": ["{{t}}"]}]}
    assert not validate_plan(half).ok
    half["steps"][2]["condition"] = {
        "op": "or",
        "vars": ["{{e}}", {"op": "defined", "vars": ["{{t}}"]}],
    }
    assert not validate_plan(half).ok


def test_limits() -> None:
    many = {"goal": "g", "steps": [ev(f"s{i}", "fs.exists", ["x"], f"v{i}") for i in range(11)]}
    assert ("plan.too_many_steps", "$.steps", None) in issues(many)
    assert validate_plan(many, limits=PlanLimits(max_steps=11)).ok
    inner: list[Any] = [ev("leaf", "fs.exists", ["x"], "z")]
    for depth in range(4):
        inner = [cond(f"c{depth}", {"op": "and", "vars": [True]}, inner)]
    deep = {"goal": "g", "steps": inner}
    found = issues(deep)
    assert (
        "plan.too_deep",
        "$.steps[0].true_branch[0].true_branch[0].true_branch[0]",
        "c0",
    ) in found
    assert validate_plan(deep, limits=PlanLimits(max_depth=5)).ok


def test_paths_leaving_the_workspace(workdir: Path) -> None:
    (workdir / "link").symlink_to("/etc")
    (workdir / "ok").mkdir()
    for bad in ("../x", "/etc/passwd", "~/.ssh/id_rsa", "link/passwd", "ok/../../x"):
        plan = {"goal": "g", "steps": [ev("a", "fs.read_text", [bad], "t")]}
        assert ("plan.path_outside", "$.steps[0].action.args[0]", "a") in issues(
            plan, workspace=workdir
        ), bad
    inside = {"goal": "g", "steps": [ev("a", "fs.read_text", [str(workdir / "ok" / "f")], "t")]}
    assert validate_plan(inside, workspace=workdir).ok


def test_conditions_shape() -> None:
    plan = {
        "goal": "g",
        "steps": [
            ev("a", "fs.exists", ["x"], "e"),
            cond("b", {"op": "not", "vars": ["{{e}}", "{{e}}"]}, []),
            cond("c", {"op": "equals", "vars": ["{{e}}"]}, []),
            cond("d", {"op": "defined", "vars": ["e"]}, []),
            cond("f", {"op": "matches", "vars": ["{{e}}", "("]}, []),
            cond("g", {"op": "and", "vars": ["{{ghost}}"]}, []),
        ],
    }
    found = issues(plan)
    assert ("plan.condition", "$.steps[1].condition.vars", "b") in found
    assert ("plan.condition", "$.steps[2].condition.vars", "c") in found
    assert ("plan.condition", "$.steps[3].condition.vars[0]", "d") in found
    assert ("plan.condition", "$.steps[4].condition.vars[1]", "f") in found
    assert ("plan.undefined_variable", "$.steps[5].condition", "g") in found


def test_http_needs_the_allowlist() -> None:
    plan = {"goal": "g", "steps": [ev("a", "http.get", ["https://example.com/x"], "r")]}
    assert ("plan.http_not_allowed", "$.steps[0].action.args[0]", "a") in issues(plan)
    assert validate_plan(plan, http_allow=["*.com"]).ok
    assert not validate_plan(plan, http_allow=["internal.net"]).ok


def test_commitment_lint() -> None:
    write = final("w", "file.append", ["report.txt", "x"])
    plan = {"goal": "g", "steps": [write]}
    result = validate_plan(plan)
    assert result.ok  # lint findings are warnings; the engine refuses the step
    assert {(i.code, i.path, i.step_id) for i in result.warnings} == {
        ("commitment.no_writable_evidence", "$.steps[0].condition", "w")
    }
    assert result.commitment_findings("w")
    checked = {
        "goal": "g",
        "steps": [
            ev("a", "filesystem.check_file_writable", ["./report.txt"], "ok"),
            final("w", "file.append", ["report.txt", "x"], {"op": "and", "vars": ["{{ok}}"]}),
        ],
    }
    assert validate_plan(checked).issues == ()
    other = json.loads(json.dumps(checked))
    other["steps"][0]["action"]["args"] = ["other.txt"]
    assert validate_plan(other).commitment_findings("w")
    unguarded = json.loads(json.dumps(checked))
    del unguarded["steps"][1]["condition"]
    assert validate_plan(unguarded).commitment_findings("w")
    cmd = {
        "goal": "g",
        "steps": [
            ev("a", "cmd.which", ["pytest"], "p"),
            final("r", "command.run", ["pytest -q"], {"op": "exists", "vars": ["{{p}}"]}),
            final("s", "command.run", ["make all"], {"op": "exists", "vars": ["{{p}}"]}),
        ],
    }
    codes = {(i.code, i.step_id) for i in validate_plan(cmd).issues}
    assert codes == {("commitment.no_command_evidence", "s")}
    column = {"goal": "g", "steps": [ev("a", "parse.csv_sum", ["d.csv", "sales"], "t")]}
    assert {i.code for i in validate_plan(column).issues} == {"commitment.no_header_evidence"}
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    p = {"goal": "g", "steps": [final("p", "patch.apply", [patch])]}
    assert "x.py" in validate_plan(p).commitment_findings("p")[0].message
    templated = {
        "goal": "g",
        "steps": [ev("a", "data.value", ["r.txt"], "n"), final("w", "file.write", ["{{n}}", "x"])],
    }
    assert {i.code for i in validate_plan(templated).issues} == {"commitment.unverifiable_target"}


def test_unreadable_json() -> None:
    with pytest.raises(PlanError) as info:
        read_plan_text('{"goal": "x",\n "steps": [}')
    assert info.value.code == "plan.json" and info.value.context["line"] == 2
    with pytest.raises(PlanError):
        read_plan_text('{"a": NaN}')
