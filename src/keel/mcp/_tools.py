"""The tools ``keel mcp`` offers, with the JSON Schema of their arguments.

Seven are ``keel run``'s, with its argument schemas (``keel.agent.SCHEMAS``) and, in
``keel.mcp._session``, its implementations: ``read_file``, ``search``, ``list_files``, ``run``,
``apply_patch``, ``write_file`` and ``run_plan``. (``ask_user`` and ``finish`` drive keel run's
own loop; an MCP client has its own.) Four more give the client keel's checkpoints and state:
``diff``, ``checkpoint``, ``rollback`` and ``status``. Descriptions name no phase: an MCP
client's calls are judged by the policy, the monitor and the stop, not by keel run's phases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from keel.agent import SCHEMAS, TOOLS

AGENT = "mcp"
"""The agent name of every ``keel mcp`` session in the journal."""
AGENT_TOOLS = ("read_file", "search", "list_files", "run", "apply_patch", "write_file", "run_plan")
"""The tools of ``keel run`` that ``keel mcp`` offers, with their schemas."""
OWN_TOOLS = frozenset({"run_plan", "diff", "checkpoint", "rollback", "status"})
"""keel's own tools: allowed by name (the policy judges files, commands and URLs), though
the stop and the monitor still decide them."""

_STR = {"type": "string"}


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    """An arguments object with only optional ``properties``, nothing else allowed."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": [],
        "additionalProperties": False,
    }


@dataclass(frozen=True, slots=True)
class McpTool:
    """One tool as an MCP client sees it (``tools/list``)."""

    name: str
    description: str
    schema: Mapping[str, Any]
    """The JSON Schema of its arguments (``inputSchema``)."""
    read_only: bool
    """It changes no file (``readOnlyHint``)."""
    destructive: bool = False
    """It may overwrite or remove what is there (``destructiveHint``)."""


_DESCRIPTIONS = {
    "run": "Run a shell command line in the workspace. keel's policy judges it first; it runs "
    "contained by keel's sandbox (writes only inside the workspace, a fresh HOME without "
    "secrets, network only to allowed hosts) with keel's time limit. The output ends with "
    "its exit code.",
    "apply_patch": "Apply a unified diff or a Codex patch (*** Begin Patch), all or nothing: "
    "a patch that does not apply changes no file. Every file it touches is judged.",
    "write_file": "Write a whole file of the workspace (never through a symlink).",
    "run_plan": "Run an evidence plan (keel's plan language: read-only probes, conditions "
    "and branches) that checks your assumptions before you change anything; the result is "
    "the evidence report, and whether every condition held. Plans only gather evidence.",
}
_OWN = (
    McpTool(
        "diff",
        "What changed in the workspace since this session's first checkpoint (or since "
        "`checkpoint`, an id), commands' changes included: the files, then a unified diff.",
        _object({"checkpoint": _STR}),
        read_only=True,
    ),
    McpTool(
        "checkpoint",
        "Take a checkpoint of the workspace now, for rollback to go back to.",
        _object({"label": _STR}),
        read_only=False,
    ),
    McpTool(
        "rollback",
        "Undo this session's changes: its last change (target 'last', the default), "
        "everything it changed (target 'session'), or everything since one of its "
        "checkpoints (target: an id). Files someone else changed are left alone.",
        _object({"target": _STR}),
        read_only=False,
        destructive=True,
    ),
    McpTool(
        "status",
        "keel's state: this session (calls, denials, the monitor's guidance), whether "
        "commands run contained, the emergency stop, the policy preset and the journal.",
        _object({}),
        read_only=True,
    ),
)


def _agent_tools() -> tuple[McpTool, ...]:
    described = {tool.name: tool.description for tool in TOOLS}
    read_only = {"read_file", "search", "list_files", "run_plan"}
    return tuple(
        McpTool(
            name,
            _DESCRIPTIONS.get(name, described[name]),
            SCHEMAS[name],
            read_only=name in read_only,
            destructive=name in ("run", "write_file", "apply_patch"),
        )
        for name in AGENT_TOOLS
    )


MCP_TOOLS: tuple[McpTool, ...] = (*_agent_tools(), *_OWN)
"""Every tool ``keel mcp`` offers, in the order ``tools/list`` gives them."""
MCP_SCHEMAS: dict[str, Mapping[str, Any]] = {tool.name: tool.schema for tool in MCP_TOOLS}
