"""Whole-workspace views of the journal: health, verify, and acknowledging what verify showed.

:func:`journal_health` and :func:`verify_journal` only read: no database is created, written,
migrated or recovered (SQLite may add the empty ``-wal``/``-shm`` files a reader needs), so
``keel status`` and ``keel verify`` can look at a broken journal and leave it, and its damaged
WAL, as evidence.
:func:`acknowledge_journal` (``keel verify --acknowledge``) writes one event: the user's word
that they have seen the incidents a verify just showed them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import JournalError
from keel.journal._base import Problem
from keel.journal._breaks import JournalBreak, JournalHealth
from keel.journal._head import (
    RecordedHead,
    head_path,
    n_events,
    read_head,
    unreadable,
    workspace_id,
)
from keel.journal._open import journal_target, open_journal, read_journal
from keel.journal._sqlite import SQLiteJournal, journal_path


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``keel verify`` found: every problem, the events, every recorded incident."""

    problems: tuple[Problem, ...]
    events: int
    incidents: tuple[JournalBreak, ...] = ()
    """Every recorded incident, acknowledged or not (the unacknowledged are also problems)."""

    @property
    def ok(self) -> bool:
        """True when there is nothing to report (acknowledged incidents aside)."""
        return not self.problems

    @property
    def acknowledged(self) -> tuple[JournalBreak, ...]:
        """The incidents the user acknowledged: listed, no longer failing."""
        return tuple(i for i in self.incidents if i.acknowledged is not None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "ok": self.ok,
            "events": self.events,
            "problems": [p.to_dict() for p in self.problems],
            "acknowledged": [_acknowledged(i) for i in self.acknowledged],
        }


def _acknowledged(incident: JournalBreak) -> dict[str, Any]:
    ack = incident.acknowledged
    return {
        "seq": incident.seq,
        "code": incident.code,
        "message": incident.describe(),
        "acknowledged": ack.to_dict() if ack is not None else None,
    }


def _recorded(root: Path) -> RecordedHead | None:
    return read_head(head_path(root), workspace_id(root))


def _missing(path: Path, recorded: RecordedHead | None) -> Problem | None:
    """What a missing database means given the recorded head; None when nothing was lost."""
    if recorded is None or recorded.seq == 0:
        return None
    return Problem(
        recorded.seq,
        "head.events_lost",
        f"the journal database {path} is missing, but its recorded head is "
        f"{recorded.describe()}: {n_events(recorded.seq)} lost",
    )


def journal_health(root: Path) -> JournalHealth:
    """The journal of ``root`` at a glance, for ``keel status``: cheap and read-only.

    Reads the recorded head, the database's last row and its break events; never walks the
    chain (``keel verify`` does). A journal that cannot be read is reported, not raised.
    """
    if journal_target(root) is not None:
        try:
            with read_journal(root) as journal:
                return journal.health()
        except JournalError as exc:
            return JournalHealth(False, 0, (), f"the journal cannot be read: {exc.message}")
    path = journal_path(root)
    if not path.exists():
        missing = _missing(path, _recorded(root))
        return JournalHealth(missing is None, 0, (), missing.message if missing else None)
    try:
        with SQLiteJournal(
            path, workspace=root, readonly=True, busy_timeout=1.0, retry_for=1.0
        ) as journal:
            return journal.health()
    except JournalError as exc:
        return JournalHealth(False, 0, (), f"the journal cannot be read: {exc.message}")


def verify_journal(root: Path) -> VerifyReport:
    """Check ``root``'s journal: chain, recorded head, file integrity and incidents.

    The keyed chain, the head recorded outside the database, SQLite's integrity check of the
    file, and the recorded incidents (breaks, unrecorded heads), acknowledged or not.

    Raises:
        JournalError: the database cannot be read at all (``journal.corrupt``: the message
            says what its recorded head was), or cannot be opened (a PostgreSQL database
            that cannot be reached: ``journal.unreachable``).
    """
    if journal_target(root) is not None:
        with read_journal(root) as journal:
            problems, found = journal.check()
            events = sum(s.events for s in journal.sessions())
        return VerifyReport(tuple(problems), events, tuple(found))
    return verify_sqlite_journal(root)


def verify_sqlite_journal(root: Path) -> VerifyReport:
    """:func:`verify_journal` of ``root``'s ``.keel/journal.db``, whatever keel.toml names."""
    path = journal_path(root)
    if not path.exists():
        missing = _missing(path, _recorded(root))
        return VerifyReport((missing,) if missing else (), 0)
    try:
        journal = SQLiteJournal(path, workspace=root, readonly=True)
    except JournalError as exc:
        if exc.code != "journal.corrupt":
            raise
        finding = unreadable(_recorded(root), str(exc.__cause__ or exc))
        raise JournalError(
            f"{finding.message} ({path}); the next keel decision moves it aside",
            code=exc.code,
            path=str(path),
        ) from exc
    with journal:
        problems, found = journal.check()
        events = sum(s.events for s in journal.sessions())
    return VerifyReport(tuple(problems), events, tuple(found))


def acknowledge_journal(
    root: Path, seen: VerifyReport, reason: str | None, by: str
) -> list[JournalBreak]:
    """Record that ``by`` has seen the incidents ``seen`` shows; the ones acknowledged now.

    ``seen`` is a report of :func:`verify_journal` that was shown to the user; each of its
    unacknowledged incidents still in the journal (same ``seq`` and hash) is acknowledged.

    Opens the journal for writing, which may recover a broken one first: its new break was
    not in ``seen`` and stays unacknowledged.

    Raises:
        JournalError: the journal cannot be opened or written.
    """
    pending = [i for i in seen.incidents if i.acknowledged is None]
    if not pending:
        return []
    with open_journal(root) as journal:
        return journal.acknowledge(pending, reason, by)
