"""``failure``: the same call failing again and again, or one error from many calls.

The same call failing ``failure_repeats`` times in a row → correct, and calling it again
unchanged is denied; the same error from different calls → hint (again every
``failure_repeats`` times). A successful call that is not a read (an edit, an install...)
makes retrying fair again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.monitor._context import Detector, Finding, put
from keel.monitor._state import READ
from keel.monitor._text import error_signature

if TYPE_CHECKING:
    from keel.monitor._context import Context, Done, Seen


class Failure(Detector):
    """Repeated failures of one call, and one error from many calls."""

    name = "failure"

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """Deny a call that already failed ``failure_repeats`` times in a row."""
        n = ctx.state.failures.get(seen.key, 0)
        if n < ctx.settings.failure_repeats:
            return []
        text = (
            f"`{seen.label}` already failed {n} times in a row. Do not run it again unchanged: "
            "read the error, fix its cause or try another approach."
        )
        return [Finding("failure", "correct", text, {"call": seen.label, "failures": n})]

    def after(self, ctx: Context, done: Done) -> list[Finding]:
        """Count a failure of the call and of its error; a success that changed things clears."""
        st, entry, result = ctx.state, done.entry, done.result
        if result.ok:
            st.failures.pop(entry.key, None)
            if not entry.flags & READ:
                st.failures.clear()  # something changed (an edit, an install...): retrying is fair
            return []
        n = put(st.failures, entry.key, st.failures.get(entry.key, 0) + 1)
        signature = error_signature(result.output, result.error)
        seen = put(st.errors, signature, st.errors.get(signature, 0) + 1)
        excerpt = _last_line(result.error or result.output)
        evidence = {"call": entry.label, "failures": n, "error": excerpt}
        if n >= ctx.settings.failure_repeats:
            text = (
                f"`{entry.label}` failed {n} times in a row (last error: {excerpt!r}). Instead: "
                "read the error and fix its cause, or try another approach; do not rerun it "
                "unchanged."
            )
            return [Finding("failure", "correct", text, evidence)]
        if seen % ctx.settings.failure_repeats == 0:
            text = (
                f"The same error appeared {seen} times: {excerpt!r}. Instead: deal with this "
                "error directly before trying anything else."
            )
            return [Finding("failure", "hint", text, {**evidence, "times": seen})]
        return []

    def reset(self, ctx: Context) -> None:
        """Forget failures and errors."""
        ctx.state.failures.clear()
        ctx.state.errors.clear()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= 160 else last[:159] + "…"
