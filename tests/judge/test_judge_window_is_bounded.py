"""The judge's window: the task, constraints, plan and last K steps, bounded, edits summarised."""

from __future__ import annotations

from judge_helpers import DATASET, run_events

from keel.core.events import DataPayload, Event, ToolCallPayload, ToolResultPayload
from keel.judge import window_of
from keel.judge._window import ACTION_CHARS, RESULT_CHARS, TASK_CHARS
from keel.judge.eval import load_dataset


def test_only_the_last_k_steps_up_to_the_step_are_shown() -> None:
    events = run_events("Fix it.", [(f"echo {n}", 0, f"out {n}") for n in range(1, 21)])
    view = window_of(events, upto=15, last=4)
    assert [s.number for s in view.steps] == [12, 13, 14, 15]
    assert view.total_steps == 15 and not view.finished
    assert "steps 12-15 of 15" in view.render()
    assert view.step_numbers == frozenset({12, 13, 14, 15})


def test_every_part_is_bounded() -> None:
    huge = "x" * 100_000
    events = run_events(huge, [("cat big.log " + huge, 0, huge)])
    view = window_of(events, constraints=[huge])
    assert len(view.task) <= TASK_CHARS and len(view.constraints[0]) <= 300
    assert len(view.steps[0].action) <= ACTION_CHARS
    assert len(view.steps[0].result) <= RESULT_CHARS
    assert len(view.render()) < 6000


def test_an_edit_is_summarised_as_its_changed_lines() -> None:
    args = {
        "file_path": "tests/test_a.py",
        "old_string": "    assert f(1) == 2\n    assert f(2) == 3\n",
        "new_string": "    assert True\n",
    }
    events = [
        Event("prompt", "s", DataPayload({"text": "Fix f."})),
        Event(
            "tool.call",
            "s",
            ToolCallPayload("Edit", "edit", None, ["tests/test_a.py"], args=args, tool_use_id="e1"),
        ),
        Event("tool.result", "s", ToolResultPayload("Edit", True, "updated", tool_use_id="e1")),
    ]
    (step,) = window_of(events).steps
    assert step.action.splitlines()[:2] == ["Edit(tests/test_a.py)", "-2 +1 lines"]
    assert "  +    assert True" in step.action and "  -    assert f(1) == 2" in step.action


def test_the_plan_and_the_claim_at_the_end() -> None:
    events = [
        Event("prompt", "s", DataPayload({"text": "Do it."})),
        Event(
            "tool.call", "s", ToolCallPayload("TodoWrite", "other", args={"todos": ["fix", "test"]})
        ),
        Event("thought", "s", DataPayload({"text": "All done, tests pass."})),
        Event("session.end", "s", DataPayload({"claim": True})),
    ]
    view = window_of(events)
    assert '"fix"' in view.plan and view.finished
    assert view.final_message == "All done, tests pass."
    assert "END (the agent claims it is done)" in view.render()
    assert not window_of(events, upto=0).finished


def test_windows_of_every_shipped_format_hash_the_same_twice() -> None:
    first = [window_of(c.events).hash for c in load_dataset(DATASET)]
    again = [window_of(c.events).hash for c in load_dataset(DATASET)]
    assert first == again and len(set(first)) == len(first)


def test_every_file_of_the_shipped_set_is_used() -> None:
    used = {c.source for c in load_dataset(DATASET)} - {"inline"}
    for path in DATASET.parent.rglob("*"):
        if path.is_file() and path.parent.name == "runs":
            assert str(path) in used, path
        elif path.is_file():
            assert path.name in ("README.md", "dataset.jsonl", "judge.script.json"), path
