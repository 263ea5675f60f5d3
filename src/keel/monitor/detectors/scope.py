"""``scope``: a change to a file outside ``[scope]`` → correct.

Before a call that names the files it changes (a write, an edit, a patch, a command whose
writes the policy can read), the call is denied. A shell command may change files its line
does not name (``python3 -c ...``): those the guard saw change while it ran (``Done.changed``)
are checked after it, and the agent is told (the change stays; ``keel diff`` shows it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keel.monitor._context import Detector, Finding
from keel.monitor._state import EDIT

if TYPE_CHECKING:
    from keel.monitor._context import Context, Done, Seen


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
        verb = "is" if len(outside) == 1 else "are"
        text = f"{_named(outside)} {verb} outside the task's scope ({_scope(ctx)})."
        return [Finding("scope", "correct", f"{text} {_INSTEAD}", {"paths": outside[:20]})]

    def after(self, ctx: Context, done: Done) -> list[Finding]:
        """Tell the agent which files outside ``[scope]`` its call changed as it ran."""
        outside = [p for p in done.changed if not ctx.in_scope(p, None)]
        if not outside:
            return []
        text = (
            f"your command changed {_named(outside)}, outside the task's scope "
            f"({_scope(ctx)}); keel kept the change and the user will see it (keel diff). "
            "Put it back unless the user asked for it; change only files in scope, or ask "
            "the user to widen [scope]."
        )
        evidence = {"paths": outside[:20], "tool_use_id": done.result.tool_use_id}
        return [Finding("scope", "correct", text, evidence)]


_INSTEAD = "Instead: change only files in scope, or ask the user to widen [scope]."


def _named(paths: list[str]) -> str:
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return ", ".join(f"`{p}`" for p in paths[:5]) + more


def _scope(ctx: Context) -> str:
    scope = ctx.config.scope
    return f"[scope] include {scope.include}, exclude {scope.exclude}"
