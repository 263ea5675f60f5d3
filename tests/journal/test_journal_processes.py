"""Many writer processes at once, and a writer killed with SIGKILL mid-append."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from journal_helpers import session_events, writer_cmd

from keel.core.errors import JournalError
from keel.journal import SQLiteJournal, journal_path, open_journal

PROCESSES = 4
PER_PROCESS = 2000


def test_concurrent_writers_lose_nothing_and_chain_stays_intact(root: Path, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [*writer_cmd(root, f"p{n}", PER_PROCESS), str(gate)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    for proc in procs:  # every writer has opened the journal (the first ran the migrations)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.communicate()[1]
    gate.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    with open_journal(root) as journal:
        events = list(journal.events())
        assert [e.seq for e in events] == list(range(1, PROCESSES * PER_PROCESS + 1))
        seen = {(e.payload.args["proc"], e.payload.args["i"]) for e in events}  # type: ignore[union-attr]
        assert seen == {(f"p{n}", i) for n in range(PROCESSES) for i in range(PER_PROCESS)}
        for n in range(PROCESSES):
            mine = [e.payload.args["i"] for e in journal.events(session_id=f"p{n}")]  # type: ignore[union-attr]
            assert mine == list(range(PER_PROCESS))
        assert journal.verify() == []
        assert sorted(s.events for s in journal.sessions()) == [PER_PROCESS] * PROCESSES


def _kill_after(root: Path, name: str, appends: int) -> int:
    """Start an endless writer, SIGKILL it once it has appended ``appends`` events."""
    with subprocess.Popen(writer_cmd(root, name, 0), stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        done = 0
        for line in proc.stdout:
            done = int(line)
            if done >= appends:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"writer exited early: {proc.returncode}"
    return done


def test_writer_killed_mid_append_leaves_a_clean_journal(root: Path) -> None:
    with open_journal(root) as journal:
        journal.append(session_events()[0])
    total = 1
    for round_, appends in enumerate((25, 400, 1500)):
        # A second, finite writer runs alongside: the kill must not block or break it.
        other = subprocess.Popen(writer_cmd(root, f"other{round_}", 300), stderr=subprocess.PIPE)
        killed_at = _kill_after(root, f"victim{round_}", appends)
        _, err = other.communicate(timeout=120)
        assert other.returncode == 0, err.decode()
        with open_journal(root) as journal:
            assert journal.verify() == []
            seqs = [e.seq for e in journal.events()]
            assert seqs == list(range(1, len(seqs) + 1))
            victim = [e.payload.args["i"] for e in journal.events(session_id=f"victim{round_}")]  # type: ignore[union-attr]
            # Every append the writer reported is there, in order, and nothing half-written:
            # the writer may have committed a few more before the signal landed.
            assert len(victim) >= killed_at
            assert victim == list(range(len(victim)))
            assert len(list(journal.events(session_id=f"other{round_}"))) == 300
            total = seqs[-1]
            after = journal.append(session_events()[1])
            assert after.seq == total + 1
            assert journal.verify() == []


def test_busy_journal_is_a_journal_error_then_appends(root: Path) -> None:
    with open_journal(root):
        pass
    locker = sqlite3.connect(journal_path(root), isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        with SQLiteJournal(journal_path(root), busy_timeout=0.01, retry_for=0) as journal:
            with pytest.raises(JournalError) as err:
                journal.append(session_events()[0])
            assert err.value.code == "journal.busy"
            locker.execute("COMMIT")
            assert journal.append(session_events()[0]).seq == 1
            assert journal.verify() == []
    finally:
        locker.close()


def test_writer_waits_for_a_held_lock_instead_of_failing(root: Path, tmp_path: Path) -> None:
    with open_journal(root):
        pass
    gate = tmp_path / "go"
    locker = sqlite3.connect(journal_path(root), isolation_level=None)
    with subprocess.Popen(
        [*writer_cmd(root, "waiter", 50), str(gate)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        locker.execute("BEGIN IMMEDIATE")
        gate.touch()
        time.sleep(0.3)  # let the writer run into the lock; not an assertion on time
        locker.execute("COMMIT")
        locker.close()
        assert proc.wait(timeout=120) == 0
    with open_journal(root) as journal:
        assert len(list(journal.events(session_id="waiter"))) == 50
        assert journal.verify() == []
