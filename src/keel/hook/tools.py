"""Every client tool shape to keel's canonical ``ToolCall`` and ``ToolResult``.

The three clients name and shape their tools differently: Claude Code's ``Bash``/``Write``/
``Edit``, Codex's ``Bash``/``exec_command``/``apply_patch`` (``*** Begin Patch`` text with
paths relative to the working directory), Gemini's ``run_shell_command``/``write_file``/
``replace``. MCP tools are ``mcp__server__tool`` (Gemini: ``mcp_server_tool``). The kind of
each name comes from ``keel.core.calls.tool_kind``, the one table ``keel monitor scan`` uses too.
Relative paths are made absolute against the hook's ``cwd``, so the policy judges the file
the tool will really touch. A tool keel does not know is kind ``other``: the default rule
judges it.

The clients' file tools run in the client, outside any sandbox, so every argument of a read
tool that selects files reaches the canonical call: paths in ``paths`` (with the literal
directory a walking glob starts from), globs in ``globs`` (Claude's Grep ``glob`` split the
way Claude Code splits it, Glob's ``pattern``, Gemini's ``include``/``include_pattern``, the
pattern of a ``!`` negation in an ``exclude``), and how a search reads contents below a
directory in ``search`` (``keel.core.calls.ToolCall.search``).

Standard library only: this runs on every hook call.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any, assert_never

from keel.core.calls import ToolCall, ToolResult, tool_kind
from keel.core.errors import PayloadError
from keel.core.patchtext import patch_paths
from keel.hook.protocol import HookInput

MAX_OUTPUT_CHARS = 64_000
"""Tool output kept in a ``ToolResult``; the monitor needs the gist, not megabytes."""

_READ_DIR_TOOLS = frozenset(
    {"Glob", "Grep", "LS", "glob", "grep_search", "search_file_content", "list_directory",
     "read_many_files"}
)  # fmt: skip
"""Read tools that may name no path: they read the working directory."""
_PATCH_TOOLS = frozenset({"apply_patch"})
_SEARCHES = {
    ("claude", "Grep"): "ripgrep",
    ("gemini", "read_many_files"): "glob_read",
    ("gemini", "grep_search"): "grep",
    ("gemini", "search_file_content"): "grep",
}
"""How each client's search reads contents below a directory (``ToolCall.search``)."""
_WALKING_GLOBS = frozenset({"Glob", "glob", "read_many_files"})
"""Tools whose globs say where to walk (their literal directory is judged as a path), not
only which files of a walk to keep."""
_WILDCARDS = frozenset("*?[{")
_GLOB_KEYS = {
    "Glob": ("pattern",),
    "glob": ("pattern",),
    "grep_search": ("include_pattern", "include"),
    "search_file_content": ("include_pattern", "include"),
    "read_many_files": ("include", "paths"),
}
"""The arguments each tool selects files with, besides a Grep's ``glob``."""
_PATH_KEYS = ("file_path", "absolute_path", "notebook_path", "path", "dir_path")
_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_EXIT_CODE = re.compile(r"exit code:?\s*(-?\d+)", re.IGNORECASE)
_GEMINI_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
# Gemini wraps shell output and adds a fresh process-group id every time: dropped, so that
# the same command with the same output looks the same to the monitor.
_GEMINI_NOISE = re.compile(
    r"^(?:Process Group PGID|Background PIDs): .*$\n?|</?untrusted_context>\n?", re.MULTILINE
)


def to_tool_call(inp: HookInput) -> ToolCall:
    """The canonical call for a pre- or post-tool hook input.

    Raises:
        PayloadError: a known tool without the arguments it needs (a shell tool without a
            command, a file tool without a path, a patch tool without patch text).
    """
    name = inp.tool_name or ""
    args = inp.tool_input
    kind = tool_kind(name)
    base: dict[str, Any] = {
        "tool": name,
        "kind": kind,
        "args": args,
        "tool_use_id": inp.tool_use_id,
        "turn_id": inp.turn_id,
        "session_id": inp.session_id,
        "agent": inp.agent,
        "cwd": inp.cwd,
    }
    match kind:
        case "exec":
            return ToolCall(**base, command=_command(name, args))
        case "write" | "edit" if name in _PATCH_TOOLS:
            patch = _patch_text(args)
            return ToolCall(
                **base, paths=_absolute(tuple(patch_paths(patch)), inp.cwd), patch=patch
            )
        case "write" | "edit":
            return ToolCall(**base, paths=_absolute(_required_paths(name, args), inp.cwd))
        case "read":
            paths, globs = _read_paths(name, args, inp.cwd), _read_globs(name, args)
            where = paths[0] if paths else inp.cwd
            starts = tuple(
                d for g in globs if name in _WALKING_GLOBS and (d := _glob_dir(g)) is not None
            )
            return ToolCall(
                **base,
                paths=_absolute(paths, inp.cwd) + _absolute(starts, _joined(where, inp.cwd)),
                globs=globs,
                search=_SEARCHES.get((inp.agent, name)),
            )
        case "network":
            return ToolCall(**base, url=_url(args))
        case "mcp" | "other":
            return ToolCall(**base)
        case _:
            assert_never(kind)


