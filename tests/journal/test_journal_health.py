"""The journal's health and verify views, called in process.

A deleted, unreadable or unopenable database and damage across sessions, as ``verify_journal``
and ``journal_health`` report them (``test_journal_integrity.py`` checks the same through the
``keel verify``/``keel status`` commands).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from journal_helpers import fill, tamper

from keel.core.errors import JournalError
from keel.journal import journal_health, journal_path
from keel.journal._head import head_path, read_head
from keel.journal._health import verify_journal


def _delete_database(root: Path) -> None:
    db = journal_path(root)
    for path in db.parent.glob(db.name + "*"):
        path.unlink()


@pytest.mark.parametrize("count", [1, 4])
def test_a_deleted_database_reports_the_events_its_head_recorded(root: Path, count: int) -> None:
    fill(root, count)
    head = read_head(head_path(root))
    assert head is not None and head.seq == count
    _delete_database(root)
    lost = "1 event" if count == 1 else f"{count} events"
    message = (
        f"the journal database {journal_path(root)} is missing, but its recorded head is "
        f"{head.describe()}: {lost} lost"
    )
    report = verify_journal(root)
    assert not report.ok and report.events == 0
    assert [(p.seq, p.code, p.message) for p in report.problems] == [
        (count, "head.events_lost", message)
    ]
    assert report.to_dict() == {
        "ok": False,
        "events": 0,
        "problems": [{"seq": count, "code": "head.events_lost", "message": message}],
        "acknowledged": [],
    }
    health = journal_health(root)
    assert (health.ok, health.events, health.breaks, health.problem) == (False, 0, (), message)


def test_no_database_and_no_head_is_healthy_and_empty(root: Path) -> None:
    assert verify_journal(root).to_dict() == {
        "ok": True,
        "events": 0,
        "problems": [],
        "acknowledged": [],
    }
    health = journal_health(root)
    assert (health.ok, health.events, health.breaks, health.problem) == (True, 0, (), None)


def test_verify_reads_an_intact_journal_without_changing_it(root: Path) -> None:
    fill(root, 6)
    db = journal_path(root)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    report = verify_journal(root)
    assert report.to_dict() == {"ok": True, "events": 6, "problems": [], "acknowledged": []}
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert journal_health(root).ok


def _replace_database(root: Path, data: bytes) -> Path:
    db = journal_path(root)
    _delete_database(root)
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(data)
    return db


def test_an_unreadable_database_names_its_recorded_head_and_what_happens_next(root: Path) -> None:
    fill(root, 3)
    head = read_head(head_path(root))
    assert head is not None
    db = _replace_database(root, b"garbage" * 1000)
    with pytest.raises(JournalError) as info:
        verify_journal(root)
    assert (info.value.code, info.value.context) == ("journal.corrupt", {"path": str(db)})
    assert info.value.message == (
        f"the journal database is unreadable (file is not a database); its recorded head is "
        f"{head.describe()}: 3 events cannot be read ({db}); the next keel decision moves it aside"
    )
    health = journal_health(root)
    assert (health.ok, health.events, health.breaks) == (False, 0, ())
    assert health.problem == (
        f"the journal cannot be read: journal open failed ({db}): file is not a database"
    )
    assert db.read_bytes() == b"garbage" * 1000  # looking moved nothing


def test_an_unreadable_database_without_a_head_says_only_that(root: Path) -> None:
    db = _replace_database(root, b"garbage" * 1000)
    with pytest.raises(JournalError) as info:
        verify_journal(root)
    assert info.value.message == (
        f"the journal database is unreadable (file is not a database) ({db}); "
        "the next keel decision moves it aside"
    )


def test_a_database_that_cannot_be_opened_is_raised_as_it_is(root: Path) -> None:
    db = journal_path(root)
    db.mkdir(parents=True)
    with pytest.raises(JournalError) as info:
        verify_journal(root)
    assert info.value.code == "journal.sqlite"
    assert info.value.message.startswith(f"journal open failed ({db}): ")
    assert journal_health(root).problem == f"the journal cannot be read: {info.value.message}"


def test_verify_counts_the_events_of_every_session_and_reports_damage(root: Path) -> None:
    fill(root, 10)  # two sessions
    assert verify_journal(root).to_dict() == {
        "ok": True,
        "events": 10,
        "problems": [],
        "acknowledged": [],
    }
    health = journal_health(root)
    assert (health.ok, health.events, health.problem) == (True, 10, None)
    tamper(root, "UPDATE events SET agent = 'mallory' WHERE seq = 4")
    report = verify_journal(root)
    assert not report.ok and report.events == 10
    assert [p.to_dict() for p in report.problems] == [
        {"seq": 4, "code": "chain.hash_mismatch", "message": "row 4 does not match its hash"}
    ]
