"""The canonical tool call and its result: what every adapter turns a client's payload into.

A ``ToolCall`` is the one shape the guard, the policy, the monitor and the journal see,
whatever client it came from. Kinds form a closed set:

- ``exec``: a shell command line in ``command``;
- ``read`` / ``write`` / ``edit``: file operations on ``paths``;
- ``network``: a fetch of ``url``;
- ``mcp``: a tool of an MCP server (``mcp__server__tool``);
- ``other``: anything keel does not know, judged by the default rule.

This module is on the hook path: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ToolKind = Literal["exec", "read", "write", "edit", "network", "mcp", "other"]
TOOL_KINDS: tuple[ToolKind, ...] = ("exec", "read", "write", "edit", "network", "mcp", "other")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call an agent wants to make, in keel's canonical form."""

    tool: str
    """The client's own tool name (``Bash``, ``apply_patch``, ``mcp__github__create_issue``)."""
    kind: ToolKind
    command: str | None = None
    """The shell command line, for ``exec``."""
    paths: tuple[str, ...] = ()
    """Files read, written or edited, as the client gave them."""
    url: str | None = None
    args: dict[str, Any] = field(default_factory=dict[str, Any])
    """The client's raw tool arguments, kept for the journal and the monitor."""
    tool_use_id: str | None = None
    session_id: str | None = None
    agent: str = "keel"
    cwd: str | None = None
    patch: str | None = None
    """Patch text (unified diff or ``*** Begin Patch``) for patch-applying tools."""
    turn_id: str | None = None
    """The client's id of the prompt this call serves (Claude ``prompt_id``, Codex ``turn_id``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "tool": self.tool,
            "kind": self.kind,
            "command": self.command,
            "paths": list(self.paths),
            "url": self.url,
            "args": self.args,
            "tool_use_id": self.tool_use_id,
            "session_id": self.session_id,
            "agent": self.agent,
            "cwd": self.cwd,
            "patch": self.patch,
            "turn_id": self.turn_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        """The inverse of :meth:`to_dict`."""
        values = dict(data)
        values["paths"] = tuple(values.get("paths") or ())
        return cls(**values)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced, as reported after it ran."""

    tool: str
    kind: ToolKind
    ok: bool
    output: str = ""
    """The output, possibly truncated by the adapter."""
    error: str | None = None
    exit_code: int | None = None
    tool_use_id: str | None = None
    session_id: str | None = None
    agent: str = "keel"
    call: ToolCall | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "tool": self.tool,
            "kind": self.kind,
            "ok": self.ok,
            "output": self.output,
            "error": self.error,
            "exit_code": self.exit_code,
            "tool_use_id": self.tool_use_id,
            "session_id": self.session_id,
            "agent": self.agent,
            "call": self.call.to_dict() if self.call else None,
        }
