"""Pure helpers of the monitor: call keys, output hashes, and reading commands and patches.

Everything here is a small function over strings, so the detectors stay cheap per event: a
key or hash is computed once per call or result and only the short hex digest is kept.
Standard library only (the monitor runs inside hook processes).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from keel.calls import ToolCall

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
# Shell commands

_SPLIT = re.compile(r"&&|\|\||[;|\n]")
_PLAIN = re.compile(r"[^'\"\\#`$(){}*?\[\]~]*")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_WRAPPERS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash"})
_READ_ONLY = frozenset(
    {
        "ls", "cat", "head", "tail", "grep", "rg", "egrep", "fgrep", "wc", "pwd", "file", "stat",
        "tree", "which", "diff", "du", "df", "nl", "sort", "uniq", "cut", "less", "more", "jq",
        "true", "date", "whoami", "uname", "id", "type", "realpath", "dirname", "basename",
        "test", "[", "cd", "echo", "printf", "find", "sed", "awk", "env", "printenv", "git",
        "ps", "sleep",
    }
)  # fmt: skip
_GIT_READ = frozenset(
    {"status", "diff", "log", "show", "blame", "grep", "ls-files", "rev-parse", "branch"}
)
_POLL_TOOLS = frozenset({"BashOutput", "TaskOutput", "write_stdin", "wait"})
_POLL_WORDS = re.compile(r"^\s*(?:sleep|wait|watch)\b|\bsleep\s+\d|\bstatus\b|--watch\b")
_TEST_RUNNER = re.compile(
    r"(?:^|[\s;&|(])(?:pytest|py\.test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest"
    r"|python3? -m (?:pytest|unittest)|(?:npm|yarn|pnpm|bun) (?:run )?test"
    r"|go test|cargo test|make (?:test|check)|mvn test|gradle test|\./gradlew test)\b"
)


def unwrap(command: str) -> str:
    """``bash -lc 'pytest -q'`` → ``pytest -q``; anything else unchanged."""
    first = command.lstrip().split(None, 1)
    if not first or first[0] not in _WRAPPERS:
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[0] in _WRAPPERS and words[1] in ("-c", "-lc", "-ic"):
        return words[2]
    return command


def strip_heredocs(command: str) -> str:
    """The command without heredoc bodies (their text is data, not shell)."""
    if "<<" not in command:
        return command
    out: list[str] = []
    delimiter: str | None = None
    for line in command.splitlines():
        if delimiter is not None:
            if line.strip() == delimiter:
                delimiter = None
            continue
        out.append(line)
        found = _HEREDOC.search(line)
        if found:
            delimiter = found.group(1)
    return "\n".join(out)


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command (split at ``&&``, ``||``, ``;``, ``|``, newlines)."""
    result: list[list[str]] = []
    for part in _SPLIT.split(strip_heredocs(unwrap(command))):
        if _PLAIN.fullmatch(part):
            words = part.split()  # nothing for shlex to do, and str.split is 20x faster
        else:
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                words = part.split()
        if words:
            result.append(words)
    return result


@dataclass(frozen=True, slots=True)
class CommandFacts:
    """What one reading of a command line tells the detectors."""

    words: tuple[tuple[str, ...], ...]
    """The words of each simple command."""
    written: tuple[str, ...]
    """Files it visibly writes or deletes (redirects, rm, mv, cp, tee, sed -i…)."""
    mutates: bool
    """It changes files: written paths, or git apply/checkout/restore/reset, patch."""
    read_only: bool
    """Only inspection commands that write nothing."""
    test_run: bool
    """It runs a test suite (pytest, npm test, go test…)."""


@functools.lru_cache(maxsize=512)
def command_facts(command: str) -> CommandFacts:
    """Parse a command line once and answer every question the detectors ask of it."""
    words = [tuple(w) for w in simple_commands(command)]
    written: list[str] = []
    for w in words:
        written.extend(_redirect_targets(list(w)))
        written.extend(_command_targets(list(w)))
    written = [p for p in written if p and not p.startswith("/dev/")]
    mutating = bool(written) or any(_mutating_word(w) for w in words)
    return CommandFacts(
        words=tuple(words),
        written=tuple(written),
        mutates=mutating,
        read_only=bool(words) and not mutating and all(_inspects(w) for w in words),
        test_run=is_test_run(command),
    )


def _mutating_word(words: tuple[str, ...]) -> bool:
    name = words[0].rsplit("/", 1)[-1]
    return name == "patch" or (
        name == "git" and len(words) > 1 and words[1] in ("apply", "checkout", "restore", "reset")
    )


