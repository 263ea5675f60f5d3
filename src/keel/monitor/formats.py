"""Readers of recorded agent runs: each turns a file into keel ``Event`` objects.

Formats:

- ``keel``: JSON lines of ``Event.to_json()``, or a journal database (``.keel/journal.db`` or
  a workspace holding one);
- ``claude``: a Claude Code transcript (JSON lines; ``assistant`` messages with ``tool_use``
  items, ``user`` messages with ``tool_result`` items);
- ``codex``: a Codex CLI rollout (JSON lines of ``{"timestamp", "type", "payload"}``:
  ``session_meta``, ``response_item`` with ``function_call`` / ``custom_tool_call`` /
  ``local_shell_call`` and their ``*_output``, ``event_msg`` token counts);
- ``mini-swe-agent``: a trajectory, either ``{"messages": [...], "info": {...}}`` (what
  ``mini`` saves) or the bare JSON list of messages (mini-swe-agent's own test trajectories),
  whose assistant messages hold one ```` ```mswea_bash_command ```` (or ```` ```bash ````)
  block and whose observations hold ``<returncode>``/``<output>``; with tool calls, the
  observations are ``{"returncode", "output"}`` JSON; an ``exit`` message ends the run;
- ``swe-agent``: a ``.traj`` JSON ``{"trajectory": [{"action", "observation", "thought"…}]}``.

Every reader emits ``tool.call`` / ``tool.result`` pairs with matching ``tool_use_id``,
``prompt`` for user messages, ``thought`` for agent text, ``model.response`` for token usage,
``plan`` never (planning tools are calls) and ``session.end`` with ``{"claim": true}`` when the
run ended with the agent claiming completion (a final message, ``submit``).

A client tool's kind comes from ``keel.core.calls.tool_kind``, the table the live hooks use; the
readers of SWE-agent and mini-swe-agent, whose agents have no client tools, give the kind of
each action they parse. Absolute paths under a run's recorded working directory (Claude's
``cwd``, Codex's ``session_meta``) are made relative to it, so that ``[scope]`` judges them as
workspace paths wherever the run was recorded.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from keel.core.calls import ToolKind, tool_kind
from keel.core.errors import KeelError, PayloadError, UserError
from keel.core.events import DataPayload, Event, EventKind, ToolCallPayload, ToolResultPayload
from keel.core.patchtext import patch_paths
from keel.core.root import STATE_DIR
from keel.monitor._text import relative_to

ScanFormat = Literal["keel", "claude", "codex", "mini-swe-agent", "swe-agent"]

_SWE_READS = frozenset(
    {"open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file"}
)
"""SWE-agent's file-viewing commands."""
_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash"})
_PATH_KEYS = ("file_path", "absolute_path", "notebook_path", "path", "dir_path")
_EXIT = re.compile(r"(?:exit code|exited with code)[: ]\s*(-?\d+)", re.IGNORECASE)
_FAILED = re.compile(
    r"Traceback \(most recent call last\)|^\w*Error: |command not found|No such file or directory"
    r"|Your proposed edit has introduced new syntax error|^fatal: |^error: ",
    re.MULTILINE,
)
_SUBMIT = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
_CODEX_LEGACY = frozenset(
    {"message", "function_call", "function_call_output", "custom_tool_call", "local_shell_call"}
)
"""Top-level record types of older rollouts, written without the ``payload`` envelope."""
_CODEX_CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<permissions")


def read_run(
    path: Path, fmt: ScanFormat | Literal["auto"] = "auto"
) -> tuple[ScanFormat, list[Event]]:
    """The format (detected when ``auto``) and the events of a recorded run.

    Raises:
        UserError: the file cannot be read (code ``monitor.read``).
        PayloadError: it is not in the format (code ``payload.scan_format``).
    """
    chosen = detect_format(path) if fmt == "auto" else fmt
    try:
        match chosen:
            case "keel":
                return chosen, _keel(path)
            case "claude":
                return chosen, _claude(_json_lines(path))
            case "codex":
                return chosen, _codex(_json_lines(path))
            case "mini-swe-agent":
                return chosen, _mini(_json_object(path))
            case "swe-agent":
                return chosen, _swe(_json_object(path))
    except KeelError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PayloadError(
            f"{path}: not a {chosen} run: {type(exc).__name__}: {exc}", code="payload.scan_format"
        ) from exc


