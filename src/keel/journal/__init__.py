"""The journal: an append-only record of every event, HMAC-chained, in SQLite.

``open_journal(root)`` opens ``<root>/.keel/journal.db``; ``append_many`` stores events (with
the request id and session state that go with them) in one transaction and returns them with
their global ``seq``; ``verify`` walks the keyed chain and names every broken, missing or
unkeyed link, a head that disagrees with (or is missing from) the record outside the database,
damage SQLite's integrity check finds, and every recorded incident. A journal found
unreadable, short of its recorded head or replaced is moved aside on open and a new chain
starts with a ``journal.break`` event; a head that could not be recorded is a
``journal.head_unrecorded`` event: decisions go on, and ``journal_health`` / ``verify_journal``
keep saying what happened until the user acknowledges it (``acknowledge_journal``).
``Journal`` is the storage seam (a ``typing.Protocol``): ``SQLiteJournal`` implements it for
real, ``PostgresJournal`` (``keel.journal._postgres``, when ``[journal] url`` names a database a
team shares: one chain per workspace, imported only then) too, ``MemoryJournal`` is the
in-process test double; ``open_journal`` picks the backend from keel.toml, and
``migrate_journal`` copies a SQLite journal, chain and all, into PostgreSQL. Exporters
(``keel.journal.export``) and the timeline (``keel.journal.timeline``) are imported on demand.

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
from keel.journal._breaks import ACK_KIND, HEAD_KIND, Acknowledgement, JournalBreak, JournalHealth
from keel.journal._head import RecordedHead, head_path, read_head
from keel.journal._health import (
    VerifyReport,
    acknowledge_journal,
    journal_health,
    verify_journal,
)
from keel.journal._key import journal_key, key_path, read_key
from keel.journal._memory import MemoryJournal
from keel.journal._migrate import MigrateReport, migrate_journal
from keel.journal._open import (
    has_journal,
    journal_location,
    journal_stamp,
    journal_target,
    open_journal,
    read_journal,
)
from keel.journal._sqlite import JOURNAL_FILE, REQUEST_TTL, SQLiteJournal, journal_path

__all__ = [
    "ACK_KIND",
    "BREAK_KIND",
    "BREAK_SESSION",
    "HASH_ALGORITHM",
    "HASH_PREFIX",
    "HEAD_KIND",
    "JOURNAL_FILE",
    "REQUEST_TTL",
    "Acknowledgement",
    "Chain",
    "Journal",
    "JournalBreak",
    "JournalHealth",
    "MemoryJournal",
    "MigrateReport",
    "Problem",
    "ProblemCode",
    "RecordedHead",
    "Row",
    "SQLiteJournal",
    "SessionSummary",
    "VerifyReport",
    "acknowledge_journal",
    "chain_hash",
    "has_journal",
    "head_path",
    "journal_health",
    "journal_key",
    "journal_location",
    "journal_path",
    "journal_stamp",
    "journal_target",
    "key_path",
    "migrate_journal",
    "open_journal",
    "read_head",
    "read_journal",
    "read_key",
    "verify_journal",
    "verify_rows",
]
