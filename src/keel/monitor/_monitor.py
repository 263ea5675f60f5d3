"""The monitor: incremental detectors over one session's calls, and the guidance ladder.

Each event is looked at once and leaves behind only counters, short windows and hashes in
``MonitorState`` (no rescans of the history), so the cost per event stays flat however long
the session runs.

Detectors, with their base level (thresholds in ``[monitor]`` and ``[limits]``):

- ``repeat``: the same call (tool + canonical arguments) ``repeat_hint`` times in a row →
  hint, ``repeat_consecutive`` times → correct; ``identical_pairs`` identical (call, result)
  pairs → correct; ``repeat_in_window`` times within ``repeat_window`` calls → hint. Polling is
  exempt: a streak restarts when the call's output changes, and waits and status checks
  (``sleep``, ``status``, ``BashOutput``) get thresholds ``poll_multiplier`` times higher.
- ``alternation``: A-B-A-B over ``alternation_steps`` calls with unchanged results → replan.
- ``failure``: the same call failing ``failure_repeats`` times (since the last successful
  change) → correct, and calling it again is denied; the same error from different calls →
  hint (and again every ``failure_repeats`` occurrences).
- ``no_progress``: ``no_progress_steps`` results in a row whose content was seen before, with
  no edit → hint (and again every ``no_progress_steps``).
- ``monologue``: the same agent message ``monologue_repeats`` times with no call between → hint.
- ``budget``: ``[limits]`` steps, wall time, tokens: hint at ``budget_warn_fraction``, stop
  when spent.
- ``scope``: an edit outside ``[scope]`` → correct.
- ``test_weakening``: deleting or skipping tests, removing assertions, unless
  ``task_is_about_tests`` → correct.
- ``unverified_finish``: completion claimed while a ``[gates]`` command has not passed after
  the last edit → correct (without gates: no passing test run after the last edit → hint).
- ``plan_drift``: ``drift_window`` calls in a row whose targets the plan does not mention → hint.

The ladder (hint → correct → replan → stop): after guidance a detector has ``cooldown_steps``
calls of grace; a detection within it is silent unless it is more severe (a pre-call detector
at correct or above still denies the call). A detection after the cooldown escalates one
level. ``escalation_reset_steps`` quiet calls start the detector over. Among several findings
on one event the highest level wins.

Replan: once a replan is issued, calls that are not reads are denied until a new plan is
stated: an event of kind ``plan`` passed to ``observe``, or a call to a planning tool
(``[monitor] planning_tools``: Claude's ``TodoWrite``/``ExitPlanMode``, Codex's
``update_plan``, Gemini's ``write_todos``). Reads are calls of kind ``read`` and shell
command lines made only of inspection commands (``ls``, ``cat``, ``grep``, ``git diff``…).
Stop: every later call is denied; ``may_finish`` answers yes. A new user prompt (event kind
``prompt``) clears streaks, the ladder, replan and stop: a person has taken over.

Journaling: pass ``journal=`` and the monitor appends a ``diagnostic`` event for each
diagnostic and a ``guidance`` event for each guidance it returns (``journal_guidance=False``
leaves guidance to a caller that journals what it delivers). Without a journal nothing is
written; ``drain()`` hands over the diagnostics produced since the last call, for the caller to
journal with ``Diagnostic.to_event``. ``scan`` and the demo work without a journal.

Pre-call hints do not deny; ``after_call`` of the same call returns the hint again, for clients
that can only add context after a tool ran. ``current_guidance()`` is what still applies, for
re-injection. Standard library only at import time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, assert_never

from keel.calls import TOOL_KINDS, ToolCall, ToolResult
from keel.decision import GUIDANCE_RANK, Guidance, GuidanceLevel
from keel.events import (
    DataPayload,
    Event,
    GatePayload,
    GuidancePayload,
    ToolCallPayload,
    ToolResultPayload,
)
from keel.monitor._state import MAP_CAP, DetectorName, Diagnostic, MonitorState
from keel.monitor._text import (
    call_key,
    command_facts,
    describe,
    error_signature,
    gate_matches,
    is_poll,
    output_hash,
    patch_changes,
    path_like,
    short_hash,
)
from keel.monitor._weakening import weakening

if TYPE_CHECKING:
    from keel.config import KeelConfig

Phase = Literal["pre", "post"]
Finding = tuple[DetectorName, GuidanceLevel, str, dict[str, Any]]

LEVELS: tuple[GuidanceLevel, ...] = ("hint", "correct", "replan", "stop")
EDIT, TEST, POLL, READ = 1, 2, 4, 8
_DRAIN_CAP = 256
_PLAN_CAP = 256
_GENERIC = frozenset(
    {
        "src", "lib", "app", "pkg", "test", "tests", "main", "index", "init", "__init__", "py",
        "js", "ts", "md", "txt", "json", "the", "and", "for", "with", "this", "that", "then",
        "file", "files", "code", "run", "use", "add", "fix", "make", "from", "into", "all",
    }
)  # fmt: skip
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*")
_SPLIT_ID = re.compile(r"[_.\-/]+")


class _Appender(Protocol):
    def append(self, event: Event) -> Event: ...


class Monitor:
    """Loop, failure, drift and budget detectors with a guidance ladder, for one session.

    Args:
        config: the workspace's ``KeelConfig`` (``[monitor]``, ``[limits]``, ``[gates]``,
            ``[scope]``).
        state: the state of an earlier process (``MonitorState.from_json``), else a new one.
        in_scope: the policy's ``in_scope(path)``; by default ``[scope]`` globs are matched
            against paths relative to the call's ``cwd``.
        journal: if given, every diagnostic (and guidance, see ``journal_guidance``) is
            appended to it as an event.
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
        journal: _Appender | None = None,
        session_id: str | None = None,
        agent: str = "keel",
        clock: Callable[[], float] = time.time,
        journal_guidance: bool = True,
    ) -> None:
        self.config = config
        self.state = state if state is not None else MonitorState()
        self._m = config.monitor
        self._in_scope = in_scope or _scope_matcher(config.scope.include, config.scope.exclude)
        self._journal = journal
        self._session_id = session_id
        self._agent = agent
        self._clock = clock
        self._journal_guidance = journal_guidance
        self._drained: list[Diagnostic] = []
        self._plan_cache: tuple[list[str] | None, frozenset[str]] = (None, frozenset())
        m = self._m
        self._recent_cap = 1 + max(
            m.repeat_window,
            m.alternation_steps,
            m.drift_window,
            m.identical_pairs * m.poll_multiplier,
        )

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

    def after_call(self, result: ToolResult) -> Guidance | None:
        """Post-call detectors for ``result``; the guidance, if any, is for the agent to read."""
        diagnostics, guidance = self._after(result, self._clock())
        self._emit(diagnostics, guidance, result.session_id, result.tool_use_id)
        pending, self.state.pending_hint = self.state.pending_hint, None
        if guidance is None and pending is not None and pending[2] == self.state.step:
            return Guidance("hint", pending[0], pending[1])
        return guidance

    def current_guidance(self) -> Guidance | None:
        """The guidance that still applies: a stop, a pending replan, or recent guidance.

        For re-injection into the agent's context (``Guard.session_context``).
        """
        st = self.state
        if st.stopped:
            return Guidance("stop", st.stopped, st.stop_detector or "stop")
        if st.replan:
            return Guidance("replan", st.replan, st.replan_detector or "replan")
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
        text = " ".join(command.split())
        names = [g for g in self.config.gates.required if gate_matches(text, g)] or [text]
        for name in names:
            self._put(self.state.gates, name, [self.state.step, passed])

    def note_tokens(self, count: int, *, cumulative: bool = False) -> None:
        """Add ``count`` tokens to the budget (or set the total when ``cumulative``)."""
        self.state.tokens = count if cumulative else self.state.tokens + count

    def may_finish(self) -> tuple[bool, str]:
        """May this session finish, and if not, why (for the Stop hook).

        No while a ``[gates]`` command has not passed after the last edit, at most
        ``[gates] max_blocks`` times in a row, so that no agent is ever trapped. Each "no"
        counts as a block and produces an ``unverified_finish`` diagnostic.
        """
        st, gates = self.state, self.config.gates
        if not self._m.enabled:
            return True, "the monitor is off"
        if st.stopped:
            return True, f"the session was stopped: {st.stopped}"
        if not gates.required:
            return True, "no [gates] are configured"
        missing = self._missing_gates()
        if not missing:
            st.finish_blocks = 0
            return True, "every gate passed after the last edit: " + ", ".join(gates.required)
        if st.finish_blocks >= gates.max_blocks:
            return True, (
                f"finishing is allowed after {st.finish_blocks} blocks although "
                + "; ".join(missing)
            )
        st.finish_blocks += 1
        message = self._gate_message(missing) + f" (block {st.finish_blocks} of {gates.max_blocks})"
        evidence = {"missing": missing, "blocks": st.finish_blocks, "max_blocks": gates.max_blocks}
        diagnostic = Diagnostic(st.step, "unverified_finish", "correct", message, evidence)
        guidance = Guidance("correct", message, "unverified_finish", evidence)
        self._emit([diagnostic], guidance, self._session_id, None)
        return False, message

    def drain(self) -> list[Diagnostic]:
        """The diagnostics produced since the last ``drain()``, for a caller that journals."""
        out, self._drained = self._drained, []
        return out

    # -- event dispatch ------------------------------------------------------------------------

    def _dispatch(self, event: Event) -> tuple[list[Diagnostic], Guidance | None]:
        payload = event.payload
        if isinstance(payload, ToolCallPayload):
            return self._before(_call_from(payload, event), event.ts)
        if isinstance(payload, ToolResultPayload):
            return self._after(_result_from(payload, event), event.ts)
        if isinstance(payload, GatePayload):
            self.note_gate(payload.command, payload.passed)
            return [], None
        if not isinstance(payload, DataPayload):
            return [], None
        match event.kind:
            case "plan":
                self._set_plan(_plan_steps(payload.data))
            case "prompt":
                self._reset_for_prompt()
            case "thought" | "model.response":
                return self._message(payload.data, event.ts)
            case "session.end":
                return self._claim()
            case _:
                pass
        return [], None

    # -- pre-call ------------------------------------------------------------------------------

    def _before(self, call: ToolCall, now: float) -> tuple[list[Diagnostic], Guidance | None]:
        st = self.state
        if not self._m.enabled:
            return [], None
        st.step += 1
        st.started = now if st.started is None else st.started
        st.last_ts = now
        st.message_n = 0
        flags, gates, facts_paths = self._flags(call)
        key = call_key(call)
        if call.tool in self._m.planning_tools:
            self._set_plan(_plan_steps(call.args))
            self._remember(key, call, flags | READ, gates)
            return [], self._standing(None, READ)
        findings: list[Finding] = []
        findings += self._budget(now)
        findings += self._repeat(key, call, flags)
        findings += self._alternation(key, call)
        findings += self._failing_again(key, call)
        if flags & EDIT:
            findings += self._scope(call, facts_paths)
            findings += self._weakening(call)
        findings += self._drift(call, facts_paths)
        self._remember(key, call, flags, gates)
        diagnostics, guidance = self._ladder(findings, st.step, "pre")
        return diagnostics, self._standing(guidance, flags)

    def _flags(self, call: ToolCall) -> tuple[int, list[str], list[str]]:
        flags = POLL if is_poll(call) else 0
        paths = list(call.paths)
        gates: list[str] = []
        if call.kind in ("write", "edit"):
            flags |= EDIT
        elif call.kind == "read":
            flags |= READ
        elif call.kind == "exec" and call.command:
            facts = command_facts(call.command)
            paths += facts.written
            flags |= (EDIT if facts.mutates else 0) | (READ if facts.read_only else 0)
            flags |= TEST if facts.test_run else 0
            gates = [g for g in self.config.gates.required if gate_matches(call.command, g)]
            if not facts.written:
                paths += [w for words in facts.words for w in words[1:] if path_like(w)][:6]
        if call.patch:
            paths += list(patch_changes(call.patch))
        return flags, gates, paths

    def _standing(self, guidance: Guidance | None, flags: int) -> Guidance | None:
        """Apply a standing stop or replan on top of what the detectors said."""
        st = self.state
        standing: Guidance | None = None
        if st.stopped:
            standing = Guidance("stop", st.stopped, st.stop_detector or "stop")
        elif st.replan and not flags & READ:
            standing = Guidance("replan", st.replan, st.replan_detector or "replan")
        if standing is None or (guidance is not None and guidance.rank >= standing.rank):
            return guidance
        return standing

    def _budget(self, now: float) -> list[Finding]:
        st, limits = self.state, self.config.limits
        found: list[Finding] = []
        elapsed = now - st.started if st.started is not None else 0.0
        checks = (
            ("steps", st.step, limits.max_steps, "tool calls", st.step > limits.max_steps),
            (
                "wall-time",
                elapsed,
                limits.max_wall_seconds,
                "seconds",
                elapsed >= limits.max_wall_seconds,
            ),
            ("tokens", st.tokens, limits.max_tokens, "tokens", st.tokens >= limits.max_tokens),
        )
        for name, used, cap, unit, spent in checks:
            evidence = {"budget": name, "used": round(used, 1), "limit": cap}
            if spent:
                text = f"The {name} budget is spent: {used:.0f} of {cap:.0f} {unit} ([limits])."
                found.append(("budget", "stop", text, evidence))
            elif used >= cap * self._m.budget_warn_fraction and name not in st.budget_warned:
                st.budget_warned.append(name)
                text = (
                    f"{used / cap:.0%} of the {name} budget is used ({used:.0f} of {cap:.0f} "
                    f"{unit}). Instead of exploring further, finish the current step and verify it."
                )
                found.append(("budget", "hint", text, evidence))
        return found

    def _repeat(self, key: str, call: ToolCall, flags: int) -> list[Finding]:
        st, m = self.state, self._m
        if key == st.streak_key:
            st.streak_n += 1
        else:
            st.streak_key, st.streak_n, st.streak_out = key, 1, None
        mult = m.poll_multiplier if flags & POLL else 1
        n, label = st.streak_n, describe(call)
        evidence: dict[str, Any] = {"call": label, "times": n, "consecutive": True}
        if n >= m.repeat_consecutive * mult:
            text = (
                f"`{label}` was called {n} times in a row without its result changing. "
                "Instead: use the result you have, or change the command or the approach."
            )
            return [("repeat", "correct", text, evidence)]
        if n >= m.repeat_hint * mult:
            text = (
                f"`{label}` was called {n} times in a row without its result changing. "
                "Repeating it will not change the result: change the command or the approach."
            )
            return [("repeat", "hint", text, evidence)]
        window = st.recent[-(m.repeat_window - 1) :]
        same = [e for e in window if e[1] == key]
        outputs = {e[3] for e in same if e[3] is not None}
        count = len(same) + 1
        if count >= m.repeat_in_window * mult and len(outputs) <= 1:
            text = (
                f"`{label}` was called {count} times in the last {len(window) + 1} calls with "
                "the same result. Instead: keep what it returned and move on to the next step."
            )
            evidence = {"call": label, "times": count, "window": len(window) + 1}
            return [("repeat", "hint", text, evidence)]
        return []

    def _alternation(self, key: str, call: ToolCall) -> list[Finding]:
        k = self._m.alternation_steps
        tail = self.state.recent[-(k - 1) :]
        if len(tail) < k - 1:
            return []
        keys = [e[1] for e in tail] + [key]
        first, second = keys[0], keys[1]
        if first == second or any(keys[i] != (first, second)[i % 2] for i in range(k)):
            return []
        for wanted in (first, second):
            if len({e[3] for e in tail if e[1] == wanted and e[3] is not None}) > 1:
                return []
        labels = [tail[-1][8], describe(call)]
        text = (
            f"The last {k} calls alternate between `{labels[0]}` and `{labels[1]}` with "
            "unchanged results. This is a loop."
        )
        return [("alternation", "replan", text, {"calls": labels, "steps": k})]

    def _failing_again(self, key: str, call: ToolCall) -> list[Finding]:
        n = self.state.failures.get(key, 0)
        if n < self._m.failure_repeats:
            return []
        label = describe(call)
        text = (
            f"`{label}` already failed {n} times in a row. Do not run it again unchanged: read "
            "the error, fix its cause or try another approach."
        )
        return [("failure", "correct", text, {"call": label, "failures": n})]

    def _scope(self, call: ToolCall, paths: list[str]) -> list[Finding]:
        outside = [p for p in dict.fromkeys(paths) if not self._in_scope(_relative(p, call.cwd))]
        if not outside:
            return []
        scope = self.config.scope
        text = (
            f"{', '.join(f'`{p}`' for p in outside[:5])} "
            f"{'is' if len(outside) == 1 else 'are'} outside the task's scope ([scope] include "
            f"{scope.include}, exclude {scope.exclude}). Instead: change only files in scope, "
            "or ask the user to widen [scope]."
        )
        return [("scope", "correct", text, {"paths": outside[:20]})]

    def _weakening(self, call: ToolCall) -> list[Finding]:
        if self._m.task_is_about_tests:
            return []
        changes = weakening(call)
        if not changes:
            return []
        what = "; ".join(f"{c['change']} in `{c['path']}`" for c in changes[:5])
        text = (
            f"This edit weakens tests ({what}) and the task is not about tests. Instead: fix "
            "the code under test; if a test is really wrong, say why and ask the user."
        )
        return [("test_weakening", "correct", text, {"changes": changes[:20]})]

    def _drift(self, call: ToolCall, paths: list[str]) -> list[Finding]:
        st = self.state
        plan = self._plan_words()
        if not plan or not paths:
            return []
        if any(_target_words(p) & plan for p in paths):
            st.drift = 0
            return []
        st.drift += 1
        if st.drift % self._m.drift_window:
            return []
        steps = "; ".join(st.plan_steps[:3])
        text = (
            f"The last {st.drift} calls touched files the current plan does not mention "
            f"(latest: `{paths[0]}`; plan: {steps}). Instead: return to the plan's current step, "
            "or state a new plan if the work has moved."
        )
        return [("plan_drift", "hint", text, {"calls": st.drift, "latest": paths[:5]})]

    def _remember(self, key: str, call: ToolCall, flags: int, gates: list[str]) -> None:
        st = self.state
        entry = [
            st.step,
            key,
            call.kind,
            None,
            None,
            call.tool_use_id,
            flags,
            gates,
            describe(call, 60),
        ]
        st.recent.append(entry)
        if len(st.recent) > self._recent_cap:
            del st.recent[0]

    # -- post-call -----------------------------------------------------------------------------

    def _after(self, result: ToolResult, now: float) -> tuple[list[Diagnostic], Guidance | None]:
        st = self.state
        if not self._m.enabled:
            return [], None
        st.last_ts = now
        entry = self._match(result)
        out = output_hash(result.output, result.error)
        entry[3], entry[4] = out, result.ok
        step, key, flags = entry[0], entry[1], entry[6]
        if key == st.streak_key:
            if st.streak_out is not None and st.streak_out != out:
                st.streak_n = 1  # polling: the output changed, so this is progress
            st.streak_out = out
        findings = self._pairs(entry) + self._failure(entry, result)
        for gate in entry[7]:
            self._put(st.gates, gate, [step, _passed(result)])
        if flags & TEST and _passed(result):
            st.last_test_pass_step = step
        if result.ok and flags & EDIT:
            st.last_edit_step, st.no_gain = step, 0
            self._see(out)
        else:
            findings += self._gain(out)
        if result.ok and not flags & READ:
            st.failures.clear()  # something changed (an edit, an install…): retrying is fair
        return self._ladder(findings, step, "post")

    def _match(self, result: ToolResult) -> list[Any]:
        recent = self.state.recent
        for entry in reversed(recent):
            if result.tool_use_id and entry[5] == result.tool_use_id:
                return entry
        if result.call is not None:
            key = call_key(result.call)
            for entry in reversed(recent):
                if entry[1] == key and entry[4] is None:
                    return entry
            return self._register(result.call)
        for entry in reversed(recent):
            if entry[4] is None and not result.tool_use_id:
                return entry
        return self._register(ToolCall(result.tool, result.kind, tool_use_id=result.tool_use_id))

    def _register(self, call: ToolCall) -> list[Any]:
        """A result whose call was never seen: count the call, without judging it."""
        self.state.step += 1
        flags, gates, _ = self._flags(call)
        self._remember(call_key(call), call, flags, gates)
        return self.state.recent[-1]

    def _pairs(self, entry: list[Any]) -> list[Finding]:
        recent, m = self.state.recent, self._m
        k = m.identical_pairs * (m.poll_multiplier if entry[6] & POLL else 1)
        tail = recent[-k:]
        if recent[-1] is not entry or len(tail) < k:
            return []
        if any(e[1] != entry[1] or e[3] != entry[3] for e in tail):
            return []
        text = (
            f"`{entry[8]}` ran {k} times in a row and returned the same result each time. "
            "Repeating it will not change the result: use it, or change the approach."
        )
        return [("repeat", "correct", text, {"call": entry[8], "pairs": k})]

    def _failure(self, entry: list[Any], result: ToolResult) -> list[Finding]:
        st, m = self.state, self._m
        key = entry[1]
        if result.ok:
            st.failures.pop(key, None)
            return []
        n = self._put(st.failures, key, st.failures.get(key, 0) + 1)
        signature = error_signature(result.output, result.error)
        seen = self._put(st.errors, signature, st.errors.get(signature, 0) + 1)
        excerpt = _last_line(result.error or result.output)
        evidence = {"call": entry[8], "failures": n, "error": excerpt}
        if n >= m.failure_repeats:
            text = (
                f"`{entry[8]}` failed {n} times in a row (last error: {excerpt!r}). Instead: "
                "read the error and fix its cause, or try another approach; do not rerun it "
                "unchanged."
            )
            return [("failure", "correct", text, evidence)]
        if seen % m.failure_repeats == 0:
            text = (
                f"The same error appeared {seen} times: {excerpt!r}. Instead: deal with this "
                "error directly before trying anything else."
            )
            return [("failure", "hint", text, {**evidence, "times": seen})]
        return []

    def _gain(self, out: str) -> list[Finding]:
        st = self.state
        if out not in st.seen:
            self._see(out)
            st.no_gain = 0
            return []
        self._see(out)
        st.no_gain += 1
        n = st.no_gain
        if n % self._m.no_progress_steps:
            return []
        text = (
            f"The last {n} results brought nothing new (each repeated an earlier result) and "
            "nothing was edited. Instead: stop re-checking; decide on the next change, or say "
            "what information is missing."
        )
        return [("no_progress", "hint", text, {"steps": n})]

    def _see(self, out: str) -> None:
        seen = self.state.seen
        seen.pop(out, None)
        seen[out] = self.state.step
        while len(seen) > self._m.seen_cap:
            del seen[next(iter(seen))]

    # -- other events --------------------------------------------------------------------------

    def _message(self, data: dict[str, Any], ts: float) -> tuple[list[Diagnostic], Guidance | None]:
        st = self.state
        st.last_ts = ts
        tokens = _tokens(data)
        if tokens is not None:
            count, cumulative = tokens
            self.note_tokens(count, cumulative=cumulative)
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            return [], None
        digest = short_hash(" ".join(text.split()))
        st.message_n = st.message_n + 1 if digest == st.message_hash else 1
        st.message_hash = digest
        if st.message_n < self._m.monologue_repeats:
            return [], None
        message = (
            f"The same message was written {st.message_n} times with no tool call between. "
            "Instead: act on it with a call, or finish."
        )
        finding: Finding = ("monologue", "hint", message, {"times": st.message_n})
        return self._ladder([finding], st.step, "post")

    def _claim(self) -> tuple[list[Diagnostic], Guidance | None]:
        st = self.state
        if self.config.gates.required:
            missing = self._missing_gates()
            if not missing:
                return [], None
            text = "Completion was claimed, but " + self._gate_message(missing)
            finding: Finding = ("unverified_finish", "correct", text, {"missing": missing})
        elif st.last_edit_step and st.last_test_pass_step < st.last_edit_step:
            text = (
                f"Completion was claimed, but no test run passed after the last edit (step "
                f"{st.last_edit_step}). Instead: run the tests and make them pass before finishing."
            )
            finding = ("unverified_finish", "hint", text, {"last_edit_step": st.last_edit_step})
        else:
            return [], None
        return self._ladder([finding], st.step, "post")

    def _missing_gates(self) -> list[str]:
        st = self.state
        missing: list[str] = []
        for gate in self.config.gates.required:
            run = st.gates.get(" ".join(gate.split()), st.gates.get(gate))
            if run is None:
                missing.append(f"`{gate}` has not run")
            elif not run[1]:
                missing.append(f"`{gate}` failed at step {run[0]}")
            elif run[0] < st.last_edit_step:
                missing.append(
                    f"`{gate}` last passed at step {run[0]}, before the edit at step "
                    f"{st.last_edit_step}"
                )
        return missing

    @staticmethod
    def _gate_message(missing: list[str]) -> str:
        return (
            "the [gates] must pass after the last edit: " + "; ".join(missing) + ". Instead of "
            "finishing: run each gate, fix what fails, then finish."
        )

    def _set_plan(self, steps: list[str]) -> None:
        st = self.state
        st.plan_steps = [s[:200] for s in steps[:20]]
        words: dict[str, None] = {}
        for step in st.plan_steps:
            for word in _WORD.findall(step):
                for token in _words_of(word):
                    words[token] = None
        st.plan_words = list(words)[:_PLAN_CAP]
        st.replan, st.replan_detector, st.drift = None, None, 0

    def _plan_words(self) -> frozenset[str]:
        words = self.state.plan_words
        if self._plan_cache[0] is not words:  # holds the list, so its identity cannot be reused
            self._plan_cache = (words, frozenset(words))
        return self._plan_cache[1]

    def _reset_for_prompt(self) -> None:
        st = self.state
        st.streak_key, st.streak_n, st.streak_out = None, 0, None
        st.failures.clear()
        st.errors.clear()
        st.ladder.clear()
        st.no_gain = st.drift = st.message_n = st.finish_blocks = 0
        st.replan = st.replan_detector = st.stopped = st.stop_detector = None

    # -- the ladder ----------------------------------------------------------------------------

    def _ladder(
        self, findings: list[Finding], step: int, phase: Phase
    ) -> tuple[list[Diagnostic], Guidance | None]:
        st = self.state
        diagnostics: list[Diagnostic] = []
        best: Guidance | None = None
        for detector, base, message, evidence in findings:
            rung_key = f"budget:{evidence['budget']}" if detector == "budget" else detector
            rung = self._rung(rung_key, base, step, phase)
            if rung is None:
                continue
            level, new = rung
            text = _phrase(level, phase, message)
            if new:
                st.ladder[rung_key] = [level, step]
                diagnostics.append(Diagnostic(step, detector, level, text, evidence))
                if level == "replan":
                    st.replan, st.replan_detector = text, detector
                elif level == "stop":
                    st.stopped, st.stop_detector = text, detector
            guidance = Guidance(level, text, detector, evidence)
            if best is None or guidance.rank > best.rank:
                best = guidance
        return diagnostics, best

    def _rung(
        self, detector: str, base: GuidanceLevel, step: int, phase: Phase
    ) -> tuple[GuidanceLevel, bool] | None:
        """The level to act at and whether it is a new diagnostic, or None to stay quiet."""
        m = self._m
        entry = self.state.ladder.get(detector)
        if entry is None or step - entry[1] > m.escalation_reset_steps:
            return base, True
        last, wanted = GUIDANCE_RANK[entry[0]], GUIDANCE_RANK[base]
        if step - entry[1] <= m.cooldown_steps:
            if wanted > last:
                return base, True
            return (entry[0], False) if phase == "pre" and last >= 1 else None
        level = min(3, max(wanted, last + 1))
        if level > last:
            return LEVELS[level], True
        return (entry[0], False) if phase == "pre" else None

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

    @staticmethod
    def _put(mapping: dict[str, Any], key: str, value: Any) -> Any:
        mapping.pop(key, None)
        mapping[key] = value
        while len(mapping) > MAP_CAP:
            del mapping[next(iter(mapping))]
        return value


