from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from journal_helpers import fill

from keel.core.events import DataPayload, DecisionPayload, Event, ToolResultPayload
from keel.journal import MemoryJournal, open_journal
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
    sessions = json.loads(as_json.stdout)["sessions"]
    assert [(s["session_id"], s["agent"], s["events"]) for s in sessions] == [
        ("sess-1", "claude", 13),
        ("sess-2", "codex", 13),
    ]
    assert set(sessions[0]) == {"session_id", "agent", "first_ts", "last_ts", "events", "trace_id"}

    limited = json.loads(cli("log", "--json", "--limit", "1", "-w", str(root)).stdout)
    assert [s["session_id"] for s in limited["sessions"]] == ["sess-2"]


def test_log_of_one_session(root: Path, cli: Cli) -> None:
    stored = fill(root, 26)
    result = cli("log", "--session", "sess-2", "--limit", "2", "-w", str(root))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [render_line(e) for e in stored[-2:]]

    as_json = cli("log", "--session", "sess-1", "--json", "-w", str(root))
    doc = json.loads(as_json.stdout)
    assert doc["session"]["session_id"] == "sess-1"
    assert [Event.from_dict(e) for e in doc["events"]] == stored[:13]


def test_log_with_no_journal_says_so(root: Path, cli: Cli) -> None:
    result = cli("log", "-w", str(root))
    assert result.exit_code == 0
    assert "nothing in the journal yet" in result.stdout
    assert json.loads(cli("log", "--json", "-w", str(root)).stdout) == {"sessions": []}
    assert not (root / ".keel").exists()


def test_timeline_generic_and_long_lines() -> None:
    journal = MemoryJournal()
    long = "x" * 500
    event = journal.append(Event("thought", "s", DataPayload({"model": "m", "text": long})))
    line = render_line(event)
    assert "thought" in line and line.endswith("…") and len(line) < 220
    assert "\n" not in render_line(
        journal.append(Event("thought", "s", DataPayload({"t": "a\nb"})))
    )


def _recent(root: Path, now: float) -> None:
    """Two sessions: "old-3f2a" three hours ago, "new-3f2b" ten minutes ago, one of each verdict."""
    with open_journal(root) as journal:
        for session, ago in (("old-3f2a", 3 * 3600), ("new-3f2b", 600)):
            for i, verdict in enumerate(("allow", "ask", "deny")):
                payload = DecisionPayload(verdict, f"rule.{verdict}", f"{verdict} {session}")
                journal.append(Event("decision", session, payload, ts=now - ago + i))
            journal.append(Event("prompt", session, DataPayload({"n": 1}), ts=now - ago + 5))


def test_log_since(root: Path, cli: Cli) -> None:
    _recent(root, time.time())
    listed = cli("log", "--since", "1h", "-w", str(root))
    assert listed.exit_code == 0, listed.output
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["new-3f2b"]
    doc = json.loads(cli("log", "--since", "4h", "--json", "-w", str(root)).stdout)
    assert [s["session_id"] for s in doc["sessions"]] == ["old-3f2a", "new-3f2b"]
    assert json.loads(cli("log", "--since", "1m", "--json", "-w", str(root)).stdout) == {
        "sessions": []
    }

    stored = fill(root, 13)  # sess-1 at 2023-11-14 22:13:21..33 UTC
    events = cli("log", "-s", "sess-1", "--since", "2023-11-14T22:13:31", "-w", str(root))
    assert events.stdout.splitlines() == [render_line(e) for e in stored[10:]]

    bad = cli("log", "--since", "yesterday", "--json", "-w", str(root))
    assert bad.exit_code == 2
    assert json.loads(bad.stderr)["error"]["code"] == "usage.since"


