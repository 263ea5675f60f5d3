"""The agent's parts: rules before any model, the repository map, the context, replay's diff."""

from __future__ import annotations

import json
from pathlib import Path

from agent_helpers import REPORT, headers_plan, replace_patch, sales_workspace

from _support import keel
from keel.agent import build_map
from keel.agent._context import State, Turn, build_request, summary_line
from keel.agent._tools import TOOLS
from keel.models import Message, ModelToolCall, Sampling
from keel.models.testing import pointer_diff


def _scripted_fix(root: Path) -> Path:
    patch = replace_patch("report.py", '"sales"', '"revenue"', REPORT)
    steps = [
        {"tool_calls": [{"name": "run_plan", "arguments": {"plan": headers_plan("revenue")}}]},
        {"tool_calls": [{"name": "apply_patch", "arguments": {"patch": patch}}]},
        {"tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]},
    ]
    script = root.parent / (root.name + "-script.json")
    script.write_text(json.dumps(steps))
    return script


def test_rules_answer_simple_requests_without_a_model(workdir: Path) -> None:
    root = sales_workspace(workdir)
    failing = keel("run", "Run the tests.", workspace=root)  # no --model: a rule answers
    assert failing.returncode == 1, failing.stderr
    assert "report.py printed ''" in failing.stdout and "0 call(s)" in failing.stdout
    script = _scripted_fix(root)
    try:
        done = keel("run", "report.py must sum the sales column", "--model", f"script:{script}",
                    "--non-interactive", workspace=root)  # fmt: skip
    finally:
        script.unlink()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "files changed: report.py" in done.stdout
    assert "keel rollback --session run-" in done.stdout
    assert keel("run", "run the tests", workspace=root).returncode == 0
    diff = keel("run", "show the diff", workspace=root)
    assert diff.returncode == 0 and '+        return sum(float(row["revenue"])' in diff.stdout
    undo = keel("run", "undo the last run", workspace=root)
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert (root / "report.py").read_text() == REPORT


def _repo(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "core.py").write_text("def shared_helper(x):\n    return x\n\n"
                                          "def lonely():\n    return 1\n")  # fmt: skip
    for n in range(4):
        (root / "pkg" / f"user{n}.py").write_text(
            "from pkg.core import shared_helper\n\n\n"
            f"def use{n}():\n    return shared_helper({n})\n"
        )
    (root / "tool.sh").write_text("greet() {\n  echo hi\n}\ngreet\n")
    (root / "notes.txt").write_text("no grammar here\n")


def test_repo_map_ranks_by_references_caches_by_mtime_and_lists_other_files(
    workdir: Path,
) -> None:
    _repo(workdir)
    cold = build_map(workdir, "make it faster", 400)
    lines = cold.text.splitlines()
    assert lines[0] == "pkg/core.py:" and "def shared_helper(x):" in lines[1]
    assert "  1: greet() {" in cold.text  # shell, through tree-sitter-bash
    assert "notes.txt" in lines  # no grammar: listed by name only
    assert cold.parsed == 6
    warm = build_map(workdir, "make it faster", 400)
    assert warm.parsed == 0 and warm.text == cold.text
    (workdir / "pkg" / "user0.py").write_text("def other():\n    return 0\n")
    assert build_map(workdir, "make it faster", 400).parsed == 1
    assert len(build_map(workdir, "x", 20).text) <= 60  # the budget holds


def test_the_window_turns_into_summaries_and_the_pinned_zone_stays_first() -> None:
    turns: list[Turn] = []
    for step in range(1, 41):
        call = ModelToolCall(f"c{step}", "read_file", json.dumps({"path": f"f{step}.py"}))
        turn = Turn(step, Message("assistant", "", (call,)), [Message.tool(f"c{step}", "x" * 600)])
        turn.summary.append(summary_line(step, "read_file", {"path": f"f{step}.py"}, "x" * 600))
        turns.append(turn)
    state = State("understand", 41, 50, "read tools", "", "")
    request = build_request(task="the task", constraints="- never touch data", repo_map="",
                            turns=turns, state=state, tools=TOOLS, sampling=Sampling(),
                            budget=6000)  # fmt: skip
    texts = [m.content for m in request.messages]
    assert "never touch data" in texts[1] and "the task" in texts[1]
    summary = next(t for t in texts if t.startswith("Earlier steps, summarised"))
    assert "step 1: read_file" in summary or "earlier steps left out" in summary
    kept = [m for m in request.messages if m.role == "tool"]
    assert 0 < len(kept) < 40
    assert request.messages[-1].content.startswith("Phase: understand.")
    assert sum(len(t) for t in texts) // 3 <= 6000


def test_pointer_diff_names_the_first_differing_field() -> None:
    old = {"messages": [{"content": "a"}, {"content": "b"}], "a/b": 1}
    new = {"messages": [{"content": "a"}, {"content": "c"}], "a/b": 1}
    assert pointer_diff(old, new) == ("/messages/1/content", "b", "c")
    assert pointer_diff({"a/b": 1}, {"a/b": 2}) == ("/a~1b", 1, 2)
    assert pointer_diff([1, 2], [1, 2, 3]) == ("/2", None, 3)


def test_a_model_budget_ends_the_run_with_exit_1(workdir: Path) -> None:
    from keel.agent import RunOptions, start_run
    from keel.models.testing import ScriptedModel

    (workdir / "keel.toml").write_text("[model]\nmax_calls = 1\n")
    read = {"tool_calls": [{"name": "list_files", "arguments": {}}]}
    model = ScriptedModel([read, read])
    result = start_run(workdir, "look around", RunOptions(), model=model)
    assert (result.outcome, result.exit_code) == ("over_budget", 1)
    assert "max_calls" in result.reason and len(model.calls) == 1
