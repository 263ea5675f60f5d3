"""Breaks: a journal found damaged, lost or replaced is moved aside and a new chain begins.

The new chain's first event is a ``journal.break`` (session ``keel.journal``) saying what was
wrong, the head recorded for the old chain, how many events are known lost and where the old
files went. Breaks are facts the user must see: ``keel verify`` reports every one, and
:class:`JournalHealth` lists them for ``keel status``.

Opening holds a shared ``flock`` on ``.keel/journal.lock`` from connect to the first read, and
recovery holds it exclusively, so no opener is half way into the files while they are renamed
and two openers never both move a journal aside. Appends never take it.

Standard library only: recovery runs on the hook path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from keel.core.errors import JournalError
from keel.core.events import DataPayload, Event
from keel.journal._base import BREAK_KIND, BREAK_SESSION, Row
from keel.journal._head import Finding

LOCK_FILE = "journal.lock"
_SIDE_FILES = ("-wal", "-shm", "")  # the WAL first: a database without its WAL only looks older


@dataclass(frozen=True, slots=True)
class JournalBreak:
    """One recorded break: when, why, how many events were lost, where the old journal went."""

    seq: int
    ts: float
    reason: str
    message: str
    lost: int | None
    """Events known lost; None when unknown."""
    moved_to: str | None
    """The old database's new path; None when there was no file worth keeping."""

    def describe(self) -> str:
        """One line for ``keel verify`` and ``keel status``."""
        when = datetime.fromtimestamp(self.ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        text = f"the journal broke at {when}: {self.message}"
        if self.moved_to:
            text += f"; the old journal is at {self.moved_to}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "seq": self.seq,
            "ts": self.ts,
            "reason": self.reason,
            "message": self.message,
            "lost": self.lost,
            "moved_to": self.moved_to,
        }


@dataclass(frozen=True, slots=True)
class JournalHealth:
    """What ``keel status`` says about the journal; cheap to get and read-only."""

    ok: bool
    """No recorded break and nothing wrong with the database's head."""
    events: int
    breaks: tuple[JournalBreak, ...] = ()
    problem: str | None = None
    """What is wrong right now (found, not yet recovered), if anything."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "ok": self.ok,
            "events": self.events,
            "breaks": [b.to_dict() for b in self.breaks],
            "problem": self.problem,
        }


def break_event(finding: Finding, moved_to: Path | None) -> Event:
    """The event that opens a new chain after ``finding``."""
    recorded = finding.recorded.to_dict() if finding.recorded is not None else None
    return Event(
        BREAK_KIND,
        BREAK_SESSION,
        DataPayload(
            {
                "reason": finding.reason,
                "message": finding.message,
                "lost": finding.lost,
                "recorded": recorded,
                "found": {"journal_id": finding.found_id, "last_seq": finding.found_seq},
                "moved_to": str(moved_to) if moved_to is not None else None,
            }
        ),
    )


def break_of(row: Row) -> JournalBreak:
    """The break a stored ``journal.break`` row records (whatever of it still parses)."""
    try:
        data = row.event_dict()["payload"].get("data", {})
    except (ValueError, AttributeError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    lost, moved = data.get("lost"), data.get("moved_to")
    return JournalBreak(
        seq=row.seq,
        ts=row.ts,
        reason=str(data.get("reason", "unknown")),
        message=str(data.get("message", "a break was recorded")),
        lost=lost if isinstance(lost, int) else None,
        moved_to=moved if isinstance(moved, str) else None,
    )


def successor_ids(row: Row) -> frozenset[str]:
    """Journal ids a (verified) opening break row names: the chains it replaced."""
    try:
        data = row.event_dict()["payload"].get("data", {})
        ids = {data["recorded"]["journal_id"] if data.get("recorded") else None}
        ids.add(data["found"]["journal_id"])
    except (ValueError, AttributeError, KeyError, TypeError):
        return frozenset()
    return frozenset(i for i in ids if isinstance(i, str))


def move_aside(path: Path) -> Path:
    """Rename ``path`` and its ``-wal``/``-shm`` to ``<stem>.broken-<UTC time><suffix>...``.

    The caller holds the exclusive lock and may still hold a connection to ``path``: SQLite
    notices the rename and neither checkpoints nor deletes the moved WAL when it closes.

    Raises:
        JournalError: a file could not be renamed (``journal.recover``).
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.stem}.broken-{stamp}{path.suffix}")
    n = 1
    while any(Path(f"{target}{s}").exists() for s in _SIDE_FILES):
        n += 1
        target = path.with_name(f"{path.stem}.broken-{stamp}-{n}{path.suffix}")
    for suffix in _SIDE_FILES:
        try:
            os.rename(f"{path}{suffix}", f"{target}{suffix}")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise JournalError(
                f"cannot move the broken journal {path}{suffix} aside: {exc.strerror or exc}",
                code="journal.recover",
                path=str(path),
            ) from exc
    return target


class OpenLock:
    """The ``flock`` on ``.keel/journal.lock``: shared while opening, exclusive to recover.

    Best effort where there is no lock file to take (a read-only ``.keel/``); waits are
    bounded by ``timeout`` and end in ``journal.busy``.
    """

    def __init__(self, path: Path, *, create: bool, timeout: float) -> None:
        self.path = path
        self._create = create
        self._timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> Self:
        """Take the shared lock."""
        flags = os.O_RDWR | os.O_CREAT if self._create else os.O_RDONLY
        try:
            self._fd = os.open(self.path, flags | os.O_CLOEXEC, 0o600)
        except OSError:
            return self
        try:
            self._take(fcntl.LOCK_SH)
        except BaseException:
            self._release()
            raise
        return self

    def exclusive(self) -> None:
        """Trade the shared lock for the exclusive one (not atomically: re-check after)."""
        if self._fd is None:
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
            try:
                self._fd = os.open(self.path, flags, 0o600)
            except OSError as exc:
                raise JournalError(
                    f"cannot lock {self.path} to recover the journal: {exc.strerror or exc}",
                    code="journal.recover",
                    path=str(self.path),
                ) from exc
        self._take(fcntl.LOCK_EX)

    def _take(self, op: int) -> None:
        assert self._fd is not None
        deadline = time.monotonic() + self._timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(self._fd, op | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError:  # no flock here (some network file systems): go on unlocked
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise JournalError(
                    f"timed out waiting for {self.path} (another process is recovering the "
                    "journal)",
                    code="journal.busy",
                    path=str(self.path),
                )
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)

    def _release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Release the lock."""
        self._release()
