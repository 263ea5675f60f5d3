"""``run_hook``: one hook call from stdin bytes to the client's answer, failing closed.

Every client measured lets a tool run when its hook crashes, prints bad JSON or times out, so
keel fails closed itself. The work runs in a worker thread under an internal deadline that is
set below the hook timeout keel registers with the client; any exception, malformed input,
unknown event or a missed deadline becomes a block through the client's exit-2 channel,
unless the user chose ``--fail-open`` (then the call goes through and the failure is
journaled). A stop event the client is already continuing from is never blocked on failure,
and gate blocks are bounded by ``[gates] max_blocks``: keel never traps an agent.

Phases: ``pre_tool`` asks ``Guard.decide``; ``post_tool`` gives ``Guard.observe`` the result
(for Codex, with the exit code read from its rollout: ``codex_transcript``) and delivers its
guidance; ``stop`` asks ``Guard.may_finish``; ``session_start``, ``prompt``
and ``compact`` journal the event and re-inject ``Guard.session_context()``;
``session_end`` journals the end.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, assert_never

from keel.adapters.dialects import Dialect, HookReply, dialect_for
from keel.adapters.protocol import DERIVED_ID_PREFIX, HookInput, parse_hook_input
from keel.adapters.tools import to_tool_call, to_tool_result
from keel.calls import ToolCall, ToolResult
from keel.decision import Decision, Guidance
from keel.errors import KeelError
from keel.root import ensure_state_dir, find_root

DEFAULT_DEADLINE = 20.0
"""Seconds keel gives itself; the hook timeout registered with clients is ``HOOK_TIMEOUT``."""
HOOK_TIMEOUT = 30
"""Seconds the client waits for keel's hook before it gives up (and would fail open)."""
DEFAULT_MAX_BLOCKS = 3
_CODEX_EXIT = re.compile(r"Process exited with code (-?\d+)")
_PROJECT_DIR_VARS: dict[str, tuple[str, ...]] = {
    "claude": ("KEEL_WORKSPACE", "CLAUDE_PROJECT_DIR"),
    "codex": ("KEEL_WORKSPACE",),
    "gemini": ("KEEL_WORKSPACE", "GEMINI_PROJECT_DIR", "CLAUDE_PROJECT_DIR"),
}
"""Where each client says its project is; Codex says nothing and runs hooks in the project."""


class GuardLike(Protocol):
    """What the runner needs from ``keel.guard.Guard`` (the contract "Guard")."""

    def decide(self, call: ToolCall) -> Decision:
        """The decision for a call; never raises."""
        ...

    def observe(self, result: ToolResult) -> Guidance | None:
        """Journal a result; the guidance to deliver."""
        ...

    def may_finish(self) -> tuple[bool, str]:
        """Whether the gates let the session finish, and why not."""
        ...

    def session_context(self) -> str:
        """Pinned constraints and current guidance."""
        ...


GuardFactory = Callable[[Path, HookInput], GuardLike]


@dataclass(frozen=True, slots=True)
class HookOptions:
    """How one hook call runs."""

    fail_open: bool = False
    """Let the call through when keel fails (journaled); the default blocks it."""
    deadline: float = DEFAULT_DEADLINE
    """Seconds before keel gives up and fails closed (or open)."""
    workspace: Path | None = None
    """The workspace root; default: from the client's project dir, else the current dir."""


def open_guard(root: Path, inp: HookInput) -> GuardLike:
    """The real guard for the session of ``inp``, with only the parts its phase uses."""
    from keel.guard import Guard

    tools = inp.phase in ("pre_tool", "post_tool")
    return Guard.open(
        root,
        session_id=inp.session_id,
        agent=inp.agent,
        monitor=inp.phase != "session_end",
        checkpoints=tools,
    )


def run_hook(
    agent: str,
    event: str,
    data: bytes | str | Callable[[], bytes | str],
    *,
    options: HookOptions | None = None,
    guard_factory: GuardFactory = open_guard,
    env: Mapping[str, str] | None = None,
) -> HookReply:
    """Answer one hook call in ``agent``'s dialect. Never raises and never fails open unasked.

    ``data`` is the hook's stdin, or a function that reads it (called under the deadline, so a
    client that never closes stdin is still answered in time).
    """
    options = options or HookOptions()
    env = os.environ if env is None else env
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["reply"] = _handle(agent, event, data, options, guard_factory, env, box)
        except BaseException as exc:  # every failure must become an answer
            box["error"] = exc
            _journal_failure(box.get("root"), box.get("input"), agent, event, exc, options)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="keel-hook", daemon=True)
    worker.start()
    if not done.wait(options.deadline):
        what = f"keel did not answer within its {options.deadline:g}s deadline"
        _log_failure(box.get("root"), agent, event, "hook.deadline", what, options.fail_open)
        return _failure_reply(agent, box.get("input"), "hook.deadline", what, options)
    if "reply" in box:
        return box["reply"]
    exc: BaseException = box["error"]
    code = exc.code if isinstance(exc, KeelError) else "internal_error"
    return _failure_reply(agent, box.get("input"), code, f"{type(exc).__name__}: {exc}", options)


