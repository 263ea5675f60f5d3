"""The monitor's controller: hands each event to the detectors, climbs the ladder, emits.

Each event is looked at once and leaves behind only counters, short windows and hashes in
``MonitorState``, so the cost per event stays flat however long the session runs. The
detectors are in ``keel.monitor.detectors`` (one module each), the ladder (hint, correct,
replan, stop) in ``keel.monitor._ladder``. Command lines are read only by the policy's parser
(``facts=``, the policy's ``command_facts``); a planning tool states a new plan, a user
prompt clears streaks, the ladder, replan and stop. Standard library only at import time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import GUIDANCE_RANK, Guidance
from keel.core.events import (
    DataPayload,
    Event,
    GatePayload,
    GuidancePayload,
    ToolCallPayload,
    ToolResultPayload,
)
from keel.core.judged import Judged
from keel.monitor._calls import find_call, read_call, remember
from keel.monitor._context import Context, Done, Finding
from keel.monitor._events import call_from, result_from, tokens_of
from keel.monitor._ladder import Phase, climb, standing
from keel.monitor._state import READ, Diagnostic, MonitorState
from keel.monitor._text import output_hash
from keel.monitor.detectors import MONOLOGUE, PIPELINE, UNVERIFIED_FINISH
from keel.monitor.detectors.drift import plan_steps, set_plan

if TYPE_CHECKING:
    from collections.abc import Callable

    from keel.core.schema import KeelConfig
    from keel.monitor._context import FactsReader

_DRAIN_CAP = 256
_JUDGED_CAP = 8
"""Undelivered verdicts kept; a flood of them keeps the newest."""
_SEEN_CAP = 32
"""Landed verdicts remembered, to land each (category, window) once."""
Outcome = tuple[list[Diagnostic], Guidance | None]


class _Appender(Protocol):
    def append(self, event: Event) -> Event: ...


class Monitor:
    """Loop, failure, drift and budget detectors with a guidance ladder, for one session.

    Args:
        config: the workspace's settings (``[monitor]``, ``[limits]``, ``[gates]``,
            ``[scope]``).
        state: the state of an earlier process (``MonitorState.from_dict``), else a new one.
        in_scope: the policy's ``in_scope(path)``; by default ``[scope]`` globs are matched
            against paths relative to the call's ``cwd``.
        facts: the policy's ``command_facts(line, cwd)``, the one reader of command lines;
            by default a policy of ``config`` is built on first use.
        journal: if given, every diagnostic (and guidance, see ``journal_guidance``) is
            appended to it as an event; ``drain()`` hands diagnostics to a caller that
            journals them itself.
        session_id: the session for journaled events when calls do not name one.
        agent: the agent name for journaled events.
        clock: the time source for wall-time budgets of live calls.
        journal_guidance: also journal each returned guidance (turn off when the caller,
            like the guard, journals the guidance it delivers itself).
    """

    def __init__(
        self,
        config: KeelConfig,
        state: MonitorState | None = None,
        in_scope: Callable[[str], bool] | None = None,
        *,
        facts: FactsReader | None = None,
        journal: _Appender | None = None,
        session_id: str | None = None,
        agent: str = "keel",
        clock: Callable[[], float] = time.time,
        journal_guidance: bool = True,
    ) -> None:
        self.config = config
        self._ctx = Context(config, state or MonitorState(), in_scope, facts)
        self._m = config.monitor
        self._journal = journal
        self._session_id = session_id
        self._agent = agent
        self._clock = clock
        self._journal_guidance = journal_guidance
        self._drained: list[Diagnostic] = []
        self._last_done: Done | None = None
        """The latest result the post-call detectors saw (``scope.outside`` reads it back)."""
        m = self._m
        windows = (m.repeat_window, m.alternation_steps, m.drift_window)
        self._recent_cap = 1 + max(*windows, m.identical_pairs * m.poll_multiplier)

    @property
    def state(self) -> MonitorState:
        """The session's state, updated in place on every event."""
        return self._ctx.state

    @state.setter
    def state(self, state: MonitorState) -> None:
        self._ctx.state = state

    # -- public API ----------------------------------------------------------------------------

    def before_call(self, call: ToolCall) -> Guidance | None:
        """Pre-call detectors for ``call``; a level of correct, replan or stop means deny it.

        A hint allows the call; it is also returned again by the ``after_call`` of the same
        call, for clients that can add context only after a tool ran.
        """
        diagnostics, guidance = self._before(call, self._clock())
        self._emit(diagnostics, guidance, call.session_id, call.tool_use_id)
        if guidance is not None and guidance.level == "hint":
            self.state.pending_hint = [guidance.message, guidance.detector, self.state.step]
        return guidance

    def after_call(self, result: ToolResult, changed: tuple[str, ...] = ()) -> Guidance | None:
        """Post-call detectors for ``result``; the guidance, if any, is for the agent to read.

        ``changed``: the files (workspace-relative) the call was seen to change as it ran,
        which a shell command's line does not say (the guard's checkpoints do).
        """
        diagnostics, guidance = self._after(result, self._clock(), changed)
        self._emit(diagnostics, guidance, result.session_id, result.tool_use_id)
        pending, self.state.pending_hint = self.state.pending_hint, None
        if guidance is None and pending is not None and pending[2] == self.state.step:
            return Guidance("hint", pending[0], pending[1])
        return guidance

    def land(self, judged: Judged) -> None:
        """Keep a deliverable verdict of the model judge for the next call's ladder.

        The same category on the same window lands once: asked again about a trajectory that
        has not moved (a second finish with nothing done in between), the judge's cached
        verdict is journaled, not delivered again.
        """
        st = self.state
        key = f"{judged.category}:{judged.window}"
        if key in st.judged_seen:
            return
        st.judged_seen.append(key)
        del st.judged_seen[:-_SEEN_CAP]
        st.judged.append(judged.to_dict())
        del st.judged[:-_JUDGED_CAP]

    def current_guidance(self) -> Guidance | None:
        """The guidance that still applies: a stop, a pending replan, or recent guidance.

        For re-injection into the agent's context (``Guard.session_context``).
        """
        st = self.state
        held = standing(st, None, 0)
        if held is not None:
            return held
        last = st.last_guidance
        if last is not None and st.step - last[3] <= self._m.cooldown_steps:
            return Guidance(last[0], last[1], last[2])
        return None

    def observe(self, event: Event) -> list[Diagnostic]:
        """Drive the detectors from a journal event; returns the diagnostics it produced."""
        diagnostics, guidance = self._dispatch(event)
        self._emit(diagnostics, guidance, event.session_id, None)
        return diagnostics

    def note_gate(self, command: str, passed: bool) -> None:
        """Record a gate run that happened after the latest call (e.g. run by a Stop hook)."""
        UNVERIFIED_FINISH.note_gate(self._ctx, command, passed)

    def note_tokens(self, count: int, *, cumulative: bool = False) -> None:
        """Add ``count`` tokens to the budget (or set the total when ``cumulative``)."""
        self.state.tokens = count if cumulative else self.state.tokens + count

    def may_finish(self) -> tuple[bool, str]:
        """May this session finish, and if not, why (for the Stop hook).

        No while a ``[gates]`` command has not passed after the last edit, at most
        ``[gates] max_blocks`` times in a row, so that no agent is ever trapped. Each "no"
        counts as a block and produces an ``unverified_finish`` diagnostic.
        """
        if not self._m.enabled:
            return True, "the monitor is off"
        judged = self._judged_blocking_finish()
        if judged is not None:
            return False, judged
        allowed, why, evidence = UNVERIFIED_FINISH.finish(self._ctx)
        if evidence is not None:
            step = self.state.step
            diagnostic = Diagnostic(step, "unverified_finish", "correct", why, evidence)
            guidance = Guidance("correct", why, "unverified_finish", evidence)
            self._emit([diagnostic], guidance, self._session_id, None)
        return allowed, why

    def _judged_blocking_finish(self) -> str | None:
        """A landed verdict at correct or above, delivered as the finish's refusal.

        Each verdict refuses one finish at most (it is consumed), so no agent is trapped.
        """
        findings = self._judged_findings()
        if not any(GUIDANCE_RANK[f.level] >= 1 for f in findings):
            return None
        diagnostics, guidance = self._climb(findings, "post")
        self._emit(diagnostics, guidance, self._session_id, None)
        return guidance.message if guidance is not None else findings[0].message

    def drain(self) -> list[Diagnostic]:
        """The diagnostics produced since the last ``drain()``, for a caller that journals."""
        out, self._drained = self._drained, []
        return out

    # -- events --------------------------------------------------------------------------------

    def _dispatch(self, event: Event) -> Outcome:
        payload = event.payload
        if isinstance(payload, ToolCallPayload):
            return self._before(call_from(payload, event), event.ts)
        if isinstance(payload, ToolResultPayload):
            return self._after(result_from(payload, event), event.ts)
        if isinstance(payload, GatePayload):
            self.note_gate(payload.command, payload.passed)
        elif isinstance(payload, DataPayload):
            match event.kind:
                case "plan":
                    self._plan(plan_steps(payload.data))
                case "prompt":
                    self._reset()
                case "thought" | "model.response":
                    return self._message(payload.data, event.ts)
                case "session.end":
                    return self._climb(UNVERIFIED_FINISH.claim(self._ctx), "post")
                case "scope.outside":
                    return self._outside_scope(payload.data)
                case "judgement":
                    self._land_recorded(payload.data)
                case _:
                    pass
        return [], None

    def _before(self, call: ToolCall, now: float) -> Outcome:
        st = self.state
        if not self._m.enabled:
            return [], None
        st.step += 1
        st.started = now if st.started is None else st.started
        st.last_ts = now
        st.message_n = 0  # a tool call ends a monologue
        seen = read_call(self._ctx, call, now)
        if call.tool in self._m.planning_tools:
            self._plan(plan_steps(call.args))
            remember(st, seen._replace(flags=seen.flags | READ), self._recent_cap)
            return [], standing(st, None, READ)
        findings = [f for d in PIPELINE for f in d.before(self._ctx, seen)]
        findings += self._judged_findings()
        remember(st, seen, self._recent_cap)
        diagnostics, guidance = self._climb(findings, "pre")
        return diagnostics, standing(st, guidance, seen.flags)

    def _after(self, result: ToolResult, now: float, changed: tuple[str, ...] = ()) -> Outcome:
        st = self.state
        if not self._m.enabled:
            return [], None
        st.last_ts = now
        index = self._match(result, now)
        out = output_hash(result.output, result.error)
        entry = st.recent[index] = st.recent[index]._replace(out=out, ok=result.ok)
        done = Done(entry, result, latest=index == len(st.recent) - 1, changed=changed)
        self._last_done = done
        findings = [f for d in PIPELINE for f in d.after(self._ctx, done)]
        return self._climb(findings, "post", entry.step)

    def _outside_scope(self, data: dict[str, Any]) -> Outcome:
        """A recorded ``scope.outside`` event (``observe``, as ``keel monitor scan`` reads).

        The guard journals it just after the shell command's result, naming what the
        checkpoints saw the command change outside ``[scope]``: live, those paths reached
        ``after_call`` as ``changed``; read back, the scope detector judges them here.
        """
        done, paths = self._last_done, data.get("paths")
        if done is None or not self._m.enabled or not isinstance(paths, list):
            return [], None
        if done.result.tool_use_id != data.get("tool_use_id"):
            return [], None
        changed = tuple(p for p in paths if isinstance(p, str))
        after = done._replace(changed=changed)
        findings = [f for d in PIPELINE if d.name == "scope" for f in d.after(self._ctx, after)]
        return self._climb(findings, "post", done.entry.step)

    def _judged_findings(self) -> list[Finding]:
        """The landed verdicts as findings of ``judge``, one rung per category (then cleared).

        On the ladder they meet the rules' findings: the highest level wins, a category in
        its cooldown stays quiet unless more severe, and a repeat after it escalates.
        """
        pending, self.state.judged = self.state.judged, []
        findings: list[Finding] = []
        for data in pending:
            try:
                judged = Judged.from_dict(data)
            except (KeyError, TypeError, ValueError):
                continue  # a damaged record is dropped; the judgement itself is journaled
            evidence = {"steps": list(judged.evidence), "confidence": judged.confidence,
                        "category": judged.category, "window": judged.window}  # fmt: skip
            rung = f"judge.{judged.category}"
            findings.append(Finding("judge", judged.level, judged.message, evidence, rung))
        return findings

    def _land_recorded(self, data: dict[str, Any]) -> None:
        """A recorded ``judgement`` event (``keel monitor scan``): land it if it was delivered."""
        judged = data.get("judged")
        if not isinstance(judged, dict):
            return
        try:
            self.land(Judged.from_dict(judged))
        except (KeyError, TypeError, ValueError):
            return

    def _match(self, result: ToolResult, now: float) -> int:
        """The index in ``recent`` of the call ``result`` answers (registered if unseen)."""
        found = find_call(self.state.recent, result)
        if found is not None:
            return found
        # a result whose call was never seen: count the call, without judging it
        call = result.call or ToolCall(result.tool, result.kind, tool_use_id=result.tool_use_id)
        self.state.step += 1
        remember(self.state, read_call(self._ctx, call, now), self._recent_cap)
        return len(self.state.recent) - 1

    def _message(self, data: dict[str, Any], ts: float) -> Outcome:
        self.state.last_ts = ts
        tokens = tokens_of(data)
        if tokens is not None:
            self.note_tokens(tokens[0], cumulative=tokens[1])
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            return [], None
        return self._climb(MONOLOGUE.message(self._ctx, text), "post")

    def _plan(self, steps: list[str]) -> None:
        set_plan(self._ctx, steps)
        self.state.replan = self.state.replan_detector = None

    def _reset(self) -> None:
        st = self.state
        for detector in PIPELINE:
            detector.reset(self._ctx)
        st.ladder.clear()
        st.replan = st.replan_detector = st.stopped = st.stop_detector = None

    # -- ladder and output ---------------------------------------------------------------------

    def _climb(self, findings: list[Finding], phase: Phase, step: int | None = None) -> Outcome:
        return climb(self._ctx, findings, self.state.step if step is None else step, phase)

    def _emit(
        self,
        diagnostics: list[Diagnostic],
        guidance: Guidance | None,
        session_id: str | None,
        tool_use_id: str | None,
    ) -> None:
        if diagnostics:
            self._drained.extend(diagnostics)
            del self._drained[:-_DRAIN_CAP]
        if guidance is not None:
            self.state.last_guidance = [
                guidance.level,
                guidance.message,
                guidance.detector,
                self.state.step,
            ]
        if self._journal is None:
            return
        session = session_id or self._session_id or "unknown"
        for diagnostic in diagnostics:
            self._journal.append(diagnostic.to_event(session, self._agent))
        if guidance is not None and self._journal_guidance:
            payload = GuidancePayload(
                guidance.level, guidance.message, guidance.detector, tool_use_id
            )
            self._journal.append(Event("guidance", session, payload, agent=self._agent))
