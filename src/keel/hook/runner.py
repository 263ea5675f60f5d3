"""``answer``: one hook call from stdin bytes to the client's answer, failing closed.

Every client measured lets a tool run when its hook crashes, prints bad JSON or times out, so
keel fails closed itself. The work runs in a worker thread under the call's deadline (an
instant, set below the hook timeout keel registers with the client); any exception,
malformed input, unknown event or a missed deadline becomes a block through the client's
exit-2 channel, unless the user chose ``--fail-open`` (then the call goes through and the
failure is journaled). Everything the guard commits it commits before the deadline
(``Guard`` passes ``commit_by`` to the journal), so the journal never records an allow for a
call the client was told is blocked. A stop event the client is already continuing from is
never blocked on failure, and gate blocks are bounded by ``[gates] max_blocks``: keel never
traps an agent.

This is the one in-process code path: the hook process runs it when ``keel hookd`` does not
answer, and the daemon runs it for every call it answers. A request id (made by the hook
process) travels with the call, so a decision the daemon committed before it was replaced is
answered again, not made twice.

Phases: ``pre_tool`` asks ``Guard.decide`` (an allowed shell command is rewritten to run in
``keel exec``, an allowed search to exclude secret files); ``post_tool`` gives
``Guard.observe`` the result (for Codex, with the exit code read from its rollout:
``codex_transcript``) and delivers its guidance; ``stop`` asks ``Guard.gate_finish``;
``session_start``, ``prompt`` and ``compact`` journal the event and re-inject
``Guard.session_context()``; ``session_end`` journals the end.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, assert_never

from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision, Guidance
from keel.core.errors import KeelError
from keel.core.events import EventKind
from keel.core.root import ensure_state_dir, hook_root
from keel.hook.dialects import Dialect, HookReply, dialect_for
from keel.hook.protocol import HookInput, parse_hook_input
from keel.hook.tools import to_tool_call, to_tool_result
from keel.hook.wire import BLOCK, HookArgs

__all__ = ["GuardFactory", "GuardLike", "HookOptions", "answer", "run_hook"]

COMMIT_MARGIN = 0.25
"""Seconds before the deadline by which everything a call journals is committed."""
GRACE = 0.5
"""Seconds after the deadline a worker still gets to finish (it commits nothing new then)."""


class GuardLike(Protocol):
    """Everything the runner uses of ``keel.guard.Guard``."""

    @property
    def root(self) -> str:
        """The workspace root."""
        ...

    @property
    def rewrite(self) -> bool:
        """Whether allowed shell commands are rewritten to run inside ``keel exec``."""
        ...

    @property
    def required_gates(self) -> Sequence[str]:
        """The ``[gates] required`` commands."""
        ...

    def decide(
        self, call: ToolCall, *, request_id: str | None = None, commit_by: float | None = None
    ) -> Decision:
        """The decision for a call, journaled; never raises."""
        ...

    def observe(
        self, result: ToolResult, *, request_id: str | None = None, commit_by: float | None = None
    ) -> Guidance | None:
        """Journal a result; the guidance to deliver."""
        ...

    def gate_finish(
        self,
        failures: Sequence[str] = (),
        *,
        request_id: str | None = None,
        commit_by: float | None = None,
    ) -> str | None:
        """Why the session may not finish yet (journaled, bounded), or None."""
        ...

    def session_context(self) -> str:
        """Pinned constraints and current guidance."""
        ...

    def note(
        self,
        kind: EventKind,
        data: dict[str, Any],
        *,
        request_id: str | None = None,
        commit_by: float | None = None,
    ) -> None:
        """Journal a free-form event."""
        ...

    def close(self) -> None:
        """Release what the guard opened."""
        ...


GuardFactory = Callable[[Path, HookInput, float], GuardLike]
"""``(root, hook input, deadline instant) -> guard``."""


@dataclass(frozen=True, slots=True)
class HookOptions:
    """How one hook call runs."""

    deadline_at: float
    """The ``time.monotonic()`` instant by which the client has its answer."""
    fail_open: bool = False
    """Let the call through when keel fails (journaled); the default blocks it."""
    request_id: str | None = None
    """The hook process's id of this call: the journal commits each request at most once."""


