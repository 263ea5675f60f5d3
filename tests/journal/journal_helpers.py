"""Shared helpers for the journal tests (imported by name: the test dir is on sys.path)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from _support import keel
from keel.core.events import (
    CheckpointPayload,
    DataPayload,
    DecisionPayload,
    DiagnosticPayload,
    Event,
    GatePayload,
    GuidancePayload,
    ProbePayload,
    StopPayload,
    ToolCallPayload,
    ToolResultPayload,
)
from keel.journal import journal_path, open_journal

WRITER = Path(__file__).resolve().parent / "journal_writer.py"
CHILD = Path(__file__).resolve().parent / "journal_child.py"
TRACE = "0af7651916cd43dd8448eb211c80319c"
T0 = 1_700_000_000.25


def session_events(session_id: str = "sess-1", agent: str = "claude") -> list[Event]:
    """A small session with one event of every payload shape, fixed ids and times."""

    def ev(i: int, kind: str, payload: object, parent: str | None = None) -> Event:
        return Event(
            kind,  # type: ignore[arg-type]
            session_id,
            payload,  # type: ignore[arg-type]
            agent=agent,
            trace_id=TRACE,
            span_id=f"{i:016x}",
            parent_span_id=parent,
            ts=T0 + i,
        )

    return [
        ev(1, "session.start", DataPayload({"cwd": "/repo", "note": "héllo ✓"})),
        ev(2, "tool.call", ToolCallPayload("Bash", "exec", command="pytest -q", tool_use_id="t1")),
        ev(
            3,
            "decision",
            DecisionPayload(
                "allow",
                "preset.developer.allow",
                "tests are fine",
                tool_use_id="t1",
                subject="pytest -q",
            ),
            f"{2:016x}",
        ),
        ev(
            4,
            "checkpoint",
            CheckpointPayload(
                "cp-abc123", label="before t1", tool_use_id="t1", files=["src/a.py", "src/b.py"]
            ),
        ),
        ev(
            5,
            "tool.result",
            ToolResultPayload("Bash", ok=False, output="1 failed", exit_code=1, tool_use_id="t1"),
            f"{2:016x}",
        ),
        ev(
            6,
            "tool.call",
            ToolCallPayload("Bash", "exec", command="rm -rf build", tool_use_id="t2"),
        ),
        ev(
            7,
            "decision",
            DecisionPayload(
                "deny",
                "risk.rm_recursive",
                "recursive delete",
                suggestion="delete single files",
                tool_use_id="t2",
                subject="rm -rf build",
            ),
            f"{6:016x}",
        ),
        ev(
            8,
            "diagnostic",
            DiagnosticPayload(
                "repeated_failure",
                "correct",
                "pytest failed 3 times",
                step=8,
                evidence={"count": 3},
            ),
        ),
        ev(
            9,
            "guidance",
            GuidancePayload(
                "correct", "read the failing test first", "repeated_failure", tool_use_id="t2"
            ),
        ),
        ev(
            10,
            "probe",
            ProbePayload(
                "s1",
                "file_exists",
                args={"path": "config.yaml"},
                result=True,
                sandbox="bwrap",
                duration_ms=3.5,
            ),
        ),
        ev(11, "gate", GatePayload("pytest -q", passed=True, exit_code=0)),
        ev(12, "stop", StopPayload("operator pressed stop", by="alice")),
        ev(13, "prompt", DataPayload({"text": "fix the tests"})),
    ]


def tamper(root: Path, sql: str, params: tuple[object, ...] = ()) -> None:
    db = sqlite3.connect(journal_path(root))
    with db:
        db.execute(sql, params)
    db.close()


def fill(root: Path, count: int = 10) -> list[Event]:
    with open_journal(root) as journal:
        return [
            journal.append(e)
            for e in (session_events("sess-1") + session_events("sess-2", agent="codex"))[:count]
        ]


def writer_cmd(root: Path, name: str, count: int) -> list[str]:
    return [sys.executable, str(WRITER), str(root), name, str(count)]


def child_cmd(*args: object) -> list[str]:
    return [sys.executable, str(CHILD), *(str(a) for a in args)]


def keel_verify(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The real ``keel verify`` command, as a user runs it."""
    return keel("verify", "--workspace", str(root), *extra, timeout=120)
