"""The guard: one place where every tool call is decided, journaled and watched.

``Guard.decide(call)`` runs, in order: the emergency stop, the policy (commands, paths, network
and the enforced constraints), the monitor's pre-call detectors (which may turn an allow into
a deny with guidance), and a checkpoint before anything that can change files: writes, edits
and shell commands, except a command line whose every simple command the policy knows to be
read-only (``Policy.is_read_only``). The call and the decision are journaled, the decision as
a child span of the call. Any internal error is a deny with rule ``internal_error``: keel
fails closed even where its host fails open.

``Guard.observe(result)`` journals what a tool returned, takes the ``after`` checkpoint of a
call that got a ``before`` one (a marker under ``.keel/guard/open/`` links the two hook
processes), runs the post-call detectors and returns the guidance an adapter should deliver.
``Guard.may_finish()`` answers the gates.

``Guard.open`` reads keel.toml through ``keel._configview`` (a cached, validated dump), so a
hook process imports neither pydantic nor tomllib while keel.toml is unchanged, and imports
the checkpoint machinery only when a call needs a checkpoint.

The monitor keeps its state in ``.keel/monitor/<session>.json`` between calls, because every
hook call is a separate process.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.calls import ToolCall, ToolResult
from keel.decision import Decision, Guidance
from keel.events import (
    DataPayload,
    DecisionPayload,
    Event,
    EventKind,
    GatePayload,
    GuidancePayload,
    Payload,
    ToolCallPayload,
    ToolResultPayload,
    new_span_id,
)
from keel.root import ensure_state_dir, state_dir
from keel.stop import stop_reason

if TYPE_CHECKING:
    from keel.config import KeelConfig
    from keel.journal import Journal
    from keel.monitor import Monitor
    from keel.policy import Policy
    from keel.workspace import Checkpoints

CHANGING_KINDS = frozenset({"write", "edit", "exec"})
MAX_OUTPUT_JOURNALED = 4000
MARKER_TTL = 86400.0
"""Seconds a ``before`` checkpoint waits for its call's result before its marker is dropped."""


def trace_id_for(session_id: str) -> str:
    """A stable 32-hex trace id for a session, the same in every hook process."""
    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]


