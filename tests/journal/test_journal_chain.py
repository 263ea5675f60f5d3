"""The keyed chain and its rows, in process on the in-memory journal (same code as SQLite's).

How a row is hashed and linked, the structured errors for events that cannot be stored, and
what ``verify`` says about each kind of damage: the seq it names, the code, and the exact
message a person reads (also for unkeyed rows: the rows and the tag it names).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace

import pytest
from journal_helpers import session_events

from keel.core.errors import JournalError
from keel.core.events import DataPayload, Event, canonical_json
from keel.journal import MemoryJournal, verify_rows
from keel.journal._base import (
    HASH_PREFIX,
    Chain,
    Problem,
    SessionSummary,
    chain_hash,
    is_keyed,
    json_text,
    place_all,
    prepare,
    too_late,
)

KEY = b"k" * 32


def _journal(n: int = 6) -> MemoryJournal:
    journal = MemoryJournal(KEY)
    for event in session_events()[:n]:
        journal.append(event)
    return journal


def _problems(
    journal: MemoryJournal, head: tuple[int, str] | None = None
) -> list[tuple[int, str, str]]:
    return [(p.seq, p.code, p.message) for p in verify_rows(journal.rows, journal.chain, head)]


def _rechain(journal: MemoryJournal, seqs: range, tag: str | None) -> None:
    """Recompute rows ``seqs`` (1-based) with plain SHA-256, tagged ``tag:`` (or untagged)."""
    prev = journal.rows[seqs[0] - 2].hash if seqs[0] > 1 else ""
    for i in range(seqs[0] - 1, seqs[-1]):
        row = replace(journal.rows[i], prev_hash=prev)
        digest = hashlib.sha256((prev + canonical_json(row.event_dict())).encode()).hexdigest()
        prev = f"{tag}:{digest}" if tag else digest
        journal.rows[i] = replace(row, hash=prev)


# -- the chain itself ------------------------------------------------------------------------------


def test_a_link_is_the_tagged_hmac_of_prev_hash_and_body() -> None:
    expected = hmac.new(KEY, b"hmac-sha256:abc" + '{"x":"é"}'.encode(), hashlib.sha256)
    assert Chain(KEY).link("hmac-sha256:abc", '{"x":"é"}') == "hmac-sha256:" + expected.hexdigest()
    chain = Chain(KEY)
    assert chain.link("", "a") == chain.link("", "a")  # the keyed state is copied, not used up
    assert chain.link("", "a") != Chain(b"j" * 32).link("", "a")
    body = {"b": 1, "a": [2]}
    assert chain.hash_event("p", body) == chain.link("p", canonical_json(body))
    assert chain_hash("p", body, KEY) == chain.hash_event("p", body)


def test_a_chain_key_needs_16_bytes() -> None:
    Chain(b"x" * 16)
    with pytest.raises(ValueError, match=r"^a chain key needs at least 16 bytes$"):
        Chain(b"x" * 15)


@pytest.mark.parametrize(
    ("value", "keyed"),
    [
        ("hmac-sha256:ab", True),
        ("hmac-sha256:", True),
        ("sha256:ab", False),
        ("hmac-sha256", False),
        ("", False),
    ],
)
def test_only_the_keyed_tag_counts_as_keyed(value: str, keyed: bool) -> None:
    assert is_keyed(value) is keyed
    assert HASH_PREFIX == "hmac-sha256:"


def test_place_all_chains_consecutive_seqs_after_the_head() -> None:
    chain = Chain(KEY)
    events = session_events()[:3]
    rows = place_all([prepare(e) for e in events], 7, "hmac-sha256:head", chain)
    assert [r.seq for r in rows] == [8, 9, 10]
    assert [r.prev_hash for r in rows] == ["hmac-sha256:head", rows[0].hash, rows[1].hash]
    for row, event in zip(rows, events, strict=True):
        assert row.hash == chain.hash_event(row.prev_hash, replace(event, seq=row.seq).to_dict())
        assert (row.kind, row.session_id, row.trace_id, row.span_id) == (
            event.kind, event.session_id, event.trace_id, event.span_id
        )  # fmt: skip
        assert (row.parent_span_id, row.ts, row.agent) == (
            event.parent_span_id,
            event.ts,
            event.agent,
        )
        assert row.to_event() == replace(event, seq=row.seq)
    assert place_all([], 7, "h", chain) == []


def test_prepare_stores_ts_as_a_float() -> None:
    event = replace(session_events()[0], ts=1_700_000_000)
    prepared = prepare(event)
    assert type(prepared.event.ts) is float and prepared.event.ts == 1_700_000_000.0
    row = prepared.place(1, "", Chain(KEY))
    assert '"ts":1700000000.0' in prepared.body(1) and row.ts == 1_700_000_000.0
    same = session_events()[1]
    assert prepare(same).event is same  # a float ts keeps the event as it is


# -- events that cannot be stored ------------------------------------------------------------------


def _event(payload: object, **ids: object) -> Event:
    return Event("prompt", "s", payload, **ids)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ids",
    [{"agent": 3}, {"trace_id": None}, {"span_id": b"x"}, {"parent_span_id": 5}, {"kind": 1}],
)
def test_ids_that_are_not_text_are_refused(ids: dict[str, object]) -> None:
    event = _event(DataPayload({"a": 1}))
    event = replace(event, **ids)  # type: ignore[arg-type]
    with pytest.raises(JournalError) as info:
        prepare(event)
    assert info.value.code == "journal.invalid_event"
    assert info.value.message == (
        "event kind, session_id, trace_id, span_id, agent and parent_span_id must be strings"
    )


def test_a_payload_that_is_not_json_is_a_structured_error() -> None:
    with pytest.raises(JournalError) as info:
        prepare(_event(DataPayload({"a": object()})))
    assert info.value.code == "journal.unserializable"
    assert info.value.message.startswith("event 'prompt' cannot be stored as JSON: ")
    with pytest.raises(JournalError) as nan:
        prepare(_event(DataPayload({"a": float("nan")})))
    assert nan.value.code == "journal.unserializable"


@dataclass(frozen=True)
class _Inner:
    n: int


def test_a_dataclass_inside_a_payload_is_stored_as_its_fields() -> None:
    prepared = prepare(_event(DataPayload({"x": [_Inner(3)], "y": _Inner(4)})))
    assert prepared.payload == '{"data":{"x":[{"n":3}],"y":{"n":4}}}'


def test_lone_surrogates_are_spelled_out_everywhere() -> None:
    event = _event(DataPayload({"f\udcff": ["a\udcfe", {"k": "\ud800"}], "n": 1}), agent="x\udc80")
    prepared = prepare(event)
    assert prepared.payload == '{"data":{"f\\\\udcff":["a\\\\udcfe",{"k":"\\\\ud800"}],"n":1}}'
    assert prepared.event.agent == "x\\udc80"
    prepared.body(1).encode("utf-8")


def test_json_text_and_too_late_errors() -> None:
    assert json_text(None, "outcome") == "{}"
    assert json_text({"b": 1, "a": "é"}, "outcome") == '{"a":"é","b":1}'
    for bad in ({"a": object()}, {"a": "\udcff"}):
        with pytest.raises(JournalError) as info:
            json_text(bad, "session state")
        assert info.value.code == "journal.unserializable"
        assert info.value.message.startswith("session state cannot be stored as JSON: ")
    err = too_late()
    assert (err.code, err.message) == (
        "journal.too_late",
        "the deadline passed before the journal transaction could commit; nothing was written",
    )


def test_a_row_that_does_not_parse_is_a_corrupt_row() -> None:
    row = replace(_journal(1).rows[0], payload="{not json")
    with pytest.raises(JournalError) as info:
        row.to_event()
    assert info.value.code == "journal.corrupt_row"
    assert info.value.message.startswith("journal row 1 does not parse: ")


def test_summaries_and_problems_as_dicts() -> None:
    summary = SessionSummary("s", "codex", 1.5, 2.5, 3, "t")
    assert summary.to_dict() == {
        "session_id": "s", "agent": "codex", "first_ts": 1.5, "last_ts": 2.5, "events": 3,
        "trace_id": "t",
    }  # fmt: skip
    assert Problem(4, "chain.missing", "m").to_dict() == {
        "seq": 4,
        "code": "chain.missing",
        "message": "m",
    }


# -- verify: each kind of damage, exactly ----------------------------------------------------------


def test_an_intact_chain_has_no_problems() -> None:
    journal = _journal()
    assert _problems(journal) == []
    assert _problems(journal, (6, journal.rows[-1].hash)) == []


def test_one_missing_row_is_named_alone_and_breaks_the_link() -> None:
    journal = _journal()
    del journal.rows[2]
    assert _problems(journal) == [
        (4, "chain.missing", "seq 3 missing before 4"),
        (4, "chain.broken_link", "row 4 does not link to the row before it (prev_hash differs)"),
    ]


def test_several_missing_rows_are_named_as_a_range() -> None:
    journal = _journal()
    del journal.rows[1:4]
    assert _problems(journal)[0] == (5, "chain.missing", "seq 2..4 missing before 5")
    first = _journal()
    del first.rows[0]
    assert _problems(first)[:2] == [
        (2, "chain.missing", "seq 1 missing before 2"),
        (2, "chain.broken_link", "row 2 does not link to the row before it (prev_hash differs)"),
    ]


def test_an_edited_row_does_not_match_its_hash() -> None:
    journal = _journal()
    journal.rows[3] = replace(journal.rows[3], agent="mallory")
    assert _problems(journal) == [(4, "chain.hash_mismatch", "row 4 does not match its hash")]


def test_an_unparseable_row_is_named_and_the_walk_goes_on() -> None:
    journal = _journal()
    journal.rows[1] = replace(journal.rows[1], payload="{oops")
    journal.rows[4] = replace(journal.rows[4], agent="mallory")
    problems = _problems(journal)
    assert [(seq, code) for seq, code, _ in problems] == [
        (2, "row.unparseable"),
        (5, "chain.hash_mismatch"),
    ]
    assert problems[0][2].startswith("row 2 does not parse: ")


def test_a_row_that_cannot_be_hashed_is_unparseable() -> None:
    journal = _journal(2)
    journal.rows[1] = replace(journal.rows[1], ts=float("inf"))
    problems = _problems(journal)
    assert [(seq, code) for seq, code, _ in problems] == [(2, "row.unparseable")]
    assert problems[0][2].startswith("row 2 cannot be hashed: ")


def test_a_relinked_row_keeps_its_hash_but_breaks_the_link() -> None:
    journal = _journal()
    row = journal.rows[2]
    forged = replace(row, prev_hash="hmac-sha256:" + "0" * 64)
    journal.rows[2] = replace(
        forged, hash=journal.chain.hash_event(forged.prev_hash, forged.event_dict())
    )
    assert _problems(journal) == [
        (3, "chain.broken_link", "row 3 does not link to the row before it (prev_hash differs)"),
        (4, "chain.broken_link", "row 4 does not link to the row before it (prev_hash differs)"),
    ]


def test_without_the_key_keyed_rows_are_unchecked_not_intact() -> None:
    journal = _journal()
    journal.rows[0] = replace(journal.rows[0], agent="mallory")
    problems = [(p.seq, p.code, p.message) for p in verify_rows(journal.rows[2:], None)]
    assert problems == [
        (3, "chain.missing", "seq 1..2 missing before 3"),
        (3, "chain.broken_link", "row 3 does not link to the row before it (prev_hash differs)"),
        (
            3,
            "chain.key_missing",
            "the journal key is missing: 4 keyed row(s) from seq 3 cannot be checked",
        ),
    ]
    assert [p.code for p in verify_rows(journal.rows[:1], None)] == ["chain.key_missing"]


def test_rows_removed_from_the_end_differ_from_the_recorded_head() -> None:
    journal = _journal()
    head = (6, journal.rows[-1].hash)
    del journal.rows[4:]
    assert _problems(journal, head) == [
        (
            6,
            "chain.head_mismatch",
            "the journal head is at seq 6 but the last row is seq 4: "
            "rows at the end were removed or altered",
        )
    ]
    same_seq = _journal()
    assert [p[1] for p in _problems(same_seq, (6, "hmac-sha256:other"))] == ["chain.head_mismatch"]
    empty = MemoryJournal(KEY)
    assert _problems(empty, (0, "")) == []


def test_an_unkeyed_row_after_a_broken_one_starts_a_new_run() -> None:
    journal = _journal()
    for i in (1, 3):
        row = journal.rows[i]
        digest = hashlib.sha256((row.prev_hash + canonical_json(row.event_dict())).encode())
        journal.rows[i] = replace(row, hash="sha256:" + digest.hexdigest())
    journal.rows[2] = replace(journal.rows[2], payload="{bad")
    codes = [(seq, code) for seq, code, _ in _problems(journal)]
    assert codes[:3] == [(2, "chain.unkeyed"), (3, "row.unparseable"), (4, "chain.unkeyed")]
    assert _problems(journal)[2][2].startswith("row 4 is not keyed (sha256 hash)")


def test_unkeyed_rows_across_a_gap_are_two_runs() -> None:
    journal = _journal()
    for i in range(len(journal.rows)):
        row = journal.rows[i]
        journal.rows[i] = replace(row, hash="sha256:" + str(i))
    del journal.rows[2]
    messages = [m for _, code, m in _problems(journal) if code == "chain.unkeyed"]
    assert [m.split(" are not")[0].split(" is not")[0] for m in messages] == [
        "rows 1..2",
        "rows 4..6",
    ]


# -- verify: unkeyed rows (an old journal, or a forger who recomputed plain SHA-256) ---------------


def test_one_unkeyed_row_is_named_with_its_tag() -> None:
    journal = _journal(4)
    _rechain(journal, range(4, 5), "sha256")
    [problem] = verify_rows(journal.rows, journal.chain)
    assert (problem.seq, problem.code) == (4, "chain.unkeyed")
    assert problem.message == (
        "row 4 is not keyed (sha256 hash): anyone able to edit the database could have computed it"
    )


def test_an_untagged_hash_is_called_untagged() -> None:
    journal = _journal(4)
    _rechain(journal, range(4, 5), None)
    [problem] = verify_rows(journal.rows, journal.chain)
    assert problem.code == "chain.unkeyed" and "(untagged hash)" in problem.message


def test_the_tag_is_what_comes_before_the_first_colon() -> None:
    journal = _journal(4)
    _rechain(journal, range(3, 5), "md5:v2")
    [problem] = verify_rows(journal.rows, journal.chain)
    assert problem.message == (
        "rows 3..4 are not keyed (md5 hashes): "
        "anyone able to edit the database could have computed them"
    )


def test_two_separate_unkeyed_runs_are_two_problems() -> None:
    journal = _journal(7)
    _rechain(journal, range(2, 4), "sha256")
    prev = journal.rows[2].hash
    for i in (3, 4):  # rows 4 and 5 keyed again, on top of the unkeyed run
        row = replace(journal.rows[i], prev_hash=prev)
        prev = journal.chain.hash_event(prev, row.event_dict())
        journal.rows[i] = replace(row, hash=prev)
    _rechain(journal, range(6, 8), "sha256")
    problems = verify_rows(journal.rows, journal.chain)
    assert [(p.seq, p.code) for p in problems] == [(2, "chain.unkeyed"), (6, "chain.unkeyed")]
    assert problems[0].message.startswith("rows 2..3 are not keyed (sha256 hashes)")
    assert problems[1].message.startswith("rows 6..7 are not keyed (sha256 hashes)")
