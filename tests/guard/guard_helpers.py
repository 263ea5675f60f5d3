"""Helpers shared by the guard tests: a guard over a real journal, its events, broken parts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from keel.core.events import Event
from keel.guard import Guard
from keel.journal import open_journal

SESSION = "s-guard"  # the session every guard test opens
RETRY = "Retry; if it persists, run `keel status` and check keel.toml and .keel/."


def open_guard(root: Path, **kw: Any) -> Guard:
    kw.setdefault("monitor", False)
    kw.setdefault("checkpoints", False)
    kw.setdefault("agent", "tester")
    return Guard.open(root, session_id=SESSION, **kw)


def events_of(root: Path, session: str = SESSION) -> list[Event]:
    with open_journal(root) as journal:
        return list(journal.events(session_id=session))


class BrokenJournal:
    """A journal whose every write fails (a full disk)."""

    def append_many(self, events: object, **_: object) -> object:
        raise OSError("disk full")

    def answered(self, request_id: str) -> None:
        return None

    def close(self) -> None:
        pass


class Forgetful:
    """The real journal, except that it cannot tell whether a request was answered."""

    def __init__(self, journal: Any) -> None:
        self._journal = journal

    def answered(self, request_id: str) -> None:
        raise OSError("cannot read")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)