@dataclass
class Guard:
    """Decides, journals and watches the tool calls of one session."""

    root: Path
    config: KeelConfig
    policy: Policy
    session_id: str
    agent: str = "keel"
    journal: Journal | None = None
    monitor: Monitor | None = None
    checkpoints: Checkpoints | None = None
    lazy_checkpoints: bool = False
    """Create ``checkpoints`` on the first call that needs one (``Guard.open`` sets this)."""

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        session_id: str,
        agent: str = "keel",
        preset: str | None = None,
        journal: bool = True,
        monitor: bool = True,
        checkpoints: bool = True,
    ) -> Guard:
        """A guard over ``root`` with its config, policy, journal, monitor and checkpoints.

        ``config`` is a read-only view of the validated keel.toml (``keel._configview``), not a
        pydantic model; the checkpoint store is opened on the first call that needs it.

        Raises:
            ConfigError: keel.toml is unreadable or invalid.
            UsageError: ``preset`` is not a known preset.
        """
        from keel._configview import config_view
        from keel.policy import Policy

        config = config_view(root, preset)
        policy = Policy.from_config(config, root)
        guard = cls(
            root=root,
            config=config,
            policy=policy,
            session_id=session_id,
            agent=agent,
            lazy_checkpoints=checkpoints,
        )
        if journal:
            from keel.journal import open_journal

            guard.journal = open_journal(root)
        if monitor:
            from keel.monitor import Monitor

            guard.monitor = Monitor(
                config,
                state=guard._load_monitor_state(),
                in_scope=policy.in_scope,
                session_id=session_id,
                agent=agent,
            )
        return guard

    # -- deciding -------------------------------------------------------------------------

    def decide(self, call: ToolCall) -> Decision:
        """The decision for ``call``; journaled; never raises, never allows on error."""
        call_span = self._call_span(call.tool_use_id)
        try:
            decision = self._decide(call)
        except Exception as exc:
            decision = Decision.deny(
                "internal_error",
                f"keel could not decide this call ({type(exc).__name__}: {exc}); denied to be safe",
                "Retry; if it persists, run `keel status` and check keel.toml.",
            )
        try:
            self._record_call(call, decision, call_span)
            checkpointing = self.checkpoints is not None or self.lazy_checkpoints
            if checkpointing and decision.decision != "deny" and self.needs_checkpoint(call):
                self._checkpoint(call)
        except Exception as exc:
            return Decision.deny(
                "internal_error",
                f"keel could not journal or checkpoint this call ({type(exc).__name__}: {exc})",
                "Check that .keel/ is writable, then retry.",
            )
        return decision

    def _decide(self, call: ToolCall) -> Decision:
        reason = stop_reason(self.root)
        if reason is not None:
            return Decision.deny(
                "stop.active",
                f"emergency stop is set: {reason}",
                "Wait for the user to run `keel resume`.",
            )
        decision = self.policy.check_call(call)
        if decision.decision == "deny" or self.monitor is None:
            return decision
        guidance = self.monitor.before_call(call)
        self._after_monitor()
        if guidance is not None and guidance.level != "hint":
            self._record_guidance(guidance, call.tool_use_id)
            return Decision.deny(
                f"monitor.{guidance.detector}", guidance.message, _advice(guidance)
            )
        return decision

    def needs_checkpoint(self, call: ToolCall) -> bool:
        """True if ``call`` can change files: writes, edits, and commands not known read-only."""
        if call.kind not in CHANGING_KINDS:
            return False
        if call.kind == "exec":
            return not self.policy.is_read_only(call.command or "", call.cwd)
        return True

    def _checkpointer(self) -> Checkpoints | None:
        if self.checkpoints is None and self.lazy_checkpoints:
            from keel.workspace import Checkpoints

            self.checkpoints = Checkpoints(self.root, journal=self.journal)
        return self.checkpoints

    def _checkpoint(self, call: ToolCall) -> None:
        checkpoints = self._checkpointer()
        if checkpoints is not None:
            checkpoints.create(
                session_id=self.session_id, tool_use_id=call.tool_use_id, label=call.tool
            )
            marker = self._open_marker(call.tool_use_id)
            marker.parent.mkdir(parents=True, exist_ok=True)
            _prune_markers(marker.parent)
            marker.touch()

    def _call_span(self, tool_use_id: str | None) -> str:
        """The call's span id, derived from its tool-use id.

        The result is journaled by another hook process, which derives the same id.
        """
        if not tool_use_id:
            return new_span_id()
        key = f"{self.session_id}\0{tool_use_id}".encode("utf-8", "replace")
        return hashlib.sha256(b"span\0" + key).hexdigest()[:16]

    def _open_marker(self, tool_use_id: str | None) -> Path:
        """The file saying a call got a ``before`` checkpoint (read by the post-call process)."""
        key = f"{self.session_id}\0{tool_use_id or ''}".encode("utf-8", "replace")
        return state_dir(self.root) / "guard" / "open" / hashlib.sha256(key).hexdigest()[:32]

    def _close_call(self, tool_use_id: str | None) -> bool:
        """True (once) if the call ``tool_use_id`` was checkpointed before it ran."""
        try:
            self._open_marker(tool_use_id).unlink()
        except FileNotFoundError:
            return False
        return True

    # -- observing ------------------------------------------------------------------------

    def observe(self, result: ToolResult) -> Guidance | None:
        """Journal a tool's result and return the guidance the agent should get, if any."""
        output = result.output or ""
        payload = ToolResultPayload(
            tool=result.tool,
            ok=result.ok,
            output=output[:MAX_OUTPUT_JOURNALED],
            error=result.error,
            exit_code=result.exit_code,
            tool_use_id=result.tool_use_id,
            output_hash="sha256:" + hashlib.sha256(output.encode("utf-8", "replace")).hexdigest(),
        )
        parent = self._call_span(result.tool_use_id) if result.tool_use_id else None
        self._append("tool.result", payload, parent=parent)
        if (
            (self.checkpoints is not None or self.lazy_checkpoints)
            and result.kind in CHANGING_KINDS
            and self._close_call(result.tool_use_id)
        ):
            checkpoints = self._checkpointer()
            if checkpoints is not None:
                checkpoints.after_call(session_id=self.session_id, tool_use_id=result.tool_use_id)
        if self.monitor is None:
            return None
        guidance = self.monitor.after_call(result)
        self._after_monitor()
        if guidance is not None:
            self._record_guidance(guidance, result.tool_use_id)
        return guidance

    def may_finish(self) -> tuple[bool, str]:
        """Whether the session may finish now (the gates), and why not."""
        if self.monitor is None:
            return True, "no monitor"
        allowed, why = self.monitor.may_finish()
        self._after_monitor()
        self._append("gate", GatePayload(command="finish", passed=allowed, detail=why))
        return allowed, why

    def session_context(self) -> str:
        """Pinned constraints, the stop status and current guidance, for re-injection."""
        lines: list[str] = []
        reason = stop_reason(self.root)
        if reason:
            lines.append(f"EMERGENCY STOP is set: {reason}. Do not run any tool.")
        constraints = [c.text for c in self.config.constraints]
        if constraints:
            lines.append("Constraints you agreed to (keel enforces them):")
            lines.extend(f"- {text}" for text in constraints)
        if self.config.scope.include != ["**"] or self.config.scope.exclude:
            lines.append(
                "Task scope (only these paths may change): "
                + ", ".join(self.config.scope.include)
                + (
                    f"; never {', '.join(self.config.scope.exclude)}"
                    if self.config.scope.exclude
                    else ""
                )
            )
        if self.config.gates.required:
            lines.append(
                "Before finishing, these must pass after your last edit: "
                + ", ".join(f"`{g}`" for g in self.config.gates.required)
            )
        latest = self.monitor.current_guidance() if self.monitor else None
        if latest is not None:
            lines.append(f"Current guidance ({latest.level}): {latest.message}")
        return "\n".join(lines)

    def note(self, kind: EventKind, data: dict[str, Any]) -> None:
        """Journal a free-form event (session start/end, prompt, plan)."""
        self._append(kind, DataPayload(data=data))

    # -- journaling -----------------------------------------------------------------------

    def _record_call(self, call: ToolCall, decision: Decision, call_span: str) -> None:
        payload = ToolCallPayload(
            tool=call.tool,
            kind=call.kind,
            command=call.command,
            paths=list(call.paths),
            url=call.url,
            args=_jsonable(call.args),
            tool_use_id=call.tool_use_id,
            turn_id=call.turn_id,
        )
        self._append("tool.call", payload, span=call_span)
        subject = call.command or (", ".join(call.paths) if call.paths else None) or call.url
        self._append(
            "decision",
            DecisionPayload(
                decision=decision.decision,
                rule=decision.rule,
                reason=decision.reason,
                suggestion=decision.suggestion,
                tool_use_id=call.tool_use_id,
                subject=subject,
            ),
            parent=call_span,
        )

    def _record_guidance(self, guidance: Guidance, tool_use_id: str | None) -> None:
        self._append(
            "guidance",
            GuidancePayload(
                level=guidance.level,
                message=guidance.message,
                detector=guidance.detector,
                tool_use_id=tool_use_id,
            ),
        )

    def _append(
        self,
        kind: EventKind,
        payload: Payload,
        *,
        span: str | None = None,
        parent: str | None = None,
    ) -> None:
        if self.journal is None:
            return
        event = Event(
            kind=kind,
            session_id=self.session_id,
            payload=payload,
            agent=self.agent,
            trace_id=trace_id_for(self.session_id),
            span_id=span or new_span_id(),
            parent_span_id=parent,
        )
        self.journal.append(event)

    # -- monitor state between processes ---------------------------------------------------

    def _after_monitor(self) -> None:
        """Journal the monitor's new diagnostics and persist its state for the next process."""
        if self.monitor is None:
            return
        for diagnostic in self.monitor.drain():
            event = diagnostic.to_event(self.session_id, self.agent)
            self._append("diagnostic", event.payload)
        self._save_monitor_state()

    def _monitor_state_path(self) -> Path:
        safe = hashlib.sha256(self.session_id.encode("utf-8", "replace")).hexdigest()[:24]
        return ensure_state_dir(self.root) / "monitor" / f"{safe}.json"

    def _load_monitor_state(self) -> Any:
        from keel.monitor import MonitorState

        path = self._monitor_state_path()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return MonitorState.from_json(text)

    def _save_monitor_state(self) -> None:
        if self.monitor is None:
            return
        path = self._monitor_state_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.monitor.state.to_json(), encoding="utf-8")
        os.replace(tmp, path)

    def close(self) -> None:
        """Close the journal."""
        if self.journal is not None:
            self.journal.close()


def _prune_markers(folder: Path) -> None:
    """Forget markers of calls whose result never came (a declined ask, a crashed client)."""
    import time

    cutoff = time.time() - MARKER_TTL
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except OSError:
                pass


def _advice(guidance: Guidance) -> str:
    match guidance.level:
        case "replan":
            return "State a new plan before using tools that change anything."
        case "stop":
            return "Stop and report to the user what you tried and why it did not work."
        case "correct" | "hint":
            return "Change your approach instead of repeating the same call."


def _jsonable(value: Any) -> Any:
    """``value`` if it survives JSON, else its JSON-safe rendering."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return {"repr": repr(value)}
