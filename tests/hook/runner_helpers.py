"""Helpers of the hook runner tests: a PreToolUse payload, and ``answer`` run in-process."""

from __future__ import annotations

import json
import time
from pathlib import Path

from adapter_helpers import StubGuard, factory_for

from keel.hook.main import parse_hook_args
from keel.hook.runner import answer


def pre_tool_use(command: str) -> bytes:
    payload = {"session_id": "s", "tool_name": "Bash", "tool_input": {"command": command}}
    return json.dumps({**payload, "hook_event_name": "PreToolUse"}).encode()


def answer_for(
    argv: list[str], data: bytes, guard: StubGuard, workdir: Path
) -> tuple[int, bytes, bytes]:
    return answer(
        parse_hook_args(argv),
        data,
        request_id="req-7",
        deadline_at=time.monotonic() + 20,
        root=str(workdir),
        guard_factory=factory_for(guard),
    )
