"""What a client sends a hook: agents, event names and the parsed ``HookInput``.

Claude Code and Codex share event names (``PreToolUse``, ``PostToolUse``, ``Stop``...); Gemini
CLI has its own (``BeforeTool``, ``AfterTool``, ``AfterAgent``...). Each event maps to one
``Phase``, the thing keel does for it. An event a client table does not list is an error, and
so the hook fails closed on it.

Standard library only: this runs on every hook call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from keel.core.calls import DERIVED_ID_PREFIX
from keel.core.errors import PayloadError

Agent = Literal["claude", "codex", "gemini"]
AGENTS: tuple[Agent, ...] = get_args(Agent)

Phase = Literal[
    "pre_tool", "post_tool", "stop", "session_start", "prompt", "compact", "session_end"
]
"""What keel does for an event: decide, observe, gate, re-inject context, or close."""

EVENTS: dict[Agent, dict[str, Phase]] = {
    "claude": {
        "PreToolUse": "pre_tool",
        "PostToolUse": "post_tool",
        "PostToolUseFailure": "post_tool",
        "Stop": "stop",
        "SessionStart": "session_start",
        "UserPromptSubmit": "prompt",
        "PreCompact": "compact",
        "SessionEnd": "session_end",
    },
    "codex": {
        "PreToolUse": "pre_tool",
        "PostToolUse": "post_tool",
        "Stop": "stop",
        "SessionStart": "session_start",
        "UserPromptSubmit": "prompt",
        "PreCompact": "compact",
    },
    "gemini": {
        "BeforeTool": "pre_tool",
        "AfterTool": "post_tool",
        "AfterAgent": "stop",
        "SessionStart": "session_start",
        "BeforeAgent": "prompt",
        "PreCompress": "compact",
        "SessionEnd": "session_end",
    },
}


MAX_INPUT_BYTES = 8_000_000
"""Hook stdin larger than this is refused (and so denied) before parsing."""


@dataclass(frozen=True, slots=True)
class HookInput:
    """One hook call as keel understands it, whatever client sent it."""

    agent: Agent
    event: str
    """The client's event name (``PreToolUse``, ``BeforeTool``...)."""
    phase: Phase
    session_id: str
    turn_id: str | None = None
    """Claude's ``prompt_id`` or Codex's ``turn_id``: one user prompt and what follows."""
    tool_use_id: str | None = None
    cwd: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] = field(default_factory=dict[str, Any])
    tool_response: Any = None
    error: str | None = None
    """The failure text of a failed tool (Claude's ``PostToolUseFailure``)."""
    stop_hook_active: bool = False
    """True when the client is already continuing because a stop hook blocked finishing."""
    prompt: str | None = None
    source: str | None = None
    """Why a session started (``startup``, ``resume``, ``clear``, ``compact``)."""
    transcript_path: str | None = None
    raw: dict[str, Any] = field(default_factory=dict[str, Any])

    def ids(self) -> dict[str, str]:
        """The client's ids for the journal: session, turn and tool use, where present."""
        found = {
            "client_session_id": self.session_id,
            "turn_id": self.turn_id,
            "tool_use_id": self.tool_use_id,
        }
        return {k: v for k, v in found.items() if v}


def phase_for(agent: str, event: str) -> Phase:
    """The phase of ``event`` for ``agent``; a ``PayloadError`` for anything unknown."""
    table = EVENTS.get(agent)  # pyright: ignore[reportArgumentType]
    if table is None:
        raise PayloadError(
            f"unknown agent {agent!r}; expected one of {', '.join(AGENTS)}", code="payload.agent"
        )
    phase = table.get(event)
    if phase is None:
        raise PayloadError(
            f"unknown {agent} hook event {event!r}; keel handles {', '.join(table)}",
            code="payload.hook_event",
        )
    return phase


