"""``no_progress``: results that bring nothing new.

``no_progress_steps`` results in a row whose content was seen before, with no edit → hint
(and again every ``no_progress_steps``). An edit is a call that changes files it names (a
command that only may change files, like ``make``, can still bring nothing new).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.monitor._context import Detector, Finding
from keel.monitor._state import WRITES

if TYPE_CHECKING:
    from keel.monitor._context import Context, Done


class NoProgress(Detector):
    """Results that bring nothing new."""

    name = "no_progress"

    def after(self, ctx: Context, done: Done) -> list[Finding]:
        """Count a result seen before; a successful edit starts over."""
        st, out = ctx.state, done.entry.out or ""
        if done.result.ok and done.entry.flags & WRITES:
            st.no_gain = 0
            _see(ctx, out)
            return []
        new = out not in st.seen
        _see(ctx, out)
        if new:
            st.no_gain = 0
            return []
        st.no_gain += 1
        n = st.no_gain
        if n % ctx.settings.no_progress_steps:
            return []
        text = (
            f"The last {n} results brought nothing new (each repeated an earlier result) and "
            "nothing was edited. Instead: stop re-checking; decide on the next change, or say "
            "what information is missing."
        )
        return [Finding("no_progress", "hint", text, {"steps": n})]

    def reset(self, ctx: Context) -> None:
        """Forget the count."""
        ctx.state.no_gain = 0


def _see(ctx: Context, out: str) -> None:
    seen = ctx.state.seen
    seen.pop(out, None)
    seen[out] = ctx.state.step
    while len(seen) > ctx.settings.seen_cap:
        del seen[next(iter(seen))]
