"""Tampering with stored rows through the real sqlite3 is reported by ``keel verify``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from journal_helpers import fill, keel_verify, session_events, tamper

from keel.journal import Chain, Row, journal_key, journal_path, open_journal, verify_rows

COLUMNS = (
    "seq, kind, session_id, trace_id, span_id, parent_span_id, ts, agent, payload, prev_hash, hash"
)

Cli = Callable[..., Any]


def test_clean_journal_verifies(root: Path, cli: Cli) -> None:
    fill(root)
    result = cli("verify", "--workspace", str(root))
    assert result.exit_code == 0, result.output
    assert "journal intact: 10 events" in result.stdout


def test_missing_journal_is_clean_and_not_created(root: Path, cli: Cli) -> None:
    result = cli("verify", "--workspace", str(root))
    assert result.exit_code == 0, result.output
    assert "journal intact: 0 events" in result.stdout
    assert not (root / ".keel").exists()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "UPDATE events SET payload = json_set(payload, '$.output', 'all passed') WHERE seq = 5",
            [(5, "chain.hash_mismatch")],
        ),
        ("UPDATE events SET session_id = 'other' WHERE seq = 5", [(5, "chain.hash_mismatch")]),
        ("UPDATE events SET ts = ts + 1 WHERE seq = 5", [(5, "chain.hash_mismatch")]),
        (
            "UPDATE events SET hash = 'hmac-sha256:' || hex(randomblob(32)) WHERE seq = 5",
            [(5, "chain.hash_mismatch"), (6, "chain.broken_link")],
        ),
        (
            "UPDATE events SET prev_hash = 'sha256:00' WHERE seq = 5",
            [(5, "chain.hash_mismatch"), (5, "chain.broken_link")],
        ),
        ("DELETE FROM events WHERE seq = 5", [(6, "chain.missing"), (6, "chain.broken_link")]),
        (
            "DELETE FROM events WHERE seq IN (4, 5, 6)",
            [(7, "chain.missing"), (7, "chain.broken_link")],
        ),
        (
            "DELETE FROM events WHERE seq = 10",
            [(10, "chain.head_mismatch"), (10, "head.events_lost")],
        ),
        ("DELETE FROM events WHERE seq = 1", [(2, "chain.missing"), (2, "chain.broken_link")]),
        ("UPDATE events SET payload = '{not json' WHERE seq = 5", [(5, "row.unparseable")]),
        ("UPDATE events SET kind = 'bogus' WHERE seq = 5", [(5, "row.unparseable")]),
        ("DELETE FROM journal_head", [(0, "chain.head_mismatch")]),
    ],
)
def test_tampering_is_named_by_verify(
    root: Path, cli: Cli, sql: str, expected: list[tuple[int, str]]
) -> None:
    fill(root)
    tamper(root, sql)
    result = cli("verify", "--workspace", str(root))
    assert result.exit_code == 1, result.output
    for seq, code in expected:
        assert f"seq {seq}: {code}" in result.stdout
    assert "journal NOT intact" in result.stdout

    as_json = cli("verify", "--json", "--workspace", str(root))
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False
    assert [(p["seq"], p["code"]) for p in report["problems"]] == expected


def test_appending_after_a_deleted_tail_does_not_hide_it(root: Path, cli: Cli) -> None:
    events = fill(root)
    tamper(root, "DELETE FROM events WHERE seq = 10")
    with open_journal(root) as journal:  # short of its recorded head: a new chain starts
        assert journal.append(events[0].with_seq(0)).seq == 2
    result = cli("verify", "--workspace", str(root))
    assert result.exit_code == 1
    assert "seq 1: journal.break" in result.stdout
    assert "database ends at seq 9: 1 event lost" in result.stdout


def test_real_keel_command_names_the_tampered_row(root: Path) -> None:
    fill(root)
    clean = keel_verify(root)
    assert clean.returncode == 0, clean.stderr
    tamper(root, "UPDATE events SET agent = 'someone-else' WHERE seq = 3")
    broken = keel_verify(root)
    assert broken.returncode == 1, broken.stderr
    assert "seq 3: chain.hash_mismatch" in broken.stdout


def _damage_session_state_page(root: Path, start: int, end: int) -> int:
    """XOR bytes ``start..end`` of the page holding the session state; its page number."""
    db = sqlite3.connect(journal_path(root))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    (page,) = db.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'session_state'"
    ).fetchone()
    (size,) = db.execute("PRAGMA page_size").fetchone()
    (count,) = db.execute("PRAGMA page_count").fetchone()
    db.close()
    with open(journal_path(root), "r+b") as f:
        f.seek((page - 1) * size + start)
        data = bytearray(f.read(end - start))
        f.seek((page - 1) * size + start)
        f.write(bytes(b ^ 0x5A for b in data))
    assert page == count  # the last page, as the fault injection found it
    return page


@pytest.mark.parametrize(("start", "end"), [(0, 8), (8, 16), (100, 4000)])
def test_a_damaged_page_outside_the_chain_fails_verify(root: Path, start: int, end: int) -> None:
    with open_journal(root) as journal:
        for event in session_events()[:6]:
            state = {"calls": event.ts, "note": "x" * 200}
            journal.append_many([event], session_state=("sess-1", state))
    _damage_session_state_page(root, start, end)
    db = sqlite3.connect(journal_path(root))
    rows = [Row(*r) for r in db.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq")]
    db.close()
    assert len(rows) == 6 and verify_rows(rows, Chain(journal_key())) == []  # the chain holds
    result = keel_verify(root, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert [(p["seq"], p["code"]) for p in report["problems"]] == [(0, "db.integrity")]
    assert report["events"] == 6
    assert "SQLite's integrity check" in report["problems"][0]["message"]
    text = keel_verify(root)
    assert text.returncode == 1
    assert "seq 0: db.integrity: " in text.stdout and "journal NOT intact" in text.stdout
