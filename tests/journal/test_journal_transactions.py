"""``append_many``: several events, a request id and session state in one bounded transaction."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from journal_helpers import child_cmd, session_events

from keel.core.errors import AlreadyAnswered, JournalError
from keel.journal import REQUEST_TTL, Journal, journal_path, open_journal

JournalFactory = Callable[[], Journal]


def test_append_many_stores_consecutive_chained_seqs(make_journal: JournalFactory) -> None:
    journal = make_journal()
    first = journal.append(session_events()[0])
    stored = journal.append_many(session_events()[1:5])
    assert [e.seq for e in stored] == [2, 3, 4, 5]
    assert list(journal.events()) == [first, *stored]
    assert journal.append_many([]) == []
    assert journal.verify() == []


def test_a_request_id_is_answered_once(make_journal: JournalFactory) -> None:
    journal = make_journal()
    first = journal.append_many(
        session_events()[:2], request_id="req-1", outcome={"decision": "allow", "n": 1}
    )
    assert journal.answered("req-1") == {"decision": "allow", "n": 1}
    assert journal.answered("req-2") is None
    with pytest.raises(AlreadyAnswered) as answer:
        journal.append_many(
            session_events()[2:4],
            request_id="req-1",
            outcome={"decision": "deny"},
            session_state=("s", {"x": 1}),
        )
    assert answer.value.outcome == {"decision": "allow", "n": 1}
    assert answer.value.code == "journal.already_answered"
    assert list(journal.events()) == first  # nothing written the second time
    assert journal.session_state_version("s") == 0
    assert journal.append_many([], request_id="req-3") == []
    assert journal.answered("req-3") == {}
    assert journal.verify() == []


def test_session_state_is_versioned(make_journal: JournalFactory) -> None:
    journal = make_journal()
    assert journal.session_state("s") is None and journal.session_state_version("s") == 0
    for n in range(1, 4):
        journal.append_many(session_events()[n : n + 1], session_state=("s", {"turn": n}))
        assert journal.session_state("s") == (n, {"turn": n})
        assert journal.session_state_version("s") == n
    journal.append_many([], session_state=("other", {}))
    assert journal.session_state_version("other") == 1
    assert journal.session_state_version("s") == 3


def test_unserializable_outcome_or_state_writes_nothing(make_journal: JournalFactory) -> None:
    journal = make_journal()
    for kwargs in ({"outcome": {"x": object()}}, {"session_state": ("s", {"x": float("nan")})}):
        with pytest.raises(JournalError) as err:
            journal.append_many(session_events()[:1], request_id="r", **kwargs)  # type: ignore[arg-type]
        assert err.value.code == "journal.unserializable"
    assert list(journal.events()) == [] and journal.answered("r") is None


def test_a_deadline_already_passed_is_too_late(make_journal: JournalFactory) -> None:
    journal = make_journal()
    with pytest.raises(JournalError) as err:
        journal.append_many(
            session_events()[:2],
            request_id="late",
            session_state=("s", {"a": 1}),
            deadline=time.monotonic() - 1,
        )
    assert err.value.code == "journal.too_late"
    assert list(journal.events()) == []
    assert journal.answered("late") is None and journal.session_state_version("s") == 0
    assert journal.append_many(session_events()[:2], deadline=time.monotonic() + 60)[1].seq == 2


def test_a_deadline_bounds_the_wait_for_a_held_lock(root: Path) -> None:
    with open_journal(root) as journal:
        journal.append(session_events()[0])
        with subprocess.Popen(
            child_cmd("lock", journal_path(root)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as holder:
            assert holder.stdout is not None and holder.stdin is not None
            assert holder.stdout.readline() == "locked\n"
            with pytest.raises(JournalError) as err:
                journal.append_many(session_events()[1:3], deadline=time.monotonic() + 0.3)
            assert err.value.code == "journal.busy"
            assert holder.poll() is None  # the other process still holds the lock
            holder.stdin.close()
            assert holder.wait(timeout=60) == 0
        assert (
            journal.append_many(session_events()[1:3], deadline=time.monotonic() + 60)[0].seq == 2
        )
        assert journal.verify() == []


def test_open_journal_timeout_bounds_a_busy_open(root: Path) -> None:
    journal_path(root).parent.mkdir()
    with subprocess.Popen(
        child_cmd("lock", journal_path(root)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(JournalError) as err:
            open_journal(root, timeout=0.3)  # a new journal must be migrated: needs the lock
        assert err.value.code == "journal.busy"
        assert holder.poll() is None
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    with open_journal(root, timeout=5) as journal:
        assert journal.append(session_events()[0]).seq == 1


def test_a_process_killed_inside_append_many_leaves_all_or_nothing(root: Path) -> None:
    with subprocess.Popen(
        child_cmd("pause", root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "inside\n", line + child.communicate()[1]
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    with open_journal(root) as journal:  # the head record lags nothing: no break
        assert [e.session_id for e in journal.events()] == ["before"] * 3
        assert journal.answered("batch-1") is None
        assert journal.session_state("batch") is None
        assert journal.verify() == []
        retry = journal.append_many(
            session_events()[:2], request_id="batch-1", session_state=("batch", {"step": 1})
        )
        assert [e.seq for e in retry] == [4, 5]
        assert journal.session_state_version("batch") == 1


def test_racing_processes_commit_a_request_id_once(root: Path, tmp_path: Path) -> None:
    with open_journal(root):
        pass
    gate = tmp_path / "go"
    procs = [
        subprocess.Popen(
            child_cmd("request", root, "same-request", gate),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(5)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.communicate()[1]
    gate.touch()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(out.split())
    stored = [o for o in outputs if o[0] == "stored"]
    answered = [o for o in outputs if o[0] == "answered"]
    assert len(stored) == 1 and len(answered) == 4
    winner = int(stored[0][1])
    assert all(json.loads(" ".join(o[1:])) == {"by": winner} for o in answered)
    with open_journal(root) as journal:
        assert len(list(journal.events(session_id="same-request"))) == 2
        assert journal.answered("same-request") == {"by": winner}
        assert journal.verify() == []


def test_old_request_ids_are_pruned(root: Path) -> None:
    with open_journal(root) as journal:
        journal.append_many([], request_id="fresh")
    db = sqlite3.connect(journal_path(root))
    with db:
        db.execute(
            "INSERT INTO requests (id, ts, outcome) VALUES ('stale', ?, '{}')",
            (time.time() - REQUEST_TTL - 60,),
        )
    db.close()
    with open_journal(root) as journal:
        assert journal.answered("stale") == {}
        events = [e for _ in range(3) for e in session_events()] * 4  # 156 events
        for start in range(0, len(events), 2):
            journal.append_many(events[start : start + 2])
        assert journal.answered("stale") is None
        assert journal.answered("fresh") == {}
        assert journal.verify() == []
