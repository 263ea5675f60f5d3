"""Every captured hook payload of the real clients parses and gets an answer in its dialect."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from adapter_helpers import CAPTURES, StubGuard, captured_calls, factory_for

from keel.hook.protocol import parse_hook_input
from keel.hook.runner import HookOptions, run_hook
from keel.hook.tools import to_tool_call

CALLS = captured_calls() if CAPTURES.is_dir() else []
CODEX_TOP = {
    "continue",
    "decision",
    "reason",
    "stopReason",
    "suppressOutput",
    "systemMessage",
    "hookSpecificOutput",
}
EXPECTED_KINDS = {
    "Bash": "exec",
    "run_shell_command": "exec",
    "Write": "write",
    "Edit": "edit",
    "Read": "read",
    "apply_patch": "edit",
    "mcp__demo__add": "mcp",
    "mcp__demo__echo": "mcp",
}


def _require_captures() -> None:
    if not CALLS:
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(f"hook captures not found at {CAPTURES}")
        pytest.skip(f"hook captures not found at {CAPTURES}")


def _ids() -> list[str]:
    return [c[0] for c in CALLS] or ["none"]


@pytest.mark.parametrize("index", range(len(CALLS)) if CALLS else [None], ids=_ids())
def test_captured_payload_parses_and_gets_a_decision(index: int | None, workdir: Path) -> None:
    _require_captures()
    assert index is not None
    case, agent, event, stdin = CALLS[index]
    data = json.dumps(stdin).replace("/home/dev/proj", str(workdir))
    inp = parse_hook_input(agent, event, data)
    assert inp.session_id == stdin["session_id"]
    if inp.phase in ("pre_tool", "post_tool"):
        call = to_tool_call(inp)
        assert call.kind == EXPECTED_KINDS[call.tool], case
        if call.kind in ("write", "edit", "read"):
            assert all(os.path.isabs(p) for p in call.paths)
    guard = StubGuard()
    reply = run_hook(
        agent,
        event,
        data,
        workdir,
        options=HookOptions(time.monotonic() + 20),
        guard_factory=factory_for(guard),
    )
    assert reply.exit_code == 0, reply.stderr
    out = json.loads(reply.stdout) if reply.stdout else {}
    if inp.phase == "pre_tool":
        assert len(guard.calls) == 1
        # Gemini sends no id: keel derives one and numbers it per call
        assert (guard.calls[0].tool_use_id or "").startswith(inp.tool_use_id or "-")
    if agent == "codex":
        assert set(out) <= CODEX_TOP
        assert out.get("hookSpecificOutput", {}).get("permissionDecision") in (None, "deny")


def _real_guard_ready() -> bool:
    try:
        from keel.init import init_workspace  # noqa: F401
        from keel.journal import open_journal  # noqa: F401
        from keel.monitor import Monitor  # noqa: F401
        from keel.policy import Policy  # noqa: F401
        from keel.workspace import Checkpoints  # noqa: F401
    except ImportError:
        return False
    return True


def test_every_captured_payload_gets_a_real_guard_decision(workdir: Path) -> None:
    _require_captures()
    if not _real_guard_ready():
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(
                "keel.guard's dependencies (policy, monitor, journal, workspace) are missing"
            )
        pytest.skip(
            "keel.guard's dependencies (policy, monitor, journal, workspace) are not there yet"
        )
    from keel.init import init_workspace
    from keel.journal import open_journal

    init_workspace(workdir, "developer")
    pre_tool_ids = []
    for case, agent, event, stdin in CALLS:
        data = json.dumps(stdin).replace("/home/dev/proj", str(workdir))
        reply = run_hook(agent, event, data, workdir, options=HookOptions(time.monotonic() + 20))
        assert reply.exit_code == 0 or "keel could not" not in reply.stderr, (case, reply)
        if reply.stdout:
            json.loads(reply.stdout)
        inp = parse_hook_input(agent, event, data)
        if inp.phase == "pre_tool":
            pre_tool_ids.append(inp.tool_use_id)
    with open_journal(workdir) as journal:
        decided = [e.payload.tool_use_id for e in journal.events(kinds=["decision"])]  # type: ignore[union-attr]
    assert len(decided) == len(pre_tool_ids)
    assert {d.rsplit("-", 1)[0] if d.startswith("derived-") else d for d in decided} == set(
        pre_tool_ids
    )
