"""What keel remembers of one session between hook calls, and the ids of numbered calls.

Between hook processes a session's state (the monitor's counters, open calls, gate blocks,
numbered call ids, contained processes stopped while a file tool acts) lives in one record of
the journal's session-state table, which the guard writes in the same transaction as the
events (``SessionState.to_dict``) and reads back (``SessionState.from_dict``).

A client that sends no tool-use id (Gemini) gets ids derived from the call
(``DERIVED_ID_PREFIX``); the state numbers them per session (``number``) so that two equal
calls are two calls, and gives each result the numbered id of its call, first in, first out
(``queue`` when the call is allowed, ``match`` when its result comes).

On the hook path: nothing but ``time`` is imported.
"""

from __future__ import annotations

import time

from keel.core.calls import DERIVED_ID_PREFIX

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any

    from keel.core.calls import ToolCall, ToolResult

OPEN_CALL_TTL = 86400.0
"""Seconds a ``before`` checkpoint waits for its call's result before it is forgotten."""
STATE_FORMAT = 1


class SessionState:
    """What keel remembers of one session between hook calls (one journal record)."""

    __slots__ = (
        "calls", "containment_broken", "frozen", "frozen_pids", "judge_due", "monitor",
        "open_calls", "pending", "stop_blocks",
    )  # fmt: skip

    def __init__(self) -> None:
        """An empty state: a new session."""
        self.monitor: dict[str, Any] | None = None
        """The monitor's state (``MonitorState.to_dict()``)."""
        self.stop_blocks = 0
        """Finishes blocked in a row by the gates."""
        self.calls = 0
        """Calls numbered so far, for clients that send no tool-use id (Gemini)."""
        self.pending: dict[str, list[str]] = {}
        """Numbered ids of allowed calls waiting for their result, by the derived base id."""
        self.open_calls: dict[str, float] = {}
        """Tool-use ids with a ``before`` checkpoint, and when it was taken."""
        self.containment_broken: str | None = None
        """The command a client ran outside the sandbox although keel rewrote it, if any."""
        self.frozen: dict[str, float] = {}
        """File-tool calls in flight while contained processes are stopped, and when each began."""
        self.frozen_pids: list[list[int]] = []
        """The stopped contained processes (``[pid, start]``): continued when the last file-tool
        call in flight ends."""
        self.judge_due: list[str] = []
        """Why a judgement is due at the next result (a hook without the daemon runs it
        there): ``finding``, ``every_n_steps``."""

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SessionState:
        """The state of a stored record; an unknown format starts afresh."""
        state = cls()
        if not data or data.get("format") != STATE_FORMAT:
            return state
        state.monitor = data.get("monitor")
        state.stop_blocks = int(data.get("stop_blocks", 0))
        state.calls = int(data.get("calls", 0))
        state.pending = {str(k): list(v) for k, v in dict(data.get("pending", {})).items()}
        state.open_calls = {str(k): float(v) for k, v in dict(data.get("open_calls", {})).items()}
        broken = data.get("containment_broken")
        state.containment_broken = str(broken) if broken else None
        state.frozen = {str(k): float(v) for k, v in dict(data.get("frozen", {})).items()}
        state.frozen_pids = [[int(p), int(s)] for p, s in data.get("frozen_pids", [])]
        state.judge_due = [str(t) for t in data.get("judge_due", [])]
        return state

    def to_dict(self) -> dict[str, Any]:
        """The record to store (open calls older than ``OPEN_CALL_TTL`` are dropped)."""
        cutoff = time.time() - OPEN_CALL_TTL
        return {
            "format": STATE_FORMAT,
            "monitor": self.monitor,
            "stop_blocks": self.stop_blocks,
            "calls": self.calls,
            "pending": {k: v for k, v in self.pending.items() if v},
            "open_calls": {k: v for k, v in self.open_calls.items() if v >= cutoff},
            "containment_broken": self.containment_broken,
            "frozen": self.frozen,
            "frozen_pids": self.frozen_pids,
            "judge_due": self.judge_due,
        }

    # -- numbered calls (clients that send no tool-use id) -----------------------------------

    def number(self, call: ToolCall) -> ToolCall:
        """A unique id for a call whose client sends none (Gemini), numbered per session."""
        if not (call.tool_use_id or "").startswith(DERIVED_ID_PREFIX):
            return call
        self.calls += 1
        return call.replace(tool_use_id=f"{call.tool_use_id}-{self.calls}")

    def queue(self, call: ToolCall) -> None:
        """Queue an allowed numbered call for its result, which arrives with the base id."""
        numbered = call.tool_use_id or ""
        if numbered.startswith(DERIVED_ID_PREFIX) and "-" in numbered[len(DERIVED_ID_PREFIX) :]:
            base = numbered.rsplit("-", 1)[0]
            self.pending.setdefault(base, []).append(numbered)

    def match(self, result: ToolResult) -> ToolResult:
        """``result`` with the id the matching call got (first in, first out)."""
        base = result.tool_use_id or ""
        queue = self.pending.get(base) if base.startswith(DERIVED_ID_PREFIX) else None
        if not queue:
            return result
        found = queue.pop(0)
        if not queue:
            del self.pending[base]
        return result.replace(tool_use_id=found)
