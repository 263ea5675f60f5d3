from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from journal_helpers import session_events, tamper

from keel.core.errors import JournalError
from keel.core.events import DataPayload, Event, ToolCallPayload, canonical_json
from keel.journal import (
    HASH_PREFIX,
    Chain,
    Journal,
    MemoryJournal,
    SQLiteJournal,
    _migrations,
    chain_hash,
    journal_key,
    journal_path,
    open_journal,
    read_journal,
    verify_rows,
)
from keel.journal._base import prepare

JournalFactory = Callable[[], Journal]


def test_round_trip_every_payload_shape(make_journal: JournalFactory) -> None:
    journal = make_journal()
    originals = session_events()
    stored = [journal.append(e) for e in originals]
    assert [e.seq for e in stored] == list(range(1, len(originals) + 1))
    read = list(journal.events())
    assert read == stored
    assert [e.with_seq(0) for e in read] == originals
    assert journal.verify() == []


def test_seq_is_global_across_sessions_and_filters_work(make_journal: JournalFactory) -> None:
    journal = make_journal()
    for a, b in zip(session_events("a"), session_events("b", agent="codex"), strict=True):
        journal.append(a)
        journal.append(b)
    assert [e.seq for e in journal.events()] == list(range(1, 27))
    only_a = list(journal.events(session_id="a"))
    assert {e.session_id for e in only_a} == {"a"} and len(only_a) == 13
    decisions = list(journal.events(kinds=["decision"]))
    assert [e.payload.decision for e in decisions] == ["allow", "allow", "deny", "deny"]  # type: ignore[union-attr]
    assert [e.seq for e in journal.events(after_seq=24)] == [25, 26]
    assert list(journal.events(kinds=[])) == []
    assert [e.kind for e in journal.events("b", kinds={"stop", "gate"})] == ["gate", "stop"]


def test_sessions_summarise_in_first_seen_order(make_journal: JournalFactory) -> None:
    journal = make_journal()
    for e in session_events("late", agent="codex"):
        journal.append(e)
    for e in session_events("early", agent="claude")[:3]:
        journal.append(replace(e, ts=e.ts - 1000, trace_id="f" * 32))
    first, second = journal.sessions()
    assert first.session_id == "late" and first.agent == "codex" and first.events == 13
    assert first.first_ts == session_events()[0].ts and first.last_ts == session_events()[-1].ts
    assert second.session_id == "early" and second.events == 3 and second.trace_id == "f" * 32


def test_paging_reads_more_than_one_page(root: Path) -> None:
    with open_journal(root) as journal:
        for i in range(1203):
            journal.append(Event("prompt", "s", DataPayload({"i": i})))
        seen = []
        for event in journal.events():
            seen.append(event.payload.data["i"])  # type: ignore[union-attr]
            if event.seq == 600:
                journal.append(Event("prompt", "s", DataPayload({"i": 1203})))
        assert seen == list(range(1204))


def test_hash_is_tagged_and_chained(root: Path) -> None:
    with open_journal(root) as journal:
        first = journal.append(session_events()[0])
        second = journal.append(session_events()[1])
    db = sqlite3.connect(journal_path(root))
    rows = db.execute("SELECT seq, prev_hash, hash FROM events ORDER BY seq").fetchall()
    db.close()
    key = journal_key()
    assert rows[0][1] == "" and rows[1][1] == rows[0][2]
    assert rows[0][2] == chain_hash("", first.to_dict(), key)
    assert rows[1][2] == chain_hash(rows[0][2], second.to_dict(), key)
    assert HASH_PREFIX == "hmac-sha256:"
    assert rows[1][2].startswith(HASH_PREFIX) and len(rows[1][2]) == len(HASH_PREFIX) + 64
    assert rows[1][2] != chain_hash(rows[0][2], second.to_dict(), b"k" * 32)


