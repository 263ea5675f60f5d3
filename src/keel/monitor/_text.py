"""Pure helpers of the monitor: call keys, output hashes, labels and patch contents.

Everything here is a small function over strings, so the detectors stay cheap per event: a
key or hash is computed once per call or result and only the short hex digest is kept. Shell
command lines are not read here: the policy's parser answers for them (``CommandFacts``).
Standard library only (the monitor runs inside hook processes).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from keel.core.calls import ToolCall

_VOLATILE_ARGS = frozenset({"description", "timeout", "timeout_ms", "run_in_background"})
"""Arguments that do not change what a call does; ignored in the call key."""

_HASH_CAP = 65_536
_VOLATILE = re.compile(
    # Every alternative starts with a character class, so the regex engine skips ahead
    # quickly: ~8x faster than the same alternatives behind \b on typical output.
    r"[0-9](?:"
    r"[0-9]{3}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}"
    r"(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
    r"|[0-9]?:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"|[0-9]*(?:\.[0-9]+)?\s?(?:ms|s|sec|secs|seconds|us|µs|ns)\b"
    r"|x[0-9a-fA-F]{6,}"
    r")"
    r"|[pP][iI][dD][ =:]?[0-9]+"
    r"|[CcSs](?:hunk|ession) ID:? ?[0-9A-Za-z\-]+"  # Codex exec_command output headers
)


def short_hash(text: str) -> str:
    """A 16-hex digest of ``text`` (BLAKE2b, 8 bytes): enough to tell results apart."""
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


def call_key(call: ToolCall) -> str:
    """The hash of a call's tool and canonical arguments (Gemini CLI's ``getToolCallKey``)."""
    if call.args:
        args: dict[str, Any] = {k: v for k, v in call.args.items() if k not in _VOLATILE_ARGS}
    else:
        args = {"command": call.command, "paths": list(call.paths), "url": call.url}
        if call.patch:
            args["patch"] = call.patch
    try:
        text = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
    except ValueError:
        text = repr(sorted(args.items()))
    return short_hash(f"{call.tool}:{text}")


def normalize_output(text: str) -> str:
    """Output with timestamps, durations, addresses and pids masked (OpenHands' ``_eq_no_pid``)."""
    if len(text) > _HASH_CAP:
        text = text[: _HASH_CAP * 3 // 4] + text[-_HASH_CAP // 4 :]
    return _VOLATILE.sub("#", text).strip()


def output_hash(output: str, error: str | None = None) -> str:
    """The content hash of a result, insensitive to timings and pids."""
    return short_hash(normalize_output(output if not error else f"{output}\x00{error}"))


def error_signature(output: str, error: str | None) -> str:
    """The hash of what a failure said: the error text, else the last lines of the output."""
    text = error or output
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return short_hash(normalize_output("\n".join(lines[-3:])))


def relative_to(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it is an absolute path inside it, else unchanged."""
    base = cwd.rstrip("/") + "/"
    return path[len(base) :] if path.startswith("/") and path.startswith(base) else path


def describe(call: ToolCall, limit: int = 80) -> str:
    """A short human label of a call: the command, else the tool and its first path or URL."""
    action = call.args.get("action")
    if call.command:
        text = " ".join(call.command.split())
    elif isinstance(action, str) and action.strip():
        text = action.strip().splitlines()[0]
    elif call.paths:
        text = f"{call.tool} {call.paths[0]}"
    elif call.url:
        text = f"{call.tool} {call.url}"
    else:
        text = call.tool
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------
# Patches and edits
