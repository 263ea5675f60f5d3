"""Diff and rollback with real git: what changed since a checkpoint, and a rollback that
restores the agent's files byte for byte (modes, symlinks, deletions), keeps everyone else's,
refuses to overwrite theirs without ``--force``, says exactly what it would do in a dry run,
and journals it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpoint_helpers import agent_call, mk, payload, ws

from keel.core.errors import UserError, WorkspaceError
from keel.journal import MemoryJournal
from keel.sandbox.os._registry import Registration
from keel.workspace import Checkpoints
from keel.workspace.checkpoints import _refusal

TreeReader = Callable[[Path], dict[str, bytes | str]]


# -- diff ------------------------------------------------------------------------------------------


def test_diff_lists_renames_type_changes_and_scope(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cp = cps.create()
    (root / "notes.txt").rename(root / "docs.txt")
    (root / "run.sh").unlink()
    (root / "run.sh").symlink_to("README.md")
    (root / "src" / "app.py").write_bytes(b"\xff\xfe not utf-8\n")
    result = cps.diff(cp, in_scope=lambda p: p != "notes.txt")
    assert [(c.path, c.status, c.old_path) for c in result.changes] == [
        ("docs.txt", "renamed", "notes.txt"),
        ("run.sh", "type_changed", None),
        ("src/app.py", "modified", None),
    ]
    assert result.outside_scope == ("notes.txt",)
    assert "rename from notes.txt" in result.patch
    assert "+\ufffd\ufffd not utf-8" in result.patch
    assert result.checkpoint == cp
    quiet = cps.diff(cp, patch=False)
    assert quiet.patch == "" and quiet.changes == result.changes and quiet.outside_scope == ()


# -- rollback --------------------------------------------------------------------------------------


def test_rollback_restores_bytes_modes_links_and_journals_it(
    workdir: Path, tree: TreeReader
) -> None:
    root = ws(workdir)
    (root / "link").symlink_to("README.md")
    (root / "bin.dat").write_bytes(bytes(range(256)) * 3)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    progress: list[str] = []
    cps.on_progress = progress.append
    before = tree(root)
    modes = {p: stat.S_IMODE(os.lstat(root / p).st_mode) for p in ("run.sh", "README.md")}

    def change() -> None:
        (root / "run.sh").chmod(0o644)
        (root / "README.md").chmod(0o755)
        (root / "link").unlink()
        (root / "link").symlink_to("notes.txt")
        (root / "bin.dat").write_bytes(b"other\n")
        (root / "src" / "app.py").write_text("print('changed')\nsecond\n")
        (root / "notes.txt").unlink()
        (root / "new" / "deep").mkdir(parents=True)
        (root / "new" / "deep" / "n.txt").write_text("n\n")

    agent_call(cps, "s", "t", change)
    (root / "mine.txt").write_text("the user's\n")
    target = cps.resolve(session_id="s")
    progress.clear()
    result = cps.rollback(target)
    assert progress == [
        "scanning the workspace",
        "adding 1 changed file(s) to the checkpoint",  # mine.txt, in the undo checkpoint
        "working out who changed what",
        "restoring 7 file(s)",
        "scanning the workspace",
        "adding 6 changed file(s) to the checkpoint",  # the deleted one is not added
    ]
    assert tree(root) == {**before, "mine.txt": b"the user's\n"}
    assert {p: stat.S_IMODE(os.lstat(root / p).st_mode) for p in modes} == modes
    assert not (root / "new").exists()
    assert result.restored == ("README.md", "bin.dat", "link", "notes.txt", "run.sh", "src/app.py")
    assert result.deleted == ("new/deep/n.txt",)
    assert result.kept == ("mine.txt",) and result.overwritten == ()
    assert result.target == target
    assert result.undo is not None and result.after is not None
    assert (result.undo.kind, result.undo.session_id, result.undo.label) == (
        "rollback",
        "s",
        f"before rollback to {target.short}",
    )
    assert (result.after.kind, result.after.session_id, result.after.label) == (
        "restored",
        "s",
        f"rolled back to {target.short}",
    )
    assert result.undo.tool_use_id is None and result.after.tool_use_id is None
    assert result.after.parent == result.undo.id
    assert cps.history()[-2:] == [result.undo, result.after]
    event = list(journal.events())[-1]
    assert (event.kind, event.session_id) == ("rollback", "s")
    assert payload(event).checkpoint_id == target.short
    assert payload(event).label == f"rollback to {target.short}"
    assert payload(event).tool_use_id == "t"
    assert payload(event).files == [*sorted([*result.restored, "new/deep/n.txt"])]
    assert payload(event).detail == {
        "undo": result.undo.short,
        "after": result.after.short,
        "restored": 6,
        "deleted": ["new/deep/n.txt"],
        "overwritten": [],
        "kept": ["mine.txt"],
    }


def test_a_rollback_can_be_rolled_back(workdir: Path, tree: TreeReader) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    agent_call(cps, "s", "t", lambda: (root / "README.md").write_text("agent\n"))
    changed = tree(root)
    first = cps.rollback(cps.resolve(session_id="s"))
    assert first.undo is not None
    second = cps.rollback(first.undo)
    assert tree(root) == changed
    assert second.restored == ("README.md",)


def test_force_resets_everything_and_journals_the_overwrite(workdir: Path) -> None:
    root = ws(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(root, journal)
    target = cps.create(label="by hand")
    (root / "scratch.txt").write_text("a note\n")  # the user's, gone again by the rollback
    agent_call(cps, "s", "t", lambda: (root / "README.md").write_text("agent\n"))
    (root / "scratch.txt").unlink()
    (root / "README.md").write_text("user on top\n")
    (root / "notes.txt").write_text("user only\n")
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(target)
    assert info.value.code == "workspace.user_changes"
    assert info.value.message == _refusal(["README.md"])
    assert info.value.context == {"files": ["README.md"], "checkpoint": target.short}
    result = cps.rollback(target, force=True)
    assert result.overwritten == ("README.md", "notes.txt")
    assert result.kept == ()
    assert result.restored == ("README.md", "notes.txt")
    assert (root / "notes.txt").read_text() == "keep\n"
    event = list(journal.events())[-1]
    assert event.session_id == "manual"
    assert payload(event).tool_use_id is None
    assert payload(event).detail["overwritten"] == ["README.md", "notes.txt"]


def test_only_the_agents_files_are_restored(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    (root / "early.txt").write_text("user before\n")
    agent_call(cps, "s", "t1", lambda: (root / "src" / "app.py").write_text("agent 1\n"))
    agent_call(cps, "o", "u1", lambda: (root / "theirs.txt").write_text("another session\n"))
    (root / "between.txt").write_text("user between\n")
    agent_call(cps, "s", "t2", lambda: (root / "README.md").write_text("agent 2\n"))
    (root / "after.txt").write_text("user after\n")
    result = cps.rollback(cps.resolve(session_id="s"))
    assert result.restored == ("README.md", "src/app.py")
    assert result.kept == ("after.txt", "between.txt", "theirs.txt")
    assert (root / "between.txt").exists() and (root / "early.txt").exists()


def test_a_call_without_an_after_is_open_until_the_next_checkpoint(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    target = cps.create(session_id="s", tool_use_id="t1")
    (root / "README.md").write_text("agent\n")  # the agent_call's post-tool hook never ran
    cps.create(label="someone else's checkpoint")
    (root / "notes.txt").write_text("later\n")
    plan = cps.rollback(target, dry_run=True)
    assert (plan.restored, plan.kept) == (("README.md",), ("notes.txt",))
    (root / ".keel" / "exec").mkdir()
    running = Registration(str(root), {})  # a contained command: it may be that agent_call's
    try:
        plan = cps.rollback(target, dry_run=True)
    finally:
        running.remove()
    assert (plan.restored, plan.kept) == (("README.md", "notes.txt"), ())


def test_a_file_over_the_cap_at_the_checkpoint_is_left_alone(workdir: Path) -> None:
    root = ws(workdir)
    (root / "big.bin").write_bytes(b"x" * 200)
    cps = Checkpoints(root, max_file_bytes=100)
    agent_call(
        cps,
        "s",
        "t",
        lambda: (
            (root / "big.bin").write_bytes(b"small"),
            (root / "README.md").write_text("agent\n"),
        ),
    )
    result = cps.rollback(cps.resolve(session_id="s"))
    assert result.restored == ("README.md",)
    assert (root / "big.bin").read_bytes() == b"small"


def test_a_dry_run_says_exactly_what_the_rollback_does(workdir: Path, tree: TreeReader) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)

    def agent() -> None:
        (root / "README.md").write_text("agent\n")
        (root / "new.txt").write_text("added by the agent\n")

    agent_call(cps, "s", "t", agent)
    (root / "notes.txt").write_text("the user's\n")
    target = cps.resolve(session_id="s")
    before = tree(root)
    plan = cps.rollback(target, dry_run=True)
    assert tree(root) == before
    assert (plan.undo, plan.after, plan.dry_run) == (None, None, True)
    assert (plan.restored, plan.deleted, plan.overwritten, plan.kept) == (
        ("README.md",),
        ("new.txt",),
        (),
        ("notes.txt",),
    )
    (root / "README.md").write_text("the user's, on top\n")
    before = tree(root)
    forced = cps.rollback(target, force=True, dry_run=True)
    assert tree(root) == before and forced.dry_run
    assert (forced.restored, forced.deleted, forced.overwritten, forced.kept) == (
        ("README.md", "notes.txt"),
        ("new.txt",),
        ("README.md", "notes.txt"),
        (),
    )
    done = cps.rollback(target, force=True)
    assert not done.dry_run and done.undo is not None
    assert (done.restored, done.deleted, done.overwritten, done.kept) == (
        forced.restored,
        forced.deleted,
        forced.overwritten,
        forced.kept,
    )


def test_a_missing_object_is_workspace_corrupt(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    agent_call(cps, "s", "t", lambda: (root / "README.md").write_text("agent\n"))
    sha = cps.git.run("rev-parse", f"{cps.history()[0].tree}:README.md").decode().strip()
    (cps.git_dir / "objects" / sha[:2] / sha[2:]).unlink()
    target = cps.resolve(session_id="s")
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(target)
    assert info.value.code == "workspace.corrupt"
    assert info.value.context["checkpoint"] == target.short
    assert info.value.message.startswith(
        f"cannot roll back to checkpoint {target.short}: it is damaged, the checkpoint store "
        f"lost the saved copy of README.md (blob {sha[:12]})"
    )
    assert info.value.context["missing"] == [{"oid": sha, "kind": "blob", "path": "README.md"}]
    assert (root / "README.md").read_text() == "agent\n"


def test_a_checkpoint_from_elsewhere_is_unknown(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cps.create()
    stranger = mk("before", "s", "t", 0xABC)
    with pytest.raises(UserError) as info:
        cps.rollback(stranger)
    assert (info.value.code, info.value.message) == (
        "workspace.unknown_checkpoint",
        f"checkpoint {stranger.short} is not in this workspace's history",
    )
