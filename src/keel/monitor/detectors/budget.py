"""``budget``: ``[limits]`` steps, wall time and tokens.

A hint at ``budget_warn_fraction`` of each (once), a stop when one is spent. Each budget
climbs the ladder on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.monitor._context import Detector, Finding

if TYPE_CHECKING:
    from keel.monitor._context import Context, Seen


class Budget(Detector):
    """Steps, wall time and tokens against ``[limits]``."""

    name = "budget"

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """A hint when a budget runs low, a stop when it is spent."""
        st, limits = ctx.state, ctx.config.limits
        elapsed = seen.now - st.started if st.started is not None else 0.0
        wall = limits.max_wall_seconds
        checks = (
            ("steps", st.step, limits.max_steps, "tool calls", st.step > limits.max_steps),
            ("wall-time", elapsed, wall, "seconds", elapsed >= wall),
            ("tokens", st.tokens, limits.max_tokens, "tokens", st.tokens >= limits.max_tokens),
        )
        found: list[Finding] = []
        for budget, used, cap, unit, spent in checks:
            evidence = {"budget": budget, "used": round(used, 1), "limit": cap}
            rung = f"budget:{budget}"
            if spent:
                text = f"The {budget} budget is spent: {used:.0f} of {cap:.0f} {unit} ([limits])."
                found.append(Finding("budget", "stop", text, evidence, rung))
            elif used >= cap * ctx.settings.budget_warn_fraction and budget not in st.budget_warned:
                st.budget_warned.append(budget)
                text = (
                    f"{used / cap:.0%} of the {budget} budget is used ({used:.0f} of {cap:.0f} "
                    f"{unit}). Instead of exploring further, finish the current step and verify it."
                )
                found.append(Finding("budget", "hint", text, evidence, rung))
        return found
