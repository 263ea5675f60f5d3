"""``alternation``: A-B-A-B over ``alternation_steps`` calls with unchanged results → replan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.monitor._context import Detector, Finding

if TYPE_CHECKING:
    from keel.monitor._context import Context, Seen


class Alternation(Detector):
    """Two calls taking turns, neither result changing: a loop."""

    name = "alternation"

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """A replan when the last calls alternate between two unchanged ones."""
        k = ctx.settings.alternation_steps
        tail = ctx.state.recent[-(k - 1) :]
        if len(tail) < k - 1:
            return []
        keys = [e.key for e in tail] + [seen.key]
        first, second = keys[0], keys[1]
        if first == second or any(keys[i] != (first, second)[i % 2] for i in range(k)):
            return []
        for wanted in (first, second):
            if len({e.out for e in tail if e.key == wanted and e.out is not None}) > 1:
                return []
        labels = [tail[-1].label, seen.label]
        text = (
            f"The last {k} calls alternate between `{labels[0]}` and `{labels[1]}` with "
            "unchanged results. This is a loop."
        )
        return [Finding("alternation", "replan", text, {"calls": labels, "steps": k})]