def detect_format(path: Path) -> ScanFormat:
    """Guess the format from the file's first bytes and first record."""
    if path.is_dir() or path.suffix == ".db":
        return "keel"
    head = _read_bytes(path, 1 << 16)
    if head.startswith(b"SQLite format 3\x00"):
        return "keel"
    text = head.decode("utf-8", "replace").lstrip()
    if text.startswith("[") or (text.startswith("{") and not _first_line_is_object(text)):
        return _json_format(_json_object(path), path)
    for line in text.splitlines():
        try:
            first = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(first, dict):
            return _line_format(first, path)
    raise PayloadError(f"{path}: not a recognised agent run", code="payload.scan_format")


def _first_line_is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text.split("\n", 1)[0]), dict)
    except (ValueError, RecursionError):
        return False


def _json_format(data: Any, path: Path) -> ScanFormat:
    if isinstance(data, dict):
        if isinstance(data.get("trajectory"), list):
            return "swe-agent"
        if isinstance(data.get("messages"), list):
            return "mini-swe-agent"
        if {"kind", "session_id", "payload"} <= set(data):
            return "keel"
    if _is_message_list(data):
        return "mini-swe-agent"
    raise PayloadError(
        f"{path}: a JSON file that is no known trajectory", code="payload.scan_format"
    )


def _is_message_list(data: Any) -> bool:
    """A bare list of chat messages (``{"role", "content"}``), as mini-swe-agent's tests keep."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(m, dict) and "role" in m for m in data)
    )


def _line_format(first: dict[str, Any], path: Path) -> ScanFormat:
    if {"kind", "session_id", "payload"} <= set(first):
        return "keel"
    if first.get("type") in ("session_meta", "response_item", "event_msg", "turn_context"):
        return "codex"
    if "sessionId" in first or first.get("type") in ("user", "assistant", "summary", "system"):
        return "claude"
    if first.get("type") in ("message", "function_call", "reasoning") or "record_type" in first:
        return "codex"
    if isinstance(first.get("messages"), list) or isinstance(first.get("trajectory"), list):
        return _json_format(first, path)  # a trajectory written on one line
    raise PayloadError(f"{path}: JSON lines of an unknown kind", code="payload.scan_format")


# ---------------------------------------------------------------------------------------------
# Reading files


def _read_bytes(path: Path, limit: int | None = None) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(limit) if limit else handle.read()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}", code="monitor.read") from exc


def _json_object(path: Path) -> Any:
    try:
        return json.loads(_read_bytes(path))
    except (ValueError, RecursionError) as exc:
        raise PayloadError(f"{path}: not valid JSON: {exc}", code="payload.scan_format") from exc


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = _read_bytes(path).decode("utf-8", "replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a torn last line of a live transcript
        if isinstance(value, dict):
            yield number, value


# ---------------------------------------------------------------------------------------------
# Building events


class _Run:
    """Collects the events of one run with a running clock and session id."""

    def __init__(self, session_id: str, agent: str) -> None:
        self.session_id = session_id
        self.agent = agent
        self.ts = 0.0
        self.events: list[Event] = []
        self.claimed = False
        self.cwd: str | None = None
        """The run's recorded working directory, if the format has one."""

    def at(self, stamp: Any) -> None:
        when = _epoch(stamp)
        if when is not None:
            self.ts = when

    def add(self, kind: EventKind, payload: Any) -> None:
        self.events.append(Event(kind, self.session_id, payload, agent=self.agent, ts=self.ts))

    def call(
        self, tool: str, args: dict[str, Any], tool_use_id: str, kind: ToolKind | None = None
    ) -> None:
        self.claimed = False
        self.add("tool.call", classify(tool, args, tool_use_id, kind, cwd=self.cwd))

    def result(
        self, tool: str, tool_use_id: str, output: str, ok: bool, exit_code: int | None
    ) -> None:
        payload = ToolResultPayload(tool, ok, output, None, exit_code, tool_use_id)
        self.add("tool.result", payload)

    def data(self, kind: EventKind, **data: Any) -> None:
        self.add(kind, DataPayload(data))

    def text(self, text: str) -> None:
        if text.strip():
            self.data("thought", text=text)
            self.claimed = True

    def finish(self) -> list[Event]:
        if self.claimed:
            self.data("session.end", claim=True)
        return self.events


