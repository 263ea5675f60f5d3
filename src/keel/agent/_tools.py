"""The nine tools keel's agent offers the model: their schemas, and each call as a ``ToolCall``.

Exactly these names and arguments; anything else is refused before it reaches a tool. A
model's call becomes keel's canonical :class:`keel.core.calls.ToolCall` (a kind, paths, a command
or a patch), so the guard, the policy and the monitor judge it as they judge any client's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from keel.core.calls import ToolCall, ToolKind
from keel.core.patchtext import patch_paths
from keel.models import Tool

ToolName = Literal[
    "read_file",
    "search",
    "list_files",
    "run",
    "run_plan",
    "apply_patch",
    "write_file",
    "ask_user",
    "finish",
]
READ_TOOLS = frozenset({"read_file", "search", "list_files"})
WRITE_TOOLS = frozenset({"apply_patch", "write_file"})
CONTROL_TOOLS = frozenset({"run_plan", "ask_user", "finish"})

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 1}


def _schema(
    required: Mapping[str, Any], optional: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": sorted(required),
        "additionalProperties": False,
    }


TOOLS: tuple[Tool, ...] = (
    Tool(
        "read_file",
        "Read a text file of the workspace (optionally lines start_line..end_line).",
        _schema({"path": _STR}, {"start_line": _INT, "end_line": _INT}),
    ),
    Tool(
        "search",
        "Search file contents for a regular expression (ripgrep syntax).",
        _schema({"pattern": _STR}, {"path": _STR}),
    ),
    Tool(
        "list_files",
        "List the files under a directory of the workspace.",
        _schema({}, {"path": _STR}),
    ),
    Tool(
        "run",
        "Run a shell command in the workspace, contained by keel (30 s limit). Before "
        "implement, only commands that change no file.",
        _schema({"command": _STR}),
    ),
    Tool(
        "run_plan",
        "Run an evidence plan (keel's plan language) that checks your "
        "assumptions with read-only probes. Conditions that hold open implement.",
        _schema({"plan": {"type": "object"}}),
    ),
    Tool(
        "apply_patch",
        "Apply a unified diff or a Codex patch (*** Begin Patch), all or "
        "nothing. Only in implement.",
        _schema({"patch": _STR}),
    ),
    Tool(
        "write_file",
        "Write a whole file. Only in implement.",
        _schema({"path": _STR, "content": _STR}),
    ),
    Tool(
        "ask_user", "Ask the user a question and wait for the answer.", _schema({"question": _STR})
    ),
    Tool(
        "finish",
        "Finish: keel runs the required gates; if one fails you continue.",
        _schema({"summary": _STR}),
    ),
)
SCHEMAS: dict[str, Mapping[str, Any]] = {tool.name: tool.parameters for tool in TOOLS}
INVALID_JSON = "(invalid arguments)"
"""The key under which a call whose arguments are not a JSON object carries the reason."""


def parse_arguments(text: str) -> dict[str, Any]:
    """The arguments of a call as a dict (``{INVALID_JSON: why}`` when they are not one)."""
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        return {INVALID_JSON: f"the arguments are not valid JSON ({exc})"}
    if not isinstance(value, dict):
        return {INVALID_JSON: "the arguments must be a JSON object"}
    return value


def argument_problem(
    tool: str, args: Mapping[str, Any], schemas: Mapping[str, Mapping[str, Any]] = SCHEMAS
) -> str | None:
    """What is wrong with ``args`` for ``tool`` (by its schema in ``schemas``), or None."""
    if INVALID_JSON in args:
        return f"{tool}: {args[INVALID_JSON]}"
    schema = schemas.get(tool)
    if schema is None:
        return f"there is no tool {tool!r}; the tools are {', '.join(schemas)}"
    props: Mapping[str, Any] = schema["properties"]
    for name in schema["required"]:
        if name not in args:
            return f"{tool} needs the argument {name!r}"
    for name, value in args.items():
        spec = props.get(name)
        if spec is None:
            return f"{tool} takes no argument {name!r} (it takes {', '.join(props) or 'none'})"
        if not _fits(spec, value):
            kind = spec["type"]
            return f"{tool}: {name!r} must be {'an' if kind == 'integer' else 'a'} {kind}"
    return None


def _fits(spec: Mapping[str, Any], value: Any) -> bool:
    match spec["type"]:
        case "string":
            return isinstance(value, str)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool) and value >= 1
        case "object":
            return isinstance(value, dict)
        case _:
            return False


def to_call(
    name: str,
    args: Mapping[str, Any],
    *,
    tool_use_id: str,
    session_id: str,
    cwd: str,
    agent: str = "keel",
) -> ToolCall:
    """The canonical call for a tool call of the model (arguments already parsed).

    ``agent`` names who made it: ``keel`` (``keel run``), ``mcp`` (``keel mcp``'s clients).
    """
    kind: ToolKind = "other"
    paths: tuple[str, ...] = ()
    command = patch = None
    text = {k: v for k, v in args.items()}
    match name:
        case "read_file" | "search" | "list_files":
            kind, paths = "read", (_text(args.get("path")) or ".",)
        case "run":
            kind, command = "exec", _text(args.get("command"))
        case "apply_patch":
            patch = _text(args.get("patch"))
            kind, paths = "edit", tuple(patch_paths(patch or ""))
        case "write_file":
            kind, paths = "write", (_text(args.get("path")) or "",)
        case _:
            pass
    return ToolCall(
        name,
        kind,
        command=command,
        paths=paths,
        args=text,
        tool_use_id=tool_use_id,
        session_id=session_id,
        agent=agent,
        cwd=cwd,
        patch=patch,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
