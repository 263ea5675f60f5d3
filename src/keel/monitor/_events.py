"""Journal events as the monitor reads them: calls, results and token counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from keel.core.calls import TOOL_KINDS, ToolCall, ToolResult

if TYPE_CHECKING:
    from keel.core.events import Event, ToolCallPayload, ToolResultPayload

_PATCH_KEYS = ("patch", "input", "command")


def call_from(payload: ToolCallPayload, event: Event) -> ToolCall:
    """The call of a ``tool.call`` event (patch text found in its arguments)."""
    kind = payload.kind if payload.kind in TOOL_KINDS else "other"
    patch = None
    for name in _PATCH_KEYS:
        value = payload.args.get(name)
        if isinstance(value, str) and ("*** Begin Patch" in value or "\n+++ " in value):
            patch = value
            break
    return ToolCall(
        tool=payload.tool,
        kind=kind,
        command=payload.command,
        paths=tuple(payload.paths),
        url=payload.url,
        args=payload.args,
        tool_use_id=payload.tool_use_id,
        session_id=event.session_id,
        agent=event.agent,
        patch=patch,
    )


def result_from(payload: ToolResultPayload, event: Event) -> ToolResult:
    """The result of a ``tool.result`` event."""
    return ToolResult(
        tool=payload.tool,
        kind="other",
        ok=payload.ok,
        output=payload.output,
        error=payload.error,
        exit_code=payload.exit_code,
        tool_use_id=payload.tool_use_id,
        session_id=event.session_id,
        agent=event.agent,
    )


def tokens_of(data: dict[str, Any]) -> tuple[int, bool] | None:
    """(tokens, cumulative) of a model response's usage, if it reports any."""
    usage = data.get("usage")
    if isinstance(usage, dict):
        total = sum(
            int(v)
            for k, v in usage.items()
            if k in ("input_tokens", "output_tokens") and isinstance(v, int | float)
        )
        return total, False
    for key, cumulative in (("total_tokens", True), ("tokens", False)):
        value = data.get(key)
        if isinstance(value, int):
            return value, cumulative
    return None