# ---------------------------------------------------------------------------------------------
# helpers


def _phrase(level: GuidanceLevel, phase: Phase, message: str) -> str:
    match level:
        case "hint":
            return message
        case "correct":
            return f"keel denied this call. {message}" if phase == "pre" else message
        case "replan":
            denied = "keel denied this call. " if phase == "pre" else ""
            return (
                f"{denied}{message} State a new plan (TodoWrite, update_plan) before changing "
                "anything else; reading is still allowed."
            )
        case "stop":
            return f"keel has stopped this session. {message} End it now and tell the user why."
        case _:
            assert_never(level)


def _passed(result: ToolResult) -> bool:
    return result.ok and result.exit_code in (0, None)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= 160 else last[:159] + "…"


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith("/") and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _scope_matcher(include: list[str], exclude: list[str]) -> Callable[[str], bool]:
    """``[scope]`` with the policy's glob semantics, for a monitor used without a guard."""
    from keel.policy._paths import GlobSet

    included, excluded = GlobSet(tuple(include)), GlobSet(tuple(exclude))

    def in_scope(path: str) -> bool:
        path = path.removeprefix("./")
        return included.match(path) is not None and excluded.match(path) is None

    return in_scope


def _words_of(word: str) -> list[str]:
    word = word.lower().strip(".-/")
    out: list[str] = []
    if len(word) >= 3 and word not in _GENERIC:
        out.append(word)
    if path_like(word):
        base = word.rsplit("/", 1)[-1]
        out += [base, base.rsplit(".", 1)[0]]
    out += [p for p in _SPLIT_ID.split(word) if len(p) >= 3 and p not in _GENERIC]
    return out