def classify(
    tool: str,
    args: dict[str, Any],
    tool_use_id: str | None = None,
    kind: ToolKind | None = None,
    *,
    cwd: str | None = None,
) -> ToolCallPayload:
    """The canonical call payload for a tool name and its arguments.

    ``kind`` defaults to the client tool's kind (``keel.core.calls.tool_kind``); a tool keel does
    not know that carries patch text is an edit. Absolute paths under the run's recorded
    ``cwd`` are made relative to it.
    """
    kind = kind or tool_kind(tool)
    command = _command(args) if kind == "exec" else None
    patch = next(
        (
            v
            for k, v in args.items()
            if k in ("input", "patch", "command") and isinstance(v, str) and "*** Begin Patch" in v
        ),
        None,
    )
    paths = [str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k]][:1]
    if patch:
        paths += [p for p in patch_paths(patch) if p not in paths]
    if cwd:
        paths = [relative_to(p, cwd) for p in paths]
    url = args.get("url") if isinstance(args.get("url"), str) else None
    if kind == "other" and patch:
        kind = "edit"
    return ToolCallPayload(tool, kind, command, paths, url, args, tool_use_id)


def _command(args: dict[str, Any]) -> str | None:
    value = args.get("command", args.get("cmd"))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return _argv_line(value)
    return value if isinstance(value, str) else None


def _argv_line(argv: list[str]) -> str:
    """Codex's argv form as a command line: ``["bash", "-lc", "pytest -q"]`` → ``pytest -q``."""
    if len(argv) == 3 and argv[0] in _SHELLS and argv[1] in ("-c", "-lc", "-ic"):
        return argv[2]
    return shlex.join(argv)


def _epoch(stamp: Any) -> float | None:
    if isinstance(stamp, int | float):
        return float(stamp)
    if isinstance(stamp, str) and stamp:
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _exit_code(text: str) -> int | None:
    found = _EXIT.search(text[:400])
    return int(found.group(1)) if found else None


def _looks_failed(text: str) -> bool:
    return bool(_FAILED.search(text[:4000]) or _FAILED.search(text[-4000:]))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(item.get("text", ""))
            for item in content
            if isinstance(item, dict) and item.get("type") in ("text", "input_text", "output_text")
        ]
        return "\n".join(parts)
    return ""


# ---------------------------------------------------------------------------------------------
# keel


def _keel(path: Path) -> list[Event]:
    if (
        path.is_dir()
        or path.suffix == ".db"
        or _read_bytes(path, 16).startswith(b"SQLite format 3")
    ):
        return _keel_db(path)
    head = _read_bytes(path, 1 << 16).decode("utf-8", "replace").lstrip()
    if head.startswith("{") and not _first_line_is_object(head):
        return [Event.from_dict(_json_object(path))]
    return [Event.from_dict(obj) for _, obj in _json_lines(path)]


def _keel_db(path: Path) -> list[Event]:
    from keel.journal import has_journal, open_journal

    root = path if path.is_dir() else path.parent.parent
    if not path.is_dir() and path.parent.name != STATE_DIR:
        raise UserError(
            f"{path}: a journal database must sit in <workspace>/.keel/", code="monitor.read"
        )
    if not has_journal(root):  # .keel/journal.db, or [journal] url in its keel.toml
        raise UserError(f"{root}: no .keel/journal.db here", code="monitor.read")
    with open_journal(root) as journal:
        return list(journal.events())


# ---------------------------------------------------------------------------------------------
# Claude Code


