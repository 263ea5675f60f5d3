"""The guard: one place where every tool call is decided, journaled and watched.

``Guard.decide(call)`` is the one decision path of keel: hooks, plans' final actions and
``keel policy check`` all call it. In order:

1. the emergency stop (``.keel/STOP``);
2. the guard's pre-rules (``pre_rules``, given at construction: ``keel run``'s phases), then
   the policy (commands, paths, network and the enforced constraints);
3. the monitor's pre-call detectors, which may turn an allow into a deny with guidance;
4. a checkpoint before anything that can change files (writes, edits, and shell command
   lines the policy does not know to be read-only); a checkpoint that fails turns the
   answer into a deny;
5. one journal transaction with the call, the monitor's diagnostics and guidance, the
   checkpoint, the **final** decision and the session's state.

So the journal and the answer always agree. Any internal error is a deny with rule
``internal_error``: keel fails closed even where its host fails open. With a ``request_id``
(the hook process's id of the call) a decision is committed at most once: asked again, the
guard answers what it committed then. ``commit_by`` (a ``time.monotonic()`` instant) is when
the caller stops waiting: nothing is committed after it.

``Guard.observe(result)`` journals what a tool returned, takes the ``after`` checkpoint of a
call that got a ``before`` one, runs the post-call detectors and returns the guidance an
adapter should deliver; ``Guard.gate_finish()`` answers the gates, at most ``[gates]
max_blocks`` times in a row.

Between hook processes a session's state (``keel.guard.session``: the monitor's counters,
open calls, gate blocks, numbered call ids) lives in one record of the journal's
session-state table, written in the same transaction as the events; the resident daemon keeps
the guard, and so that state, in memory while the record has not changed. While a client's
file tool acts, the workspace's contained commands are stopped (``keel.guard.freeze``). A
shell command the hooks rewrote is read back from its ``keel exec`` line with the codec
``keel.sandbox.exec.line``.

This module is on the hook path: it imports only what the decision needs, and the journal,
the monitor and the checkpoint store only when the guard uses them.
"""

from __future__ import annotations

import os
import time

from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision, Guidance
from keel.guard.freeze import freeze_for, thaw_everything, thaw_for
from keel.guard.session import OPEN_CALL_TTL, STATE_FORMAT, SessionState

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Literal, Protocol

    from keel.core.events import Event, EventKind, Payload
    from keel.core.schema import KeelConfig
    from keel.guard.judging import Judging
    from keel.journal import Journal
    from keel.monitor import Monitor
    from keel.policy import Policy
    from keel.workspace import Checkpoints

    class PreRule(Protocol):
        """A rule the guard consults before its policy (``keel run``'s phases, for one).

        Rules are asked in order after the emergency stop; the first decision is the
        policy's answer, and the rest of the pipeline (containment, the monitor, the
        checkpoint, the journal) treats it as it treats the policy's.
        """

        def check(self, call: ToolCall, policy: Policy) -> Decision | None:
            """The decision for ``call``, or None to leave it to the next rule and the policy.

            ``policy`` is the guard's, for the facts a rule needs (``is_read_only``).
            """
            ...


__all__ = [
    "CHANGING_KINDS",
    "INSIDE_WRAP",
    "MAX_OUTPUT_JOURNALED",
    "OPEN_CALL_TTL",
    "STATE_FORMAT",
    "Guard",
    "SessionState",
    "containment",
    "left_behind",
]

CHANGING_KINDS = frozenset({"write", "edit", "exec"})
INSIDE_WRAP = "the whole client runs inside keel wrap"
MAX_OUTPUT_JOURNALED = 4000
JOURNAL_PATHS_CAP = 200
"""At most this many paths in one ``scope.outside`` event (``total`` has the count)."""


