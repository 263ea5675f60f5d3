"""Contained commands stopped while a client's file tool acts.

The client's file tools (Read, Write, Edit, patches) run outside the sandbox: a contained
command left running in the background could swap a directory for a symlink between the
guard's check of a path and the client's use of it. So the guard stops the workspace's
running contained commands (SIGSTOP, ``keel.sandbox.os._registry``) before it checks a file
tool's call (``freeze_for``), and continues them when the last file-tool call in flight ends
(``thaw_for``), at the end of a turn (``thaw_everything``) or once ``FREEZE_TTL`` passes for
a call whose result never comes. What is stopped is kept in the session's state
(``SessionState.frozen`` and ``frozen_pids``): the result comes to another hook process.

On the hook path: the registry is imported only when there is something to stop or continue.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from keel.core.calls import ToolCall
    from keel.guard.session import SessionState

FILE_KINDS = frozenset({"read", "write", "edit"})
"""Calls the client carries out itself, outside the sandbox (Read, Write, Edit, patches)."""
FREEZE_TTL = 30.0
"""Seconds contained processes stay stopped for a file-tool call whose result never comes."""


def freeze_for(state: SessionState, root: str, call: ToolCall, *, rewrite: bool) -> None:
    """Stop the workspace's running contained commands while ``call``, a file tool, acts.

    Only where the guard contains shell commands itself (``rewrite``): inside ``keel wrap``
    the file tools run contained too. Frozen before the check until the tool's result comes
    (or ``FREEZE_TTL`` passes), a contained command cannot race the client's use of a path.
    """
    thaw_stale(state)
    if not rewrite or call.kind not in FILE_KINDS:
        return
    from keel.sandbox.os._registry import freeze_contained

    stopped = freeze_contained(root)
    if stopped:
        state.frozen[call.tool_use_id or ""] = time.time()
        known = {tuple(p) for p in state.frozen_pids}
        state.frozen_pids += [[p, s] for p, s in stopped if (p, s) not in known]


def thaw_for(state: SessionState, tool_use_id: str | None) -> None:
    """Let the contained commands go on once no file-tool call is in flight."""
    if state.frozen.pop(tool_use_id or "", None) is not None and not state.frozen:
        _thaw_all(state)


def thaw_stale(state: SessionState) -> None:
    """Continue what a file-tool call froze whose result never came (``FREEZE_TTL``)."""
    cutoff = time.time() - FREEZE_TTL
    for key in [k for k, ts in state.frozen.items() if ts < cutoff]:
        del state.frozen[key]
    if state.frozen_pids and not state.frozen:
        _thaw_all(state)


def thaw_everything(state: SessionState) -> None:
    """Continue every stopped contained command: no file tool is in flight any more."""
    state.frozen.clear()
    if state.frozen_pids:
        _thaw_all(state)


def _thaw_all(state: SessionState) -> None:
    from keel.sandbox.os._registry import thaw

    pids, state.frozen_pids = state.frozen_pids, []
    thaw([(p, s) for p, s in pids])