def _claude(lines: Iterator[tuple[int, dict[str, Any]]]) -> list[Event]:
    run = _Run("claude", "claude")
    names: dict[str, str] = {}
    usage_seen: set[str] = set()
    for _, obj in lines:
        run.session_id = str(obj.get("sessionId") or run.session_id)
        run.at(obj.get("timestamp"))
        run.cwd = obj.get("cwd") if isinstance(obj.get("cwd"), str) else run.cwd
        message = obj.get("message")
        if not isinstance(message, dict):
            continue
        content: Any = message.get("content")
        if obj.get("type") == "assistant":
            _claude_assistant(run, message, content, names, usage_seen)
        elif obj.get("type") == "user" and not obj.get("isMeta"):
            _claude_user(run, content, names)
    return run.finish()


def _claude_assistant(
    run: _Run, message: dict[str, Any], content: Any, names: dict[str, str], usage_seen: set[str]
) -> None:
    usage = message.get("usage")
    msg_id = str(message.get("id", len(run.events)))
    if isinstance(usage, dict) and msg_id not in usage_seen:
        usage_seen.add(msg_id)
        run.data("model.response", usage=usage)
    if isinstance(content, str):
        run.text(content)
        return
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text":
            run.text(str(item.get("text", "")))
        elif item.get("type") == "tool_use":
            tool_id, name = str(item.get("id")), str(item.get("name"))
            names[tool_id] = name
            args = item.get("input")
            run.call(name, args if isinstance(args, dict) else {}, tool_id)


def _claude_user(run: _Run, content: Any, names: dict[str, str]) -> None:
    if isinstance(content, str):
        if content.strip() and not content.lstrip().startswith("<"):
            run.claimed = False
            run.data("prompt", text=content)
        return
    texts: list[str] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "tool_result":
            tool_id = str(item.get("tool_use_id"))
            output = _text_of(item.get("content"))
            failed = bool(item.get("is_error"))
            code = _exit_code(output)
            run.result(
                names.get(tool_id, "?"), tool_id, output, not failed, code if failed else None
            )
        elif item.get("type") == "text":
            texts.append(str(item.get("text", "")))
    if texts and "".join(texts).strip():
        run.claimed = False
        run.data("prompt", text="\n".join(texts))


# ---------------------------------------------------------------------------------------------
# Codex CLI


def _codex(lines: Iterator[tuple[int, dict[str, Any]]]) -> list[Event]:
    run = _Run("codex", "codex")
    names: dict[str, str] = {}
    for _, obj in lines:
        run.at(obj.get("timestamp"))
        kind = obj.get("type")
        payload: Any = obj.get("payload") if "payload" in obj else obj
        if not isinstance(payload, dict):
            continue
        if kind in ("session_meta", "turn_context") and isinstance(payload.get("cwd"), str):
            run.cwd = str(payload["cwd"])
        if kind == "session_meta":
            run.session_id = str(payload.get("id") or run.session_id)
        elif kind == "event_msg":
            _codex_event(run, payload)
        elif kind == "response_item" or kind in _CODEX_LEGACY:
            _codex_item(run, payload, names)
    return run.finish()


def _codex_event(run: _Run, payload: dict[str, Any]) -> None:
    if payload.get("type") != "token_count":
        return
    info = payload.get("info")
    usage = info.get("total_token_usage") if isinstance(info, dict) else None
    if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
        run.data("model.response", total_tokens=usage["total_tokens"])


def _codex_item(run: _Run, item: dict[str, Any], names: dict[str, str]) -> None:
    kind = item.get("type")
    call_id = str(item.get("call_id") or item.get("id") or f"codex-{len(run.events)}")
    if kind == "message":
        text = _text_of(item.get("content"))
        if item.get("role") == "user" and not text.lstrip().startswith(_CODEX_CONTEXT):
            run.claimed = False
            run.data("prompt", text=text)
        elif item.get("role") == "assistant":
            run.text(text)
    elif kind == "function_call":
        raw = item.get("arguments", "{}")
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else raw
        name = str(item.get("name"))
        names[call_id] = name
        run.call(name, args if isinstance(args, dict) else {"arguments": raw}, call_id)
    elif kind == "custom_tool_call":
        name = str(item.get("name"))
        names[call_id] = name
        run.call(name, {"input": item.get("input", "")}, call_id)
    elif kind == "local_shell_call":
        action = item.get("action")
        command = action.get("command") if isinstance(action, dict) else None
        names[call_id] = "local_shell"
        run.call("local_shell", {"command": command}, call_id)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output, code = _codex_output(item.get("output"))
        run.result(names.get(call_id, "?"), call_id, output, code in (None, 0), code)