class Guard:
    """Decides, journals and watches the tool calls of one session."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        config: KeelConfig,
        policy: Policy,
        session_id: str,
        agent: str = "keel",
        *,
        journal: Journal | None = None,
        monitor: Monitor | None = None,
        checkpoints: Checkpoints | None = None,
        lazy_checkpoints: bool = False,
        owns_journal: bool = True,
        state: SessionState | None = None,
        state_version: int = 0,
        pre_rules: Sequence[PreRule] = (),
        judging: Judging | None = None,
    ) -> None:
        """A guard over ``root``; ``Guard.open`` builds one from the workspace's files.

        ``pre_rules`` are asked before ``policy``, in order (``PreRule``). ``judging``: where
        the model judge runs (``keel.guard.judging``), used when ``[judge] model`` is set.
        """
        self.root = os.fspath(root)
        """The workspace root, as a string (``pathlib`` is not imported on the hook path)."""
        self.config = config
        self.policy = policy
        self.pre_rules: tuple[PreRule, ...] = tuple(pre_rules)
        self.judging = judging if config.judge.model else None
        """Where judgements run; None while ``[judge] model`` is unset."""
        """Rules asked before the policy (``keel run``'s phases); the first answer counts."""
        self.session_id = session_id
        self.agent = agent
        self.journal = journal
        self.monitor = monitor
        self.checkpoints = checkpoints
        self.lazy_checkpoints = lazy_checkpoints
        """Create ``checkpoints`` on the first call that needs one."""
        self.owns_journal = owns_journal
        """Close the journal with the guard (False when it is shared, as in the daemon)."""
        self.state = state if state is not None else SessionState()
        self.state_version = state_version
        """The version of the state record this guard last read or wrote."""
        self.contain = policy.contained
        """Every shell command this guard allows runs inside ``keel exec`` (the hooks rewrite
        it); set from ``[sandbox] contain`` and whether a sandbox works here."""
        self.contain_reason = "contained" if self.contain else "not contained"
        self.inside_sandbox = False
        """The whole client runs contained (``keel wrap``): nothing is rewritten."""

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        *,
        session_id: str,
        agent: str = "keel",
        preset: str | None = None,
        journal: bool | Journal = True,
        monitor: bool = True,
        checkpoints: bool = True,
        wait_until: float | None = None,
        inside_sandbox: bool = False,
        config: KeelConfig | None = None,
        pre_rules: Sequence[PreRule] = (),
        judging: Judging | Literal["inline"] | None = None,
    ) -> Guard:
        """A guard over ``root`` with its config, policy, journal, monitor and checkpoints.

        ``journal`` is True (open the workspace's journal), False (none) or a journal to
        share; ``wait_until`` (a ``time.monotonic()`` instant) bounds waiting for its lock.
        ``inside_sandbox``: the whole client runs contained (``keel wrap``), so commands
        are judged as contained and are not rewritten. ``config``: the settings to use
        instead of the workspace's keel.toml and ``preset`` (``keel run`` passes its own);
        ``pre_rules``: rules asked before the policy (``PreRule``); ``judging``: where the
        model judge runs (``keel.guard.judging``; ``"inline"``: in this process's time, made
        only when ``[judge] model`` is set).

        Raises:
            ConfigError: keel.toml is unreadable or invalid.
            UsageError: ``preset`` is not a known preset.
        """
        from keel.policy import Policy

        if config is None:
            from keel.core.configview import config_view

            config = config_view(os.fspath(root), preset)
        if judging == "inline":
            judging = _inline_judging(root) if config.judge.model else None
        contain, why = (True, INSIDE_WRAP) if inside_sandbox else containment(config)
        policy = Policy.from_config(config, os.fspath(root), contained=contain)
        guard = cls(
            root, config, policy, session_id, agent, lazy_checkpoints=checkpoints,
            pre_rules=pre_rules, judging=judging,
        )  # fmt: skip
        guard.contain, guard.contain_reason = contain, why
        guard.inside_sandbox = inside_sandbox
        if journal is True:
            from keel.journal import open_journal

            timeout = None if wait_until is None else max(wait_until - time.monotonic(), 0.01)
            guard.journal = open_journal(root, timeout=timeout, settings=config.journal)
        elif journal is not False:
            guard.journal, guard.owns_journal = journal, False
        guard.reload_state()
        if monitor:
            guard.monitor = guard._new_monitor()
        return guard

    def _new_monitor(self) -> Monitor:
        from keel.monitor import Monitor, MonitorState

        saved = self.state.monitor
        return Monitor(
            self.config,
            state=MonitorState.from_dict(saved) if saved else None,
            in_scope=self.policy.in_scope,
            facts=self.policy.command_facts,
            session_id=self.session_id,
            agent=self.agent,
        )

    def reload_state(self) -> None:
        """Read the session's state record again (another process may have written it)."""
        if self.journal is None:
            return
        stored = self.journal.session_state(self.session_id)
        version, data = stored if stored is not None else (0, None)
        self.state, self.state_version = SessionState.from_dict(data), version
        if self.monitor is not None:
            self.monitor = self._new_monitor()

    def is_current(self) -> bool:
        """True while no other process has written this session's state since this guard."""
        if self.journal is None:
            return True
        return self.journal.session_state_version(self.session_id) == self.state_version

    @property
    def rewrite(self) -> bool:
        """Whether the hooks rewrite an allowed shell command to run inside ``keel exec``."""
        return self.contain and not self.inside_sandbox

    @property
    def required_gates(self) -> Sequence[str]:
        """The ``[gates] required`` commands."""
        return tuple(self.config.gates.required)

    # -- deciding -------------------------------------------------------------------------

    def decide(
        self, call: ToolCall, *, request_id: str | None = None, commit_by: float | None = None
    ) -> Decision:
        """The decision for ``call``; journaled with it; never raises, never allows on error."""
        prior = self._answered(request_id)
        if prior is not None:
            return Decision.from_dict(prior["decision"])
        call = self.state.number(call)
        events: list[tuple[EventKind, Payload]] = []
        try:
            freeze_for(self.state, self.root, call, rewrite=self.rewrite)
            self._land_judged(events)
            decision = self._decide(call, events)
        except Exception as exc:
            decision = _internal_error("could not decide this call", exc)
        if decision.decision != "deny" and self._checkpointing() and self.needs_checkpoint(call):
            try:
                events.append(self._checkpoint_before(call, commit_by))
            except Exception as exc:
                decision = _internal_error("could not take a checkpoint before this call", exc)
        if decision.allowed:
            self.state.queue(call)
        else:
            thaw_for(self.state, call.tool_use_id)
        triggers = self._judge_due(events, None)
        try:
            committed = self._commit_decision(call, decision, events, request_id, commit_by)
        except Exception as exc:
            return _answered_or(exc, lambda o: Decision.from_dict(o["decision"]), call.tool)
        self._ask_judge(triggers, None)
        return committed

    def _decide(self, call: ToolCall, events: list[tuple[EventKind, Payload]]) -> Decision:
        from keel.core.stop import stop_reason

        reason = stop_reason(self.root)
        if reason is not None:
            return Decision.deny(
                "stop.active",
                f"emergency stop is set: {reason}",
                "Wait for the user to run `keel resume`.",
            )
        decision = self._pre_rule(call)
        if decision is None:
            decision = self.policy.check_call(call)
        if decision.decision != "deny" and call.kind == "exec":
            decision = self._containable(decision)
        if decision.decision == "deny" or self.monitor is None:
            return decision
        guidance = self.monitor.before_call(call)
        self._drain(events)
        if guidance is not None and guidance.level != "hint":
            events.append(("guidance", _guidance_payload(guidance, call.tool_use_id)))
            return Decision.deny(
                f"monitor.{guidance.detector}", guidance.message, _advice(guidance)
            )
        return decision

    def _pre_rule(self, call: ToolCall) -> Decision | None:
        """The first decision of the guard's pre-rules, if any rule has one."""
        for rule in self.pre_rules:
            decision = rule.check(call, self.policy)
            if decision is not None:
                return decision
        return None

    def _containable(self, decision: Decision) -> Decision:
        """Deny a shell command that would run uncontained where it must not."""
        if self.state.containment_broken:
            return Decision.deny(
                "sandbox.bypassed",
                f"the client ran a shell command outside keel's sandbox in this session "
                f"({self.state.containment_broken}); every later shell command is denied",
                "Start a new session; check the client's version and keel doctor.",
            )
        if not self.contain and self.config.sandbox.contain == "always":
            return Decision.deny(
                "sandbox.unavailable",
                f'[sandbox] contain = "always" but no sandbox works here: {self.contain_reason}',
                'Run `keel sandbox check`, or set [sandbox] contain = "auto" in keel.toml.',
            )
        return decision

    def needs_checkpoint(self, call: ToolCall) -> bool:
        """True if ``call`` can change files: writes, edits, and commands not known read-only."""
        if call.kind not in CHANGING_KINDS:
            return False
        if call.kind == "exec":
            return not self.policy.is_read_only(call.command or "", call.cwd)
        return True

    def _checkpointing(self) -> bool:
        return self.checkpoints is not None or self.lazy_checkpoints

    def checkpointer(self) -> Checkpoints:
        """The checkpoint store, opened on first use (``keel run`` takes its start with it)."""
        if self.checkpoints is None:
            from pathlib import Path

            from keel.workspace import Checkpoints

            self.checkpoints = Checkpoints(Path(self.root), journal=self.journal)
        return self.checkpoints

    def _checkpoint_before(
        self, call: ToolCall, commit_by: float | None
    ) -> tuple[EventKind, Payload]:
        from keel.workspace.checkpoints import checkpoint_payload

        cp = self.checkpointer().create(
            session_id=self.session_id,
            tool_use_id=call.tool_use_id,
            label=call.tool,
            journal=False,
            deadline=commit_by,
        )
        self.state.open_calls[call.tool_use_id or ""] = time.time()
        return "checkpoint", checkpoint_payload(cp)

    def _commit_decision(
        self,
        call: ToolCall,
        decision: Decision,
        events: list[tuple[EventKind, Payload]],
        request_id: str | None,
        commit_by: float | None,
    ) -> Decision:
        if self.journal is None:  # keel policy check, demos: nothing to record
            return decision
        from keel.core.events import DecisionPayload, ToolCallPayload

        span = self._call_span(call.tool_use_id)
        subject = call.command or (", ".join(call.paths) if call.paths else None) or call.url
        call_payload = ToolCallPayload(
            tool=call.tool,
            kind=call.kind,
            command=call.command,
            paths=list(call.paths),
            url=call.url,
            args=_jsonable(call.args),
            tool_use_id=call.tool_use_id,
            turn_id=call.turn_id,
        )
        verdict = DecisionPayload(
            decision=decision.decision,
            rule=decision.rule,
            reason=decision.reason,
            suggestion=decision.suggestion,
            tool_use_id=call.tool_use_id,
            subject=subject,
        )
        batch = [
            self._event("tool.call", call_payload, span=span),
            *(self._event(kind, payload) for kind, payload in events),
            self._event("decision", verdict, parent=span),
        ]
        self._commit(batch, {"decision": decision.to_dict()}, request_id, commit_by)
        return decision

    # -- observing ------------------------------------------------------------------------

    def observe(
        self, result: ToolResult, *, request_id: str | None = None, commit_by: float | None = None
    ) -> Guidance | None:
        """Journal a tool's result and return the guidance the agent should get, if any."""
        prior = self._answered(request_id)
        if prior is not None:
            return Guidance.from_dict(prior["guidance"]) if prior.get("guidance") else None
        from keel.core.events import ToolResultPayload

        result = self.state.match(result)
        thaw_for(self.state, result.tool_use_id)
        events: list[tuple[EventKind, Payload]] = []
        bypass = self._bypass(result)
        if bypass is not None:
            events.append(bypass)
        left = self._left_behind(result)
        result = _as_written(result)
        changed: tuple[str, ...] = ()
        if self._checkpointing() and result.kind in CHANGING_KINDS:
            after, changed = self._checkpoint_after(result, commit_by)
            events.extend(after)
        changed = changed if result.kind == "exec" else ()  # a file tool's paths were judged
        outside = self._outside_scope(result, changed)
        if outside is not None:
            events.append(outside)
        guidance = None
        if self.monitor is not None:
            guidance = self.monitor.after_call(result, changed)
            self._drain(events)
        if left is not None:
            events.append(("diagnostic", left[0]))
            guidance = left[1] if guidance is None or left[1].rank >= guidance.rank else guidance
        if guidance is not None:
            events.append(("guidance", _guidance_payload(guidance, result.tool_use_id)))
        triggers = self._judge_due(events, "observe")
        output = result.output or ""
        payload = ToolResultPayload(
            tool=result.tool,
            ok=result.ok,
            output=output[:MAX_OUTPUT_JOURNALED],
            error=result.error,
            exit_code=result.exit_code,
            tool_use_id=result.tool_use_id,
            output_hash="sha256:" + _sha256(output),
        )
        parent = self._call_span(result.tool_use_id) if result.tool_use_id else None
        batch = [
            self._event("tool.result", payload, parent=parent),
            *(self._event(kind, p) for kind, p in events),
        ]
        outcome = {"guidance": guidance.to_dict() if guidance is not None else None}
        try:
            self._commit(batch, outcome, request_id, commit_by)
        except Exception as exc:
            return _answered_or(exc, lambda o: _guidance_of(o), result.tool, raise_other=True)
        self._ask_judge(triggers, commit_by)
        return guidance

    def _bypass(self, result: ToolResult) -> tuple[EventKind, Payload] | None:
        """An ``error`` event when a shell command the hook rewrote ran as it was written.

        Every client names the command that ran in its post-tool event; if it is not the
        ``keel exec`` line keel answered with, the client ignored the rewrite. That session's
        later shell commands are then denied.
        """
        command = result.call.command if result.call is not None else None
        if not self.rewrite or result.kind != "exec" or not command:
            return None
        from keel.sandbox.exec.line import command_of

        if command_of(command) is not None:
            return None
        from keel.core.events import DataPayload

        self.state.containment_broken = command[:200]
        data = {"event": "sandbox.bypassed", "command": command, "tool": result.tool}
        return ("error", DataPayload(data))

    def _left_behind(self, result: ToolResult) -> tuple[Payload, Guidance] | None:
        """What a contained command left behind (``keel exec --report``), journaled and told.

        ``keel exec`` moved the protected files the command created to quarantine, put back
        those it changed, and kept the prompt files of future agent sessions it changed; its
        report (outside the sandbox's reach, in ``.keel/exec/reports``) is read once here.
        """
        command = result.call.command if result.call is not None else None
        if result.kind != "exec" or not command or "--report" not in command:
            return None
        from keel.sandbox.exec.line import decode

        line = decode(command)
        report_id = line.report if line is not None else None
        if report_id is None:
            return None
        import json

        from keel.sandbox.exec._control import take_report

        try:
            text = take_report(str(self.root), report_id)
            data = json.loads(text) if text is not None else None
        except (OSError, ValueError):
            data = {"unchecked": True}
        if not isinstance(data, dict):
            return None
        return left_behind(data)

    def _checkpoint_after(
        self, result: ToolResult, commit_by: float | None
    ) -> tuple[list[tuple[EventKind, Payload]], tuple[str, ...]]:
        """The ``after`` checkpoint of a call that got a ``before`` one (or why it failed).

        With the files changed since the checkpoint before it: what the call changed as it
        ran (and whatever else changed the workspace meanwhile).
        """
        if self.state.open_calls.pop(result.tool_use_id or "", None) is None:
            return [], ()
        from keel.core.events import DataPayload
        from keel.workspace.checkpoints import checkpoint_payload

        try:
            cp = self.checkpointer().after_call(
                session_id=self.session_id,
                tool_use_id=result.tool_use_id,
                journal=False,
                deadline=commit_by,
            )
        except Exception as exc:  # the call already ran; losing "after" must not lose the result
            detail = f"{type(exc).__name__}: {exc}"
            failed = DataPayload({"event": "checkpoint.after_failed", "detail": detail})
            return [("error", failed)], ()
        return [("checkpoint", checkpoint_payload(cp))], cp.files

    def _outside_scope(
        self, result: ToolResult, changed: tuple[str, ...]
    ) -> tuple[EventKind, Payload] | None:
        """A ``scope.outside`` event naming what a shell command changed outside ``[scope]``.

        A command line does not say every file it writes (``python3 -c ...``), so the policy
        cannot judge them before it runs; the checkpoints see them after. Journaled whether or
        not the monitor is on; not reverted (the user decides: ``keel diff``).
        """
        try:
            outside = [p for p in changed if not self.policy.in_scope(p)]
        except Exception as exc:  # the result must still be journaled
            outside = [f"(could not check [scope]: {type(exc).__name__}: {exc})"]
        if not outside:
            return None
        from keel.core.events import DataPayload

        command = result.call.command if result.call is not None else None
        data = {
            "paths": outside[:JOURNAL_PATHS_CAP],
            "total": len(outside),
            "command": command,
            "tool_use_id": result.tool_use_id,
        }
        return ("scope.outside", DataPayload(data))

    # -- the model judge (keel.guard.judging) -----------------------------------------------

    def _land_judged(
        self, events: list[tuple[EventKind, Payload]], wait_until: float | None = None
    ) -> None:
        """Hand the verdicts landed since the last call to the monitor's ladder; journal notes."""
        if self.judging is None or self.monitor is None:
            return
        from keel.core.events import DataPayload

        judged, notes = self.judging.take(self.session_id, wait_until=wait_until)
        for verdict in judged:
            self.monitor.land(verdict)
        events.extend(("judgement", DataPayload(note)) for note in notes)

    def _judge_due(
        self, events: list[tuple[EventKind, Payload]], phase: str | None
    ) -> tuple[str, ...]:
        """Why a judgement is due after this call (``[judge.when]``), if it is.

        A rule finding of this call at or above ``on_finding`` (from ``decide`` or
        ``observe``), or every ``every_n_steps`` results. Inline (no daemon) a finding of
        ``decide`` waits in the session's state for the next result, where it may run.
        """
        if self.judging is None or self.monitor is None:
            return ()
        from keel.core.events import DiagnosticPayload
        from keel.guard.judging import due

        levels = [  # the judge's own verdicts never schedule another judgement
            p.level
            for kind, p in events
            if kind == "diagnostic" and isinstance(p, DiagnosticPayload) and p.detector != "judge"
        ]
        finding = max(levels, key=_rank) if levels else None
        step = self.monitor.state.step
        fired = due(self.config.judge.when, step=step if phase else 0, finding=finding)
        if self.judging.background:
            return fired
        if phase is None:  # inline: a result (PostToolUse) is where a judgement may run
            if fired:
                self.state.judge_due = sorted({*self.state.judge_due, *fired})
            return ()
        waiting, self.state.judge_due = self.state.judge_due, []
        return tuple(dict.fromkeys((*waiting, *fired)))

    def _ask_judge(
        self, triggers: tuple[str, ...], deadline_at: float | None, *, finishing: bool = False
    ) -> None:
        """Schedule a judgement; inline, run it and commit what it found.

        The judge is advice: a failure never changes an answer already given; it is journaled
        (at the finish, raised for ``_judge_finish`` to journal with the finish).
        """
        if not triggers or self.judging is None:
            return
        try:
            self._schedule_judgement(triggers, deadline_at, finishing)
        except Exception as exc:
            if finishing:
                raise
            self._journal_quietly(_judge_failure("judge.schedule", exc), deadline_at)

    def _schedule_judgement(
        self, triggers: tuple[str, ...], deadline_at: float | None, finishing: bool
    ) -> None:
        from keel.guard.judging import JudgeJob

        assert self.judging is not None
        step = self.monitor.state.step if self.monitor else 0
        timeout = self.config.judge.timeout_seconds + 5.0
        job = JudgeJob(
            self.session_id, self.agent, step, triggers, finishing=finishing, timeout=timeout
        )
        self.judging.schedule(job, deadline_at=deadline_at)
        if self.judging.background or finishing:
            return
        events: list[tuple[EventKind, Payload]] = []
        self._land_judged(events)
        self._commit([self._event(k, p) for k, p in events], {}, None, deadline_at)

    def _journal_quietly(self, note: dict[str, Any], commit_by: float | None) -> None:
        """Journal one ``judgement`` note after the answer; a failure here is dropped."""
        from keel.core.events import DataPayload

        try:
            self._commit([self._event("judgement", DataPayload(note))], {}, None, commit_by)
        except Exception:
            return  # the answer was committed; this note is all that is lost

    def _judge_finish(
        self, events: list[tuple[EventKind, Payload]], commit_by: float | None
    ) -> None:
        """At the finish: ask the judge (``on_finish``) and wait for it until ``commit_by``."""
        if self.judging is None or self.monitor is None:
            return
        try:
            from keel.guard.judging import MARGIN, due

            fired = due(self.config.judge.when, step=0, finishing=True)
            if not self.judging.background:
                fired = tuple(dict.fromkeys((*self.state.judge_due, *fired)))
                self.state.judge_due = []
            self._ask_judge(fired, commit_by, finishing=True)
            until = None if commit_by is None else commit_by - MARGIN
            if until is None and fired:
                until = time.monotonic() + self.config.judge.timeout_seconds + 5.0
            self._land_judged(events, wait_until=until if fired else None)
        except Exception as exc:  # the finish is answered without the judge
            from keel.core.events import DataPayload

            events.append(("judgement", DataPayload(_judge_failure("judge.finish", exc))))

    # -- finishing, notes and context -------------------------------------------------------

    def gate_finish(
        self,
        failures: Sequence[str] = (),
        *,
        request_id: str | None = None,
        commit_by: float | None = None,
    ) -> str | None:
        """Why the session may not finish yet, or None; journaled, and bounded.

        ``failures`` are gate failures keel learned elsewhere (a Codex rollout). A session is
        never blocked more than ``[gates] max_blocks`` times in a row: then it may finish,
        and the giving up is journaled.
        """
        prior = self._answered(request_id)
        if prior is not None:
            return prior.get("block")
        from keel.core.events import DataPayload, GatePayload

        thaw_everything(self.state)  # the turn is over: no file tool is in flight
        events: list[tuple[EventKind, Payload]] = []
        self._judge_finish(events, commit_by)
        allowed, why = True, "no monitor"
        if self.monitor is not None:
            allowed, why = self.monitor.may_finish()
            self._drain(events)
        if allowed and failures:
            allowed, why = False, "the [gates] must pass: " + "; ".join(failures)
        events.append(("gate", GatePayload(command="finish", passed=allowed, detail=why)))
        block: str | None = None
        if allowed:
            self.state.stop_blocks = 0
        elif self.state.stop_blocks >= self.config.gates.max_blocks:
            blocks, self.state.stop_blocks = self.state.stop_blocks, 0
            events.append(("error", DataPayload({"gate": "gave_up", "blocks": blocks, "why": why})))
        else:
            self.state.stop_blocks += 1
            block = f"keel: do not finish yet: {why}"
        batch = [self._event(kind, payload) for kind, payload in events]
        try:
            self._commit(batch, {"block": block}, request_id, commit_by)
        except Exception as exc:
            return _answered_or(exc, lambda o: o.get("block"), None, raise_other=True)
        return block

    def may_finish(self) -> tuple[bool, str]:
        """Whether the gates let the session finish now, and why not (journaled)."""
        block = self.gate_finish()
        return (block is None, block or "the gates allow finishing")

    def note(
        self,
        kind: EventKind,
        data: dict[str, Any],
        *,
        request_id: str | None = None,
        commit_by: float | None = None,
    ) -> None:
        """Journal a free-form event (session start/end, prompt, plan)."""
        if self._answered(request_id) is not None:
            return
        thaw_everything(self.state)  # a new prompt or the session's end: no file tool is in flight
        from keel.core.events import DataPayload

        try:
            self._commit([self._event(kind, DataPayload(data))], {}, request_id, commit_by)
        except Exception as exc:
            _answered_or(exc, lambda o: None, None, raise_other=True)

    def session_context(self) -> str:
        """Pinned constraints, the stop status and current guidance, for re-injection."""
        from keel.core.stop import stop_reason

        lines: list[str] = []
        reason = stop_reason(self.root)
        if reason:
            lines.append(f"EMERGENCY STOP is set: {reason}. Do not run any tool.")
        constraints = [c.text for c in self.config.constraints]
        if constraints:
            lines.append("Constraints you agreed to (keel enforces them):")
            lines.extend(f"- {text}" for text in constraints)
        scope = self.config.scope
        if list(scope.include) != ["**"] or scope.exclude:
            never = f"; never {', '.join(scope.exclude)}" if scope.exclude else ""
            lines.append(
                "Task scope (only these paths may change): " + ", ".join(scope.include) + never
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

    # -- span ids ---------------------------------------------------------------------------

    def _call_span(self, tool_use_id: str | None) -> str:
        """The call's span id, derived from its tool-use id.

        The result is journaled by another hook process, which derives the same id.
        """
        if not tool_use_id:
            return os.urandom(8).hex()
        key = f"{self.session_id}\0{tool_use_id}".encode("utf-8", "replace")
        return _sha256(b"span\0" + key)[:16]

    # -- journaling -----------------------------------------------------------------------

    def _answered(self, request_id: str | None) -> dict[str, Any] | None:
        if request_id is None or self.journal is None:
            return None
        try:
            return self.journal.answered(request_id)
        except Exception:  # the commit will find out again, and fail closed there
            return None

    def _drain(self, events: list[tuple[EventKind, Payload]]) -> None:
        """Move the monitor's new diagnostics into ``events``."""
        if self.monitor is None:
            return
        for diagnostic in self.monitor.drain():
            events.append(("diagnostic", diagnostic.to_event(self.session_id, self.agent).payload))

    def _event(
        self,
        kind: EventKind,
        payload: Payload,
        *,
        span: str | None = None,
        parent: str | None = None,
    ) -> Event:
        from keel.core.events import Event, new_span_id, trace_id_for

        return Event(
            kind=kind,
            session_id=self.session_id,
            payload=payload,
            agent=self.agent,
            trace_id=trace_id_for(self.session_id),
            span_id=span or new_span_id(),
            parent_span_id=parent,
        )

    def _commit(
        self,
        events: list[Event],
        outcome: dict[str, Any],
        request_id: str | None,
        commit_by: float | None,
    ) -> None:
        """One transaction: ``events``, the request's outcome and the session's state."""
        if self.journal is None:
            return
        if self.monitor is not None:
            self.state.monitor = self.monitor.state.to_dict()
        self.journal.append_many(
            events,
            request_id=request_id,
            outcome=outcome,
            session_state=(self.session_id, self.state.to_dict()),
            deadline=commit_by,
        )
        self.state_version += 1

    def close(self) -> None:
        """Close the journal, if this guard owns it."""
        if self.journal is not None and self.owns_journal:
            self.journal.close()


def containment(config: KeelConfig) -> tuple[bool, str]:
    """Whether the hooks contain shell commands for ``config``, and why (or why not)."""
    mode = config.sandbox.contain
    if mode == "off":
        return False, '[sandbox] contain = "off"'
    from keel.sandbox.exec import exec_backend

    backend, reason = exec_backend(config.sandbox.backend)
    return (backend is not None), reason


def _as_written(result: ToolResult) -> ToolResult:
    """``result`` with its call's command as the agent wrote it, not its ``keel exec`` line."""
    call = result.call
    if call is None or not call.command:
        return result
    from keel.sandbox.exec.line import command_of

    original = command_of(call.command)
    if original is None:
        return result
    args = {**call.args, "command": original} if "command" in call.args else call.args
    return result.replace(call=call.replace(command=original, args=args))


def _internal_error(what: str, exc: BaseException) -> Decision:
    return Decision.deny(
        "internal_error",
        f"keel {what} ({type(exc).__name__}: {exc}); denied to be safe",
        "Retry; if it persists, run `keel status` and check keel.toml and .keel/.",
    )


def _answered_or(exc: Exception, read: Any, tool: str | None, *, raise_other: bool = False) -> Any:
    """The outcome committed earlier for this request, else a deny (or ``exc`` again)."""
    from keel.core.errors import AlreadyAnswered

    if isinstance(exc, AlreadyAnswered):
        return read(exc.outcome)
    if raise_other:
        raise exc
    what = f"could not journal this {tool} call" if tool else "could not journal this call"
    return _internal_error(what, exc)


def _guidance_of(outcome: dict[str, Any]) -> Guidance | None:
    data = outcome.get("guidance")
    return Guidance.from_dict(data) if data else None


def left_behind(report: dict[str, Any]) -> tuple[Payload, Guidance]:
    """The diagnostic and the guidance for what ``keel exec`` reported about a run."""
    from keel.core.events import DiagnosticPayload
    from keel.core.protected import reason_for

    moved = [str(r) for r in report.get("quarantined") or []]
    restored = [str(r) for r in report.get("restored") or []]
    prompts = [str(r) for r in report.get("prompts") or []]
    parts: list[str] = []
    if moved:
        named = "; ".join(f"{r} ({reason_for(r)})" for r in moved)
        parts.append(
            "your command created files that programs outside the sandbox would run; keel "
            f"moved them to .keel/quarantine: {named}. Do not create them"
        )
    if restored:
        parts.append(f"your command changed protected files; keel put them back: {restored}")
    if report.get("unchecked"):
        parts.append("keel could not check what your command left behind")
    if prompts:
        parts.append(
            f"your command changed {', '.join(prompts)}: instructions the next agent session "
            "reads. They were kept, and the user will review them (keel diff)"
        )
    level = "correct" if moved or restored or report.get("unchecked") else "hint"
    message = "; ".join(parts) or "keel exec reported nothing"
    evidence = {"quarantined": moved, "restored": restored, "prompts": prompts}
    diagnostic = DiagnosticPayload(
        detector="sandbox.left_behind", level=level, message=message, evidence=evidence
    )
    return diagnostic, Guidance(level, message, "sandbox.left_behind", evidence)


def _guidance_payload(guidance: Guidance, tool_use_id: str | None) -> Payload:
    from keel.core.events import GuidancePayload

    return GuidancePayload(
        level=guidance.level,
        message=guidance.message,
        detector=guidance.detector,
        tool_use_id=tool_use_id,
    )


def _advice(guidance: Guidance) -> str:
    if guidance.detector == "judge" and guidance.level in ("correct", "hint"):
        return "Do what the judge suggests, or explain to the user why its finding is wrong."
    match guidance.level:
        case "replan":
            return "State a new plan before using tools that change anything."
        case "stop":
            return "Stop and report to the user what you tried and why it did not work."
        case "correct" | "hint":
            return "Change your approach instead of repeating the same call."


def _judge_failure(code: str, exc: BaseException) -> dict[str, Any]:
    return {"status": "error", "error": code, "message": f"{type(exc).__name__}: {exc}"[:300]}


def _inline_judging(root: str | os.PathLike[str]) -> Judging:
    from keel.guard.judging import SubprocessJudging

    return SubprocessJudging(root, background=False)


def _rank(level: str) -> int:
    from keel.core.decision import GUIDANCE_RANK

    return GUIDANCE_RANK.get(level, -1)


def _sha256(data: str | bytes) -> str:
    import hashlib

    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def _jsonable(value: Any) -> Any:
    """``value`` if it survives JSON, else its JSON-safe rendering."""
    import json

    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return {"repr": repr(value)}