def to_tool_result(inp: HookInput, call: ToolCall | None = None) -> ToolResult:
    """The canonical result of a post-tool hook input, from each client's response shape."""
    call = call or to_tool_call(inp)
    output, error, exit_code = _response_parts(inp.tool_response)
    if inp.error:
        error = inp.error
        exit_code = exit_code if exit_code is not None else _exit_code(inp.error)
    ok = error is None and exit_code in (None, 0)
    return ToolResult(
        tool=call.tool,
        kind=call.kind,
        ok=ok,
        output=output[:MAX_OUTPUT_CHARS],
        error=error[:MAX_OUTPUT_CHARS] if error else None,
        exit_code=exit_code,
        tool_use_id=inp.tool_use_id,
        session_id=inp.session_id,
        agent=inp.agent,
        call=call,
    )


def _command(name: str, args: dict[str, Any]) -> str:
    value = args.get("command", args.get("cmd"))
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    if isinstance(value, str) and value.strip():
        return value
    raise PayloadError(f"{name} call without a command", code="payload.tool_command", tool=name)


def _patch_text(args: dict[str, Any]) -> str:
    for key in ("command", "input", "patch"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and len(value) >= 2 and value[0] == "apply_patch":
            return str(value[-1])
    raise PayloadError("apply_patch call without patch text", code="payload.tool_patch")


def _required_paths(name: str, args: dict[str, Any]) -> tuple[str, ...]:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return (value,)
    raise PayloadError(f"{name} call without a file path", code="payload.tool_path", tool=name)


def _read_paths(name: str, args: dict[str, Any], cwd: str | None) -> tuple[str, ...]:
    if name == "read_many_files":  # its include entries are globs below the project
        return (cwd or ".",)
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return (value,)
    many = args.get("paths")
    if isinstance(many, list) and all(isinstance(p, str) for p in many):
        return tuple(many)
    if name in _READ_DIR_TOOLS:
        return (cwd or ".",)
    raise PayloadError(f"{name} call without a file path", code="payload.tool_path", tool=name)


def _read_globs(name: str, args: dict[str, Any]) -> tuple[str, ...]:
    """The globs a read tool selects files with, read the way its client reads them."""
    if name == "Grep":  # Claude Code: split on white space, then on commas outside braces
        text = args.get("glob")
        out: list[str] = []
        for piece in text.split() if isinstance(text, str) else ():
            parts = [piece] if "{" in piece and "}" in piece else piece.split(",")
            out.extend(p for p in parts if p and not p.startswith("!"))  # "!" excludes
        return tuple(out)
    globs = [g for key in _GLOB_KEYS.get(name, ()) for g in _strings(args.get(key))]
    # an exclude's "!PATTERN" would select files back if the tool read it as a negation
    globs += [e[1:] for e in _strings(args.get("exclude")) if e.startswith("!") and e[1:]]
    return tuple(globs)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and v]
    return []


def _glob_dir(glob: str) -> str | None:
    """Where a walking glob starts: the whole of a plain path, else its literal directory."""
    if not any(c in _WILDCARDS for c in glob):
        return glob
    from keel.policy import literal_dir

    return literal_dir(glob)


def _joined(path: str | None, cwd: str | None) -> str | None:
    if path is None or os.path.isabs(path) or not cwd:
        return path
    return os.path.normpath(os.path.join(cwd, path))


def _absolute(paths: tuple[str, ...], cwd: str | None) -> tuple[str, ...]:
    if not cwd:
        return paths
    return tuple(p if os.path.isabs(p) else os.path.normpath(os.path.join(cwd, p)) for p in paths)


def _url(args: dict[str, Any]) -> str | None:
    url = args.get("url")
    if isinstance(url, str) and url:
        return url
    for value in args.values():
        if isinstance(value, str):
            found = _URL.search(value)
            if found:
                return found.group(0)
    return None


def _response_parts(response: Any) -> tuple[str, str | None, int | None]:
    """(output, error, exit code) from Claude's, Codex's or Gemini's ``tool_response``."""
    if response is None:
        return "", None, None
    if isinstance(response, str):
        return response, None, _codex_exit_code(response)
    if isinstance(response, dict):
        return _dict_parts(response)
    return json.dumps(response, default=str), None, None


def _dict_parts(response: dict[str, Any]) -> tuple[str, str | None, int | None]:
    error = response.get("error")
    error_text = error if isinstance(error, str) and error else None
    if error and not error_text:
        error_text = json.dumps(error, default=str)
    if "llmContent" in response:  # Gemini
        content = response.get("llmContent")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        text = _GEMINI_NOISE.sub("", text)
        found = _GEMINI_EXIT_CODE.search(text)
        return text, error_text, int(found.group(1)) if found else None
    if "stdout" in response or "stderr" in response:  # Claude Code's Bash
        out = str(response.get("stdout") or "")
        err = str(response.get("stderr") or "")
        text = out + ("\n" + err if out and err else err)
        if response.get("interrupted") is True:
            error_text = error_text or "interrupted"
        code = response.get("exit_code", response.get("exitCode"))
        return text, error_text, code if isinstance(code, int) else None
    if response.get("is_error") is True or response.get("isError") is True:
        error_text = error_text or json.dumps(response, default=str)[:MAX_OUTPUT_CHARS]
    return json.dumps(response, default=str)[:MAX_OUTPUT_CHARS], error_text, None


def _codex_exit_code(text: str) -> int | None:
    if text.startswith("Exit code:"):
        return _exit_code(text.splitlines()[0])
    return None


def _exit_code(text: str) -> int | None:
    found = _EXIT_CODE.search(text)
    return int(found.group(1)) if found else None
