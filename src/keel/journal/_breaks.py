"""Breaks: a journal found damaged, lost or replaced is moved aside and a new chain begins.

The new chain's first event is a ``journal.break`` (session ``keel.journal``) saying what was
wrong, the head recorded for the old chain, how many events are known lost and where the old
files went. A ``journal.head_unrecorded`` event says that the head could not be kept outside
the database (its record was missing, or writing it failed), so losses from the end would have
gone unnoticed for a while. Both are incidents the user must see: ``keel verify`` reports every
one, and :class:`JournalHealth` lists them for ``keel status``, until the user acknowledges
them (``keel verify --acknowledge``): a ``journal.acknowledged`` event, keyed in the chain like
any other, names each incident it covers by ``seq`` and hash, so it covers those and no later
one, and a forged one (no key) covers nothing.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from keel.core.errors import JournalError
from keel.core.events import DataPayload, Event
from keel.journal._base import BREAK_KIND, BREAK_SESSION, Chain, ProblemCode, Row
from keel.journal._head import Finding

HEAD_KIND = "journal.head_unrecorded"
"""The kind of the event that says the chain's head went unrecorded outside the database."""
ACK_KIND = "journal.acknowledged"
"""The kind of the event that records the user's acknowledgement of earlier incidents."""
INCIDENT_KINDS = (BREAK_KIND, HEAD_KIND)
JOURNAL_KINDS = (*INCIDENT_KINDS, ACK_KIND)
"""Every kind the journal writes itself, all in session :data:`BREAK_SESSION`."""
_CODES: dict[str, ProblemCode] = {BREAK_KIND: "journal.break", HEAD_KIND: "journal.head_unrecorded"}

LOCK_FILE = "journal.lock"
_SIDE_FILES = ("-wal", "-shm", "")  # the WAL first: a database without its WAL only looks older


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """The user's word that they have seen an incident: who, when, why."""

    seq: int
    """The ``seq`` of the ``journal.acknowledged`` event."""
    ts: float
    by: str
    reason: str | None

    def describe(self) -> str:
        """``acknowledged by alice at <time>: <reason>``."""
        text = f"acknowledged by {self.by} at {_when(self.ts)}"
        return f"{text}: {self.reason}" if self.reason else text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"seq": self.seq, "ts": self.ts, "by": self.by, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class JournalBreak:
    """One recorded incident: a break, or a head that went unrecorded.

    For a break: when, why, how many events were lost, where the old journal went. Either
    kind carries the user's acknowledgement once there is one.
    """

    seq: int
    ts: float
    reason: str
    message: str
    lost: int | None
    """Events known lost; None when unknown."""
    moved_to: str | None
    """The old database's new path; None when there was no file worth keeping."""
    kind: str = BREAK_KIND
    hash: str = ""
    """The incident row's hash: what an acknowledgement names it by."""
    acknowledged: Acknowledgement | None = None

    @property
    def code(self) -> ProblemCode:
        """The code ``keel verify`` reports it with."""
        return _CODES.get(self.kind, "journal.break")

    def describe(self) -> str:
        """One line for ``keel verify`` and ``keel status``."""
        when = _when(self.ts)
        if self.kind == HEAD_KIND:
            text = f"the journal's head went unrecorded at {when}: {self.message}"
        else:
            text = f"the journal broke at {when}: {self.message}"
        if self.moved_to:
            text += f"; the old journal is at {self.moved_to}"
        if self.acknowledged is not None:
            text += f" ({self.acknowledged.describe()})"
        return text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        ack = self.acknowledged
        return {
            "seq": self.seq,
            "kind": self.kind,
            "ts": self.ts,
            "reason": self.reason,
            "message": self.message,
            "lost": self.lost,
            "moved_to": self.moved_to,
            "acknowledged": ack.to_dict() if ack is not None else None,
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


def head_event(reason: str, message: str, seq: int, head_file: Path) -> Event:
    """The event that says the head was not recorded (``reason``: missing, write_failed)."""
    data = {"reason": reason, "message": message, "seq": seq, "head_file": str(head_file)}
    return Event(HEAD_KIND, BREAK_SESSION, DataPayload(data))


def ack_event(incidents: Sequence[JournalBreak], reason: str | None, by: str) -> Event:
    """The event that acknowledges ``incidents``, each named by its ``seq`` and hash."""
    named = [{"seq": i.seq, "kind": i.kind, "hash": i.hash} for i in incidents]
    return Event(
        ACK_KIND, BREAK_SESSION, DataPayload({"incidents": named, "reason": reason, "by": by})
    )


def _data(row: Row) -> dict[str, Any]:
    try:
        data = row.event_dict()["payload"].get("data", {})
    except (ValueError, AttributeError):
        return {}
    return data if isinstance(data, dict) else {}


def break_of(row: Row) -> JournalBreak:
    """The incident a stored break or head row records (whatever of it still parses)."""
    data = _data(row)
    lost, moved = data.get("lost"), data.get("moved_to")
    return JournalBreak(
        seq=row.seq,
        ts=row.ts,
        reason=str(data.get("reason", "unknown")),
        message=str(data.get("message", "a break was recorded")),
        lost=lost if isinstance(lost, int) else None,
        moved_to=moved if isinstance(moved, str) else None,
        kind=row.kind,
        hash=row.hash,
    )


def _acknowledgement(
    row: Row, chain: Chain | None
) -> tuple[Acknowledgement, set[tuple[int, str]]] | None:
    """The acknowledgement an ``ACK_KIND`` row records and what it names; None unless keyed."""
    try:
        if chain is None or chain.hash_event(row.prev_hash, row.event_dict()) != row.hash:
            return None
    except (TypeError, ValueError):
        return None
    data = _data(row)
    named = data.get("incidents")
    targets = {
        (item["seq"], item["hash"])
        for item in (named if isinstance(named, list) else [])
        if isinstance(item, dict)
        and isinstance(item.get("seq"), int)
        and isinstance(item.get("hash"), str)
    }
    by, reason = data.get("by"), data.get("reason")
    ack = Acknowledgement(
        row.seq, row.ts, str(by or "unknown"), reason if isinstance(reason, str) else None
    )
    return ack, targets


def incidents(rows: Iterable[Row], chain: Chain | None) -> list[JournalBreak]:
    """The incidents among ``rows`` (the journal's own events, in ``seq`` order).

    Each carries the first later acknowledgement that names it. An acknowledgement whose hash
    ``chain`` does not verify counts for nothing (with no key, none counts).
    """
    found: list[JournalBreak] = []
    index: dict[tuple[int, str], int] = {}
    for row in rows:
        if row.kind in INCIDENT_KINDS:
            index[(row.seq, row.hash)] = len(found)
            found.append(break_of(row))
        elif row.kind == ACK_KIND:
            parsed = _acknowledgement(row, chain)
            if parsed is None:
                continue
            ack, targets = parsed
            for target in targets:
                at = index.get(target)
                if at is not None and found[at].acknowledged is None:
                    found[at] = replace(found[at], acknowledged=ack)
    return found


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
