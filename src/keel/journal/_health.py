"""Whole-workspace views of the journal: :func:`journal_health` and :func:`verify_journal`.

Both only read: no database is created, written, migrated or recovered (SQLite may add the
empty ``-wal``/``-shm`` files a reader needs), so ``keel status`` and ``keel verify`` can look
at a broken journal and leave it, and its damaged WAL, as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import JournalError
from keel.journal._base import Problem
from keel.journal._breaks import JournalHealth
from keel.journal._head import RecordedHead, head_path, n_events, read_head, unreadable
from keel.journal._sqlite import SQLiteJournal, journal_path


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``keel verify`` found: every problem, and how many events the journal holds."""

    problems: tuple[Problem, ...]
    events: int

    @property
    def ok(self) -> bool:
        """True when there is nothing to report."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "ok": self.ok,
            "events": self.events,
            "problems": [p.to_dict() for p in self.problems],
        }


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
    path = journal_path(root)
    if not path.exists():
        missing = _missing(path, read_head(head_path(root)))
        return JournalHealth(missing is None, 0, (), missing.message if missing else None)
    try:
        with SQLiteJournal(
            path, workspace=root, readonly=True, busy_timeout=1.0, retry_for=1.0
        ) as journal:
            return journal.health()
    except JournalError as exc:
        return JournalHealth(False, 0, (), f"the journal cannot be read: {exc.message}")


def verify_journal(root: Path) -> VerifyReport:
    """Check ``root``'s journal: its keyed chain, its recorded head and its recorded breaks.

    Raises:
        JournalError: the database cannot be read at all (``journal.corrupt``: the message
            says what its recorded head was), or cannot be opened.
    """
    path = journal_path(root)
    if not path.exists():
        missing = _missing(path, read_head(head_path(root)))
        return VerifyReport((missing,) if missing else (), 0)
    try:
        journal = SQLiteJournal(path, workspace=root, readonly=True)
    except JournalError as exc:
        if exc.code != "journal.corrupt":
            raise
        finding = unreadable(read_head(head_path(root)), str(exc.__cause__ or exc))
        raise JournalError(
            f"{finding.message} ({path}); the next keel decision moves it aside",
            code=exc.code,
            path=str(path),
        ) from exc
    with journal:
        problems = journal.verify()
        events = sum(s.events for s in journal.sessions())
    return VerifyReport(tuple(problems), events)