def _codex_output(value: Any) -> tuple[str, int | None]:
    """(output, exit code) from a Codex tool output: plain text, or JSON with metadata."""
    if isinstance(value, dict):
        text = str(value.get("content", value.get("output", "")))
        success = value.get("success")
        return text, (1 if success is False else _exit_code(text))
    if isinstance(value, list):  # content items: [{"type": "input_text", "text": ...}]
        text = _text_of(value)
        return text, _exit_code(text)
    text = value if isinstance(value, str) else json.dumps(value)
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, dict) and "output" in data:
            meta = data.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return str(data["output"]), code if isinstance(code, int) else None
    return text, _exit_code(text)


# ---------------------------------------------------------------------------------------------
# mini-swe-agent

_BASH_BLOCK = re.compile(r"```(?:mswea_bash_command|bash|sh)?\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output(?:_head|_tail)?>\n?(.*?)</output(?:_head|_tail)?>", re.DOTALL)


def _mini(data: Any) -> list[Event]:
    """The events of a trajectory: ``{"messages", "info"}`` or the bare list of messages."""
    if isinstance(data, list):
        data = {"messages": data}
    messages = data["messages"]
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    run = _Run(
        str(info.get("instance_id") or data.get("instance_id") or "mini-swe-agent"),
        "mini-swe-agent",
    )
    pending: str | None = None
    prompted = False
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), _text_of(message.get("content"))
        if role == "assistant":
            pending = _mini_assistant(run, message, content, index)
        elif role == "tool":
            tool_id = str(message.get("tool_call_id") or pending or f"mini-{index}")
            _mini_result(run, tool_id, content, message)
            pending = None
        elif role == "user" and pending is not None:
            _mini_result(run, pending, content, message)
            pending = None
        elif role == "user" and not prompted:
            prompted = True
            run.data("prompt", text=content)
        elif role == "exit" and _exit_status(message) == "Submitted":
            run.claimed = True
    if info.get("exit_status") == "Submitted":
        run.claimed = True
    return run.finish()


def _exit_status(message: dict[str, Any]) -> Any:
    extra = message.get("extra")
    return extra.get("exit_status") if isinstance(extra, dict) else None


def _mini_assistant(run: _Run, message: dict[str, Any], content: str, index: int) -> str | None:
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        last: str | None = None
        for number, call in enumerate(calls):
            function = call.get("function", {}) if isinstance(call, dict) else {}
            raw = function.get("arguments", "{}")
            args = json.loads(raw) if isinstance(raw, str) else raw
            last = str(call.get("id") or f"mini-{index}-{number}")
            _mini_command(run, str(args.get("command", "")), last)
        return last
    blocks = _BASH_BLOCK.findall(content) or _extra_actions(message)
    thought = _BASH_BLOCK.sub("", content)
    run.text(thought)
    if not blocks:
        return None
    tool_id = f"mini-{index}"
    return tool_id if _mini_command(run, blocks[0], tool_id) else None


def _mini_command(run: _Run, command: str, tool_id: str) -> bool:
    if any(marker in command for marker in _SUBMIT):
        run.claimed = True
        return False
    run.call("bash", {"command": command}, tool_id, "exec")
    return True


def _extra_actions(message: dict[str, Any]) -> list[str]:
    """The commands mini-swe-agent recorded it ran (``extra.actions``), when the text has none."""
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, dict) else None
    if not isinstance(actions, list):
        return []
    return [str(a["command"]) for a in actions if isinstance(a, dict) and "command" in a]


def _mini_result(run: _Run, tool_id: str, content: str, message: dict[str, Any]) -> None:
    output, code = (
        _mini_recorded(message)
        or _mini_json_observation(content)
        or _mini_text_observation(content)
    )
    ok = code == 0 if code is not None else not _looks_failed(output)
    run.result("bash", tool_id, output, ok, code)