def parse_hook_input(agent: str, event: str, data: bytes | str) -> HookInput:
    """Parse a hook's stdin for ``agent`` and ``event`` into a ``HookInput``.

    Raises:
        PayloadError: unknown agent or event, oversized or malformed JSON, a payload whose
            ``hook_event_name`` contradicts ``event``, or a tool event without a tool.
    """
    phase = phase_for(agent, event)
    raw = _load_object(data)
    named = raw.get("hook_event_name")
    if named is not None and named != event:
        raise PayloadError(
            f"hook registered for {event!r} received a {named!r} payload",
            code="payload.hook_event_mismatch",
        )
    tool_name, tool_input = _tool_fields(raw, phase)
    session_id = _id_str(raw, "session_id") or f"{agent}-unknown-session"
    return HookInput(
        agent=agent,  # pyright: ignore[reportArgumentType]
        event=event,
        phase=phase,
        session_id=session_id,
        turn_id=_id_str(raw, "prompt_id") or _id_str(raw, "turn_id"),
        tool_use_id=_tool_use_id(raw, session_id, tool_name, tool_input),
        cwd=_id_str(raw, "cwd", limit=4096),
        tool_name=tool_name,
        tool_input=tool_input,
        tool_response=raw.get("tool_response"),
        error=_error_text(raw.get("error")),
        stop_hook_active=raw.get("stop_hook_active") is True,
        prompt=_opt_str(raw, "prompt"),
        source=_opt_str(raw, "source") or _opt_str(raw, "trigger"),
        transcript_path=_id_str(raw, "transcript_path", limit=4096),
        raw=raw,
    )


def _load_object(data: bytes | str) -> dict[str, Any]:
    if len(data) > MAX_INPUT_BYTES:
        raise PayloadError(
            f"hook input is {len(data)} bytes, over the {MAX_INPUT_BYTES}-byte limit",
            code="payload.too_large",
        )
    if not data or not data.strip():
        raise PayloadError("hook input is empty; expected a JSON object", code="payload.empty")
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError(f"hook input is not valid JSON: {exc}", code="payload.json") from exc
    except RecursionError as exc:
        raise PayloadError("hook input is nested too deeply", code="payload.json") from exc
    if not isinstance(value, dict):
        raise PayloadError(
            f"hook input must be a JSON object, got {type(value).__name__}", code="payload.shape"
        )
    return value


def _tool_fields(raw: dict[str, Any], phase: Phase) -> tuple[str | None, dict[str, Any]]:
    if phase not in ("pre_tool", "post_tool"):
        return None, {}
    name = raw.get("tool_name")
    if not isinstance(name, str) or not name:
        raise PayloadError("tool event without a tool_name", code="payload.tool_name")
    tool_input = raw.get("tool_input", {})
    if tool_input is None:
        tool_input = {}
    if not isinstance(tool_input, dict):
        raise PayloadError(
            f"tool_input of {name!r} must be an object, got {type(tool_input).__name__}",
            code="payload.tool_input",
        )
    return name, tool_input


def _tool_use_id(
    raw: dict[str, Any], session_id: str, tool_name: str | None, tool_input: dict[str, Any]
) -> str | None:
    given = _opt_str(raw, "tool_use_id") or _opt_str(raw, "tool_call_id")
    if given or tool_name is None:
        return given
    # Gemini sends no id: derive one from the call itself, so its BeforeTool and AfterTool
    # land on the same id in the journal.
    import hashlib

    digest = hashlib.sha256(
        json.dumps([session_id, tool_name, tool_input], sort_keys=True, default=str).encode()
    ).hexdigest()
    return f"{DERIVED_ID_PREFIX}{digest[:20]}"


def _id_str(raw: dict[str, Any], key: str, *, limit: int = 512) -> str | None:
    """An id or path field: absent, or a printable string of at most ``limit`` characters."""
    value = raw.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PayloadError(
            f"hook input field {key!r} must be a string, got {type(value).__name__}",
            code="payload.field_type",
        )
    if len(value) > limit or not value.isprintable():
        raise PayloadError(
            f"hook input field {key!r} is over {limit} characters or holds control characters",
            code="payload.field_value",
        )
    return value


def _opt_str(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) and value else None


def _error_text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        message = value.get("message")
        if isinstance(message, str):
            return message
    return json.dumps(value, default=str)
