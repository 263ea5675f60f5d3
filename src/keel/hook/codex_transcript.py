"""A Codex shell call's real result, recovered from Codex's rollout transcript.

Codex CLI (0.171.0) gives a ``PostToolUse`` hook for a shell command only the command's
output as ``tool_response`` (empty when it printed nothing), never its exit code, so every
Codex command looked like a success to the monitor. When the hook fires, the rollout named by
``transcript_path`` already holds the call's ``event_msg`` ``item_completed`` record (a
``CommandExecution`` item whose ``id`` is the hook's ``tool_use_id``, with ``exit_code`` and
``aggregated_output``); the ``function_call_output`` the model sees is written only after the
hook returns, because a hook may replace it. Older rollouts have ``exec_command_end`` events;
those and ``function_call_output`` (``Process exited with code N``) are read too.

Only the file's tail is read (``TAIL_BYTES``), a partial last line is skipped, and any problem
(missing or unreadable file, record not there) gives ``None``: the caller keeps what the hook
said. Standard library only: this runs on every Codex hook call.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from keel.core.calls import ToolResult
from keel.hook.protocol import HookInput
from keel.hook.tools import MAX_OUTPUT_CHARS

TAIL_BYTES = 2 * 1024 * 1024
"""Bytes read from the end of the rollout; the call's record is among its last lines."""

OutcomeRecord = Literal["item_completed", "exec_command_end", "function_call_output"]
_EXIT_PREFIXES = ("Process exited with code ", "Exit code: ")
_OUTPUT_MARK = "\nOutput:\n"


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one Codex call ended, as its rollout records it."""

    exit_code: int
    output: str
    """The command's combined output, without Codex's chunk header (``Chunk ID``, wall time)."""
    record: OutcomeRecord
    """The kind of rollout record it came from."""


def find_call_outcome(
    path: str | os.PathLike[str], call_id: str, *, tail_bytes: int = TAIL_BYTES
) -> CallOutcome | None:
    """The outcome of call ``call_id`` in the rollout at ``path``; None when it is not there.

    The newest matching record in the last ``tail_bytes`` bytes wins. Never raises: a missing,
    unreadable or malformed file, or a record cut by the tail window, gives None.
    """
    if not call_id:
        return None
    needle = json.dumps(call_id, ensure_ascii=False).encode("utf-8")
    try:
        lines = _tail_lines(path, tail_bytes)
    except (OSError, ValueError):
        return None
    for line in reversed(lines):
        if needle not in line:
            continue
        outcome = _outcome(line, call_id)
        if outcome is not None:
            return outcome
    return None


def recover_codex_result(inp: HookInput, result: ToolResult) -> ToolResult:
    """``result`` with the exit code (and, if the hook gave none, the output) from the rollout.

    Only for a Codex shell call whose exit code the hook did not tell; otherwise, or when the
    rollout does not have the call, ``result`` unchanged.
    """
    if (
        inp.agent != "codex"
        or result.kind != "exec"
        or result.exit_code is not None
        or result.error is not None
        or not inp.transcript_path
        or not inp.tool_use_id
    ):
        return result
    outcome = find_call_outcome(inp.transcript_path, inp.tool_use_id)
    if outcome is None:
        return result
    return result.replace(
        ok=outcome.exit_code == 0,
        exit_code=outcome.exit_code,
        output=result.output or outcome.output[:MAX_OUTPUT_CHARS],
    )


def _tail_lines(path: str | os.PathLike[str], tail_bytes: int) -> list[bytes]:
    """The complete lines among the file's last ``tail_bytes`` bytes."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - max(0, tail_bytes))
        fh.seek(start)
        data = fh.read(size - start)
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # cut by the window: not a whole record
    if lines and not data.endswith(b"\n"):
        lines = lines[:-1]  # still being written
    return lines


def _outcome(line: bytes, call_id: str) -> CallOutcome | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    payload: Any = record.get("payload", record)
    if not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    if kind == "item_completed":
        return _item_completed(payload.get("item"), call_id)
    if kind == "exec_command_end" and payload.get("call_id") == call_id:
        return _exec_end(payload)
    if kind == "function_call_output" and payload.get("call_id") == call_id:
        return _function_output(payload.get("output"))
    return None


def _item_completed(item: Any, call_id: str) -> CallOutcome | None:
    if not isinstance(item, dict) or item.get("id") != call_id:
        return None
    code = item.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    output = item.get("aggregated_output")
    return CallOutcome(code, output if isinstance(output, str) else "", "item_completed")


def _exec_end(payload: dict[str, Any]) -> CallOutcome | None:
    code = payload.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    output = payload.get("aggregated_output")
    if not isinstance(output, str):
        parts = [payload.get("stdout"), payload.get("stderr")]
        output = "\n".join(p for p in parts if isinstance(p, str) and p)
    return CallOutcome(code, output, "exec_command_end")


def _function_output(value: Any) -> CallOutcome | None:
    if isinstance(value, dict):  # {"content": ..., "success": ...} in some versions
        value = value.get("content", value.get("output"))
    if not isinstance(value, str):
        return None
    if value.startswith("{"):
        meta = _json_output(value)
        if meta is not None:
            return meta
    head, mark, body = value.partition(_OUTPUT_MARK)
    code = _header_exit_code(head if mark else value[:2000])
    if code is None:
        return None
    return CallOutcome(code, body if mark else value, "function_call_output")


def _header_exit_code(header: str) -> int | None:
    """N from a ``Process exited with code N`` (or ``Exit code: N``) line of Codex's header."""
    for line in header.splitlines():
        for prefix in _EXIT_PREFIXES:
            if line.startswith(prefix):
                try:
                    return int(line[len(prefix) :].strip())
                except ValueError:
                    return None
    return None


def _json_output(text: str) -> CallOutcome | None:
    """Older rollouts: ``{"output": ..., "metadata": {"exit_code": N}}``."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    meta = data.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    output = data.get("output")
    return CallOutcome(code, output if isinstance(output, str) else "", "function_call_output")


def failed_gates(transcript_path: str, gates: Sequence[str]) -> list[str]:
    """The gates whose latest run in a Codex rollout failed, as "`gate` exited with code N".

    Codex gives a ``PostToolUse`` hook the command's output but not always its exit code, so
    by the ``Stop`` event the rollout is the authority: it holds each call and its
    ``Process exited with code N``. Any problem reading it gives no failures.
    """
    wanted = {" ".join(str(g).split()): str(g) for g in gates}
    try:
        lines = Path(transcript_path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    runs: dict[str, str] = {}
    last: dict[str, int] = {}
    for line in lines:
        item = _transcript_item(line)
        call_id = item.get("call_id")
        if item.get("type") == "function_call" and isinstance(call_id, str):
            command = _codex_command(item.get("arguments"))
            if command in wanted:
                runs[call_id] = wanted[command]
        elif item.get("type") == "function_call_output" and call_id in runs:
            found = _EXITED.search(str(item.get("output", "")))
            if found:
                last[runs[str(call_id)]] = int(found.group(1))
    return [f"`{gate}` exited with code {code}" for gate, code in last.items() if code != 0]


_EXITED = re.compile(r"Process exited with code (-?\d+)")


def _transcript_item(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    payload = record.get("payload") if isinstance(record, dict) else None
    return payload if isinstance(payload, dict) else {}


def _codex_command(arguments: Any) -> str | None:
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else {}
    except (ValueError, RecursionError):
        return None
    value = args.get("cmd", args.get("command")) if isinstance(args, dict) else None
    if isinstance(value, list):
        value = shlex.join(str(v) for v in value)
    return " ".join(value.split()) if isinstance(value, str) else None