def test_log_decision_across_sessions_and_in_one(root: Path, cli: Cli) -> None:
    _recent(root, time.time())
    denied = cli("log", "--decision", "deny", "-w", str(root))
    assert denied.exit_code == 0, denied.output
    lines = denied.stdout.splitlines()
    assert len(lines) == 2 and all("DENY [rule.deny]" in line for line in lines)
    assert "old-3f2a" in lines[0] and "new-3f2b" in lines[1]  # the session on each line

    doc = json.loads(
        cli("log", "-s", "new", "-d", "deny,ask", "--json", "-w", str(root)).stdout
    )  # a session prefix, as keel show takes
    assert doc["session"]["session_id"] == "new-3f2b"
    assert [e["payload"]["decision"] for e in doc["events"]] == ["ask", "deny"]

    recent = json.loads(
        cli("log", "-d", "allow", "--since", "1h", "--json", "-w", str(root)).stdout
    )
    assert recent["session"] is None
    assert [(e["session_id"], e["payload"]["decision"]) for e in recent["events"]] == [
        ("new-3f2b", "allow")
    ]

    bad = cli("log", "--decision", "maybe", "-w", str(root))
    assert bad.exit_code == 2 and "usage.decision" in bad.stderr
    empty = cli("log", "-s", "", "-w", str(root))
    assert empty.exit_code == 2 and "usage.session" in empty.stderr


def test_show_full_prints_every_field_uncut(root: Path, cli: Cli) -> None:
    output = "\n".join(f"line {i}: " + "x" * 200 for i in range(3)) + "\n\x1b[31mred"
    with open_journal(root) as journal:
        journal.append(
            Event("tool.result", "s-full", ToolResultPayload("Bash", ok=True, output=output))
        )
    short = cli("show", "s-full", "-w", str(root))
    assert short.exit_code == 0 and "x" * 200 not in short.stdout
    full = cli("show", "s-f", "--full", "-w", str(root))
    assert full.exit_code == 0, full.output
    for i in range(3):
        assert f"    line {i}: {'x' * 200}" in full.stdout
    assert "payload.tool: Bash" in full.stdout and "payload.ok: true" in full.stdout
    assert "\x1b" not in full.stdout and "\\x1b[31mred" in full.stdout


def test_show_without_a_session_shows_the_latest(root: Path, cli: Cli) -> None:
    empty = cli("show", "-w", str(root))
    assert empty.exit_code == 1 and "nothing in the journal" in empty.output
    fill(root, 26)  # sess-1 and sess-2, from 2023
    with open_journal(root) as journal:
        journal.append(Event("prompt", "now", DataPayload({})))  # the latest activity
        journal.append(Event("prompt", "keel-doctor-0a1b2c3d", DataPayload({})))  # a probe
    latest = cli("show", "--json", "-w", str(root))
    assert latest.exit_code == 0, latest.output
    assert json.loads(latest.stdout)["session"]["session_id"] == "now"


def test_log_follow_prints_events_as_they_are_journaled(root: Path) -> None:
    import queue
    import subprocess
    import threading

    from _support import KEEL, keel_env

    fill(root, 2)
    follow = subprocess.Popen(
        [KEEL, "log", "--follow", "--json", "-w", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=keel_env(),
    )  # fmt: skip
    assert follow.stdout is not None
    lines: queue.Queue[bytes] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in follow.stdout], daemon=True)  # pyright: ignore[reportOptionalIterable]
    reader.start()

    def next_event() -> dict[str, Any]:
        try:
            return json.loads(lines.get(timeout=60))
        except queue.Empty:
            raise AssertionError("keel log --follow printed nothing within 60 s") from None

    try:
        assert [next_event()["seq"], next_event()["seq"]] == [1, 2]  # what was there
        with open_journal(root) as journal:
            journal.append(Event("prompt", "later", DataPayload({"text": "new"})))
        shown = next_event()  # journaled after the follow began
        assert (shown["seq"], shown["session_id"]) == (3, "later")
    finally:
        follow.terminate()
        follow.wait(30)
        reader.join(30)  # the pipe ended with the process
        follow.stdout.close()
        follow.stderr.close()  # pyright: ignore[reportOptionalMemberAccess]
