"""``monologue``: the same agent message ``monologue_repeats`` times with no call between.

A hint; the controller resets the count on every tool call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.monitor._context import Detector, Finding
from keel.monitor._text import short_hash

if TYPE_CHECKING:
    from keel.monitor._context import Context


class Monologue(Detector):
    """An agent repeating itself instead of acting."""

    name = "monologue"

    def message(self, ctx: Context, text: str) -> list[Finding]:
        """Count an agent message; a hint when the same one comes back too often."""
        st = ctx.state
        digest = short_hash(" ".join(text.split()))
        st.message_n = st.message_n + 1 if digest == st.message_hash else 1
        st.message_hash = digest
        if st.message_n < ctx.settings.monologue_repeats:
            return []
        message = (
            f"The same message was written {st.message_n} times with no tool call between. "
            "Instead: act on it with a call, or finish."
        )
        return [Finding("monologue", "hint", message, {"times": st.message_n})]

    def reset(self, ctx: Context) -> None:
        """Forget the count."""
        ctx.state.message_n = 0
