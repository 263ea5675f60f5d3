"""The head recorded outside the database: missing, unwritable, or left by a previous workspace.

A journal with events but no record, and a record that cannot be written (the per-user state
directory, ``$KEEL_STATE_DIR``, made unwritable the way root cannot get around either: its
``heads`` directory replaced by a file), are journaled and fail ``keel verify``; a workspace
made again at the same path starts clean, while a journal deleted from, or swapped into, a
workspace is still caught.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from journal_helpers import fill, keel_verify, session_events, writer_cmd

from keel.core.userstate import user_state_dir
from keel.journal import (
    BREAK_KIND,
    HEAD_KIND,
    head_path,
    journal_health,
    journal_path,
    open_journal,
    read_head,
    verify_journal,
)


def _codes(root: Path) -> list[tuple[int, str]]:
    return [(p.seq, p.code) for p in verify_journal(root).problems]


def _head_events(root: Path) -> list[dict[str, object]]:
    with open_journal(root) as journal:
        found = list(journal.events(session_id="keel.journal", kinds=[HEAD_KIND]))
    return [e.payload.data for e in found]  # type: ignore[union-attr]


def _unwritable_heads() -> Path:
    """Make every head record unwritable (and unreadable): ``heads`` is a file now."""
    heads = Path(user_state_dir()) / "heads"
    shutil.rmtree(heads, ignore_errors=True)
    heads.parent.mkdir(parents=True, exist_ok=True)
    heads.write_text("not a directory\n")
    return heads


def _writable_heads(heads: Path) -> None:
    heads.unlink()


# -- a missing record ----------------------------------------------------------------------


def test_a_journal_with_events_and_no_head_record_fails_verify(root: Path) -> None:
    fill(root, 5)
    head_path(root).unlink()
    message = (
        f"the journal holds 5 events but its head is not recorded outside the database "
        f"({head_path(root)}): events lost from its end could not be detected"
    )
    assert _codes(root) == [(5, "head.missing")]
    assert verify_journal(root).problems[0].message == message
    health = journal_health(root)
    assert (health.ok, health.problem) == (False, message)
    result = keel_verify(root)
    assert result.returncode == 1 and f"seq 5: head.missing: {message}" in result.stdout
    assert not head_path(root).exists()  # verify only looks


def test_opening_a_journal_without_its_head_record_journals_that_once(root: Path) -> None:
    fill(root, 5)
    head_path(root).unlink()
    for _ in range(3):  # opened again and again: one incident, and the head recorded again
        with open_journal(root) as journal:
            journal.append(session_events()[5])
    data = _head_events(root)
    assert len(data) == 1 and (data[0]["reason"], data[0]["seq"]) == ("missing", 5)
    head = read_head(head_path(root))
    assert head is not None and head.seq == 9
    assert _codes(root) == [(6, "journal.head_unrecorded")]
    # truncation from here on is caught by the record again
    with open_journal(root) as journal:
        assert journal.append(session_events()[6]).seq == 10


# -- a record that cannot be written ------------------------------------------------------


def test_a_head_record_that_cannot_be_written_is_journaled_once_and_fails_verify(
    root: Path,
) -> None:
    with open_journal(root):
        pass  # the key exists; the new journal's head is recorded (seq 0)
    heads = _unwritable_heads()
    for name in ("a", "b"):  # two writer processes, five transactions each
        run = subprocess.run(writer_cmd(root, name, 5), capture_output=True, text=True)
        assert run.returncode == 0, run.stderr  # decisions go on
    data = _head_events(root)
    assert len(data) == 1, data  # noted where it happened, once while it lasts
    assert (data[0]["reason"], data[0]["seq"]) == ("write_failed", 1)
    assert "could not be recorded after seq 1" in str(data[0]["message"])
    assert "Not a directory" in str(data[0]["message"])
    codes = _codes(root)
    assert (2, "journal.head_unrecorded") in codes and (11, "head.missing") in codes
    assert keel_verify(root).returncode == 1

    _writable_heads(heads)  # fixed: the record follows the journal again ...
    with open_journal(root) as journal:
        journal.append(session_events()[0])
    head = read_head(head_path(root))
    assert head is not None and head.seq == 12
    assert _codes(root) == [(2, "journal.head_unrecorded")]  # ... and the gap stays reported
    assert not journal_health(root).ok


def test_a_head_record_that_fails_after_an_acknowledgement_fails_again(root: Path) -> None:
    with open_journal(root):
        pass
    heads = _unwritable_heads()
    fill(root, 3)
    _writable_heads(heads)
    fill(root, 1)
    seen = verify_journal(root)
    with open_journal(root) as journal:
        acknowledged = journal.acknowledge(seen.incidents, "state disk was full", "alice")
    assert [(i.seq, i.code) for i in acknowledged] == [(2, "journal.head_unrecorded")]
    assert verify_journal(root).ok
    _unwritable_heads()
    fill(root, 1)  # its open finds no record it can read: a new incident
    assert [d["reason"] for d in _head_events(root)] == ["write_failed", "missing"]
    assert (7, "journal.head_unrecorded") in _codes(root)
    assert not verify_journal(root).ok


# -- a workspace made again at the same path ------------------------------------------------


def _made_again(root: Path) -> Path:
    """Move the workspace away and make a new directory at its path; the old one's path."""
    old = root.with_name(root.name + ".old")
    root.rename(old)
    root.mkdir()  # the old directory still exists: the new one has another inode
    return old


def test_a_workspace_made_again_at_the_same_path_starts_clean(root: Path) -> None:
    fill(root, 10)
    old = _made_again(root)
    with open_journal(root) as journal:
        assert journal.append(session_events()[0]).seq == 1  # no break, no incident
        assert [e.kind for e in journal.events()] == ["session.start"]
    result = keel_verify(root, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["problems"] == []
    assert journal_health(root).ok
    head = read_head(head_path(root))
    assert head is not None and head.seq == 1

    # the old journal swapped into the new workspace is still a replaced journal
    for path in journal_path(root).parent.glob("journal.db*"):
        path.unlink()
    shutil.copy(journal_path(old), journal_path(root))
    swapped = keel_verify(root)
    assert swapped.returncode == 1 and "head.replaced" in swapped.stdout
    with open_journal(root) as journal:
        first = next(journal.events())
        assert first.kind == BREAK_KIND and first.payload.data["reason"] == "replaced"  # type: ignore[union-attr]
        journal.append(session_events()[1])

    # and the whole .keel deleted from the workspace, which is still there, is caught too
    shutil.rmtree(root / ".keel")
    assert [code for _, code in _codes(root)] == ["head.events_lost"]
    with open_journal(root) as journal:
        first = next(journal.events())
        assert first.kind == BREAK_KIND and first.payload.data["lost"] == 2  # type: ignore[union-attr]
