"""Mutation-testing survivors of the journal's health and verify views (issue 14, MUTATION.md).

A deleted database was only checked through ``keel verify``/``keel status`` subprocesses,
which mutmut cannot map to the functions they reach; these call the functions directly.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from journal_helpers import fill

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
    }
    health = journal_health(root)
    assert not health.ok and health.problem == message


def test_no_database_and_no_head_is_healthy_and_empty(root: Path) -> None:
    assert verify_journal(root).to_dict() == {"ok": True, "events": 0, "problems": []}
    health = journal_health(root)
    assert health.ok and health.problem is None


def test_verify_reads_an_intact_journal_without_changing_it(root: Path) -> None:
    fill(root, 6)
    db = journal_path(root)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    report = verify_journal(root)
    assert report.to_dict() == {"ok": True, "events": 6, "problems": []}
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert journal_health(root).ok
