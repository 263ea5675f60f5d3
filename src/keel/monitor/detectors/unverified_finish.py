"""``unverified_finish``: finishing before the work was verified.

Completion claimed while a ``[gates]`` command has not passed after the last edit → correct;
without gates, no passing test run after the last edit → hint.

The Stop hook asks ``finish``: no while a gate is missing, at most ``[gates] max_blocks``
times in a row, so that no agent is ever trapped. A gate counts when a call ran it so that
its exit status was the call's (``CommandFacts.runs``), or when ``note_gate`` reports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from keel.monitor._context import Detector, Finding, put
from keel.monitor._state import EDIT, TEST

if TYPE_CHECKING:
    from keel.monitor._context import Context, Done


class UnverifiedFinish(Detector):
    """Finishing before the gates (or the tests) passed after the last edit."""

    name = "unverified_finish"

    def after(self, ctx: Context, done: Done) -> list[Finding]:
        """Record gate runs, passing test runs and edits."""
        st, entry, result = ctx.state, done.entry, done.result
        passed = result.ok and result.exit_code in (0, None)
        for gate in entry.gates:
            put(st.gates, gate, [entry.step, passed])
        if entry.flags & TEST and passed:
            st.last_test_pass_step = entry.step
        if result.ok and entry.flags & EDIT:
            st.last_edit_step = entry.step
        return []

    def reset(self, ctx: Context) -> None:
        """A person took over: the finish blocks start over."""
        ctx.state.finish_blocks = 0

    def claim(self, ctx: Context) -> list[Finding]:
        """Completion was claimed (``session.end``): is it verified?"""
        st = ctx.state
        if ctx.config.gates.required:
            missing = _missing(ctx)
            if not missing:
                return []
            text = "Completion was claimed, but " + _gate_message(missing)
            return [Finding("unverified_finish", "correct", text, {"missing": missing})]
        if st.last_edit_step and st.last_test_pass_step < st.last_edit_step:
            text = (
                f"Completion was claimed, but no test run passed after the last edit (step "
                f"{st.last_edit_step}). Instead: run the tests and make them pass before finishing."
            )
            return [
                Finding("unverified_finish", "hint", text, {"last_edit_step": st.last_edit_step})
            ]
        return []

    def finish(self, ctx: Context) -> tuple[bool, str, dict[str, Any] | None]:
        """May the session finish, why, and the evidence of a block (counted as one)."""
        st, gates = ctx.state, ctx.config.gates
        if st.stopped:
            return True, f"the session was stopped: {st.stopped}", None
        if not gates.required:
            return True, "no [gates] are configured", None
        missing = _missing(ctx)
        if not missing:
            st.finish_blocks = 0
            return True, "every gate passed after the last edit: " + ", ".join(gates.required), None
        if st.finish_blocks >= gates.max_blocks:
            why = f"finishing is allowed after {st.finish_blocks} blocks although "
            return True, why + "; ".join(missing), None
        st.finish_blocks += 1
        message = _gate_message(missing) + f" (block {st.finish_blocks} of {gates.max_blocks})"
        evidence = {"missing": missing, "blocks": st.finish_blocks, "max_blocks": gates.max_blocks}
        return False, message, evidence

    def note_gate(self, ctx: Context, command: str, passed: bool) -> None:
        """Record a gate run reported from outside a call (e.g. run by a Stop hook)."""
        text = " ".join(command.split())
        facts = ctx.facts(command, None)
        names = [g for g in ctx.config.gates.required if facts.runs(g)] or [text]
        for name in names:
            put(ctx.state.gates, name, [ctx.state.step, passed])


def _missing(ctx: Context) -> list[str]:
    st = ctx.state
    missing: list[str] = []
    for gate in ctx.config.gates.required:
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


def _gate_message(missing: list[str]) -> str:
    return (
        "the [gates] must pass after the last edit: " + "; ".join(missing) + ". Instead of "
        "finishing: run each gate, fix what fails, then finish."
    )
