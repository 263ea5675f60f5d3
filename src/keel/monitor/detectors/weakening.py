"""``test_weakening``: edits that make the tests say less.

Deleting test files, skipping tests, removing assertions → correct, unless ``[monitor]
task_is_about_tests``.

Read from what a call carries: a patch (``*** Begin Patch`` or unified diff), Claude's
``Edit``/``MultiEdit`` old and new strings, a ``Write`` of an empty test file, or a shell
command that deletes test files (its words, as the policy's parser read them). Only files
that look like tests are judged.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from keel.core.patchtext import read_patch
from keel.monitor._context import Detector, Finding
from keel.monitor._state import EDIT

if TYPE_CHECKING:
    from keel.core.calls import ToolCall
    from keel.monitor._context import Context, Seen

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


class Weakening(Detector):
    """Edits that make the tests say less."""

    name = "test_weakening"

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """Deny an edit that weakens tests, when the task is not about tests."""
        if not seen.flags & EDIT or ctx.settings.task_is_about_tests:
            return []
        changes = weakening(seen.call, seen.words)
        if not changes:
            return []
        what = "; ".join(f"{c['change']} in `{c['path']}`" for c in changes[:5])
        text = (
            f"This edit weakens tests ({what}) and the task is not about tests. Instead: fix "
            "the code under test; if a test is really wrong, say why and ask the user."
        )
        return [Finding("test_weakening", "correct", text, {"changes": changes[:20]})]


def is_test_path(path: str) -> bool:
    """True for paths that look like test code (``tests/``, ``test_x.py``, ``x.test.ts``…)."""
    return bool(_TEST_PATH.search(path.replace("\\", "/")))


def weakening(call: ToolCall, words: tuple[tuple[str, ...], ...] = ()) -> list[dict[str, Any]]:
    """What ``call`` (a shell call: its ``words``) does to weaken tests: one change per file."""
    findings: list[dict[str, Any]] = []
    if call.patch:
        for f in read_patch(call.patch):
            findings.extend(_judge(f.path, f.op, list(f.added), list(f.removed)))
    if call.kind in ("edit", "write") and call.paths:
        findings.extend(_judge_args(call.paths[0], call.args))
    if call.kind == "exec":
        findings.extend(_judge_command(words))
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
        for edit in edits:
            if isinstance(edit, dict):
                added += _lines(edit.get("new_string"))
                removed += _lines(edit.get("old_string"))
        return _judge(path, "update", added, removed)
    content = args.get("content")
    if isinstance(content, str) and not content.strip() and is_test_path(path):
        return [{"path": path, "change": "emptied test file"}]
    return []


def _judge_command(words: tuple[tuple[str, ...], ...]) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = []
    for argv in words:
        name = argv[0].rsplit("/", 1)[-1]
        targets: tuple[str, ...] = ()
        if name in ("rm", "unlink", "shred"):
            targets = argv[1:]
        elif name == "git" and len(argv) > 2 and argv[1] == "rm":
            targets = argv[2:]
        for target in targets:
            if not target.startswith("-") and is_test_path(target):
                findings.append({"path": target, "change": "deleted test file"})
    return findings


def _lines(value: Any) -> list[str]:
    return value.splitlines() if isinstance(value, str) else []


def _count(pattern: re.Pattern[str], lines: list[str]) -> int:
    return sum(len(pattern.findall(line)) for line in lines)
