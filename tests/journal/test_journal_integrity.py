"""The keyed chain, the head recorded outside the database, and recovery from a broken journal.

Every damage here is done the way it happens: a writer SIGKILLed with its WAL on disk, bytes
flipped in that WAL, a file truncated, copied over or deleted, rows rewritten through sqlite3
with the chain recomputed. ``keel verify`` is the real command.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from journal_helpers import child_cmd, fill, keel_verify, session_events, writer_cmd

from keel.core.errors import JournalError
from keel.core.events import Event, canonical_json
from keel.journal import (
    BREAK_KIND,
    Chain,
    JournalHealth,
    MemoryJournal,
    RecordedHead,
    Row,
    SQLiteJournal,
    head_path,
    journal_health,
    journal_key,
    journal_path,
    key_path,
    open_journal,
    read_head,
    read_key,
    verify_rows,
)
from keel.journal._head import write_head

COLUMNS = (
    "seq, kind, session_id, trace_id, span_id, parent_span_id, ts, agent, payload, prev_hash, hash"
)


def _break(journal: SQLiteJournal) -> tuple[Event, dict[str, Any]]:
    """The journal's first event, which must be a break, and its payload data."""
    first = next(journal.events())
    assert first.kind == BREAK_KIND and first.seq == 1 and first.session_id == "keel.journal"
    return first, first.payload.data  # type: ignore[union-attr]


def _problems(journal: SQLiteJournal) -> list[tuple[int, str]]:
    return [(p.seq, p.code) for p in journal.verify()]


def _flip_wal_byte(root: Path, fraction: float) -> None:
    """Flip one byte inside the page of the WAL frame ``fraction`` of the way in."""
    wal = Path(f"{journal_path(root)}-wal")
    data = bytearray(wal.read_bytes())
    page = int.from_bytes(data[8:12], "big")
    frames = (len(data) - 32) // (24 + page)
    offset = 32 + int(frames * fraction) * (24 + page) + 24 + page // 2
    data[offset] ^= 0xFF
    wal.write_bytes(bytes(data))


# -- the key ---------------------------------------------------------------------------------


def test_key_is_created_private_once() -> None:
    assert read_key() is None
    key = journal_key()
    path = key_path()
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert journal_key() == key == read_key()


