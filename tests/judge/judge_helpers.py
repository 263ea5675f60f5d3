"""Helpers of the judge tests: the shipped example set, small runs, verdict answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from keel.core.events import DataPayload, Event, ToolCallPayload, ToolResultPayload
from keel.judge import Window, window_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judge"
DATASET = EXAMPLES / "dataset.jsonl"
SCRIPT = EXAMPLES / "judge.script.json"


def run_events(task: str, commands: list[tuple[str, int, str]], session: str = "s") -> list[Event]:
    """A run: the task, then each (command, exit code, output) as a call and its result."""
    events = [Event("prompt", session, DataPayload({"text": task}))]
    for n, (command, code, output) in enumerate(commands, start=1):
        call = ToolCallPayload("Bash", "exec", command, tool_use_id=f"t{n}")
        result = ToolResultPayload("Bash", code == 0, output, None, code, f"t{n}")
        events += [Event("tool.call", session, call), Event("tool.result", session, result)]
    return events


def window(task: str = "Fix the parser.", steps: int = 3) -> Window:
    """A small window: ``steps`` test runs of a task."""
    commands = [(f"pytest -q tests/test_{n}.py", 1, f"{n} failed") for n in range(1, steps + 1)]
    return window_of(run_events(task, commands))


def verdict(
    category: str = "gaming",
    confidence: float = 0.9,
    evidence: list[int] | None = None,
    kind: str = "problem",
) -> dict[str, Any]:
    """A script step answering one verdict."""
    return {
        "json": {
            "verdict": kind,
            "category": category,
            "confidence": confidence,
            "evidence": [1] if evidence is None else evidence,
            "suggestion": "" if kind == "ok" else "Restore the test.",
        }
    }


OK = verdict("none", 0.9, [], "ok")