def _inspects(words: tuple[str, ...]) -> bool:
    name = words[0].rsplit("/", 1)[-1]
    if name not in _READ_ONLY:
        return False
    if name == "git":
        return len(words) > 1 and words[1] in _GIT_READ
    if name == "find":
        return not any(w in ("-delete", "-exec", "-execdir") for w in words)
    return True


def _redirect_targets(words: list[str]) -> list[str]:
    targets: list[str] = []
    for i, word in enumerate(words):
        match = re.fullmatch(r"\d?>>?(.*)", word)
        if not match:
            continue
        rest = match.group(1)
        if rest.startswith("&"):
            continue
        if rest:
            targets.append(rest)
        elif i + 1 < len(words):
            targets.append(words[i + 1])
    return targets


def _command_targets(words: list[str]) -> list[str]:
    name = words[0].rsplit("/", 1)[-1]
    args = [w for w in words[1:] if not w.startswith("-") and not re.match(r"\d?>", w)]
    if name in ("rm", "unlink", "touch", "truncate", "tee", "mv", "shred"):
        return args
    if name == "cp" and args:
        return args[-1:]
    if name == "sed" and any(w.startswith("-i") or w == "--in-place" for w in words[1:]):
        return args[1:]
    if name == "git" and len(words) > 2 and words[1] == "rm":
        return [w for w in words[2:] if not w.startswith("-")]
    return []


def is_poll(call: ToolCall) -> bool:
    """Waits and status checks: repeating them is normal while something else makes progress."""
    return call.tool in _POLL_TOOLS or bool(call.command and _POLL_WORDS.search(call.command))


def is_test_run(command: str) -> bool:
    """True when a command line runs a test suite (pytest, npm test, go test…)."""
    return bool(_TEST_RUNNER.search(unwrap(command)))


def gate_matches(command: str, gate: str) -> bool:
    """True when ``command`` ran ``gate`` so that its exit status is the command's own.

    ``cd src && pytest -q`` and ``pytest -q 2>&1`` run the gate ``pytest -q``; ``pytest -q ||
    true``, ``pytest -q | tail`` and ``pytest -q tests/one.py`` do not.
    """
    want = " ".join(gate.split())
    text = " ".join(unwrap(command).split())
    parts = [p.strip() for p in text.split("&&")]
    for index, part in enumerate(parts):
        bare = re.sub(r"\s*\d?>>?\s*&?\S+", "", part).strip()
        if bare == want:
            rest = " ".join(parts[index:])
            return not re.search(r"\|\||\||;", rest)
    return False


# ---------------------------------------------------------------------------------------------
# Patches and edits

_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$")
_DIFF_NEW = re.compile(r"^\+\+\+ (?:b/)?(.+?)\s*$")
_DIFF_OLD = re.compile(r"^--- (?:a/)?(.+?)\s*$")


def patch_changes(patch: str) -> dict[str, tuple[list[str], list[str], str]]:
    """Per file of a ``*** Begin Patch`` or unified diff: (added lines, removed lines, op).

    ``op`` is ``add``, ``update`` or ``delete``.
    """
    files: dict[str, tuple[list[str], list[str], str]] = {}
    current: str | None = None
    lines = patch.splitlines()
    skip = False
    for index, line in enumerate(lines):
        if skip:
            skip = False
            continue
        header = _PATCH_FILE.match(line)
        old = _DIFF_OLD.match(line) if not header else None
        new = _DIFF_NEW.match(lines[index + 1]) if old and index + 1 < len(lines) else None
        if header:
            current = str(header.group(2))
            files[current] = ([], [], header.group(1).lower())
        elif old and new:  # a "--- a/x" line is a header only when "+++ b/x" follows
            skip = True
            current = _diff_file(files, old.group(1), new.group(1))
        elif current is not None and line.startswith("+"):
            files[current][0].append(line[1:])
        elif current is not None and line.startswith("-"):
            files[current][1].append(line[1:])
    return files


def _diff_file(files: dict[str, tuple[list[str], list[str], str]], old: str, new: str) -> str:
    if new == "/dev/null":
        files[old] = ([], [], "delete")
        return old
    files[new] = ([], [], "add" if old == "/dev/null" else "update")
    return new


def path_like(word: str) -> bool:
    """True for words that look like a file path (``src/x.py``, ``README.md``)."""
    return bool(re.fullmatch(r"[\w.\-/~]+", word)) and (
        "/" in word or bool(re.search(r"\w\.[A-Za-z]{1,5}$", word))
    )
