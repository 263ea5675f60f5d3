"""What applying a patch reports: the result, the journal event of an applied or failed
patch, the checkpoints taken around it, and check mode (validates, writes and journals nothing).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from patch_helpers import codex_patch, make_files, payload, snapshot

from keel.core.errors import PatchError
from keel.journal import MemoryJournal
from keel.workspace.patch import apply_patch

MOVE_AND_ADD = codex_patch(
    "*** Update File: a.txt", "*** Move to: c.txt", "*** Add File: a.txt", "+n"
)


def test_the_result_and_the_journal_event_of_an_applied_patch(workdir: Path) -> None:
    make_files(workdir, {"a.txt": "a\n"})
    journal = MemoryJournal()
    result = apply_patch(workdir, MOVE_AND_ADD, journal=journal, tool_use_id="call-1")
    patch_id = "patch-" + hashlib.sha256(MOVE_AND_ADD.encode()).hexdigest()[:12]
    assert result.patch_id == patch_id and result.applied and result.checkpoint is None
    assert result.paths == ("a.txt", "c.txt")
    assert result.to_dict() == {
        "format": "codex",
        "applied": True,
        "patch_id": patch_id,
        "checkpoint": None,
        "files": [
            {"action": "move", "path": "a.txt", "new_path": "c.txt", "hunks": 0, "offsets": []},
            {"action": "add", "path": "a.txt", "new_path": None, "hunks": 1, "offsets": []},
        ],
    }
    assert snapshot(workdir) == {
        "a.txt": ("file", b"n\n", 0o644),
        "c.txt": ("file", b"a\n", 0o644),
    }
    [event] = list(journal.events())
    assert (event.kind, event.session_id) == ("patch", "manual")
    p = payload(event)
    assert (p.checkpoint_id, p.label, p.tool_use_id) == (patch_id, f"{patch_id} applied", "call-1")
    assert p.files == ["a.txt", "c.txt"]
    assert p.detail == {"ok": True, "format": "codex", "checkpoint": None}


def test_the_journal_event_of_a_failed_patch(workdir: Path) -> None:
    journal = MemoryJournal()
    text = codex_patch("*** Delete File: gone.txt")
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, text, journal=journal, session_id="s-9", tool_use_id="call-2")
    [event] = list(journal.events())
    assert info.value.code == "patch.missing"
    p = payload(event)
    assert (event.kind, event.session_id, p.tool_use_id, p.files) == (
        "patch",
        "s-9",
        "call-2",
        [],
    )
    patch_id = "patch-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    assert (p.checkpoint_id, p.label) == (patch_id, f"{patch_id} failed [patch.missing]")
    assert p.detail == {
        "ok": False,
        "code": "patch.missing",
        "message": "cannot delete 'gone.txt': no such file",
        "path": "gone.txt",
    }


def test_a_surrogate_in_the_patch_text_still_names_the_patch(workdir: Path) -> None:
    text = "--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+\udcff\n"
    result = apply_patch(workdir, text, check=True)
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    assert result.patch_id == "patch-" + digest
    assert not (workdir / "n").exists()


def test_check_mode_validates_but_writes_and_journals_nothing(workdir: Path) -> None:
    make_files(workdir, {"a.txt": "a\n"})
    before = snapshot(workdir)
    journal = MemoryJournal()
    result = apply_patch(workdir, MOVE_AND_ADD, journal=journal, check=True)
    assert not result.applied and result.checkpoint is None
    assert result.to_dict()["applied"] is False
    assert [f.action for f in result.files] == ["move", "add"]
    assert snapshot(workdir) == before and list(journal.events()) == []
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, codex_patch("*** Delete File: nope"), journal=journal, check=True)
    assert info.value.code == "patch.missing" and len(list(journal.events())) == 1


def test_a_checkpoint_is_taken_before_and_after_the_patch(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    make_files(workdir, {"a.txt": "a\n"})
    cps = Checkpoints(workdir)
    journal = MemoryJournal()
    result = apply_patch(
        workdir, MOVE_AND_ADD, checkpoints=cps, journal=journal, session_id="s1", tool_use_id="t1"
    )
    before = cps.get(result.checkpoint or "")
    assert (before.kind, before.session_id, before.tool_use_id) == ("before", "s1", "t1")
    assert before.label == result.patch_id and result.checkpoint == before.short
    after = cps.history("s1")[-1]
    assert (after.kind, after.tool_use_id) == ("after", "t1")
    patch_events = [e for e in journal.events() if e.kind == "patch"]
    assert [payload(e).checkpoint_id for e in patch_events] == [before.short]
    assert patch_events[0].session_id == "s1" and payload(patch_events[0]).tool_use_id == "t1"
    assert payload(patch_events[0]).detail["checkpoint"] == before.short


def test_without_a_tool_call_the_checkpoint_is_filed_under_the_patch_id(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    make_files(workdir, {"a.txt": "a\n"})
    cps = Checkpoints(workdir)
    result = apply_patch(workdir, MOVE_AND_ADD, checkpoints=cps, session_id="s2")
    assert cps.find("s2", result.patch_id) is not None
    assert [c.kind for c in cps.history("s2")] == ["before", "after"]
    assert all(c.tool_use_id == result.patch_id for c in cps.history("s2"))


def test_check_mode_takes_no_checkpoint(workdir: Path) -> None:
    from keel.workspace import Checkpoints

    make_files(workdir, {"a.txt": "a\n"})
    cps = Checkpoints(workdir)
    assert apply_patch(workdir, MOVE_AND_ADD, checkpoints=cps, check=True).checkpoint is None
    assert cps.history() == []
