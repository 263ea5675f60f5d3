"""Ask steps: an unanswered question defers what depends on it; an answer (given, or from the
prompt) is evidence, checked against its choices.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plan_engine_helpers import _c, ask, cond, ev, fin, plan_events, records, run

QUESTION = [
    ev("e1", "parse.csv_headers", ["d.csv"], "cols"),
    ask("q1", "Which of {{cols}}?", "col", "{{cols}}"),
    ev("e2", "parse.csv_sum", ["d.csv", "{{col}}"], "total"),
    cond("c1", _c("gt", "{{total}}", 0), [fin("f1", "output.result", ["sum {{total}}"])]),
    fin("f2", "output.result", ["done"]),
]


def _question(
    status: str, answer: Any = None, source: str | None = None, choices: Any = ("x", "y")
) -> dict[str, Any]:
    return {"step_id": "q1", "output_to": "col", "question": 'Which of ["x", "y"]?',
            "status": status, "choices": list(choices) if choices is not None else None,
            "answer": answer, "source": source}  # fmt: skip


def test_an_unanswered_question_defers_what_depends_on_it(root: Path) -> None:
    report, sink = run(QUESTION, root)
    found = records(report)
    assert found["q1"] == _question("pending")
    assert found["e2"]["status"] == "blocked"
    assert found["e2"]["reason"] == "waits for an answer to q1"
    assert found["c1"] == {"step_id": "c1", "value": None, "branch": "deferred",
                           "reason": "waits for input: total"}  # fmt: skip
    deferred = "a question is not answered yet"
    assert found["f2"] == {"step_id": "f2", "function": "output.result", "status": "deferred",
                           "args": {}, "output": None, "reason": deferred,
                           "decision": None}  # fmt: skip
    assert "f1" not in found
    assert (report.state, report.exit_code) == ("needs_input", 3)
    assert report.facts == ('d.csv has columns ["x", "y"]',)
    assert {"event": "ask", **_question("pending")} in plan_events(sink)


@pytest.mark.parametrize(
    ("answers", "question", "reason"),
    [
        ({}, "And for {{col}} or true?", "waits for input: col, more"),
        ({"col": "a"}, "And for a or true?", "waits for input: more"),
    ],
)
def test_questions_that_wait_for_each_other(
    root: Path, answers: dict[str, Any], question: str, reason: str
) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ask("q1", "Which?", "col"),
        ask("q2", "And for {{col}} or {{ex}}?", "more"),
        cond("c", _c("and", "{{ex}}", "{{col}}", "{{more}}"), [fin("t", "output.result", ["x"])]),
        fin("f", "output.result", ["y"]),
    ]
    report, _ = run(steps, root, answers=answers)
    found = records(report)
    assert (found["q2"]["question"], found["q2"]["status"]) == (question, "pending")
    assert found["c"] == {"step_id": "c", "value": None, "branch": "deferred", "reason": reason}
    if answers:
        assert report.facts == ("a.txt exists", "the user chose col = a", "ex is true", "col is a")
    else:
        assert report.facts == ("a.txt exists", "ex is true")
    assert (report.state, found["f"]["status"]) == ("needs_input", "deferred")


@pytest.mark.parametrize(
    ("answers", "column", "total"),
    [({"col": "y"}, "y", 2), ({"q1": "x"}, "x", 1), ({"col": "y", "q1": "x"}, "y", 2)],
)
def test_an_answer_is_evidence(
    root: Path, answers: dict[str, Any], column: str, total: int
) -> None:
    asked: list[Any] = []
    report, sink = run(QUESTION, root, answers=answers, prompt=lambda q, c: asked.append(q))
    found = records(report)
    assert found["q1"] == _question("answered", column, "answers")
    assert found["e2"]["args"] == {"path": "d.csv", "column": column}
    assert found["c1"]["branch"] == "true"
    assert found["f1"]["output"] == f"sum {total}" and found["f2"]["status"] == "done"
    assert f"the user chose col = {column}" in report.facts
    assert report.state == "completed" and asked == []
    assert {"event": "ask", **_question("answered", column, "answers")} in plan_events(sink)


def test_an_answer_outside_the_choices_is_rejected(root: Path) -> None:
    report, _ = run(QUESTION, root, answers={"col": "z"})
    found = records(report)
    assert found["q1"] == _question("rejected", "z", "answers")
    assert found["e2"]["reason"] == "waits for an answer to q1"
    assert found["f2"]["status"] == "deferred"
    assert report.state == "needs_input"
    assert not any(f.startswith("the user chose") for f in report.facts)


def test_the_prompt_is_asked_with_the_rendered_question_and_choices(root: Path) -> None:
    asked: list[Any] = []

    def prompt(question: str, choices: list[Any] | None) -> Any:
        asked.append((question, choices))
        return "x"

    report, _ = run(QUESTION, root, prompt=prompt)
    assert asked == [('Which of ["x", "y"]?', ["x", "y"])]
    assert records(report)["q1"] == _question("answered", "x", "prompt")
    assert records(report)["f1"]["output"] == "sum 1"


def _eof(question: str, choices: list[Any] | None) -> Any:
    raise EOFError


@pytest.mark.parametrize(
    ("prompt", "source"), [(_eof, None), (lambda q, c: None, "prompt")], ids=["eof", "none"]
)
def test_no_answer_from_the_prompt_is_pending(root: Path, prompt: Any, source: Any) -> None:
    report, _ = run(QUESTION, root, prompt=prompt)
    assert records(report)["q1"] == _question("pending", None, source)
    assert report.state == "needs_input"


@pytest.mark.parametrize(
    ("choices", "answer", "shown", "status"),
    [
        (None, "anything", None, "answered"),
        (["x", "y"], "y", ["x", "y"], "answered"),
        (["x", "y"], "z", ["x", "y"], "rejected"),
        ("{{n}}", "anything", None, "answered"),
        ("{{cols}}", "z", ["x", "y"], "rejected"),
    ],
)
def test_choices_are_a_list_a_list_variable_or_anything(
    root: Path, choices: Any, answer: str, shown: Any, status: str
) -> None:
    steps = [
        ev("e1", "parse.csv_headers", ["d.csv"], "cols"),
        ev("e2", "data.length", ["{{cols}}"], "n"),
        ask("q1", "Which?", "col", choices),
        fin("f", "output.result", ["{{col}}"]),
    ]
    report, _ = run(steps, root, answers={"col": answer})
    question = records(report)["q1"]
    assert (question["choices"], question["status"], question["answer"]) == (shown, status, answer)
    assert records(report)["f"]["status"] == ("done" if status == "answered" else "deferred")
