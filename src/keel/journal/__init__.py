"""The journal: an append-only record of every event, HMAC-chained, in SQLite.

``open_journal(root)`` opens ``<root>/.keel/journal.db``; ``append_many`` stores events (with
the request id and session state that go with them) in one transaction and returns them with
their global ``seq``; ``verify`` walks the keyed chain and names every broken, missing or
unkeyed link, a head that disagrees with the one recorded outside the database, and every
recorded break. A journal found unreadable, short of its recorded head or replaced is moved
aside on open and a new chain starts with a ``journal.break`` event: decisions go on, and
``journal_health`` / ``verify_journal`` keep saying what happened. ``Journal`` is the storage
seam (a ``typing.Protocol``): ``SQLiteJournal`` implements it for real, ``MemoryJournal`` is
the in-process test double. Exporters (``keel.journal.export``) and the timeline
(``keel.journal.timeline``) are imported on demand.

This package is on the hook path: standard library only.
"""

from keel.journal._base import (
    BREAK_KIND,
    BREAK_SESSION,
    HASH_ALGORITHM,
    HASH_PREFIX,
    Chain,
    Journal,
    Problem,
    ProblemCode,
    Row,
    SessionSummary,
    chain_hash,
    verify_rows,
)
from keel.journal._breaks import JournalBreak, JournalHealth
from keel.journal._head import RecordedHead, head_path, read_head
from keel.journal._health import VerifyReport, journal_health, verify_journal
from keel.journal._key import journal_key, key_path, read_key
from keel.journal._memory import MemoryJournal
from keel.journal._sqlite import (
    JOURNAL_FILE,
    REQUEST_TTL,
    SQLiteJournal,
    journal_path,
    open_journal,
    read_journal,
)

__all__ = [
    "BREAK_KIND",
    "BREAK_SESSION",
    "HASH_ALGORITHM",
    "HASH_PREFIX",
    "JOURNAL_FILE",
    "REQUEST_TTL",
    "Chain",
    "Journal",
    "JournalBreak",
    "JournalHealth",
    "MemoryJournal",
    "Problem",
    "ProblemCode",
    "RecordedHead",
    "Row",
    "SQLiteJournal",
    "SessionSummary",
    "VerifyReport",
    "chain_hash",
    "head_path",
    "journal_health",
    "journal_key",
    "journal_path",
    "key_path",
    "open_journal",
    "read_head",
    "read_journal",
    "read_key",
    "verify_journal",
    "verify_rows",
]