def _handle(
    agent: str,
    event: str,
    data: bytes | str | Callable[[], bytes | str],
    options: HookOptions,
    guard_factory: GuardFactory,
    env: Mapping[str, str],
    box: dict[str, Any],
) -> HookReply:
    root = _root(options, env, agent)
    box["root"] = root
    inp = parse_hook_input(agent, event, data() if callable(data) else data)
    box["input"] = inp
    guard = guard_factory(root, inp)
    try:
        return _dispatch(guard, inp, root, dialect_for(agent))
    finally:
        close = getattr(guard, "close", None)
        if callable(close):
            close()


def _dispatch(guard: GuardLike, inp: HookInput, root: Path, dialect: Dialect) -> HookReply:
    match inp.phase:
        case "pre_tool":
            base = inp.tool_use_id
            inp = _numbered_call_id(root, inp)
            decision = guard.decide(to_tool_call(inp))
            if decision.allowed:
                _remember_call_id(root, inp, base)
            return dialect.pre_tool(inp, decision)
        case "post_tool":
            inp = _matched_call_id(root, inp)
            result = to_tool_result(inp)
            if inp.agent == "codex":  # its hook gives no exit code: read it from the rollout
                from keel.adapters.codex_transcript import recover_codex_result

                result = recover_codex_result(inp, result)
            return dialect.post_tool(inp, guard.observe(result))
        case "stop":
            return dialect.stop(inp, _stop_gate(guard, inp, root))
        case "session_start" | "prompt" | "compact":
            # No reset of the stop bound here: Gemini retries a blocked AfterAgent as a new
            # prompt (BeforeAgent), and resetting would loop forever.
            _note(guard, "prompt" if inp.phase == "prompt" else "session.start", inp)
            return dialect.context(inp, guard.session_context())
        case "session_end":
            _note(guard, "session.end", inp)
            return dialect.silence
        case _:
            assert_never(inp.phase)


def _stop_gate(guard: GuardLike, inp: HookInput, root: Path) -> str | None:
    """The reason to block finishing, or None.

    The monitor bounds its own blocks by ``[gates] max_blocks``; this count, kept per session
    across hook processes, is a second bound so that no client loops forever on a gate.
    """
    allowed, why = guard.may_finish()
    if allowed and inp.agent == "codex":
        failed = _codex_failed_gates(guard, inp)
        if failed:
            allowed, why = False, "the [gates] must pass: " + "; ".join(failed)
    if allowed:
        _save_stop_blocks(root, inp.session_id, 0)
        return None
    limit = _max_blocks(guard)
    blocks = _load_stop_blocks(root, inp.session_id)
    if blocks >= limit:
        _save_stop_blocks(root, inp.session_id, 0)
        _note(guard, "error", inp, gate="gave_up", blocks=blocks, why=why)
        return None
    _save_stop_blocks(root, inp.session_id, blocks + 1)
    return f"keel: do not finish yet: {why}"


def _codex_failed_gates(guard: GuardLike, inp: HookInput) -> list[str]:
    """Gates whose last run failed, read from Codex's transcript.

    Codex gives a PostToolUse hook the command's output but not its exit code, so keel saw
    every Codex shell command as a success. By the Stop event the transcript holds each call
    and its ``Process exited with code N``; a gate whose latest run there failed blocks.
    """
    gates = getattr(getattr(getattr(guard, "config", None), "gates", None), "required", None)
    if not gates or not inp.transcript_path:
        return []
    wanted = {" ".join(str(g).split()): str(g) for g in gates}
    try:
        lines = Path(inp.transcript_path).read_text(encoding="utf-8", errors="replace").splitlines()
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
            found = _CODEX_EXIT.search(str(item.get("output", "")))
            if found:
                last[runs[str(call_id)]] = int(found.group(1))
    return [f"`{gate}` exited with code {code}" for gate, code in last.items() if code != 0]


