"""One keel session per MCP connection: every tool call through ``Guard.decide`` and ``observe``.

A call is made canonical by ``keel run``'s own ``to_call`` (agent ``mcp``), decided by the
guard (the emergency stop, ``McpRules``, the policy, the monitor, the judge's verdicts, a
checkpoint before anything that can change files, one journal transaction), carried out by
``keel run``'s own tools (``keel.agent.carry_out``: a command runs in ``keel exec``), and its
result goes through ``Guard.observe``, whose guidance rides on the reply. A call that is not
allowed is an error reply naming the rule, the reason and the suggestion.

Fail closed: an error anywhere (keel.toml unreadable, the journal, a tool) is an error reply,
never a success. A session's calls run one at a time; its state lives in the journal, so a
session reopened (keel.toml changed, or one evicted from ``Sessions``) goes on where it was.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.agent import (
    FILE_TOOLS,
    ToolOutcome,
    agent_config,
    argument_problem,
    carry_out,
    clipped,
    denied_text,
    plan_tool,
    ran_as,
    to_call,
    with_guidance,
)
from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision, Guidance
from keel.core.errors import KeelError
from keel.guard import Guard
from keel.mcp._tools import AGENT, MCP_SCHEMAS, OWN_TOOLS

if TYPE_CHECKING:
    from keel.guard.judging import Judging
    from keel.policy import Policy
    from keel.workspace import Checkpoint

MAX_OPEN = 16
"""Sessions whose guard (a journal connection) stays open between calls; see ``Sessions``."""


@dataclass(frozen=True, slots=True)
class McpRules:
    """The rules the guard asks before its policy: the arguments, and keel's own tools."""

    def check(self, call: ToolCall, policy: Policy) -> Decision | None:
        """Deny a call its tool's schema does not fit; allow keel's own tools by name."""
        problem = argument_problem(call.tool, call.args, MCP_SCHEMAS)
        if problem is not None:
            return Decision.deny(
                "mcp.bad_call", problem, "Call one of keel's tools as its input schema says."
            )
        if call.tool in OWN_TOOLS:
            return Decision.allow("mcp.tool", f"{call.tool} is one of keel's own tools")
        return None


@dataclass(frozen=True, slots=True)
class Reply:
    """What one tool call answers: the text, whether it is an error, and the same as data."""

    is_error: bool
    text: str
    data: dict[str, Any] = field(default_factory=dict[str, Any])
    """``structuredContent``: ``output`` (``text`` again: a client may give the model only
    this, as Claude Code does), the session, the decision, ``guidance``, ``ok``,
    ``exit_code`` and, for keel's own tools, ``result``."""


def internal_error(session_id: str | None, tool: str, exc: BaseException) -> Reply:
    """The reply when keel itself failed: an error, never a success (fail closed)."""
    why = f"keel could not carry out {tool} ({type(exc).__name__}: {exc}); denied to be safe"
    decision = Decision.deny(
        "internal_error", why, "Retry; if it persists, run `keel status` and `keel doctor`."
    )
    text = denied_text(decision)
    return Reply(True, text, _data(text, session_id, decision))