def open_guard(root: Path, inp: HookInput, deadline_at: float) -> GuardLike:
    """The real guard for the session of ``inp``, with only the parts its phase uses."""
    from keel.guard import Guard

    return Guard.open(
        root,
        session_id=inp.session_id,
        agent=inp.agent,
        monitor=inp.phase != "session_end",
        checkpoints=inp.phase in ("pre_tool", "post_tool"),
        wait_until=deadline_at - COMMIT_MARGIN,
        judging="inline",  # no daemon: a judgement runs at a result, within its deadline
    )


def answer(
    args: HookArgs,
    data: bytes,
    *,
    request_id: str,
    deadline_at: float,
    root: str | None = None,
    guard_factory: GuardFactory = open_guard,
    env: Mapping[str, str] | None = None,
) -> tuple[int, bytes, bytes]:
    """One hook call in process: ``(exit code, stdout, stderr)``; never raises."""
    options = HookOptions(deadline_at, args.fail_open, request_id)
    where = Path(root or hook_root(args.agent, args.workspace, env))
    reply = run_hook(
        args.agent, args.event, data, where, options=options, guard_factory=guard_factory
    )
    out = (reply.stdout + "\n").encode("utf-8", "surrogateescape") if reply.stdout else b""
    code = reply.exit_code if reply.exit_code in (0, BLOCK) else BLOCK
    return code, out, reply.stderr.encode("utf-8", "surrogateescape")


def run_hook(
    agent: str,
    event: str,
    data: bytes | str,
    root: Path,
    *,
    options: HookOptions,
    guard_factory: GuardFactory = open_guard,
) -> HookReply:
    """Answer one hook call in ``agent``'s dialect. Never raises and never fails open unasked."""
    box: dict[str, Any] = {}
    done = threading.Event()
    if time.monotonic() >= options.deadline_at:  # nothing sane fits in no time: block now
        what = "keel's deadline passed before the call could be decided"
        _log_failure(root, agent, event, "hook.deadline", what, options.fail_open)
        return _failure_reply(agent, None, "hook.deadline", what, options)

    def work() -> None:
        try:
            box["reply"] = _handle(agent, event, data, root, options, guard_factory, box)
        except BaseException as exc:  # every failure must become an answer
            box["error"] = exc
            _journal_failure(root, box.get("input"), agent, event, exc, options)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="keel-hook", daemon=True)
    worker.start()
    # The guard commits nothing after deadline_at - COMMIT_MARGIN, so waiting a little past
    # the deadline for a worker that is about to finish can only turn a block into its answer.
    if not done.wait(max(options.deadline_at - time.monotonic(), 0.0) + GRACE):
        what = "keel did not answer within its deadline"
        _log_failure(root, agent, event, "hook.deadline", what, options.fail_open)
        return _failure_reply(agent, box.get("input"), "hook.deadline", what, options)
    if "reply" in box:
        return box["reply"]
    exc: BaseException = box["error"]
    code = exc.code if isinstance(exc, KeelError) else "internal_error"
    return _failure_reply(agent, box.get("input"), code, f"{type(exc).__name__}: {exc}", options)


def _handle(
    agent: str,
    event: str,
    data: bytes | str,
    root: Path,
    options: HookOptions,
    guard_factory: GuardFactory,
    box: dict[str, Any],
) -> HookReply:
    inp = parse_hook_input(agent, event, data)
    box["input"] = inp
    guard = guard_factory(root, inp, options.deadline_at)
    try:
        return _dispatch(guard, inp, dialect_for(agent), options)
    finally:
        guard.close()


