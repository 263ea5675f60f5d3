"""The chain head recorded outside the database, and what a database that disagrees means.

After every committed transaction the journal writes its head (the last ``seq``, that row's
hash, the journal's random id and the workspace directory's inode) to
``<user_state_dir>/heads/<sha256 of the workspace's real path>.json``: beside the key, never
inside the workspace. Written after COMMIT, the record may lag the database (a writer killed in
between, two writers finishing out of order), but it is never ahead of a healthy one; a
database that lacks the recorded ``seq``, holds another hash there or carries another journal
id lost events (a damaged WAL, a truncated file) or was replaced (an older copy, another
journal). :func:`compare` turns the two sides into a :class:`Finding`, or None when they agree.

The record is bound to the directory it was written for: a record whose inode is not the
workspace's describes a previous directory at that path (the workspace was deleted and made
again, or cloned anew), so :func:`read_head` ignores it and the new journal starts clean. A
journal deleted from a workspace that is still there is caught as before. A head that cannot
be written returns its ``OSError`` (the journal records that, ``keel.journal._breaks``), and
a journal with events but no record is reported, never taken as intact.

Standard library only: this runs on every hook call.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from keel.core.userstate import user_state_dir

HEADS_DIR = "heads"
RECORD_SIZE = 512

BreakReason = Literal["events_lost", "replaced", "unreadable", "key_missing"]


@dataclass(frozen=True, slots=True)
class RecordedHead:
    """The head of one journal as last recorded outside it."""

    journal_id: str
    seq: int
    hash: str
    root: str | None = None
    """The inode of the workspace directory it was written for (:func:`workspace_id`); None
    in records from before it was kept."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        found: dict[str, Any] = {"journal_id": self.journal_id, "seq": self.seq, "hash": self.hash}
        if self.root is not None:
            found["root"] = self.root
        return found

    def describe(self) -> str:
        """``seq N (hash …)`` for messages."""
        return f"seq {self.seq} (hash {short(self.hash)})"


@dataclass(frozen=True, slots=True)
class DbFacts:
    """What the database says about its own head, read in one transaction."""

    journal_id: str | None
    last_seq: int
    last_hash: str
    hash_at_recorded: str | None
    """The hash of the row at the recorded ``seq``; None when there is no such row."""
    successor_of: frozenset[str]
    """Journal ids named by the database's opening (keyed, verified) break event."""


@dataclass(frozen=True, slots=True)
class Finding:
    """Why a database cannot continue the recorded chain."""

    reason: BreakReason
    message: str
    lost: int | None
    """Events known lost; None when unknown."""
    recorded: RecordedHead | None
    found_id: str | None = None
    found_seq: int = 0

    @property
    def seq(self) -> int:
        """The ``seq`` a verify problem is reported at."""
        return self.recorded.seq if self.recorded is not None else 0


def n_events(n: int) -> str:
    """``1 event``, ``2 events``."""
    return f"{n} event" if n == 1 else f"{n} events"


def short(hash_: str) -> str:
    """A hash clipped for messages: the tag and 16 hex digits."""
    tag, _, digest = hash_.rpartition(":")
    return f"{tag}:{digest[:16]}…" if tag else (digest[:16] + "…" if digest else "''")


def head_path(root: Path) -> Path:
    """Where the head of workspace ``root``'s journal is recorded (not created)."""
    real = os.path.realpath(root)
    name = hashlib.sha256(os.fsencode(real)).hexdigest()[:32]
    return Path(user_state_dir()) / HEADS_DIR / f"{name}.json"