def _transcript_item(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError:
        return {}
    payload = record.get("payload") if isinstance(record, dict) else None
    return payload if isinstance(payload, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def _codex_command(arguments: Any) -> str | None:
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else {}
    except ValueError:
        return None
    value = args.get("cmd", args.get("command")) if isinstance(args, dict) else None
    if isinstance(value, list):
        value = shlex.join(str(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    return " ".join(value.split()) if isinstance(value, str) else None


def _max_blocks(guard: GuardLike) -> int:
    gates = getattr(getattr(guard, "config", None), "gates", None)
    value = getattr(gates, "max_blocks", DEFAULT_MAX_BLOCKS)
    return value if isinstance(value, int) else DEFAULT_MAX_BLOCKS


def _state_path(root: Path, session_id: str) -> Path:
    import hashlib

    safe = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:24]
    return ensure_state_dir(root) / "hooks" / f"{safe}.json"


def _load_state(root: Path, session_id: str) -> dict[str, Any]:
    """The adapter's per-session state between hook processes (stop blocks, pending ids)."""
    try:
        data = json.loads(_state_path(root, session_id).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return data if isinstance(data, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def _save_state(root: Path, session_id: str, state: dict[str, Any]) -> None:
    path = _state_path(root, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state), encoding="utf-8")
    os.replace(tmp, path)


def _load_stop_blocks(root: Path, session_id: str) -> int:
    blocks = _load_state(root, session_id).get("stop_blocks", 0)
    return blocks if isinstance(blocks, int) else 0


def _save_stop_blocks(root: Path, session_id: str, blocks: int) -> None:
    state = _load_state(root, session_id)
    if state.get("stop_blocks", 0) == blocks:
        return
    state["stop_blocks"] = blocks
    _save_state(root, session_id, state)


def _numbered_call_id(root: Path, inp: HookInput) -> HookInput:
    """A unique id for a call whose client sends none (Gemini), numbered per session."""
    if not (inp.tool_use_id or "").startswith(DERIVED_ID_PREFIX):
        return inp
    state = _load_state(root, inp.session_id)
    counter = int(state.get("calls", 0)) + 1
    state["calls"] = counter
    _save_state(root, inp.session_id, state)
    return replace(inp, tool_use_id=f"{inp.tool_use_id}-{counter}")


def _remember_call_id(root: Path, inp: HookInput, base: str | None) -> None:
    """Queue an allowed call's id for its after-tool event, which arrives without one."""
    if base is None or base == inp.tool_use_id:
        return
    state = _load_state(root, inp.session_id)
    state.setdefault("pending", {}).setdefault(base, []).append(inp.tool_use_id)
    _save_state(root, inp.session_id, state)


def _matched_call_id(root: Path, inp: HookInput) -> HookInput:
    """The id the matching before-tool call got (first in, first out)."""
    base = inp.tool_use_id or ""
    if not base.startswith(DERIVED_ID_PREFIX):
        return inp
    state = _load_state(root, inp.session_id)
    queue = state.get("pending", {}).get(base) or []
    if not queue:
        return inp
    found = queue.pop(0)
    if not queue:
        del state["pending"][base]
    _save_state(root, inp.session_id, state)
    return replace(inp, tool_use_id=found)


def _note(guard: GuardLike, kind: str, inp: HookInput, **extra: Any) -> None:
    note = getattr(guard, "note", None)
    if not callable(note):
        return
    data: dict[str, Any] = {"event": inp.event, **inp.ids(), **extra}
    for key in ("source", "prompt", "transcript_path", "cwd"):
        value = getattr(inp, key)
        if value:
            data[key] = value
    if inp.raw.get("reason"):
        data["reason"] = inp.raw["reason"]
    note(kind, data)


def _root(options: HookOptions, env: Mapping[str, str], agent: str) -> Path:
    if options.workspace is not None:
        return find_root(override=str(options.workspace))
    for var in _PROJECT_DIR_VARS.get(agent, ("KEEL_WORKSPACE",)):
        value = env.get(var)
        if value and os.path.isdir(value):
            return find_root(start=value)
    return find_root()


def _failure_reply(
    agent: str, inp: HookInput | None, code: str, detail: str, options: HookOptions
) -> HookReply:
    dialect = dialect_for(agent)
    if options.fail_open:
        return HookReply(0, dialect.silence.stdout, f"keel failed ({code}: {detail}); fail-open\n")
    what = f"this {inp.tool_name} call" if inp is not None and inp.tool_name else "this step"
    return dialect.blocked(
        inp, f"keel could not check {what} ({code}: {detail}); it is blocked to be safe."
    )


def _log_failure(
    root: Path | None, agent: str, event: str, code: str, detail: str, fail_open: bool
) -> None:
    """Append the failure to ``.keel/hook-errors.jsonl``: cheap, and works when SQLite hangs."""
    try:
        base = ensure_state_dir(root or find_root())
        line = json.dumps(
            {
                "ts": time.time(),
                "agent": agent,
                "event": event,
                "code": code,
                "detail": detail,
                "fail_open": fail_open,
            }
        )
        with open(base / "hook-errors.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError:
        pass


def _journal_failure(
    root: Path | None,
    inp: HookInput | None,
    agent: str,
    event: str,
    exc: BaseException,
    options: HookOptions,
) -> None:
    """Best effort: the failure (and a fail-open pass) as an ``error`` event in the journal."""
    code = exc.code if isinstance(exc, KeelError) else "internal_error"
    detail = f"{type(exc).__name__}: {exc}"
    _log_failure(root, agent, event, code, detail, options.fail_open)
    try:
        from keel.events import DataPayload, Event
        from keel.guard import trace_id_for
        from keel.journal import open_journal

        session = inp.session_id if inp is not None else f"{agent}-unknown-session"
        data: dict[str, Any] = {
            "event": event,
            "code": code,
            "detail": detail,
            "fail_open": options.fail_open,
            **(inp.ids() if inp is not None else {}),
        }
        journal = open_journal(root or find_root())
        try:
            journal.append(
                Event(
                    kind="error",
                    session_id=session,
                    payload=DataPayload(data),
                    agent=agent,
                    trace_id=trace_id_for(session),
                )
            )
        finally:
            journal.close()
    except Exception:  # the hook answer matters more than this record
        pass
