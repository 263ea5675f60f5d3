"""Random call/result/event sequences: the monitor never raises and its state stays bounded."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from keel.config import parse_config
from keel.core.calls import ToolCall, ToolResult
from keel.core.events import DataPayload, Event
from keel.monitor import Monitor, MonitorState

COMMANDS = [
    "pytest -q",
    "ls",
    "cat a.py",
    "sed -i 's/x/y/' src/a.py",
    "rm tests/test_a.py",
    "echo $(date) > log.txt",
    "bash -lc 'make test'",
    "sleep 5 && git status",
    "python - <<'EOF'\nprint(1 > 0)\nEOF",
    "grep -rn 'unbalanced src",
    "",
]
ODD_ARGS: list[dict[str, Any]] = [
    {},
    {"file_path": "src/a.py", "old_string": "assert x", "new_string": ""},
    {"edits": [{"old_string": None}, "junk", {"new_string": 3}]},
    {"todos": "not a list"},
    {"plan": [{"step": 1, "status": None}, None]},
    {"content": ""},
    {"nested": {"a": [1, 2, {"b": float("inf")}]}},
]


def random_call(rng: random.Random, i: int) -> ToolCall:
    tool, kind = rng.choice(
        [("Bash", "exec"), ("Read", "read"), ("Edit", "edit"), ("Write", "write"),
         ("TodoWrite", "other"), ("apply_patch", "edit"), ("mcp__x__y", "mcp")]
    )  # fmt: skip
    patch = None
    if tool == "apply_patch":
        patch = rng.choice(
            [
                "*** Begin Patch\n*** Delete File: tests/t.py\n*** End Patch",
                "--- a\n+++ b\n-x\n+y",
                "garbage",
            ]
        )
    return ToolCall(
        tool,
        kind,  # pyright: ignore[reportArgumentType]
        command=rng.choice(COMMANDS) if kind == "exec" else None,
        paths=tuple(
            rng.sample(
                ["src/a.py", "/abs/b.py", "tests/test_a.py", "../x", ""], k=rng.randint(0, 2)
            )
        ),
        args=rng.choice(ODD_ARGS),
        tool_use_id=rng.choice([f"t{i}", None, "dup"]),
        cwd=rng.choice([None, "/abs", "/"]),
        patch=patch,
    )


@pytest.mark.parametrize("seed", range(8))
def test_random_sequences_never_raise(seed: int) -> None:
    rng = random.Random(seed)
    config = parse_config(
        '[gates]\nrequired = ["pytest -q"]\n[limits]\nmax_steps = 150\n'
        '[scope]\ninclude = ["src/**"]\n'
    )
    text = MonitorState().to_json()
    for i in range(300):
        monitor = Monitor(config, MonitorState.from_json(text) if rng.random() < 0.3 else None)
        if rng.random() < 0.3:
            monitor.state = MonitorState.from_json(text)
        call = random_call(rng, i)
        guidance = monitor.before_call(call)
        if guidance is not None:
            assert guidance.message and guidance.level in ("hint", "correct", "replan", "stop")
        roll = rng.random()
        if roll < 0.7:
            output = rng.choice(["", "ok", "x" * 5000, "Traceback\nValueError: bad", f"{i} items"])
            monitor.after_call(
                ToolResult(
                    call.tool,
                    call.kind,
                    rng.random() < 0.7,
                    output,
                    rng.choice([None, "err"]),
                    rng.choice([None, 0, 1]),
                    call.tool_use_id,
                )
            )
        elif roll < 0.8:
            kind = rng.choice(["plan", "prompt", "thought", "model.response", "session.end"])
            data = rng.choice(
                [
                    {},
                    {"text": "same"},
                    {"steps": ["edit src/a.py"]},
                    {"usage": {"input_tokens": 10}},
                    {"total_tokens": "x"},
                ]
            )
            monitor.observe(Event(kind, "s", DataPayload(data)))  # pyright: ignore[reportArgumentType]
        else:
            monitor.may_finish()
        text = monitor.state.to_json()
        assert len(text) < 60_000
    final = MonitorState.from_json(text)
    assert len(final.recent) <= 21 and len(final.failures) <= 64 and len(final.errors) <= 64


def test_hostile_command_lines_and_paths_never_raise(shared_data: Path) -> None:
    lines = (shared_data / "command-injection").glob("*.txt")
    commands = [c for f in lines for c in f.read_text(errors="replace").splitlines() if c.strip()]
    paths = [
        p
        for f in (shared_data / "traversal").glob("*.txt")
        for p in f.read_text(errors="replace").splitlines()
        if p.strip()
    ]
    assert commands and paths
    config = parse_config('[scope]\ninclude = ["src/**"]\n')
    monitor = Monitor(config)
    for i, command in enumerate(commands):
        monitor.before_call(ToolCall("Bash", "exec", command=command, tool_use_id=f"c{i}"))
        monitor.after_call(ToolResult("Bash", "exec", False, command, None, 1, f"c{i}"))
    for i, path in enumerate(paths):
        got = monitor.before_call(ToolCall("Write", "write", paths=(path,), tool_use_id=f"p{i}"))
        assert got is not None  # outside src/**, or the session was stopped
    assert len(monitor.state.to_json()) < 60_000
