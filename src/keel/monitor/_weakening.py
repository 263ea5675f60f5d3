"""Edits that weaken tests: deleting test files, skipping tests, removing assertions.

Read from what a call carries: a patch (``*** Begin Patch`` or unified diff), Claude's
``Edit``/``MultiEdit`` old and new strings, a ``Write`` of an empty test file, or a shell
command that deletes test files. Only files that look like tests are judged.
"""

from __future__ import annotations

import re
from typing import Any

from keel.calls import ToolCall
from keel.monitor._text import patch_changes, simple_commands

_TEST_PATH = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec|specs)/"
    r"|(?:^|/)(?:test_[^/]+\.py|[^/]+_test\.(?:py|go|rb)|conftest\.py)$"
    r"|(?:^|/)[^/]+\.(?:test|spec)\.[cm]?[jt]sx?$"
)
_SKIP = re.compile(
    r"@pytest\.mark\.(?:skip|skipif|xfail)\b|\bpytest\.skip\(|@unittest\.skip|\.skipTest\("
    r"|\b(?:it|test|describe)\.skip\(|\bx(?:it|describe|test)\(|\bt\.Skip\(|#\[ignore\]"
)
_ASSERT = re.compile(r"\bassert\w*\b|\bexpect\(|\bt\.(?:Error|Fatal)f?\(|\bshould\b")


def is_test_path(path: str) -> bool:
    """True for paths that look like test code (``tests/``, ``test_x.py``, ``x.test.ts``…)."""
    return bool(_TEST_PATH.search(path.replace("\\", "/")))


def weakening(call: ToolCall) -> list[dict[str, Any]]:
    """What ``call`` does to weaken tests: one finding per file, empty when nothing."""
    findings: list[dict[str, Any]] = []
    if call.patch:
        for path, (added, removed, op) in patch_changes(call.patch).items():
            findings.extend(_judge(path, op, added, removed))
    if call.kind in ("edit", "write") and call.paths:
        findings.extend(_judge_args(call.paths[0], call.args))
    if call.kind == "exec" and call.command:
        findings.extend(_judge_command(call.command))
    return findings


def _judge(path: str, op: str, added: list[str], removed: list[str]) -> list[dict[str, Any]]:
    if not is_test_path(path):
        return []
    if op == "delete":
        return [{"path": path, "change": "deleted test file"}]
    skips = _count(_SKIP, added) - _count(_SKIP, removed)
    if skips > 0:
        return [{"path": path, "change": f"added {skips} skip marker(s)"}]
    asserts = _count(_ASSERT, removed) - _count(_ASSERT, added)
    if asserts > 0:
        return [{"path": path, "change": f"removed {asserts} assertion(s)"}]
    return []


def _judge_args(path: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    if "old_string" in args or "new_string" in args:
        return _judge(
            path, "update", _lines(args.get("new_string")), _lines(args.get("old_string"))
        )
    edits = args.get("edits")
    if isinstance(edits, list):
        added: list[str] = []
        removed: list[str] = []
        for edit in edits:  # pyright: ignore[reportUnknownVariableType]
            if isinstance(edit, dict):
                added += _lines(edit.get("new_string"))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
                removed += _lines(edit.get("old_string"))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return _judge(path, "update", added, removed)
    content = args.get("content")
    if isinstance(content, str) and not content.strip() and is_test_path(path):
        return [{"path": path, "change": "emptied test file"}]
    return []


def _judge_command(command: str) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = []
    for words in simple_commands(command):
        name = words[0].rsplit("/", 1)[-1]
        targets: list[str] = []
        if name in ("rm", "unlink", "shred"):
            targets = words[1:]
        elif name == "git" and len(words) > 2 and words[1] == "rm":
            targets = words[2:]
        for target in targets:
            if not target.startswith("-") and is_test_path(target):
                findings.append({"path": target, "change": "deleted test file"})
    return findings


def _lines(value: Any) -> list[str]:
    return value.splitlines() if isinstance(value, str) else []


def _count(pattern: re.Pattern[str], lines: list[str]) -> int:
    return sum(len(pattern.findall(line)) for line in lines)
