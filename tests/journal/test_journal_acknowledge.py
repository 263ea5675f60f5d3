"""``keel verify --acknowledge``: the user's word, journaled and keyed, that they saw a break.

After it verify exits 0 and still lists the break; a later break fails again; an
acknowledgement covers only what the user was shown, and one forged without the key covers
nothing.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from journal_helpers import fill, keel_verify, session_events

from keel.core.stop import current_user
from keel.journal import (
    ACK_KIND,
    BREAK_KIND,
    acknowledge_journal,
    journal_health,
    journal_path,
    open_journal,
    verify_journal,
)


def _broken(root: Path) -> None:
    """A journal truncated to nothing, then opened by a writer: a break at seq 1."""
    journal_path(root).write_bytes(b"")
    with open_journal(root) as journal:
        journal.append(session_events()[0])
        assert next(journal.events()).kind == BREAK_KIND


def test_an_acknowledged_break_is_listed_and_no_longer_fails(root: Path) -> None:
    fill(root)
    _broken(root)
    before = keel_verify(root)
    assert before.returncode == 1 and "seq 1: journal.break: " in before.stdout
    assert "keel verify --acknowledge" in before.stderr  # the way out is named

    done = keel_verify(root, "--acknowledge", "--reason", "restored from backup")
    assert done.returncode == 0, done.stdout + done.stderr
    who = current_user()
    assert "seq 1: journal.break (acknowledged): the journal broke at " in done.stdout
    assert f"(acknowledged by {who} at " in done.stdout and ": restored from backup)" in done.stdout
    # three events: the break, the call, the acknowledgement
    assert "journal intact: 3 events" in done.stdout and "1 acknowledged incident" in done.stdout
    assert "acknowledged: seq 1 (journal.break)" in done.stderr

    after = keel_verify(root, "--json")
    assert after.returncode == 0, after.stdout
    report = json.loads(after.stdout)
    assert (report["ok"], report["problems"]) == (True, [])
    [listed] = report["acknowledged"]
    assert (listed["seq"], listed["code"]) == (1, "journal.break")
    assert listed["acknowledged"]["by"] == who
    assert listed["acknowledged"]["reason"] == "restored from backup"
    health = journal_health(root)
    assert health.ok and [b.acknowledged is not None for b in health.breaks] == [True]

    with open_journal(root) as journal:  # the acknowledgement is an event of the keyed chain
        [ack] = list(journal.events(kinds=[ACK_KIND]))
    data = ack.payload.data  # type: ignore[union-attr]
    assert (ack.session_id, data["by"]) == ("keel.journal", who)
    assert data["reason"] == "restored from backup"
    assert [i["seq"] for i in data["incidents"]] == [1]

    again = keel_verify(root, "--acknowledge")  # nothing left: says so, changes nothing
    assert again.returncode == 0 and "nothing to acknowledge" in again.stderr


def test_a_break_after_the_acknowledgement_fails_again(root: Path) -> None:
    fill(root)
    _broken(root)
    assert keel_verify(root, "--acknowledge").returncode == 0
    _broken(root)
    result = keel_verify(root)
    assert result.returncode == 1, result.stdout
    assert "seq 1: journal.break: " in result.stdout and "(acknowledged" not in result.stdout


def test_an_acknowledgement_covers_only_the_break_that_was_shown(root: Path) -> None:
    fill(root)
    _broken(root)
    shown = verify_journal(root)
    _broken(root)  # broken again (a new chain, a new break at seq 1) after the user looked
    assert acknowledge_journal(root, shown, "seen", "alice") == []
    report = verify_journal(root)
    assert [(p.seq, p.code) for p in report.problems] == [(1, "journal.break")]
    # shown the new one, the user can acknowledge it
    assert [i.seq for i in acknowledge_journal(root, report, "seen", "alice")] == [1]
    assert verify_journal(root).ok


def test_an_acknowledgement_forged_without_the_key_counts_for_nothing(root: Path) -> None:
    fill(root)
    _broken(root)
    with open_journal(root) as journal:
        [incident] = journal.health().breaks
        journal.acknowledge([incident], "real", "alice")
        [ack] = list(journal.events(kinds=[ACK_KIND]))
    db = sqlite3.connect(journal_path(root))
    with db:  # someone without the key rewrites the acknowledgement's payload
        db.execute(
            "UPDATE events SET payload = json_set(payload, '$.data.by', 'mallory') WHERE seq = ?",
            (ack.seq,),
        )
    db.close()
    report = verify_journal(root)
    codes = [(p.seq, p.code) for p in report.problems]
    assert (ack.seq, "chain.hash_mismatch") in codes and (1, "journal.break") in codes
    assert report.acknowledged == ()
    assert not journal_health(root).ok


def test_reason_without_acknowledge_is_a_usage_error(root: Path) -> None:
    fill(root, 2)
    result = keel_verify(root, "--reason", "why")
    assert result.returncode != 0 and "[usage.reason]" in result.stderr
