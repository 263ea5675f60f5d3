"""What a killed or stopped keel process leaves in the checkpoint store, in process.

A stale git lock is removed and journaled (under the session, with every field), a half-written
large-files list is cleared, and a held store bounds the wait of every operation.
``test_checkpoint_locks.py`` does the same with real kills and stopped processes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from checkpoint_helpers import ws

from keel.core.errors import WorkspaceError
from keel.journal import MemoryJournal
from keel.workspace import Checkpoints, _lock


def test_a_stale_git_lock_is_journaled_under_the_session(workdir: Path) -> None:
    root = ws(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    cps.create()
    lock = cps.git_dir / "keel-index.lock"
    lock.write_text("")  # left by a keel process killed in the middle of git add
    target = cps.create(session_id="s", tool_use_id="t")
    assert not lock.exists()
    assert [r.lock for r in cps.recovered] == ["keel-index.lock"]
    lock.write_text("")
    cps.rollback(target)
    errors = [e for e in journal.events() if e.kind == "error"]
    assert [e.session_id for e in errors] == ["s", "s"]


def test_a_stale_git_lock_is_journaled_with_every_field(workdir: Path) -> None:
    root = ws(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    cps.create()
    lock = cps.git_dir / "keel-index.lock"
    lock.write_text("")
    os.utime(lock, (time.time() - 120, time.time() - 120))
    cps.create(session_id="s")
    (item,) = cps.recovered
    (event,) = [e for e in journal.events() if e.kind == "error"]
    assert event.session_id == "s"
    assert event.payload.data == {  # pyright: ignore[reportAttributeAccessIssue]
        "event": "checkpoint.lock_recovered",
        "message": "removed a stale git lock 'keel-index.lock' (120s old) left in the "
        "checkpoint store by a keel process that was killed",
        "repo": str(cps.git_dir),
        **item.to_dict(),
    }


def test_a_large_files_list_a_killed_writer_left_half_written_is_cleared(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cps.create()
    names = set(os.listdir(cps.git_dir))

    def killed(src: str, dst: str) -> None:  # the process dies before its rename
        raise OSError(5, "killed")

    monkeypatch.setattr(os, "replace", killed)
    monkeypatch.setattr(os, "unlink", lambda *a, **k: None)
    with pytest.raises(OSError):
        cps._set_large_files({"big.bin"})  # pyright: ignore[reportPrivateUsage]
    monkeypatch.undo()
    assert len(set(os.listdir(cps.git_dir)) - names) == 1  # its temporary file
    cps.create()  # the next keel process clears what the dead one left
    assert set(os.listdir(cps.git_dir)) - names <= {"keel-recovered.json"}


def test_a_held_store_bounds_the_wait(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root, lock_timeout=0)
    cps.create()
    fd = _lock.acquire(cps.git_dir / _lock.LOCK_NAME)
    try:
        with pytest.raises(WorkspaceError) as info:
            cps.create()
        assert info.value.code == "workspace.locked"
        other = Checkpoints(root)
        for attempt in (
            lambda: other.create(deadline=0.0),
            lambda: other.after_call("s", deadline=0.0),
            lambda: other.diff(cps.history()[0], deadline=0.0),
            lambda: other.rollback(cps.history()[0], deadline=0.0),
        ):
            with pytest.raises(WorkspaceError) as info:
                attempt()
            assert info.value.code == "workspace.locked"
    finally:
        _lock.release(fd)
    assert len(cps.history()) == 1
