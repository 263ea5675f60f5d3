from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from journal_helpers import fill

from keel.events import DataPayload, Event
from keel.journal import MemoryJournal
from keel.journal.timeline import render_line, session_timeline

Cli = Callable[..., Any]

TIMELINE = """\
session sess-1  agent claude  trace 0af7651916cd43dd8448eb211c80319c
13 events, 2023-11-14 22:13:21.250 .. 2023-11-14 22:13:33.250 UTC

22:13:21.250  #1     session.start  {"cwd": "/repo", "note": "héllo ✓"}
22:13:22.250  #2     tool.call      Bash (exec): pytest -q
22:13:23.250  #3     decision       ALLOW [preset.developer.allow] tests are fine (on pytest -q)
22:13:24.250  #4     checkpoint     cp-abc123 'before t1'; files: src/a.py, src/b.py
22:13:25.250  #5     tool.result    Bash FAILED exit 1
22:13:26.250  #6     tool.call      Bash (exec): rm -rf build
22:13:27.250  #7     decision       DENY [risk.rm_recursive] recursive delete (on rm -rf build); \
suggestion: delete single files
22:13:28.250  #8     diagnostic     [correct] repeated_failure: pytest failed 3 times
22:13:29.250  #9     guidance       [correct] repeated_failure: read the failing test first
22:13:30.250  #10    probe          step s1: file_exists(path="config.yaml") -> true
22:13:31.250  #11    gate           pytest -q: PASS (exit 0)
22:13:32.250  #12    stop           operator pressed stop (by alice)
22:13:33.250  #13    prompt         {"text": "fix the tests"}
"""


def test_show_renders_the_timeline(root: Path, cli: Cli) -> None:
    fill(root, 26)
    result = cli("show", "sess-1", "--workspace", str(root))
    assert result.exit_code == 0, result.output
    assert result.stdout == TIMELINE


def test_show_accepts_a_unique_prefix_and_json(root: Path, cli: Cli) -> None:
    fill(root, 14)  # sess-1 whole, one event of sess-2
    journal = MemoryJournal()
    for event in [
        Event("prompt", "abc123", DataPayload({})),
        Event("prompt", "abd", DataPayload()),
    ]:
        journal.append(event)
    assert session_timeline(journal, "abc").splitlines()[0].startswith("session abc123 ")

    result = cli("show", "sess-2", "--json", "-w", str(root))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["session"]["session_id"] == "sess-2" and doc["session"]["events"] == 1
    assert [e["seq"] for e in doc["events"]] == [14]

    ambiguous = cli("show", "sess", "-w", str(root))
    assert ambiguous.exit_code == 1
    assert "journal.session_ambiguous" in ambiguous.stderr

    unknown = cli("show", "nope", "--json", "-w", str(root))
    assert unknown.exit_code == 1
    assert json.loads(unknown.stderr)["error"]["code"] == "journal.session_unknown"


def test_log_lists_sessions(root: Path, cli: Cli) -> None:
    fill(root, 26)
    text = cli("log", "-w", str(root))
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["SESSION", "AGENT", "EVENTS", "FIRST", "(UTC)", "LAST", "(UTC)"]
    assert lines[1].split()[:3] == ["sess-1", "claude", "13"]
    assert lines[2].split()[:3] == ["sess-2", "codex", "13"]

    as_json = cli("log", "--json", "-w", str(root))
    assert as_json.exit_code == 0
    sessions = json.loads(as_json.stdout)
    assert [(s["session_id"], s["agent"], s["events"]) for s in sessions] == [
        ("sess-1", "claude", 13),
        ("sess-2", "codex", 13),
    ]
    assert set(sessions[0]) == {"session_id", "agent", "first_ts", "last_ts", "events", "trace_id"}

    limited = json.loads(cli("log", "--json", "--limit", "1", "-w", str(root)).stdout)
    assert [s["session_id"] for s in limited] == ["sess-2"]


def test_log_of_one_session(root: Path, cli: Cli) -> None:
    stored = fill(root, 26)
    result = cli("log", "--session", "sess-2", "--limit", "2", "-w", str(root))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [render_line(e) for e in stored[-2:]]

    as_json = cli("log", "--session", "sess-1", "--json", "-w", str(root))
    events = [Event.from_dict(e) for e in json.loads(as_json.stdout)]
    assert events == stored[:13]


def test_log_with_no_journal_says_so(root: Path, cli: Cli) -> None:
    result = cli("log", "-w", str(root))
    assert result.exit_code == 0
    assert "nothing in the journal yet" in result.stdout
    assert json.loads(cli("log", "--json", "-w", str(root)).stdout) == []
    assert not (root / ".keel").exists()


def test_timeline_generic_and_long_lines() -> None:
    journal = MemoryJournal()
    long = "x" * 500
    event = journal.append(Event("model.request", "s", DataPayload({"model": "m", "text": long})))
    line = render_line(event)
    assert "model.request" in line and line.endswith("…") and len(line) < 220
    assert "\n" not in render_line(
        journal.append(Event("thought", "s", DataPayload({"t": "a\nb"})))
    )
