"""The canonical tool call and its result: what every adapter turns a client's payload into.

A ``ToolCall`` is the one shape the guard, the policy, the monitor and the journal see,
whatever client it came from. Kinds form a closed set:

- ``exec``: a shell command line in ``command``;
- ``read`` / ``write`` / ``edit``: file operations on ``paths`` (a search or listing also
  selects files with ``globs``, and says in ``search`` how it reads contents below a directory);
- ``network``: a fetch of ``url``;
- ``mcp``: a tool of an MCP server (``mcp__server__tool``);
- ``other``: anything keel does not know, judged by the default rule.

``tool_kind`` holds the one table of client tool names: the hook adapters and ``keel monitor
scan`` both classify with it.

This module is on the hook path: nothing but ``keel.core.frozen`` is imported at run time.
"""

from __future__ import annotations

from keel.core.frozen import Frozen

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any, Literal

    ToolKind = Literal["exec", "read", "write", "edit", "network", "mcp", "other"]
else:  # a run-time stand-in, so that modules may import the name
    ToolKind = str

TOOL_KINDS: tuple[ToolKind, ...] = ("exec", "read", "write", "edit", "network", "mcp", "other")
_KIND_OF_TOOL: dict[str, ToolKind] = {
    # Claude Code
    "Bash": "exec", "Read": "read", "Write": "write", "Edit": "edit", "MultiEdit": "edit",
    "NotebookEdit": "edit", "Glob": "read", "Grep": "read", "LS": "read",
    "WebFetch": "network", "WebSearch": "network",
    # Codex CLI
    "exec_command": "exec", "shell": "exec", "shell_command": "exec", "local_shell": "exec",
    "apply_patch": "edit", "view_image": "read", "web_search": "network",
    # Gemini CLI (search_file_content: the older name of grep_search)
    "run_shell_command": "exec", "read_file": "read", "read_many_files": "read",
    "write_file": "write", "replace": "edit", "glob": "read", "grep_search": "read",
    "search_file_content": "read", "list_directory": "read", "web_fetch": "network",
    "google_web_search": "network",
}  # fmt: skip
"""Every client tool keel knows by name; searches (``WebSearch``) are ``network`` without URL."""
_MCP_PREFIXES = ("mcp__", "mcp_")
"""``mcp__server__tool`` (Claude, Codex), ``mcp_server_tool`` (Gemini)."""

DERIVED_ID_PREFIX = "derived-"
"""Tool-use ids keel made up for a client that sends none (Gemini)."""


def tool_kind(name: str) -> ToolKind:
    """The canonical kind of a client tool name (``other`` when keel does not know it)."""
    kind = _KIND_OF_TOOL.get(name)
    if kind is not None:
        return kind
    return "mcp" if name.startswith(_MCP_PREFIXES) else "other"


class ToolCall(Frozen):
    """One tool call an agent wants to make, in keel's canonical form."""

    __slots__ = (
        "agent",
        "args",
        "command",
        "cwd",
        "globs",
        "kind",
        "patch",
        "paths",
        "search",
        "session_id",
        "tool",
        "tool_use_id",
        "turn_id",
        "url",
    )  # fmt: skip
    tool: str
    """The client's own tool name (``Bash``, ``apply_patch``, ``mcp__github__create_issue``)."""
    kind: ToolKind
    command: str | None
    """The shell command line, for ``exec``."""
    paths: tuple[str, ...]
    """Files read, written or edited, as the client gave them."""
    url: str | None
    args: dict[str, Any]
    """The client's raw tool arguments, kept for the journal and the monitor."""
    tool_use_id: str | None
    session_id: str | None
    agent: str
    cwd: str | None
    patch: str | None
    """Patch text (unified diff or ``*** Begin Patch``) for patch-applying tools."""
    turn_id: str | None
    """The client's id of the prompt this call serves (Claude ``prompt_id``, Codex ``turn_id``)."""
    globs: tuple[str, ...]
    """Globs a read tool selects files with, as given: a search's include globs, a ``Glob``
    pattern, the pattern of an exclude's ``!`` negation (it selects files back)."""
    search: str | None
    """How a read tool reads file contents below a directory, for the policy:

    - ``ripgrep``: ripgrep without following symbolic links; keel adds exclude globs for
      secret files to the input (Claude Code's Grep);
    - ``glob_read``: every file its globs select, following links; keel adds the excludes, and
      the policy looks for links under the directory that reach a secret (Gemini's
      ``read_many_files``);
    - ``grep``: whichever of ripgrep, git grep, grep or a walk the client finds, with no way
      to exclude files and ``args["pattern"]`` as an operand: the policy looks for secret
      files the search would read (Gemini's ``grep_search``);
    - ``None``: no contents below a directory (Read, Glob, LS, a file path).
    """

    def __init__(
        self,
        tool: str,
        kind: ToolKind,
        command: str | None = None,
        paths: tuple[str, ...] = (),
        url: str | None = None,
        args: dict[str, Any] | None = None,
        tool_use_id: str | None = None,
        session_id: str | None = None,
        agent: str = "keel",
        cwd: str | None = None,
        patch: str | None = None,
        turn_id: str | None = None,
        globs: tuple[str, ...] = (),
        search: str | None = None,
    ) -> None:
        """A call; ``paths`` and ``globs`` are kept as tuples, ``args`` defaults to a dict."""
        if kind not in TOOL_KINDS:
            raise ValueError(f"tool kind must be one of {TOOL_KINDS}, not {kind!r}")
        self._init(
            tool=tool,
            kind=kind,
            command=command,
            paths=tuple(paths),
            url=url,
            args={} if args is None else args,
            tool_use_id=tool_use_id,
            session_id=session_id,
            agent=agent,
            cwd=cwd,
            patch=patch,
            turn_id=turn_id,
            globs=tuple(globs),
            search=search,
        )

    def __hash__(self) -> int:
        """Hashable despite ``args`` (a dict): by everything else."""
        return hash(tuple(v for v in self._values() if not isinstance(v, dict)))

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
            "globs": list(self.globs),
            "search": self.search,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        """The inverse of :meth:`to_dict`."""
        values = dict(data)
        values["paths"] = tuple(values.get("paths") or ())
        values["globs"] = tuple(values.get("globs") or ())
        return cls(**values)


class ToolResult(Frozen):
    """What a tool call produced, as reported after it ran."""

    __slots__ = (
        "agent",
        "call",
        "error",
        "exit_code",
        "kind",
        "ok",
        "output",
        "session_id",
        "tool",
        "tool_use_id",
    )  # fmt: skip
    tool: str
    kind: ToolKind
    ok: bool
    output: str
    """The output, possibly truncated by the adapter."""
    error: str | None
    exit_code: int | None
    tool_use_id: str | None
    session_id: str | None
    agent: str
    call: ToolCall | None

    def __init__(
        self,
        tool: str,
        kind: ToolKind,
        ok: bool,
        output: str = "",
        error: str | None = None,
        exit_code: int | None = None,
        tool_use_id: str | None = None,
        session_id: str | None = None,
        agent: str = "keel",
        call: ToolCall | None = None,
    ) -> None:
        """A result of a call of ``kind``."""
        if kind not in TOOL_KINDS:
            raise ValueError(f"tool kind must be one of {TOOL_KINDS}, not {kind!r}")
        self._init(
            tool=tool,
            kind=kind,
            ok=ok,
            output=output,
            error=error,
            exit_code=exit_code,
            tool_use_id=tool_use_id,
            session_id=session_id,
            agent=agent,
            call=call,
        )

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