def test_int_timestamp_is_stored_as_float(root: Path) -> None:
    with open_journal(root) as journal:
        journal.append(Event("prompt", "s", DataPayload({}), ts=1_700_000_000))  # type: ignore[arg-type]
        assert journal.verify() == []


def test_unserializable_event_leaves_nothing_and_append_continues(
    make_journal: JournalFactory,
) -> None:
    journal = make_journal()
    journal.append(session_events()[0])
    bad = Event("prompt", "s", DataPayload({"x": float("nan")}))
    with pytest.raises(JournalError) as err:
        journal.append(bad)
    assert err.value.code == "journal.unserializable"
    unjsonable = Event("tool.call", "s", ToolCallPayload("T", "other", args={"p": Path("/x")}))
    with pytest.raises(JournalError):
        journal.append(unjsonable)
    assert journal.append(session_events()[1]).seq == 2
    assert journal.verify() == []


def test_failure_inside_the_transaction_rolls_back(root: Path) -> None:
    with open_journal(root) as journal:
        journal.append(session_events()[0])
        tamper(
            root,
            "CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.kind = 'stop' "
            "BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
        )
        with pytest.raises(JournalError) as err:
            journal.append(session_events()[11])
        assert "injected failure" in err.value.message
        assert err.value.code.startswith("journal.")
        tamper(root, "DROP TRIGGER boom")
        assert journal.append(session_events()[11]).seq == 2
        assert [e.seq for e in journal.events()] == [1, 2]
        assert journal.verify() == []


def test_open_creates_state_dir_in_wal_mode(root: Path) -> None:
    with open_journal(root):
        pass
    assert journal_path(root) == root / ".keel" / "journal.db"
    db = sqlite3.connect(journal_path(root))
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    indexes = {r[1] for r in db.execute("PRAGMA index_list(events)")}
    db.close()
    assert "events_session" in indexes


def test_not_a_database_is_a_journal_error_without_recovery(root: Path) -> None:
    journal_path(root).parent.mkdir()
    journal_path(root).write_bytes(b"this is not sqlite at all" * 100)
    for opener in (lambda: SQLiteJournal(journal_path(root)), lambda: read_journal(root)):
        with pytest.raises(JournalError) as err:
            opener()
        assert err.value.code == "journal.corrupt"
    assert journal_path(root).read_bytes() == b"this is not sqlite at all" * 100


def test_state_dir_that_is_a_file_is_a_journal_error(root: Path) -> None:
    (root / ".keel").write_text("oops")
    with pytest.raises(JournalError) as err:
        open_journal(root)
    assert err.value.code == "journal.open"


def test_migrations_applied_once_recorded_and_idempotent(root: Path) -> None:
    names = [fn.__name__ for fn in _migrations.MIGRATIONS]
    assert names[0] == "m001_initial" and names == sorted(names)
    with open_journal(root) as journal:
        assert isinstance(journal, SQLiteJournal)
        assert journal.migrations() == names
        journal.append(session_events()[0])
    db = sqlite3.connect(journal_path(root))
    before = db.execute("SELECT name, applied_at FROM _migrations ORDER BY rowid").fetchall()
    db.close()
    for _ in range(3):
        with open_journal(root) as journal:
            assert journal.verify() == []
    db = sqlite3.connect(journal_path(root), isolation_level=None)
    after = db.execute("SELECT name, applied_at FROM _migrations ORDER BY rowid").fetchall()
    assert after == before and [n for n, _ in after] == names
    assert _migrations.migrate(db) == []
    db.close()