def _dispatch(
    guard: GuardLike, inp: HookInput, dialect: Dialect, options: HookOptions
) -> HookReply:
    rid, by = options.request_id, options.deadline_at - COMMIT_MARGIN
    match inp.phase:
        case "pre_tool":
            call = to_tool_call(inp)
            decision = guard.decide(call, request_id=rid, commit_by=by)
            if guard.rewrite and call.kind == "exec" and decision.decision != "deny":
                from keel.sandbox.exec.line import encode

                line = encode(
                    guard.root, call.command or "", timeout=_timeout(inp), report=_report_id()
                )
                return dialect.contained(inp, decision, line)
            if call.search in EXCLUDING and decision.decision != "deny":
                return _excluding(inp, dialect, decision)
            return dialect.pre_tool(inp, decision)
        case "post_tool":
            result = to_tool_result(inp)
            if inp.agent == "codex":  # its hook gives no exit code: read it from the rollout
                from keel.hook.codex_transcript import recover_codex_result

                result = recover_codex_result(inp, result)
            return dialect.post_tool(inp, guard.observe(result, request_id=rid, commit_by=by))
        case "stop":
            failures: list[str] = []
            if inp.agent == "codex" and inp.transcript_path and guard.required_gates:
                from keel.hook.codex_transcript import failed_gates

                failures = failed_gates(inp.transcript_path, guard.required_gates)
            reason = guard.gate_finish(failures, request_id=rid, commit_by=by)
            return dialect.stop(inp, reason)
        case "session_start" | "prompt" | "compact":
            # No reset of the stop bound here: Gemini retries a blocked AfterAgent as a new
            # prompt (BeforeAgent), and resetting would loop forever.
            kind: EventKind = "prompt" if inp.phase == "prompt" else "session.start"
            guard.note(kind, _note_data(inp), request_id=rid, commit_by=by)
            return dialect.context(inp, guard.session_context())
        case "session_end":
            guard.note("session.end", _note_data(inp), request_id=rid, commit_by=by)
            return dialect.silence
        case _:
            assert_never(inp.phase)


EXCLUDING = frozenset({"ripgrep", "glob_read"})
"""``ToolCall.search`` kinds whose input the pre-tool answer rewrites to exclude secret files
(the policy's allow, ``path.read_excluding_secrets``, says so in the journal)."""


def _excluding(inp: HookInput, dialect: Dialect, decision: Decision) -> HookReply:
    """The search with keel's excludes for secret files, in the client's rewrite contract.

    Whatever else the guard's policy does, a search the client runs outside the sandbox never
    reads a secret file: the rewrite does not depend on ``[sandbox] contain``. ``[sandbox]
    show_secrets`` exposes files to contained commands only; the file tools (Read too) still
    refuse them, so they stay excluded here.
    """
    from keel.policy import secret_excludes

    return dialect.excluding(inp, decision, secret_excludes())


def _report_id() -> str:
    """A fresh id for ``keel exec --report``: what the run leaves behind reaches ``observe``."""
    import os

    return os.urandom(8).hex()


def _timeout(inp: HookInput) -> float | None:
    """The client's own time limit of a shell call, for ``keel exec`` (Claude: ms)."""
    value = inp.tool_input.get("timeout")
    if inp.agent == "claude" and isinstance(value, int | float) and value > 0:
        return min(float(value) / 1000.0, 600.0)
    return 120.0 if inp.agent == "claude" else None


def _note_data(inp: HookInput) -> dict[str, Any]:
    data: dict[str, Any] = {"event": inp.event, **inp.ids()}
    for key in ("source", "prompt", "transcript_path", "cwd"):
        value = getattr(inp, key)
        if value:
            data[key] = value
    if inp.raw.get("reason"):
        data["reason"] = inp.raw["reason"]
    return data


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
    root: Path, agent: str, event: str, code: str, detail: str, fail_open: bool
) -> None:
    """Append the failure to ``.keel/hook-errors.jsonl``: cheap, and works when SQLite hangs."""
    try:
        base = ensure_state_dir(root)
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
    root: Path,
    inp: HookInput | None,
    agent: str,
    event: str,
    exc: BaseException,
    options: HookOptions,
) -> None:
    """Best effort, within the deadline: the failure as an ``error`` event in the journal."""
    code = exc.code if isinstance(exc, KeelError) else "internal_error"
    detail = f"{type(exc).__name__}: {exc}"
    _log_failure(root, agent, event, code, detail, options.fail_open)
    try:
        from keel.core.events import DataPayload, Event, trace_id_for
        from keel.journal import open_journal

        session = inp.session_id if inp is not None else f"{agent}-unknown-session"
        data: dict[str, Any] = {
            "event": event,
            "code": code,
            "detail": detail,
            "fail_open": options.fail_open,
            **(inp.ids() if inp is not None else {}),
        }
        by = options.deadline_at - COMMIT_MARGIN
        journal = open_journal(root, timeout=max(by - time.monotonic(), 0.01))
        try:
            journal.append_many(
                [
                    Event(
                        kind="error",
                        session_id=session,
                        payload=DataPayload(data),
                        agent=agent,
                        trace_id=trace_id_for(session),
                    )
                ],
                deadline=by,
            )
        finally:
            journal.close()
    except Exception:  # the hook answer matters more than this record
        pass