def named_head_path(name: str) -> Path:
    """Where the head of a chain kept elsewhere (a database and a workspace's name) is recorded.

    ``pg:`` in front keeps these names apart from the workspace paths :func:`head_path` hashes.
    """
    digest = hashlib.sha256(f"pg:{name}".encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return Path(user_state_dir()) / HEADS_DIR / f"{digest}.json"


def workspace_id(root: Path) -> str | None:
    """The identity a head record is bound to: the inode of the workspace directory.

    Not the device number, which a remount may change; None when ``root`` cannot be looked at.
    """
    try:
        return str(os.stat(root).st_ino)
    except OSError:
        return None


def _check(head: RecordedHead) -> str:
    """A checksum of the record, so a read that raced a rewrite is noticed and read again."""
    text = f"{head.journal_id}\n{head.seq}\n{head.hash}"
    if head.root is not None:  # records from before the root was kept still check
        text += f"\n{head.root}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_head(path: Path, root: str | None = None) -> RecordedHead | None:
    """The head recorded at ``path``; None when there is none or it does not parse.

    With ``root`` (the workspace's :func:`workspace_id`), a record written for another
    directory that stood at the same path is none: it says nothing about this workspace.
    """
    for _ in range(3):
        try:
            data = path.read_bytes()
        except OSError:
            return None
        head, check = _parse(data)
        if head is None:
            return None
        if check == _check(head):
            if root is not None and head.root is not None and head.root != root:
                return None
            return head
    return None


def _parse(data: bytes) -> tuple[RecordedHead | None, object]:
    try:
        doc = json.loads(data)
    except ValueError:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    jid, seq, hash_ = doc.get("journal_id"), doc.get("seq"), doc.get("hash")
    if not (isinstance(jid, str) and isinstance(hash_, str)):
        return None, None
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return None, None
    root = doc.get("root")
    return RecordedHead(jid, seq, hash_, root if isinstance(root, str) else None), doc.get("check")


def encode_head(head: RecordedHead, database: Path | str) -> bytes:
    """The record of ``head``: one JSON object padded to :data:`RECORD_SIZE` bytes."""
    doc: dict[str, Any] = {**head.to_dict(), "check": _check(head), "database": str(database)}
    data = json.dumps(doc, sort_keys=True).encode("utf-8") + b"\n"
    if len(data) > RECORD_SIZE:  # a very long path: the database is only there for people
        del doc["database"]
        data = json.dumps(doc, sort_keys=True).encode("utf-8") + b"\n"
    return data.ljust(RECORD_SIZE)


def write_head(path: Path, head: RecordedHead, database: Path | str) -> OSError | None:
    """Record ``head`` at ``path``, after the commit it describes; the error if it failed.

    The record is rewritten in place, one fixed-size ``pwrite``: a tmp file renamed over the
    old one costs 0.3-1.6 ms on ext4 (the rename flushes the new file's data,
    ``auto_da_alloc``), more than the whole transaction. Writers are serialised by the
    kernel; a reader that races one sees a checksum mismatch and reads again.

    A failure (a full disk, a read-only state directory) is returned, not raised: the commit
    stands, and the journal records that its head went unrecorded.
    """
    data = encode_head(head, database)
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            os.makedirs(path.parent, mode=0o700, exist_ok=True)
            fd = os.open(path, flags, 0o600)
        try:
            os.pwrite(fd, data, 0)
            if os.fstat(fd).st_size != RECORD_SIZE:
                os.ftruncate(fd, RECORD_SIZE)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc
    return None


def compare(recorded: RecordedHead | None, facts: DbFacts) -> Finding | None:
    """Why the database cannot continue the ``recorded`` chain; None when it can."""
    if recorded is None:
        return None
    if facts.journal_id != recorded.journal_id:
        if recorded.journal_id in facts.successor_of:
            return None  # the database is the new chain that replaced the recorded one
        if facts.last_seq == 0:
            return None if recorded.seq == 0 else _lost(recorded, facts)
        return Finding(
            "replaced",
            f"journal was replaced: the database holds journal {facts.journal_id or '(no id)'} "
            f"(ending at seq {facts.last_seq}), but the recorded head is journal "
            f"{recorded.journal_id} at {recorded.describe()}: its {n_events(recorded.seq)} are "
            "not in this database",
            recorded.seq,
            recorded,
            facts.journal_id,
            facts.last_seq,
        )
    if recorded.seq == 0:
        return None
    if facts.hash_at_recorded is None:
        return _lost(recorded, facts)
    if facts.hash_at_recorded != recorded.hash:
        return Finding(
            "replaced",
            f"journal was replaced by a different copy: seq {recorded.seq} has hash "
            f"{short(facts.hash_at_recorded)}, but the journal's recorded head is "
            f"{recorded.describe()}",
            None,
            recorded,
            facts.journal_id,
            facts.last_seq,
        )
    return None


def _lost(recorded: RecordedHead, facts: DbFacts) -> Finding:
    if facts.last_seq >= recorded.seq:  # the recorded row alone is gone: rows were deleted
        message = (
            f"the journal's recorded head is {recorded.describe()}, but that row is missing "
            f"from the database (which ends at seq {facts.last_seq})"
        )
        lost = None
    else:
        lost = recorded.seq - facts.last_seq
        message = (
            f"the journal's recorded head is {recorded.describe()}, but the database ends at "
            f"seq {facts.last_seq}: {n_events(lost)} lost"
        )
    return Finding("events_lost", message, lost, recorded, facts.journal_id, facts.last_seq)


def head_missing(head_file: Path, last_seq: int) -> str:
    """What a journal of ``last_seq`` events without a recorded head means."""
    return (
        f"the journal holds {n_events(last_seq)} but its head is not recorded outside the "
        f"database ({head_file}): events lost from its end could not be detected"
    )


def head_unwritable(head_file: Path, seq: int, error: OSError) -> str:
    """What a head record that could not be written after ``seq`` means."""
    return (
        f"the journal's head could not be recorded after seq {seq} ({head_file}: "
        f"{error.strerror or error}): events lost from its end since the last recorded head "
        "would go unnoticed"
    )


def unreadable(recorded: RecordedHead | None, error: str) -> Finding:
    """The finding for a database SQLite cannot read."""
    message = f"the journal database is unreadable ({error})"
    if recorded is not None:
        message += (
            f"; its recorded head is {recorded.describe()}: {n_events(recorded.seq)} cannot be read"
        )
    return Finding("unreadable", message, recorded.seq if recorded else None, recorded)


def key_missing(recorded: RecordedHead | None, facts: DbFacts, key_file: Path) -> Finding:
    """The finding for keyed rows whose key is gone: the chain cannot be checked or continued."""
    return Finding(
        "key_missing",
        f"the journal key {key_file} is missing: the chain of {n_events(facts.last_seq)} "
        "can no longer be checked or continued",
        None,
        recorded,
        facts.journal_id,
        facts.last_seq,
    )
