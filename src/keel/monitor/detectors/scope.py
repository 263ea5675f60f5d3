"""``scope``: a call that changes a file outside ``[scope]`` → correct (the call is denied)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.monitor._context import Detector, Finding
from keel.monitor._state import EDIT

if TYPE_CHECKING:
    from keel.monitor._context import Context, Seen


class Scope(Detector):
    """Changes to files the task's ``[scope]`` does not include."""

    name = "scope"

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """Deny a change to a file outside ``[scope]``."""
        if not seen.flags & EDIT:
            return []
        outside = [p for p in seen.changed if not ctx.in_scope(p, seen.call.cwd)]
        if not outside:
            return []
        scope = ctx.config.scope
        text = (
            f"{', '.join(f'`{p}`' for p in outside[:5])} "
            f"{'is' if len(outside) == 1 else 'are'} outside the task's scope ([scope] include "
            f"{scope.include}, exclude {scope.exclude}). Instead: change only files in scope, "
            "or ask the user to widen [scope]."
        )
        return [Finding("scope", "correct", text, {"paths": outside[:20]})]
