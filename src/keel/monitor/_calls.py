"""What the monitor reads from one call, once, for every detector, and remembers of it.

``read_call`` → ``Seen``; ``remember`` keeps a ``CallEntry`` in the state's window and
``find_call`` finds the call a result answers. A shell command is read by the policy's parser
(``ctx.facts``), never here: whether it only reads, changes files (and which), runs the tests
or a ``[gates]`` command, and the words of each simple command.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from keel.core.patchtext import patch_paths
from keel.monitor._context import Seen
from keel.monitor._state import EDIT, POLL, READ, TEST, WRITES, CallEntry
from keel.monitor._text import call_key, describe

if TYPE_CHECKING:
    from keel.core.calls import ToolCall, ToolResult
    from keel.monitor._context import Context
    from keel.monitor._state import MonitorState

_POLL_TOOLS = frozenset({"BashOutput", "TaskOutput", "write_stdin", "wait"})
_POLL_COMMANDS = frozenset({"sleep", "wait", "watch"})
_PATH_LIKE = re.compile(r"[\w.\-/~]+")
_HAS_SUFFIX = re.compile(r"\w\.[A-Za-z]{1,5}$")
_TARGET_WORDS = 6
_LABEL = 60


def read_call(ctx: Context, call: ToolCall, now: float) -> Seen:
    """The call as every detector sees it: key, flags, files changed and touched, gates."""
    flags, written, words, gates = _kind_flags(call), (), (), ()
    if call.kind == "exec" and call.command:
        facts = ctx.facts(call.command, call.cwd)
        flags |= (EDIT if facts.mutates else 0) | (READ if facts.read_only else 0)
        flags |= TEST if facts.test_run else 0
        written, words = facts.written, facts.words
        gates = tuple(g for g in ctx.config.gates.required if facts.runs(g))
    named = [] if written else [w for argv in words for w in argv[1:] if path_like(w)]
    patched = patch_paths(call.patch) if call.patch else []
    edited = call.paths if flags & EDIT and call.kind != "exec" else ()
    flags |= WRITES if edited or written or patched else 0
    return Seen(
        call=call,
        key=call_key(call),
        flags=flags | (POLL if is_poll(call, words) else 0),
        label=describe(call),
        changed=tuple(dict.fromkeys([*edited, *written, *patched])),
        targets=(*call.paths, *written, *named[:_TARGET_WORDS], *patched),
        words=words,
        gates=gates,
        now=now,
    )


def _kind_flags(call: ToolCall) -> int:
    if call.kind in ("write", "edit"):
        return EDIT
    return READ if call.kind == "read" else 0


def remember(state: MonitorState, seen: Seen, cap: int) -> None:
    """Keep the call in ``state.recent``, at most ``cap`` of them."""
    call = seen.call
    label = describe(call, _LABEL)
    entry = CallEntry(
        state.step, seen.key, call.kind, None, None, call.tool_use_id, seen.flags, seen.gates, label
    )
    state.recent.append(entry)
    if len(state.recent) > cap:
        del state.recent[0]


def find_call(recent: list[CallEntry], result: ToolResult) -> int | None:
    """The index of the call ``result`` answers, or None.

    By tool-use id, else by call key, else (for a result with neither) the latest call still
    waiting for its result.
    """
    back = range(len(recent) - 1, -1, -1)
    if result.tool_use_id:
        found = next((i for i in back if recent[i].tool_use_id == result.tool_use_id), None)
        if found is not None:
            return found
    if result.call is not None:
        key = call_key(result.call)
        return next((i for i in back if recent[i].key == key and recent[i].ok is None), None)
    if result.tool_use_id:
        return None
    return next((i for i in back if recent[i].ok is None), None)


def is_poll(call: ToolCall, words: tuple[tuple[str, ...], ...]) -> bool:
    """Waits and status checks: repeating them is normal while something else makes progress."""
    if call.tool in _POLL_TOOLS:
        return True
    return any(
        argv[0] in _POLL_COMMANDS or "status" in argv or any(w.startswith("--watch") for w in argv)
        for argv in words
        if argv
    )


def path_like(word: str) -> bool:
    """True for words that look like a file path (``src/x.py``, ``README.md``)."""
    return bool(_PATH_LIKE.fullmatch(word)) and ("/" in word or bool(_HAS_SUFFIX.search(word)))