def test_later_migration_upgrades_an_old_journal(root: Path) -> None:
    journal_path(root).parent.mkdir()
    db = sqlite3.connect(journal_path(root), isolation_level=None)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    _migrations.m001_initial(db)
    db.execute("INSERT INTO _migrations VALUES ('m001_initial', 0)")
    memory = MemoryJournal(key=journal_key())
    for event in session_events()[:4]:
        memory.append(event)
    for row in memory.rows:
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.seq,
                row.kind,
                row.session_id,
                row.trace_id,
                row.span_id,
                row.parent_span_id,
                row.ts,
                row.agent,
                row.payload,
                row.prev_hash,
                row.hash,
            ),
        )
    db.close()
    with open_journal(root) as journal:
        assert isinstance(journal, SQLiteJournal)
        assert journal.migrations() == [fn.__name__ for fn in _migrations.MIGRATIONS]
        assert journal.verify() == []
        assert journal.append(session_events()[4]).seq == 5
        assert journal.verify() == []


def test_memory_journal_detects_tampering() -> None:
    journal = MemoryJournal()
    for event in session_events():
        journal.append(event)
    journal.rows[3] = replace(journal.rows[3], payload=json.dumps({"checkpoint_id": "x"}))
    del journal.rows[6]
    problems = journal.verify()
    assert [(p.seq, p.code) for p in problems] == [
        (4, "chain.hash_mismatch"),
        (8, "chain.missing"),
        (8, "chain.broken_link"),
    ]
    assert "seq 7 missing" in problems[1].message


def test_journal_protocol_is_satisfied() -> None:
    journals: list[Journal] = [MemoryJournal()]
    assert journals


def test_hot_path_imports_stay_stdlib(root: Path) -> None:
    code = (
        "import sys, keel.journal\n"
        "heavy = {'pydantic', 'typer', 'rich', 'yaml', 'click'}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "lazy = sorted(m for m in sys.modules if m in "
        "('keel.journal.export', 'keel.journal.timeline'))\n"
        "print(loaded, lazy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


@dataclass(frozen=True)
class _Nested:
    name: str
    values: tuple[int, ...]


@pytest.mark.parametrize(
    "event",
    [
        *session_events(),
        Event("prompt", "s", DataPayload({"z": [1, {"b": None, "a": "é"}], "a": 1.5})),
        Event("prompt", "s", DataPayload({"nested": _Nested("n", (1, 2))})),
        Event("prompt", 'quote"d\nsession', DataPayload(), agent="ü", parent_span_id="ab" * 8),
        Event("prompt", "s", DataPayload(), ts=12),  # type: ignore[arg-type]
    ],
)
def test_prepared_body_is_the_canonical_json_of_the_placed_event(event: Event) -> None:
    prepared = prepare(event)
    placed = prepared.event.with_seq(42)
    assert prepared.body(42) == canonical_json(placed.to_dict())
    chain = Chain(b"k" * 32)
    row = prepared.place(42, "hmac-sha256:prev", chain)
    assert row.hash == chain_hash("hmac-sha256:prev", placed.to_dict(), b"k" * 32)
    assert verify_rows([replace(row, seq=1, prev_hash="")], chain) != []  # covers seq and link


def test_closed_journal_is_a_journal_error(root: Path) -> None:
    journal = open_journal(root)
    journal.close()
    journal.close()
    with pytest.raises(JournalError) as err:
        journal.append(session_events()[0])
    assert err.value.code == "journal.closed"


@pytest.mark.parametrize(
    "event",
    [
        Event("prompt", 5, DataPayload()),  # type: ignore[arg-type]
        Event("prompt", "s", DataPayload(), agent=None),  # type: ignore[arg-type]
        Event("prompt", "s", DataPayload(), parent_span_id=7),  # type: ignore[arg-type]
        Event("prompt", "s", DataPayload(), ts="yesterday"),  # type: ignore[arg-type]
        Event("prompt", "s", DataPayload(), ts=float("inf")),
    ],
)
def test_events_that_would_not_hash_back_are_refused(
    make_journal: JournalFactory, event: Event
) -> None:
    journal = make_journal()
    with pytest.raises(JournalError) as err:
        journal.append(event)
    assert err.value.code in {"journal.invalid_event", "journal.unserializable"}
    assert list(journal.events()) == []
    assert journal.verify() == []
