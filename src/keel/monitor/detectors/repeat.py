"""``repeat``: the same call over and over without its result changing.

``repeat_hint`` times in a row → hint, ``repeat_consecutive`` → correct; ``identical_pairs``
identical (call, result) pairs in a row → correct; ``repeat_in_window`` times within
``repeat_window`` calls with one result → hint. Polling is exempt: a streak restarts when the
output changes, and waits and status checks get thresholds ``poll_multiplier`` times higher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from keel.monitor._context import Detector, Finding
from keel.monitor._state import POLL

if TYPE_CHECKING:
    from keel.monitor._context import Context, Done, Seen


class Repeat(Detector):
    """Identical calls in a row, in a window, and identical call-result pairs."""

    name = "repeat"

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """Count the streak and the window of identical calls."""
        st, m = ctx.state, ctx.settings
        if seen.key == st.streak_key:
            st.streak_n += 1
        else:
            st.streak_key, st.streak_n, st.streak_out = seen.key, 1, None
        mult = m.poll_multiplier if seen.flags & POLL else 1
        n, label = st.streak_n, seen.label
        evidence: dict[str, Any] = {"call": label, "times": n, "consecutive": True}
        if n >= m.repeat_consecutive * mult:
            text = (
                f"`{label}` was called {n} times in a row without its result changing. "
                "Instead: use the result you have, or change the command or the approach."
            )
            return [Finding("repeat", "correct", text, evidence)]
        if n >= m.repeat_hint * mult:
            text = (
                f"`{label}` was called {n} times in a row without its result changing. "
                "Repeating it will not change the result: change the command or the approach."
            )
            return [Finding("repeat", "hint", text, evidence)]
        return _in_window(ctx, seen, mult)

    def after(self, ctx: Context, done: Done) -> list[Finding]:
        """Restart a polling streak whose output changed; flag identical pairs."""
        st, entry = ctx.state, done.entry
        if entry.key == st.streak_key:
            if st.streak_out is not None and st.streak_out != entry.out:
                st.streak_n = 1  # polling: the output changed, so this is progress
            st.streak_out = entry.out
        return _pairs(ctx, done)

    def reset(self, ctx: Context) -> None:
        """Forget the streak."""
        st = ctx.state
        st.streak_key, st.streak_n, st.streak_out = None, 0, None


def _in_window(ctx: Context, seen: Seen, mult: int) -> list[Finding]:
    window = ctx.state.recent[-(ctx.settings.repeat_window - 1) :]
    same = [e for e in window if e.key == seen.key]
    outputs = {e.out for e in same if e.out is not None}
    count = len(same) + 1
    if count < ctx.settings.repeat_in_window * mult or len(outputs) > 1:
        return []
    text = (
        f"`{seen.label}` was called {count} times in the last {len(window) + 1} calls with "
        "the same result. Instead: keep what it returned and move on to the next step."
    )
    evidence = {"call": seen.label, "times": count, "window": len(window) + 1}
    return [Finding("repeat", "hint", text, evidence)]


def _pairs(ctx: Context, done: Done) -> list[Finding]:
    recent, m, entry = ctx.state.recent, ctx.settings, done.entry
    k = m.identical_pairs * (m.poll_multiplier if entry.flags & POLL else 1)
    tail = recent[-k:]
    if not done.latest or len(tail) < k:
        return []
    if any(e.key != entry.key or e.out != entry.out for e in tail):
        return []
    text = (
        f"`{entry.label}` ran {k} times in a row and returned the same result each time. "
        "Repeating it will not change the result: use it, or change the approach."
    )
    return [Finding("repeat", "correct", text, {"call": entry.label, "pairs": k})]
