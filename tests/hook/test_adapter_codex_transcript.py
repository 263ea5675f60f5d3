"""Recovering a Codex shell call's exit code and output from its rollout transcript.

The records are shaped like Codex CLI 0.171.0's rollout at the moment its PostToolUse hook
runs: the ``function_call`` and the ``event_msg`` ``item_completed`` (``CommandExecution``)
are written, the ``function_call_output`` is not yet (it follows the hook).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from adapter_helpers import StubGuard, factory_for

from keel.hook.codex_transcript import TAIL_BYTES, find_call_outcome, recover_codex_result
from keel.hook.protocol import parse_hook_input
from keel.hook.runner import HookOptions, run_hook
from keel.hook.tools import to_tool_result

LS_ERROR = "ls: cannot access 'does-not-exist': No such file or directory\n"


def _line(kind: str, payload: dict[str, Any]) -> str:
    record = {"timestamp": "2026-11-30T15:40:11.898Z", "type": kind, "payload": payload}
    return json.dumps(record, separators=(",", ":")) + "\n"


def call_line(call_id: str, cmd: str) -> str:
    args = json.dumps({"cmd": cmd})
    item = {"type": "function_call", "name": "exec_command", "arguments": args, "call_id": call_id}
    return _line("response_item", item)


def completed_line(call_id: str, cmd: str, code: int, output: str) -> str:
    item = {
        "type": "CommandExecution",
        "id": call_id,
        "command": ["/bin/bash", "-lc", cmd],
        "status": "completed" if code == 0 else "failed",
        "aggregated_output": output,
        "exit_code": code,
    }
    return _line("event_msg", {"type": "item_completed", "turn_id": "t1", "item": item})


def output_line(call_id: str, code: int, output: str) -> str:
    text = (
        f"Chunk ID: 24e5ad\nWall time: 0.0000 seconds\nProcess exited with code {code}\n"
        f"Original token count: 16\nOutput:\n{output}"
    )
    return _line(
        "response_item", {"type": "function_call_output", "call_id": call_id, "output": text}
    )


def at_hook_time(call_id: str, cmd: str, code: int, output: str) -> str:
    return call_line(call_id, cmd) + completed_line(call_id, cmd, code, output)


def write(path: Path, *parts: str | bytes) -> Path:
    with open(path, "wb") as fh:
        for part in parts:
            fh.write(part.encode() if isinstance(part, str) else part)
    return path


def test_the_completed_item_gives_exit_code_and_output(workdir: Path) -> None:
    rollout = write(
        workdir / "rollout.jsonl",
        at_hook_time("call_1", "echo ok", 0, "ok\n"),
        at_hook_time("call_2", "ls does-not-exist", 2, LS_ERROR),
    )
    found = find_call_outcome(rollout, "call_2")
    assert found is not None
    assert (found.exit_code, found.output, found.record) == (2, LS_ERROR, "item_completed")
    ok = find_call_outcome(rollout, "call_1")
    assert ok is not None and ok.exit_code == 0


def test_the_function_call_output_gives_the_code_without_codexs_header(workdir: Path) -> None:
    rollout = write(
        workdir / "r.jsonl", call_line("call_9", "false"), output_line("call_9", 3, "x\n")
    )
    found = find_call_outcome(rollout, "call_9")
    assert found is not None
    assert (found.exit_code, found.output, found.record) == (3, "x\n", "function_call_output")


def test_older_record_shapes_are_read(workdir: Path) -> None:
    end = _line(
        "event_msg",
        {
            "type": "exec_command_end",
            "call_id": "c1",
            "stdout": "",
            "stderr": "boom",
            "exit_code": 1,
        },
    )
    meta = json.dumps({"output": "fine\n", "metadata": {"exit_code": 0}})
    legacy = json.dumps({"type": "function_call_output", "call_id": "c2", "output": meta}) + "\n"
    rollout = write(workdir / "r.jsonl", end, legacy)
    first = find_call_outcome(rollout, "c1")
    second = find_call_outcome(rollout, "c2")
    assert first is not None and (first.exit_code, first.output) == (1, "boom")
    assert second is not None and (second.exit_code, second.output) == (0, "fine\n")


def test_the_newest_record_of_the_call_wins(workdir: Path) -> None:
    rollout = write(
        workdir / "r.jsonl",
        completed_line("call_1", "make", 2, "old\n"),
        output_line("call_1", 2, "old\n"),
        completed_line("call_1", "make", 0, "new\n"),
    )
    found = find_call_outcome(rollout, "call_1")
    assert found is not None and (found.exit_code, found.output) == (0, "new\n")


@pytest.mark.parametrize("wanted", ["call_2", "call_10", "call", "", "call_1\\"])
def test_another_calls_record_is_never_taken(workdir: Path, wanted: str) -> None:
    rollout = write(workdir / "r.jsonl", at_hook_time("call_1", "false", 1, ""))
    assert find_call_outcome(rollout, wanted) is None


def test_a_call_without_a_result_yet_gives_none(workdir: Path) -> None:
    rollout = write(workdir / "r.jsonl", call_line("call_1", "sleep 100"))
    assert find_call_outcome(rollout, "call_1") is None


def test_a_missing_or_unreadable_transcript_gives_none(workdir: Path) -> None:
    assert find_call_outcome(workdir / "absent.jsonl", "call_1") is None
    assert find_call_outcome(workdir, "call_1") is None  # a directory
    not_a_dir = write(workdir / "file", "x")
    assert find_call_outcome(not_a_dir / "rollout.jsonl", "call_1") is None


def test_a_partly_written_last_line_is_skipped(workdir: Path) -> None:
    whole = completed_line("call_1", "false", 1, "")
    rollout = write(workdir / "r.jsonl", call_line("call_1", "false"), whole[: len(whole) // 2])
    assert find_call_outcome(rollout, "call_1") is None
    write(rollout, whole, completed_line("call_2", "true", 0, "")[:40])
    found = find_call_outcome(rollout, "call_1")
    assert found is not None and found.exit_code == 1


def test_malformed_lines_are_skipped(workdir: Path) -> None:
    rollout = write(
        workdir / "r.jsonl",
        '{"call_1": [1, 2\n',
        '["call_1"]\n',
        '{"type": "event_msg", "payload": "call_1"}\n',
        b'\xff\xfe "call_1" \x00\n',
        _line("event_msg", {"type": "item_completed", "item": {"id": "call_1", "exit_code": "2"}}),
        _line("event_msg", {"type": "item_completed", "item": {"id": "call_1", "exit_code": True}}),
        "\n",
    )
    assert find_call_outcome(rollout, "call_1") is None


def test_a_huge_transcript_is_read_only_at_its_tail(workdir: Path) -> None:
    filler = _line("response_item", {"type": "message", "content": "x" * 4000})
    early = at_hook_time("call_early", "false", 1, "")
    with open(workdir / "r.jsonl", "w") as fh:
        fh.write(early)
        for _ in range(3 * TAIL_BYTES // len(filler)):
            fh.write(filler)
        fh.write(at_hook_time("call_late", "false", 7, "late\n"))
    rollout = workdir / "r.jsonl"
    assert rollout.stat().st_size > 2 * TAIL_BYTES
    late = find_call_outcome(rollout, "call_late")
    assert late is not None and late.exit_code == 7
    assert find_call_outcome(rollout, "call_early") is None  # beyond the window: not read


def test_a_record_cut_by_the_tail_window_is_not_misread(workdir: Path) -> None:
    record = completed_line("call_1", "cat big", 4, "y" * 5000)
    rollout = write(workdir / "r.jsonl", record)
    assert find_call_outcome(rollout, "call_1", tail_bytes=len(record) - 10) is None
    found = find_call_outcome(rollout, "call_1", tail_bytes=len(record))
    assert found is not None and found.exit_code == 4


def _post(rollout: Path | None, response: object = "", call_id: str = "call_2") -> dict[str, Any]:
    data: dict[str, Any] = {
        "session_id": "s1",
        "turn_id": "t1",
        "cwd": "/w",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls does-not-exist"},
        "tool_response": response,
        "tool_use_id": call_id,
    }
    if rollout is not None:
        data["transcript_path"] = str(rollout)
    return data


def test_a_codex_post_tool_hook_reports_the_real_failure(workdir: Path) -> None:
    rollout = write(
        workdir / "r.jsonl",
        at_hook_time("call_1", "echo ok", 0, "ok\n"),
        at_hook_time("call_2", "ls does-not-exist", 2, LS_ERROR),
    )
    guard = StubGuard()
    run_hook(
        "codex",
        "PostToolUse",
        json.dumps(_post(rollout)),
        workdir,
        options=HookOptions(time.monotonic() + 20),
        guard_factory=factory_for(guard),
    )
    (result,) = guard.results
    assert (result.ok, result.exit_code, result.output) == (False, 2, LS_ERROR)
    assert result.call is not None and result.call.command == "ls does-not-exist"


def test_what_the_hook_said_is_kept_and_only_the_code_added(workdir: Path) -> None:
    rollout = write(workdir / "r.jsonl", at_hook_time("call_2", "ls x", 2, "from rollout\n"))
    inp = parse_hook_input("codex", "PostToolUse", json.dumps(_post(rollout, "from hook\n")))
    result = recover_codex_result(inp, to_tool_result(inp))
    assert (result.ok, result.exit_code, result.output) == (False, 2, "from hook\n")


@pytest.mark.parametrize(
    ("agent", "response", "call_id", "with_rollout"),
    [
        ("codex", "", "call_2", False),  # no transcript_path: as before
        ("codex", "", "call_3", True),  # the call is not in the rollout yet
        ("codex", "Exit code: 0\nOutput:\nSuccess.\n", "call_2", True),  # the hook told the code
        ("claude", "", "call_2", True),  # only Codex is looked up
    ],
)
def test_otherwise_the_result_is_what_the_hook_said(
    workdir: Path, agent: str, response: str, call_id: str, with_rollout: bool
) -> None:
    rollout = write(workdir / "r.jsonl", at_hook_time("call_2", "ls x", 2, LS_ERROR))
    payload = _post(rollout if with_rollout else None, response, call_id)
    inp = parse_hook_input(agent, "PostToolUse", json.dumps(payload))
    before = to_tool_result(inp)
    assert recover_codex_result(inp, before) == before
    assert before.ok is True
