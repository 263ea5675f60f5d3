"""Client turn ids travel from the hook payload through the guard into the journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keel.core.events import ToolCallPayload
from keel.guard import Guard
from keel.hook.protocol import parse_hook_input
from keel.hook.tools import to_tool_call
from keel.journal import open_journal

CAPTURES = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "hook-captures"


def _first_pre_tool_use(case: str) -> dict[str, object]:
    path = CAPTURES / case / "hooks.jsonl"
    if not path.exists():
        pytest.skip(f"hook captures not found at {path}")
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["stdin"].get("hook_event_name") == "PreToolUse":
            return record["stdin"]
    raise AssertionError(f"no PreToolUse in {case}")


@pytest.mark.parametrize(
    ("case", "agent", "key"),
    [("A_all_events_allow", "claude", "prompt_id"), ("Y1_codex_all_events", "codex", "turn_id")],
)
def test_turn_id_is_journaled_with_the_call(
    case: str, agent: str, key: str, tmp_path: Path
) -> None:
    payload = _first_pre_tool_use(case)
    inp = parse_hook_input(agent, "PreToolUse", json.dumps(payload))
    call = to_tool_call(inp)
    assert call.turn_id == payload[key]
    guard = Guard.open(
        tmp_path, session_id=inp.session_id, agent=agent, monitor=False, checkpoints=False
    )
    guard.decide(call)
    guard.close()
    with open_journal(tmp_path) as journal:
        (event,) = [e for e in journal.events() if e.kind == "tool.call"]
    assert isinstance(event.payload, ToolCallPayload)
    assert event.payload.turn_id == payload[key]
    assert event.payload.tool_use_id == call.tool_use_id
    assert event.session_id == payload["session_id"]