def _target_words(path: str) -> set[str]:
    parts = [p for p in path.lower().replace("\\", "/").split("/") if p]
    if not parts:
        return set()
    base = parts[-1]
    stem = base.rsplit(".", 1)[0]
    words = {base, stem, *(p for p in _SPLIT_ID.split(stem) if len(p) >= 3)}
    if len(parts) > 1:
        words.add(parts[-2])
    return {w for w in words if w not in _GENERIC}


def _plan_steps(data: dict[str, Any]) -> list[str]:
    """Plan steps from a plan event or a planning tool's arguments (open steps first)."""
    items: Any = data.get("todos", data.get("plan", data.get("steps", data.get("text"))))
    if isinstance(items, str):
        return [line.strip() for line in items.splitlines() if line.strip()]
    if not isinstance(items, list):
        return []
    steps: list[str] = []
    done: list[str] = []
    for item in items:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(item, str):
            steps.append(item)
        elif isinstance(item, dict):
            text = item.get("content", item.get("step", item.get("description", "")))  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            status = item.get("status", "")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            (done if status == "completed" else steps).append(str(text))  # pyright: ignore[reportUnknownArgumentType]
    return steps or done


def _tokens(data: dict[str, Any]) -> tuple[int, bool] | None:
    usage = data.get("usage")
    if isinstance(usage, dict):
        total = sum(
            int(v)  # pyright: ignore[reportUnknownArgumentType]
            for k, v in usage.items()  # pyright: ignore[reportUnknownVariableType]
            if k in ("input_tokens", "output_tokens") and isinstance(v, int | float)
        )
        return total, False
    for key, cumulative in (("total_tokens", True), ("tokens", False)):
        value = data.get(key)
        if isinstance(value, int):
            return value, cumulative
    return None


def _call_from(payload: ToolCallPayload, event: Event) -> ToolCall:
    kind = payload.kind if payload.kind in TOOL_KINDS else "other"
    patch = None
    for name in ("patch", "input", "command"):
        value = payload.args.get(name)
        if isinstance(value, str) and ("*** Begin Patch" in value or "\n+++ " in value):
            patch = value
            break
    return ToolCall(
        tool=payload.tool,
        kind=kind,  # pyright: ignore[reportArgumentType]
        command=payload.command,
        paths=tuple(payload.paths),
        url=payload.url,
        args=payload.args,
        tool_use_id=payload.tool_use_id,
        session_id=event.session_id,
        agent=event.agent,
        patch=patch,
    )


def _result_from(payload: ToolResultPayload, event: Event) -> ToolResult:
    return ToolResult(
        tool=payload.tool,
        kind="other",
        ok=payload.ok,
        output=payload.output,
        error=payload.error,
        exit_code=payload.exit_code,
        tool_use_id=payload.tool_use_id,
        session_id=event.session_id,
        agent=event.agent,
    )