def _mini_recorded(message: dict[str, Any]) -> tuple[str, int | None] | None:
    """What mini-swe-agent 2 records beside the text: ``extra.returncode``/``raw_output``."""
    extra = message.get("extra")
    code = extra.get("returncode") if isinstance(extra, dict) else None
    raw = extra.get("raw_output") if isinstance(extra, dict) else None
    if not isinstance(code, int) or not isinstance(raw, str):
        return None
    return raw, code


def _mini_text_observation(content: str) -> tuple[str, int | None]:
    """``<returncode>N</returncode><output>...</output>`` (the text-based agents)."""
    code_match = _RETURNCODE.search(content)
    output_match = _OUTPUT.search(content)
    output = output_match.group(1) if output_match else content
    return output, int(code_match.group(1)) if code_match else None


def _mini_json_observation(content: str) -> tuple[str, int | None] | None:
    """``{"returncode": N, "output": ...}`` (the tool-call agents), else None."""
    if not content.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("returncode"), int):
        return None
    parts = (data.get("output"), data.get("output_head"), data.get("output_tail"))
    output = "\n".join(p for p in parts if isinstance(p, str))
    return output, int(data["returncode"])


# ---------------------------------------------------------------------------------------------
# SWE-agent

_EDITOR_KINDS = {
    "view": "read",
    "create": "write",
    "str_replace": "edit",
    "insert": "edit",
    "undo_edit": "edit",
}


def _swe(data: Any) -> list[Event]:
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    run = _Run(str(data.get("instance_id") or info.get("instance_id") or "swe-agent"), "swe-agent")
    open_file: str | None = None
    for index, step in enumerate(data["trajectory"]):
        if not isinstance(step, dict):
            continue
        run.ts = float(index)
        thought = step.get("thought")
        if isinstance(thought, str):
            run.text(thought)
        action = str(step.get("action", "")).strip()
        if not action:
            continue
        words = action.split(maxsplit=2)
        if words[0] == "submit":
            run.claimed = True
            continue
        if words[0] == "open" and len(words) > 1:
            open_file = words[1].strip("\"'")
        tool, args, kind = _swe_call(action, words, open_file)
        tool_id = f"swe-{index}"
        run.call(tool, args, tool_id, kind)
        observation = str(step.get("observation") or "")
        run.result(tool, tool_id, observation, not _looks_failed(observation), None)
    if info.get("exit_status") in ("submitted", "Submitted"):
        run.claimed = True
    return run.finish()


def _swe_call(
    action: str, words: list[str], open_file: str | None
) -> tuple[str, dict[str, Any], ToolKind]:
    """The tool, arguments and kind of one SWE-agent action."""
    name = words[0]
    if name == "str_replace_editor" and len(words) > 2:
        tool, args = _swe_editor(action)
        return tool, args, tool_kind(tool)
    if name in ("edit", "insert") and open_file:
        return "edit", {"path": open_file, "action": action}, "edit"
    if name == "create" and len(words) > 1:
        return "create", {"path": words[1]}, "write"
    if name in _SWE_READS:
        target = words[1] if len(words) > 1 and name in ("open", "find_file") else open_file
        return name, {"path": target, "action": action} if target else {"action": action}, "read"
    return "bash", {"command": action}, "exec"


def _swe_editor(action: str) -> tuple[str, dict[str, Any]]:
    try:
        words = shlex.split(action)
    except ValueError:
        words = action.split()
    sub = words[1] if len(words) > 1 else "view"
    args: dict[str, Any] = {"path": words[2] if len(words) > 2 else ""}
    for flag, key in (
        ("--old_str", "old_string"),
        ("--new_str", "new_string"),
        ("--file_text", "content"),
    ):
        if flag in words and words.index(flag) + 1 < len(words):
            args[key] = words[words.index(flag) + 1]
    tool = {"read": "Read", "write": "Write", "edit": "Edit"}[_EDITOR_KINDS.get(sub, "read")]
    return tool, args
