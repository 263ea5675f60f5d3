"""The guidance ladder: hint → correct → replan → stop (``keel.core.decision.GUIDANCE_LEVELS``).

After guidance a detector has ``cooldown_steps`` calls of grace: a detection within it is
silent unless it is more severe (a pre-call detection at correct or above still denies the
call). A detection after the cooldown climbs one level. ``escalation_reset_steps`` quiet
calls start the detector over. Among several findings on one event the highest level wins.

A replan or stop, once reached, stands (``standing``). Replan: calls that are not reads (kind
``read``, or command lines the policy finds read-only) are denied until a new plan is stated
(an event of kind ``plan``, or a planning tool: ``[monitor] planning_tools``). Stop: every
later call is denied, and ``may_finish`` answers yes. A user prompt clears both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, assert_never

from keel.core.decision import GUIDANCE_LEVELS, GUIDANCE_RANK, Guidance
from keel.monitor._state import READ, Diagnostic

if TYPE_CHECKING:
    from collections.abc import Sequence

    from keel.core.decision import GuidanceLevel
    from keel.monitor._context import Context, Finding
    from keel.monitor._state import MonitorState

Phase = Literal["pre", "post"]


def climb(
    ctx: Context, findings: list[Finding], step: int, phase: Phase
) -> tuple[list[Diagnostic], Guidance | None]:
    """The new diagnostics of ``findings`` and the guidance to give, at their ladder levels."""
    st = ctx.state
    diagnostics: list[Diagnostic] = []
    best: Guidance | None = None
    for detector, base, message, evidence, rung_key in findings:
        key = rung_key or detector
        rung = _rung(ctx, key, base, step, phase)
        if rung is None:
            continue
        level, new = rung
        text = _phrase(level, phase, message, ctx.settings.planning_tools)
        if new:
            st.ladder[key] = [level, step]
            diagnostics.append(Diagnostic(step, detector, level, text, evidence))
            if level == "replan":
                st.replan, st.replan_detector = text, detector
            elif level == "stop":
                st.stopped, st.stop_detector = text, detector
        guidance = Guidance(level, text, detector, evidence)
        if best is None or guidance.rank > best.rank:
            best = guidance
    return diagnostics, best


def standing(state: MonitorState, guidance: Guidance | None, flags: int) -> Guidance | None:
    """``guidance``, or the standing stop or replan if that is more severe (reads pass a replan)."""
    held: Guidance | None = None
    if state.stopped:
        held = Guidance("stop", state.stopped, state.stop_detector or "stop")
    elif state.replan and not flags & READ:
        held = Guidance("replan", state.replan, state.replan_detector or "replan")
    if held is None or (guidance is not None and guidance.rank >= held.rank):
        return guidance
    return held


def _rung(
    ctx: Context, key: str, base: GuidanceLevel, step: int, phase: Phase
) -> tuple[GuidanceLevel, bool] | None:
    """The level to act at and whether it is a new diagnostic, or None to stay quiet."""
    m = ctx.settings
    entry = ctx.state.ladder.get(key)
    if entry is None or step - entry[1] > m.escalation_reset_steps:
        return base, True
    last, wanted = GUIDANCE_RANK[entry[0]], GUIDANCE_RANK[base]
    if step - entry[1] <= m.cooldown_steps:
        if wanted > last:
            return base, True
        return (entry[0], False) if phase == "pre" and last >= 1 else None
    level = min(len(GUIDANCE_LEVELS) - 1, max(wanted, last + 1))
    if level > last:
        return GUIDANCE_LEVELS[level], True
    return (entry[0], False) if phase == "pre" else None


def _phrase(level: GuidanceLevel, phase: Phase, message: str, planning_tools: Sequence[str]) -> str:
    match level:
        case "hint":
            return message
        case "correct":
            return f"keel denied this call. {message}" if phase == "pre" else message
        case "replan":
            denied = "keel denied this call. " if phase == "pre" else ""
            # the tools that state a plan are configurable ([monitor] planning_tools), and
            # `keel run` adds run_plan: name the ones this session can use
            tools = ", ".join(planning_tools) or "a plan"
            return (
                f"{denied}{message} State a new plan ({tools}) before changing anything else; "
                "reading is still allowed."
            )
        case "stop":
            return f"keel has stopped this session. {message} End it now and tell the user why."
        case _:
            assert_never(level)
