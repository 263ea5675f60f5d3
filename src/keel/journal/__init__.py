"""The journal: an append-only, hash-chained record of every event, in SQLite.

``open_journal(root)`` opens ``<root>/.keel/journal.db``; ``append`` stores one event per
transaction and returns it with its global ``seq``; ``verify`` walks the chain and names every
broken or missing link. ``Journal`` is the storage seam (a ``typing.Protocol``):
``SQLiteJournal`` implements it for real, ``MemoryJournal`` is the in-process test double.
Exporters (``keel.journal.export``) and the timeline (``keel.journal.timeline``) are imported
on demand.

This package is on the hook path: standard library only.
"""

from keel.journal._base import (
    HASH_ALGORITHM,
    HASH_PREFIX,
    Journal,
    Problem,
    ProblemCode,
    Row,
    SessionSummary,
    chain_hash,
    verify_rows,
)
from keel.journal._memory import MemoryJournal
from keel.journal._sqlite import JOURNAL_FILE, SQLiteJournal, journal_path, open_journal

__all__ = [
    "HASH_ALGORITHM",
    "HASH_PREFIX",
    "JOURNAL_FILE",
    "Journal",
    "MemoryJournal",
    "Problem",
    "ProblemCode",
    "Row",
    "SQLiteJournal",
    "SessionSummary",
    "chain_hash",
    "journal_path",
    "open_journal",
    "verify_rows",
]