def test_processes_racing_to_create_the_key_end_with_one(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    procs = [
        subprocess.Popen(child_cmd("key", gate), stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    gate.touch()
    keys = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert keys == {key_path().read_bytes().hex()}
    assert sorted(p.name for p in key_path().parent.iterdir()) == ["journal.key"]


def test_a_key_file_of_the_wrong_size_is_an_error() -> None:
    key_path().parent.mkdir(parents=True, exist_ok=True)
    key_path().write_bytes(b"short")
    with pytest.raises(JournalError) as err:
        journal_key()
    assert err.value.code == "journal.key_invalid"


def test_memory_journal_chains_with_its_key() -> None:
    a, b, c = MemoryJournal(b"a" * 32), MemoryJournal(b"a" * 32), MemoryJournal()
    for journal in (a, b, c):
        for event in session_events()[:3]:
            journal.append(event)
    assert [r.hash for r in a.rows] == [r.hash for r in b.rows] != [r.hash for r in c.rows]
    assert verify_rows(a.rows, Chain(b"a" * 32)) == []
    assert {p.code for p in verify_rows(a.rows, Chain(b"b" * 32))} == {"chain.hash_mismatch"}
    assert [(p.seq, p.code) for p in verify_rows(a.rows, None)] == [(1, "chain.key_missing")]


def test_runs_of_unkeyed_rows_are_one_problem_each() -> None:
    journal = MemoryJournal()
    for event in session_events()[:9]:
        journal.append(event)
    prev = journal.rows[1].hash
    for i in range(2, 6):  # seq 3..6 rechained with plain SHA-256, as an old journal was
        row = replace(journal.rows[i], prev_hash=prev)
        body = (prev + canonical_json(row.event_dict())).encode()
        prev = "sha256:" + hashlib.sha256(body).hexdigest()
        journal.rows[i] = replace(row, hash=prev)
    problems = verify_rows(journal.rows, journal.chain)
    assert [(p.seq, p.code) for p in problems] == [(3, "chain.unkeyed"), (7, "chain.broken_link")]
    assert problems[0].message.startswith("rows 3..6 are not keyed (sha256 hashes)")


# -- forging the chain -----------------------------------------------------------------------


def _plain_sha256(prev: str, data: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256((prev + canonical_json(data)).encode()).hexdigest()


def _forge(root: Path, rehash: Callable[[str, dict[str, Any]], str]) -> None:
    """Rewrite row 5's payload and recompute every later hash, the head row and head file."""
    db = sqlite3.connect(journal_path(root))
    rows = [Row(*r) for r in db.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq")]
    prev = rows[3].hash
    for row in rows[4:]:
        payload = json.loads(row.payload)
        if row.seq == 5:
            payload.update(ok=True, output="all passed", exit_code=0)
        forged = replace(row, payload=canonical_json(payload), prev_hash=prev)
        prev = rehash(prev, forged.event_dict())
        db.execute(
            "UPDATE events SET payload = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (forged.payload, forged.prev_hash, prev, row.seq),
        )
    db.execute("UPDATE journal_head SET seq = ?, hash = ?", (rows[-1].seq, prev))
    (jid,) = db.execute("SELECT value FROM journal_meta WHERE key = 'journal_id'").fetchone()
    db.commit()
    db.close()
    # The strongest forger: even the head kept outside the workspace agrees.
    write_head(head_path(root), RecordedHead(jid, rows[-1].seq, prev), journal_path(root))


@pytest.mark.parametrize(
    ("rehash", "expected"),
    [
        (_plain_sha256, [(5, "chain.unkeyed")]),
        (Chain(b"w" * 32).hash_event, [(seq, "chain.hash_mismatch") for seq in range(5, 11)]),
    ],
    ids=["plain-sha256", "hmac-wrong-key"],
)
def test_a_forged_chain_fails_verify(
    root: Path, rehash: Callable[[str, dict[str, Any]], str], expected: list[tuple[int, str]]
) -> None:
    fill(root)
    _forge(root, rehash)
    result = keel_verify(root, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert [(p["seq"], p["code"]) for p in report["problems"]] == expected
    assert not report["ok"]


def test_missing_key_fails_verify_and_the_next_append_starts_a_new_chain(root: Path) -> None:
    fill(root)
    key_path().unlink()
    result = keel_verify(root)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "seq 1: chain.key_missing" in result.stdout
    assert not key_path().exists()  # verify never makes a key up
    with open_journal(root) as journal:
        assert len(list(journal.events())) == 10  # reading needs no key
        assert not journal_health(root).ok and "journal key" in str(journal_health(root).problem)
        assert journal.append(session_events()[0]).seq == 2  # appending starts a new chain
        _, data = _break(journal)
        assert data["reason"] == "key_missing"
        assert Path(data["moved_to"]).exists()
        assert _problems(journal) == [(1, "journal.break")]
    assert key_path().exists()


# -- losses the recorded head catches ---------------------------------------------------------


def test_damaged_wal_after_a_crash_is_named_then_moved_aside(root: Path) -> None:
    crash = subprocess.run(child_cmd("crash", root, 48), capture_output=True, text=True)
    assert crash.returncode == -signal.SIGKILL, crash.stderr
    assert crash.stdout == "done\n"
    recorded = read_head(head_path(root))
    assert recorded is not None and recorded.seq == 48
    _flip_wal_byte(root, 1 / 3)
    damaged = Path(f"{journal_path(root)}-wal").read_bytes()

    verify = keel_verify(root)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert "head.events_lost" in verify.stdout
    found = re.search(
        r"recorded head is seq 48 \(hash hmac-sha256:\w+…\), but the database ends at seq "
        r"(\d+): (\d+) events lost",
        verify.stdout,
    )
    assert found is not None, verify.stdout
    kept, lost = int(found[1]), int(found[2])
    assert kept + lost == 48 and lost > 0
    health = journal_health(root)
    assert not health.ok and health.breaks == ()
    assert health.problem is not None and f"{lost} events lost" in health.problem
    assert Path(f"{journal_path(root)}-wal").exists()  # looking moved nothing

    with open_journal(root) as journal:
        _, data = _break(journal)
        assert (data["reason"], data["lost"]) == ("events_lost", lost)
        assert data["recorded"] == recorded.to_dict()
        moved = Path(data["moved_to"])
        assert moved.parent == journal_path(root).parent
        assert moved.name.startswith("journal.broken-") and moved.name.endswith("Z.db")
        assert Path(f"{moved}-wal").read_bytes() == damaged  # kept as it was, for forensics
        assert journal.append(session_events()[0]).seq == 2  # decisions are journaled again
        assert _problems(journal) == [(1, "journal.break")]
    with SQLiteJournal(moved, readonly=True, workspace=moved) as old:
        assert [e.payload.data["i"] for e in old.events()] == list(range(kept))  # type: ignore[union-attr]

    again = keel_verify(root)
    assert again.returncode == 1
    assert "seq 1: journal.break" in again.stdout and str(moved) in again.stdout
    health = journal_health(root)
    assert (health.ok, health.events, health.problem) == (False, 2, None)
    assert [(b.reason, b.lost, b.moved_to) for b in health.breaks] == [
        ("events_lost", lost, str(moved))
    ]
    head = read_head(head_path(root))  # the head record follows the new chain
    assert head is not None and head.seq == 2 and head.journal_id != recorded.journal_id


def test_truncated_to_zero_bytes_is_detected_and_recovered(root: Path) -> None:
    fill(root)
    journal_path(root).write_bytes(b"")
    verify = keel_verify(root)
    assert verify.returncode == 1
    assert "but the database ends at seq 0: 10 events lost" in verify.stdout
    assert journal_path(root).stat().st_size == 0
    with open_journal(root) as journal:
        _, data = _break(journal)
        assert (data["reason"], data["lost"], data["recorded"]["seq"]) == ("events_lost", 10, 10)
        assert journal.append(session_events()[0]).seq == 2
        assert _problems(journal) == [(1, "journal.break")]


def test_deleted_database_is_detected_and_recovered(root: Path) -> None:
    fill(root)
    journal_path(root).unlink()
    verify = keel_verify(root)
    assert verify.returncode == 1
    assert "is missing, but its recorded head is seq 10" in verify.stdout
    assert "10 events lost" in verify.stdout
    assert not journal_path(root).exists()
    assert not journal_health(root).ok
    with open_journal(root) as journal:
        _, data = _break(journal)
        assert (data["lost"], data["moved_to"]) == (10, None)


def test_older_copy_is_detected_and_recovered(root: Path, tmp_path: Path) -> None:
    fill(root, 5)
    backup = tmp_path / "backup.db"
    shutil.copy(journal_path(root), backup)
    with open_journal(root) as journal:
        for event in session_events()[5:10]:
            journal.append(event)
    shutil.copy(backup, journal_path(root))
    verify = keel_verify(root)
    assert verify.returncode == 1
    assert "recorded head is seq 10" in verify.stdout
    assert "database ends at seq 5: 5 events lost" in verify.stdout
    with open_journal(root) as journal:
        _, data = _break(journal)
        assert (data["reason"], data["lost"]) == ("events_lost", 5)
        assert Path(data["moved_to"]).read_bytes() == backup.read_bytes()


def test_another_journal_copied_over_is_a_replaced_journal(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    fill(other, 12)
    fill(root, 10)
    shutil.copy(journal_path(other), journal_path(root))
    verify = keel_verify(root)
    assert verify.returncode == 1
    assert "head.replaced" in verify.stdout and "journal was replaced" in verify.stdout
    with open_journal(root) as journal:
        _, data = _break(journal)
        assert (data["reason"], data["lost"]) == ("replaced", 10)


def test_a_rewritten_copy_with_the_same_id_is_a_replaced_journal(root: Path) -> None:
    fill(root, 10)
    db = sqlite3.connect(journal_path(root))
    with db:
        db.execute("UPDATE events SET hash = 'hmac-sha256:' || hex(randomblob(32)) WHERE seq = 10")
    db.close()
    with open_journal(root) as journal:
        _, data = _break(journal)
        assert data["reason"] == "replaced" and "different copy" in data["message"]


def test_unreadable_database_is_moved_aside(root: Path) -> None:
    fill(root)
    garbage = os.urandom(8192)
    journal_path(root).write_bytes(garbage)
    verify = keel_verify(root)
    assert verify.returncode == 1
    assert "[journal.corrupt]" in verify.stderr and "recorded head is seq 10" in verify.stderr
    with open_journal(root) as journal:
        _, data = _break(journal)
        assert (data["reason"], data["lost"]) == ("unreadable", 10)
        assert Path(data["moved_to"]).read_bytes() == garbage


# -- recovery under concurrency ----------------------------------------------------------------


def test_concurrent_openers_move_a_broken_journal_aside_once(root: Path, tmp_path: Path) -> None:
    journal_path(root).parent.mkdir()
    journal_path(root).write_bytes(b"not a database" * 500)
    gate = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [*writer_cmd(root, f"p{n}", 5), str(gate)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    for proc in procs:  # all open (and find the journal broken) at once
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.communicate()[1]
    gate.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert len(list(journal_path(root).parent.glob("journal.broken-*.db"))) == 1
    with open_journal(root) as journal:
        events = list(journal.events())
        assert [e.seq for e in events if e.kind == BREAK_KIND] == [1]
        assert len(events) == 1 + 6 * 5
        assert _problems(journal) == [(1, "journal.break")]


def test_an_open_handle_follows_the_journal_to_its_new_chain(root: Path) -> None:
    fill(root, 3)
    with open_journal(root) as stale:
        bogus = RecordedHead("0" * 32, 3, "hmac-sha256:00")  # as if the file had been swapped
        write_head(head_path(root), bogus, journal_path(root))
        with open_journal(root) as fresh:
            assert [e.kind for e in fresh.events()] == [BREAK_KIND]
        assert stale.append(session_events()[5]).seq == 2
    with open_journal(root) as journal:
        assert [e.seq for e in journal.events()] == [1, 2]
        assert _problems(journal) == [(1, "journal.break")]


def test_a_late_head_from_the_old_chain_does_not_break_the_new_one(root: Path) -> None:
    fill(root, 3)
    old = read_head(head_path(root))
    assert old is not None
    journal_path(root).write_bytes(b"")
    with open_journal(root) as journal:
        _break(journal)
        new = read_head(head_path(root))
    # A writer of the old chain recording its head after the recovery:
    write_head(head_path(root), old, journal_path(root))
    with open_journal(root) as journal:
        assert [e.kind for e in journal.events()] == [BREAK_KIND]
        assert _problems(journal) == [(1, "journal.break")]
    assert read_head(head_path(root)) == new


def test_health_is_read_only(root: Path) -> None:
    assert journal_health(root) == JournalHealth(True, 0)
    assert not (root / ".keel").exists()
    fill(root, 4)
    assert journal_health(root) == JournalHealth(True, 4)
    journal_path(root).write_bytes(b"")
    health = journal_health(root)
    assert not health.ok and health.problem is not None and "4 events lost" in health.problem
    assert journal_path(root).stat().st_size == 0
    assert list(journal_path(root).parent.glob("*.broken-*")) == []
    assert health.to_dict()["breaks"] == []