class McpSession:
    """One MCP connection's keel session: its guard, and its calls, one at a time."""

    def __init__(
        self,
        root: Path,
        *,
        client: str | None = None,
        transport: str = "stdio",
        judging: Judging | None = None,
        session_id: str | None = None,
    ) -> None:
        """A session over the workspace ``root``; nothing is opened before its first call.

        ``client`` is the client's name and version (``initialize``), ``transport`` how it
        is connected; ``judging``: where the model judge runs (shared by a server's sessions).
        """
        self.root = root
        self.session_id = session_id or f"mcp-{uuid.uuid4().hex[:12]}"
        self.client = client
        self.transport = transport
        self.judging = judging
        self.calls = 0
        self.denied = 0
        self._guard: Guard | None = None
        self._stamp: object = None
        self._started = False
        self._lock = threading.Lock()

    # -- one call -------------------------------------------------------------------------

    def call(self, tool: str, arguments: Mapping[str, Any] | None) -> Reply:
        """Decide, carry out and observe one call; any failure is an error reply."""
        with self._lock:
            try:
                return self._call(tool, dict(arguments or {}))
            except Exception as exc:  # fail closed: never a silent success
                return internal_error(self.session_id, tool, exc)

    def _call(self, tool: str, args: dict[str, Any]) -> Reply:
        guard = self.guard()
        self.calls += 1
        use_id = f"m{self.calls}"
        call = to_call(
            tool, args, tool_use_id=use_id, session_id=self.session_id, cwd=str(self.root),
            agent=AGENT,
        )  # fmt: skip
        decision = guard.decide(call)
        if not decision.allowed:
            self.denied += 1
            text = denied_text(decision)
            return Reply(True, text, _data(text, self.session_id, decision))
        extra: dict[str, Any] = {}
        try:
            outcome = self._execute(guard, tool, args, use_id, extra)
        except Exception as exc:  # journaled as the call's failed result, answered as one
            outcome = ToolOutcome(
                False, f"error: keel could not carry out {tool}: {exc}\n", str(exc)
            )
        timeout = guard.config.agent.tool_timeout_seconds
        result = ToolResult(
            call.tool, call.kind, outcome.ok, outcome.output, outcome.error, outcome.exit_code,
            use_id, self.session_id, AGENT, ran_as(self.root, guard, call, timeout),
        )  # fmt: skip
        limit = guard.config.agent.tool_output_chars
        try:
            guidance = guard.observe(result)
        except Exception as exc:  # it ran: say so, as an error (its result is not journaled)
            text = clipped(outcome.output, limit) + (
                f"\nkeel: {tool} ran, but keel could not journal its result "
                f"({type(exc).__name__}: {exc})\n"
            )
            return Reply(True, text, {**_data(text, self.session_id, decision), "ok": False})
        text = with_guidance(clipped(outcome.output, limit), guidance)
        data = _data(text, self.session_id, decision, guidance)
        data.update(ok=outcome.ok, exit_code=outcome.exit_code, **extra)
        return Reply(not outcome.ok, text, data)

    def _execute(
        self, guard: Guard, tool: str, args: dict[str, Any], use_id: str, extra: dict[str, Any]
    ) -> ToolOutcome:
        timeout = guard.config.agent.tool_timeout_seconds
        if tool in FILE_TOOLS:
            return carry_out(self.root, guard, tool, args, use_id=use_id, timeout=timeout)
        try:
            match tool:
                case "run_plan":
                    done = plan_tool(self.root, args, guard.config, guard.journal, self.session_id)
                    extra["result"] = {"held": done.held}
                    return done.outcome
                case "diff":
                    return self._diff(guard, args.get("checkpoint"), extra)
                case "checkpoint":
                    return self._checkpoint(guard, args.get("label"), extra)
                case "rollback":
                    return self._rollback(guard, str(args.get("target") or "last"), extra)
                case "status":
                    return self._status(guard, extra)
                case _:  # McpRules denied it already: a tool no schema names
                    raise AssertionError(f"no tool {tool!r}")
        except KeelError as exc:
            return ToolOutcome(False, f"error: {exc.message} [{exc.code}]\n", exc.message)

    # -- keel's own tools -----------------------------------------------------------------

    def _mine(self, guard: Guard) -> list[Checkpoint]:
        from keel.workspace.checkpoints import TARGET_KINDS

        history = guard.checkpointer().history(self.session_id)
        return [c for c in history if c.kind in TARGET_KINDS]

    def _diff(self, guard: Guard, ref: str | None, extra: dict[str, Any]) -> ToolOutcome:
        cps = guard.checkpointer()
        if ref:
            target = cps.get(ref)
        else:
            mine = self._mine(guard)
            if not mine:
                return ToolOutcome(True, "this session has changed nothing yet\n")
            target = mine[0]
        found = cps.diff(target, in_scope=guard.policy.in_scope)
        extra["result"] = {k: v for k, v in found.to_dict().items() if k != "patch"}
        lines = [f"changes since checkpoint {target.short} ({target.kind}):"]
        lines += [f"  {c.status:<12} {c.path}" for c in found.changes] or ["  (none)"]
        if found.outside_scope:
            lines.append(f"outside [scope]: {', '.join(found.outside_scope)}")
        return ToolOutcome(True, "\n".join(lines) + "\n\n" + found.patch)

    def _checkpoint(self, guard: Guard, label: str | None, extra: dict[str, Any]) -> ToolOutcome:
        cp = guard.checkpointer().create(
            session_id=self.session_id, label=label or "keel mcp: checkpoint", kind="manual"
        )
        extra["result"] = cp.to_dict()
        note = " (nothing changed since the last one)" if cp.reused else ""
        return ToolOutcome(True, f"checkpoint {cp.short} taken{note}\n")

    def _rollback(self, guard: Guard, target: str, extra: dict[str, Any]) -> ToolOutcome:
        cps = guard.checkpointer()
        mine = self._mine(guard)
        if target in ("last", "session"):
            if not mine:
                return ToolOutcome(True, "this session has changed nothing to roll back\n")
            chosen = mine[-1] if target == "last" else mine[0]
        else:
            chosen = cps.get(target)
            if chosen.session_id != self.session_id:
                why = f"checkpoint {chosen.short} is not one of this session's"
                return ToolOutcome(False, f"error: {why}: roll back only your own changes\n", why)
        done = cps.rollback(chosen)
        extra["result"] = done.to_dict()
        if done.noop:
            return ToolOutcome(True, f"nothing changed since checkpoint {chosen.short}\n")
        lines = [f"rolled back to checkpoint {chosen.short}"]
        lines += [f"  restored {p}" for p in done.restored]
        lines += [f"  removed  {p}" for p in done.deleted]
        lines += [f"  kept (changed by someone else) {p}" for p in done.kept]
        if done.undo is not None:
            lines.append(f"undo with rollback target {done.undo.short}")
        return ToolOutcome(True, "\n".join(lines) + "\n")

    def _status(self, guard: Guard, extra: dict[str, Any]) -> ToolOutcome:
        from keel.lifecycle import workspace_status

        data = workspace_status(self.root)
        monitor = guard.monitor
        guidance = monitor.current_guidance() if monitor is not None else None
        data["session"] = {
            "id": self.session_id,
            "agent": AGENT,
            "client": self.client,
            "calls": self.calls,
            "denied": self.denied,
            "contained": guard.contain,
            "containment": guard.contain_reason,
            "monitor_stopped": monitor.state.stopped if monitor is not None else None,
            "guidance": guidance.to_dict() if guidance is not None else None,
        }
        extra["result"] = data
        stop = data["stop"]
        lines = [
            f"session {self.session_id} ({self.calls} calls, {self.denied} denied)",
            f"workspace {data['root']}, preset {data['preset']}",
            f"commands: {'contained' if guard.contain else 'NOT contained'} "
            f"({guard.contain_reason})",
            f"emergency stop: {'SET: ' + str(stop.get('reason')) if stop.get('active') else 'off'}",
        ]
        if guidance is not None:
            lines.append(f"guidance ({guidance.level}): {guidance.message}")
        return ToolOutcome(True, "\n".join(lines) + "\n")

    # -- the guard --------------------------------------------------------------------------

    def guard(self) -> Guard:
        """The session's guard, opened again when keel.toml changed (its state is journaled).

        Raises:
            ConfigError: keel.toml is unreadable or invalid (the call is refused).
        """
        from keel.core.configview import config_stamp

        stamp = config_stamp(self.root)
        if self._guard is not None and stamp == self._stamp:
            return self._guard
        self.close_guard()
        config = agent_config(self.root)  # run_plan states a plan, as in keel run
        self._guard = Guard.open(
            self.root, session_id=self.session_id, agent=AGENT, config=config,
            pre_rules=(McpRules(),), judging=self.judging,
        )  # fmt: skip
        self._stamp = stamp
        if not self._started:
            self._started = True
            self._guard.note(
                "session.start",
                {"event": "mcp.start", "client": self.client, "transport": self.transport},
            )
        return self._guard

    def close_guard(self) -> None:
        """Close the guard (its journal connection); the next call opens it again."""
        if self._guard is not None:
            guard, self._guard = self._guard, None
            guard.close()

    def close_if_idle(self) -> None:
        """``close_guard`` unless a call is running."""
        if self._lock.acquire(blocking=False):
            try:
                self.close_guard()
            finally:
                self._lock.release()

    def end(self) -> None:
        """Journal the end of a session that started, and close its guard."""
        with self._lock:
            try:
                if self._started:
                    self.guard().note(
                        "session.end",
                        {"event": "mcp.end", "calls": self.calls, "denied": self.denied},
                    )
            except Exception:  # the server is going away; the calls are journaled already
                pass
            finally:
                self.close_guard()


