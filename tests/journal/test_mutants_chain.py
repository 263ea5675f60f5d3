"""Mutation-testing survivors of the chain walk (issue 14, tests/MUTATION.md).

What ``verify`` says about unkeyed rows (a journal from before the keyed chain, or a forger
who recomputed plain SHA-256) was only checked by its code, not by the rows and tag it names.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from journal_helpers import session_events

from keel.core.events import canonical_json
from keel.journal import MemoryJournal, verify_rows


def _rechain(journal: MemoryJournal, seqs: range, tag: str | None) -> None:
    """Recompute rows ``seqs`` (1-based) with plain SHA-256, tagged ``tag:`` (or untagged)."""
    prev = journal.rows[seqs[0] - 2].hash if seqs[0] > 1 else ""
    for i in range(seqs[0] - 1, seqs[-1]):
        row = replace(journal.rows[i], prev_hash=prev)
        digest = hashlib.sha256((prev + canonical_json(row.event_dict())).encode()).hexdigest()
        prev = f"{tag}:{digest}" if tag else digest
        journal.rows[i] = replace(row, hash=prev)


def _journal(n: int) -> MemoryJournal:
    journal = MemoryJournal()
    for event in session_events()[:n]:
        journal.append(event)
    return journal


def test_one_unkeyed_row_is_named_with_its_tag() -> None:
    journal = _journal(4)
    _rechain(journal, range(4, 5), "sha256")
    [problem] = verify_rows(journal.rows, journal.chain)
    assert (problem.seq, problem.code) == (4, "chain.unkeyed")
    assert problem.message == (
        "row 4 is not keyed (sha256 hash): anyone able to edit the database could have computed it"
    )


def test_an_untagged_hash_is_called_untagged() -> None:
    journal = _journal(4)
    _rechain(journal, range(4, 5), None)
    [problem] = verify_rows(journal.rows, journal.chain)
    assert problem.code == "chain.unkeyed" and "(untagged hash)" in problem.message


def test_the_tag_is_what_comes_before_the_first_colon() -> None:
    journal = _journal(4)
    _rechain(journal, range(3, 5), "md5:v2")
    [problem] = verify_rows(journal.rows, journal.chain)
    assert problem.message == (
        "rows 3..4 are not keyed (md5 hashes): "
        "anyone able to edit the database could have computed them"
    )


def test_two_separate_unkeyed_runs_are_two_problems() -> None:
    journal = _journal(7)
    _rechain(journal, range(2, 4), "sha256")
    prev = journal.rows[2].hash
    for i in (3, 4):  # rows 4 and 5 keyed again, on top of the unkeyed run
        row = replace(journal.rows[i], prev_hash=prev)
        prev = journal.chain.hash_event(prev, row.event_dict())
        journal.rows[i] = replace(row, hash=prev)
    _rechain(journal, range(6, 8), "sha256")
    problems = verify_rows(journal.rows, journal.chain)
    assert [(p.seq, p.code) for p in problems] == [(2, "chain.unkeyed"), (6, "chain.unkeyed")]
    assert problems[0].message.startswith("rows 2..3 are not keyed (sha256 hashes)")
    assert problems[1].message.startswith("rows 6..7 are not keyed (sha256 hashes)")