class Sessions:
    """The keel sessions of one server, by MCP connection."""

    def __init__(self, root: Path, *, transport: str = "stdio") -> None:
        """Sessions over ``root``, sharing one model judge (run on threads, off the calls)."""
        from keel.guard.judging import SubprocessJudging

        self.root = root
        self.transport = transport
        self.judging = SubprocessJudging(root, background=True)
        self._sessions: dict[str, McpSession] = {}
        self._lock = threading.Lock()

    def session(self, key: str, client: str | None = None) -> McpSession:
        """The session of the connection ``key`` (made on its first call).

        ``key`` is the transport's session id (``Mcp-Session-Id``), or ``""`` for a stdio
        connection (one per process) and for clients of stateless HTTP, which share one.
        At most ``MAX_OPEN`` sessions keep their guard (a journal connection) open: the
        least recently used idle ones close theirs, and open it again on their next call.
        """
        with self._lock:
            found = self._sessions.pop(key, None)
            if found is None:
                found = McpSession(
                    self.root, client=client, transport=self.transport, judging=self.judging
                )
            self._sessions[key] = found  # the most recently used last
            for idle in list(self._sessions.values())[:-MAX_OPEN]:
                idle.close_if_idle()
            return found

    def close(self) -> None:
        """End every session (journaled), closing their journals."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.end()


def _data(
    text: str, session_id: str | None, decision: Decision, guidance: Guidance | None = None
) -> dict[str, Any]:
    return {
        "output": text,
        "session": session_id,
        "decision": decision.to_dict(),
        "guidance": guidance.to_dict() if guidance is not None else None,
    }
