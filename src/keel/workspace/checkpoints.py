"""Checkpoints: snapshots of the workspace in a shadow git repository, and rollback.

Every checkpoint is a commit in ``.keel/checkpoints`` (see ``_git.ShadowGit``), chained on
``refs/keel/head`` (the shadow HEAD); its message carries the metadata as JSON (kind, session,
tool-call id, label, the files changed since the previous checkpoint). Snapshots are cheap:
keel keeps its own index; a directory watch (``_watch``) plus ``git diff-files`` tells when
nothing changed (the newest tree is reused) or which tracked files did, else one ``git
status`` finds what changed; only those paths are added. ``.gitignore`` is honoured, ``.keel/``
is never snapshotted, and files above a size cap and nested repositories are left out (and
never touched by a rollback).

Checkpoint kinds:

- ``before``: taken by the guard before an agent call that can change files;
- ``after``: taken after that call (``after_call``), recording what the agent left;
- ``manual``: ``keel checkpoint create``;
- ``rollback`` / ``restored``: the state just before and just after a rollback, so a
  rollback can itself be rolled back.

Who changed what: the time between two consecutive checkpoints is an *interval*. An interval
belongs to the agent while one of its calls is open and to keel during a rollback; every
other interval belongs to someone else (the user, another session). A call is open from its
``before`` to its ``after``. A call that never got an ``after`` (the user rejected the
prompt, the client was interrupted, the post-tool hook never ran) is open only until the
next checkpoint, whoever took it: its own session's next call, another session's call, a
manual checkpoint or a rollback. Whatever it changed is in that next checkpoint's tree, so
it stays that call's; what changes after it belongs to whoever holds the later intervals.
Left open to the end, such a call would overlap every later call of every other session
and make their rollbacks refuse, naming files only they changed. The cost: a call that is
in fact still running with no ``after`` yet, and writes a file while another session's
call is open, has that write counted as the other session's. keel narrows that: while a
contained command (``keel exec``) is running in the workspace, which call it belongs to is
unknown, so every call with no ``after`` stays open until now, as it must (a shell command
run uncontained, without a sandbox, is not seen). A call that is the newest checkpoint
stays open until now too.

A rollback restores the files the agent changed since the checkpoint, leaves alone the
files only someone else changed, and refuses, naming them, when a file was changed by both;
``force=True`` resets every changed file. Without ``after`` checkpoints keel cannot tell a
user's edit from the agent's during the call, so the guard should take them.

One keel process at a time works in the shadow repository (a flock, see ``_lock``). By
default a caller waits for it as long as it takes; ``lock_timeout`` or a ``deadline`` bounds
the wait (``workspace.locked``, naming the holder). A git lock file found while holding the
flock was left by a killed process: it is removed, journaled (kind ``error``, event
``checkpoint.lock_recovered``) and remembered for ``checkpoint_health``.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from keel.core.errors import UserError, WorkspaceError
from keel.core.events import CheckpointPayload, DataPayload, Event
from keel.core.files import write_atomic
from keel.core.root import state_dir
from keel.workspace import _lock, _watch
from keel.workspace._atomic import FileTransaction
from keel.workspace._damage import Damage, absent, scan
from keel.workspace._git import HEAD_REF, ShadowGit
from keel.workspace._lock import LockRecovery

CheckpointKind = Literal["before", "after", "manual", "rollback", "restored"]
CHECKPOINT_KINDS: tuple[CheckpointKind, ...] = ("before", "after", "manual", "rollback", "restored")
TARGET_KINDS: frozenset[str] = frozenset({"before", "manual", "rollback"})
"""Kinds ``--last`` picks: the states an undo goes back to."""

DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024
MANUAL_SESSION = "manual"
"""The journal session of checkpoints and rollbacks that belong to no agent session."""
MESSAGE_FILES_CAP = 1000
PATHSPEC_LIMIT = 200
LARGE_FILES = "keel-large"
"""In the shadow repository: an ignore file (``core.excludesFile``) of the files over the cap."""
LARGE_HEADER = "# written by keel: files over the checkpoint size cap\n"
JOURNAL_FILES_CAP = 200
DAMAGE_SCAN_SECONDS = 30.0
"""How long a failed diff or rollback looks for the damage that explains it."""


class EventSink(Protocol):
    """The part of ``keel.journal.Journal`` checkpoints need."""

    def append(self, event: Event) -> Event:
        """Store one event."""
        ...


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One snapshot of the workspace."""

    id: str
    """The commit id in the shadow repository (40 hex); ``short`` is what people type."""
    tree: str
    kind: CheckpointKind
    ts: float
    session_id: str | None = None
    tool_use_id: str | None = None
    label: str | None = None
    files: tuple[str, ...] = ()
    """Files changed since the previous checkpoint (capped; ``files_total`` is the count)."""
    files_total: int = 0
    skipped: tuple[str, ...] = ()
    """Left out: files larger than the size cap, and nested repositories (``dir/``)."""
    parent: str | None = None
    reused: bool = False
    """True when nothing changed since the previous checkpoint (same tree)."""

    @property
    def short(self) -> str:
        """The first 12 hex digits of ``id``."""
        return self.id[:12]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with ``short`` added."""
        data = asdict(self)
        data["short"] = self.short
        data["files"] = list(self.files)
        data["skipped"] = list(self.skipped)
        return data


ChangeStatus = Literal["added", "modified", "deleted", "renamed", "type_changed"]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file that differs between a checkpoint and now."""

    path: str
    status: ChangeStatus
    old_path: str | None = None


@dataclass(frozen=True, slots=True)
class DiffResult:
    """What changed in the workspace since a checkpoint."""

    checkpoint: Checkpoint
    changes: tuple[FileChange, ...]
    patch: str = ""
    outside_scope: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "checkpoint": self.checkpoint.to_dict(),
            "changes": [asdict(c) for c in self.changes],
            "outside_scope": list(self.outside_scope),
            "patch": self.patch,
        }


@dataclass(frozen=True, slots=True)
class RollbackResult:
    """A rollback that happened; ``undo`` is the checkpoint that takes it back.

    In a dry run (``dry_run``) nothing happened: the lists say what the rollback would do,
    and ``undo`` and ``after`` are None. They are None too, with every list empty, when
    nothing had changed since ``target``: there was nothing to undo (``noop``).
    """

    target: Checkpoint
    undo: Checkpoint | None
    after: Checkpoint | None
    restored: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    overwritten: tuple[str, ...] = ()
    """Files someone else changed that ``force`` overwrote."""
    kept: tuple[str, ...] = ()
    """Files changed since the checkpoint only by someone else, left as they are."""
    dry_run: bool = False
    """True when this only says what a rollback would do."""

    @property
    def noop(self) -> bool:
        """True when nothing had changed since ``target``: nothing was (or would be) done."""
        return self.undo is None and not self.files and not self.kept

    @property
    def files(self) -> tuple[str, ...]:
        """Every file the rollback wrote or removed."""
        return tuple(sorted({*self.restored, *self.deleted}))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "dry_run": self.dry_run,
            "target": self.target.to_dict(),
            "undo": self.undo.short if self.undo is not None else None,
            "after": self.after.short if self.after is not None else None,
            "restored": list(self.restored),
            "deleted": list(self.deleted),
            "overwritten": list(self.overwritten),
            "kept": list(self.kept),
        }


@dataclass(frozen=True, slots=True)
class _Entry:
    """A line of ``git diff-tree -r``: the target side (``mode``/``blob``) of one path."""

    path: str
    status: str
    mode: str
    blob: str
    new_mode: str = ""
    old_path: str | None = None


@dataclass(slots=True)
class _Snapshot:
    tree: str
    skipped: list[str] = field(default_factory=list[str])
    files: list[str] | None = None
    """Paths changed since the newest checkpoint, when known without asking git."""
    survey: tuple[int, dict[str, _watch.StatKey]] | None = None
    """The directory survey taken before git scanned the tree (see ``_watch``)."""
    quick: bool = False
    """Found unchanged by the quick check: the saved watch stays valid."""
    head: _Head | None = None
    """The newest checkpoint when the snapshot was taken."""


@dataclass(frozen=True, slots=True)
class _Head:
    commit: str
    tree: str


class Checkpoints:
    """Checkpoints of the workspace at ``root``, kept in ``root/.keel/checkpoints``."""

    def __init__(
        self,
        root: Path,
        journal: EventSink | None = None,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        watch: bool = True,
        lock_timeout: float | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.watch = watch
        """Use the directory watch (``_watch``) to skip the full scan when nothing changed."""
        self.journal = journal
        self.max_file_bytes = max_file_bytes
        self.git_dir = state_dir(self.root) / "checkpoints"
        self.git = ShadowGit(self.root, self.git_dir)
        self.large_list = self.git_dir / LARGE_FILES
        self.watch_file = self.git_dir / "keel-watch"
        self.lock_timeout = lock_timeout
        """Seconds to wait for another keel process before ``workspace.locked``; None: forever."""
        self.on_progress: Callable[[str], None] | None = None
        """Told what a long checkpoint or rollback is doing now (the CLI's spinner shows it)."""
        self._recovered: list[LockRecovery] = []

    @property
    def recovered(self) -> tuple[LockRecovery, ...]:
        """The stale git locks this object removed, oldest first (each one is journaled)."""
        return tuple(self._recovered)

    # -- taking checkpoints ---------------------------------------------------------------

    def create(
        self,
        *,
        session_id: str | None = None,
        tool_use_id: str | None = None,
        label: str | None = None,
        kind: CheckpointKind | None = None,
        deadline: float | None = None,
        journal: bool = True,
    ) -> Checkpoint:
        """Snapshot the workspace now (``before`` with a session, else ``manual``).

        Args:
            session_id: The agent session the checkpoint belongs to.
            tool_use_id: The tool call it was taken for.
            label: Free text shown in listings.
            kind: Overrides the kind (``after``, ...).
            deadline: A ``time.monotonic()`` instant after which waiting for another keel
                process gives up; overrides ``lock_timeout``. It bounds the wait, not git.
            journal: False leaves journaling the checkpoint to the caller
                (``checkpoint_event``); a stale-lock recovery is journaled either way.

        Raises:
            WorkspaceError: ``workspace.locked`` when the deadline passed; ``workspace.git``
                or ``workspace.io`` when git or the disk failed.
        """
        chosen: CheckpointKind = kind or ("before" if session_id else "manual")
        with self._locked(deadline, session_id):
            cp = self._commit_snapshot(chosen, session_id, tool_use_id, label)
        if journal:
            self._journal_checkpoint(cp)
        return cp

    def after_call(
        self,
        session_id: str | None,
        tool_use_id: str | None = None,
        *,
        deadline: float | None = None,
        journal: bool = True,
    ) -> Checkpoint:
        """Snapshot what an agent call left behind (from the post-tool hook); see ``create``."""
        return self.create(
            session_id=session_id,
            tool_use_id=tool_use_id,
            kind="after",
            deadline=deadline,
            journal=journal,
        )

    # -- reading --------------------------------------------------------------------------

    def history(self, session_id: str | None = None) -> list[Checkpoint]:
        """Every checkpoint, oldest first; only one session's when ``session_id`` is given."""
        commit = self.git.read_ref(HEAD_REF)
        if commit is None:
            return []
        with self._intact(None, "read the checkpoint history"):
            raw = self.git.run("log", "-z", "--format=%H%x1f%T%x1f%P%x1f%B", commit)
        items = [_parse_commit(chunk) for chunk in raw.decode("utf-8", "replace").split("\0")]
        cps = [c for c in reversed(items) if c is not None]
        if session_id is not None:
            cps = [c for c in cps if c.session_id == session_id]
        return cps

    def get(self, ref: str) -> Checkpoint:
        """The checkpoint whose id starts with ``ref`` (at least 4 hex digits)."""
        ref = ref.strip().lower()
        if len(ref) < 4 or any(ch not in "0123456789abcdef" for ch in ref):
            raise UserError(
                f"{ref!r} is not a checkpoint id (use 4 or more hex digits from "
                "`keel checkpoint list`)",
                code="workspace.bad_checkpoint_id",
            )
        found = [c for c in self.history() if c.id.startswith(ref)]
        if not found:
            raise UserError(f"no checkpoint {ref!r}", code="workspace.unknown_checkpoint")
        if len(found) > 1:
            raise UserError(
                f"checkpoint id {ref!r} is ambiguous; give more digits",
                code="workspace.ambiguous_checkpoint",
            )
        return found[0]

    def find(self, session_id: str, tool_use_id: str) -> Checkpoint | None:
        """The ``before`` checkpoint the guard took for one tool call, if any."""
        for cp in self.history(session_id):
            if cp.kind == "before" and cp.tool_use_id == tool_use_id:
                return cp
        return None

    def resolve(
        self, ref: str | None = None, *, session_id: str | None = None, last: bool = False
    ) -> Checkpoint:
        """Pick a checkpoint: by id, the first of a session, or the last undo point."""
        if ref:
            return self.get(ref)
        if session_id is not None and not last:
            mine = [c for c in self.history(session_id) if c.kind in TARGET_KINDS]
            if not mine:
                raise UserError(
                    f"session {session_id!r} has no checkpoints", code="workspace.no_checkpoint"
                )
            return mine[0]
        targets = [c for c in self.history(session_id) if c.kind in TARGET_KINDS]
        if not targets:
            raise UserError(
                "there are no checkpoints yet (keel takes one before each agent change; "
                "`keel checkpoint create` takes one by hand)",
                code="workspace.no_checkpoint",
            )
        return targets[-1]

    def diff(
        self,
        checkpoint: Checkpoint,
        *,
        patch: bool = True,
        in_scope: Callable[[str], bool] | None = None,
        deadline: float | None = None,
    ) -> DiffResult:
        """What changed since ``checkpoint``: files (with renames) and a unified diff.

        ``deadline`` bounds the wait for another keel process, as in ``create``.

        Raises:
            WorkspaceError: ``workspace.corrupt`` when the store lost objects the diff needs,
                naming the damaged checkpoints and the files whose content is gone.
        """
        with self._intact(checkpoint, "diff against"):
            with self._locked(deadline):
                now = self._snapshot()
            raw = self.git.run("diff-tree", "-r", "-z", "-M", checkpoint.tree, now.tree)
            changes = tuple(_change(e) for e in _parse_diff_tree(raw))
            text = ""
            if patch and changes:
                out = self.git.run(
                    "diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M",
                    checkpoint.tree, now.tree,
                )  # fmt: skip
                text = out.decode("utf-8", "replace")
        outside: tuple[str, ...] = ()
        if in_scope is not None:
            touched = {c.path for c in changes} | {c.old_path for c in changes if c.old_path}
            outside = tuple(sorted(p for p in touched if not in_scope(p)))
        return DiffResult(checkpoint, changes, text, outside)

    # -- rollback -------------------------------------------------------------------------

    def rollback(
        self,
        target: Checkpoint,
        *,
        force: bool = False,
        deadline: float | None = None,
        dry_run: bool = False,
    ) -> RollbackResult:
        """Undo the agent's changes since ``target``: restore those files, and only those.

        Files that only someone else (the user, another session) changed since ``target``
        are left alone (``RollbackResult.kept``). A file both the agent and someone else
        changed makes the rollback refuse (``WorkspaceError`` code ``workspace.user_changes``
        naming the files), so nobody's work is wiped. ``force`` restores every file changed
        since ``target``, whoever changed it: a full reset. The state before the rollback is
        itself a checkpoint (``RollbackResult.undo``), so a rollback can be rolled back.
        ``deadline`` bounds the wait for another keel process, as in ``create``.
        ``dry_run`` decides the same way (and refuses the same way) but restores nothing and
        takes no checkpoint: the result lists what would be restored, deleted and kept.

        A rollback that would restore nothing refuses too when files changed since ``target``
        (``workspace.nothing_to_roll_back``: only someone else changed them; ``force`` resets
        them), and is a no-op when nothing changed: no file, checkpoint or journal entry.

        Raises:
            WorkspaceError: ``workspace.user_changes``, ``workspace.nothing_to_roll_back``;
                ``workspace.corrupt`` when the store lost objects the rollback needs.
        """
        with self._intact(target, "roll back to"):
            return self._rollback(target, force, deadline, dry_run)

    def _rollback(
        self, target: Checkpoint, force: bool, deadline: float | None, dry_run: bool
    ) -> RollbackResult:
        with self._locked(deadline, target.session_id):
            now = self._snapshot()
            self._progress("working out who changed what")
            agent, others = self._attribute(target, now.tree, _commands_running(self.root))
            raw = self.git.run("diff-tree", "-r", "-z", "--no-renames", target.tree, now.tree)
            unknown = set(target.skipped)  # over the size cap then: no content to go back to
            entries = [
                e
                for e in _parse_diff_tree(raw)
                if "160000" not in (e.mode, e.new_mode) and e.path not in unknown
            ]  # submodules are the user's business
            changed = {e.path for e in entries}
            conflicts = sorted(changed & agent & others)
            if conflicts and not force:
                raise WorkspaceError(
                    _refusal(conflicts),
                    code="workspace.user_changes",
                    files=conflicts,
                    checkpoint=target.short,
                )
            kept = sorted(changed - agent) if not force else []
            entries = [e for e in entries if e.path not in kept]
            if kept and not entries:
                raise WorkspaceError(
                    _nothing_of_the_agents(target, kept),
                    code="workspace.nothing_to_roll_back",
                    files=kept,
                    checkpoint=target.short,
                )
            if not changed:  # nothing to undo: no checkpoints that only say so
                return RollbackResult(target, None, None, dry_run=dry_run)
            if dry_run:  # it would refuse for a lost object too: say so now
                self._require_blobs([e.blob for e in entries if e.status != "A"])
                return RollbackResult(
                    target,
                    None,
                    None,
                    tuple(sorted(e.path for e in entries if e.status != "A")),
                    tuple(sorted(e.path for e in entries if e.status == "A")),
                    tuple(sorted(changed & others) if force else []),
                    tuple(kept),
                    dry_run=True,
                )
            restored, deleted = self._restore(entries)
            label = f"before rollback to {target.short}"
            undo = self._commit(now, "rollback", target.session_id, None, label)
            after = self._commit_snapshot(
                "restored", target.session_id, None, f"rolled back to {target.short}"
            )
        overwritten = sorted(changed & others) if force else []
        result = RollbackResult(
            target, undo, after, tuple(restored), tuple(deleted), tuple(overwritten), tuple(kept)
        )
        self._journal_rollback(result)
        return result

    def damage(self, *, deadline: float | None = None) -> Damage | None:
        """What the store lost: the checkpoints that cannot be diffed or restored, and why.

        Read-only, without the lock; None when the scan ran past ``deadline`` (a
        ``time.monotonic()`` instant). See ``_damage``.
        """
        head = self.git.read_ref(HEAD_REF)
        return Damage() if head is None else scan(self.git, head, deadline=deadline)

    # -- internals ------------------------------------------------------------------------

    @contextmanager
    def _intact(self, target: Checkpoint | None, action: str) -> Iterator[None]:
        """A git failure that a damaged store explains as ``workspace.corrupt``.

        A failure with no damage behind it (or when the scan runs out of time) passes as it is.
        """
        try:
            yield
        except WorkspaceError as exc:
            if exc.code not in ("workspace.git", "workspace.corrupt"):
                raise
            damage = self.damage(deadline=time.monotonic() + DAMAGE_SCAN_SECONDS)
            if damage is None or not damage.found:
                raise
            raise damage.error(target.id if target else None, action) from exc

    @contextmanager
    def _locked(
        self, deadline: float | None = None, session_id: str | None = None
    ) -> Iterator[None]:
        """One keel process at a time in the shadow repository; OS errors become keel's.

        Holding the flock, it clears the git locks killed processes left (``_lock.recover``);
        those recoveries are journaled once the flock is released.
        """
        if deadline is None and self.lock_timeout is not None:
            deadline = time.monotonic() + self.lock_timeout
        try:
            self.git.ensure()
            fd = _lock.acquire(self.git_dir / _lock.LOCK_NAME, deadline)
        except OSError as exc:
            raise _io_error(exc) from exc
        recovered: tuple[LockRecovery, ...] = ()
        try:
            recovered = _lock.recover(self.git_dir)
            self.git.lock_fd = fd
            yield
        except OSError as exc:
            raise _io_error(exc) from exc
        finally:
            self.git.lock_fd = None
            _lock.release(fd)
            if recovered:
                self._recovered.extend(recovered)
                self._journal_recoveries(recovered, session_id)

    def _head(self) -> _Head | None:
        """The newest checkpoint (commit, tree), read without a git process."""
        commit = self.git.read_ref(HEAD_REF)
        if commit is None:
            return None
        tree = self.git.commit_tree(commit)
        return _Head(commit, tree)

    def _set_head(self, commit: str) -> None:
        self.git.set_ref(HEAD_REF, commit)

    def _snapshot(self) -> _Snapshot:
        """Bring keel's index up to date with the work tree and write its tree.

        When the directory watch says no file appeared or vanished since the newest
        checkpoint, ``git diff-files`` (tracked files only) is all it takes to find what
        changed; otherwise one ``git status`` (the shadow HEAD is the newest checkpoint, the
        untracked cache on) does. When nothing changed, the newest tree is reused.
        """
        self._progress("scanning the workspace")
        large, shrunk = self._large_files()  # first: a file back under the cap must show up
        head = self._head()
        watch = _watch.load(self.watch_file) if self.watch else None
        quick = None if shrunk or head is None else self._quick_changes(watch, head)
        if quick and any(os.path.basename(p) == b".gitignore" for p in quick):
            quick, watch = None, None  # what is ignored changed: a full scan and survey
        if quick is not None and watch is not None and head is not None:
            worktree, staged = quick, []
            survey: tuple[int, dict[str, _watch.StatKey]] | None = (watch.taken_ns, watch.dirs)
            if not worktree:
                return _Snapshot(head.tree, sorted(large), files=[], quick=True, head=head)
        else:
            survey = (
                _watch.survey(self.root, watch.dirs if watch else None, self._ignored_dirs)
                if self.watch
                else None
            )  # before git looks: whatever changes after this shows up next time
            worktree, staged = self._status()
        if survey is not None and self._ignore_rules_moved(survey[0], (*worktree, *staged)):
            survey = None  # what is ignored changed under the survey: a full one next time
        if not worktree and not staged and head is not None:
            return _Snapshot(head.tree, sorted(large), files=[], survey=survey, head=head)
        worktree = self._expand_directories(worktree)
        add: list[bytes] = []
        drop: list[bytes] = []
        known_large = len(large)
        for raw in sorted(set(worktree)):
            if self._gone(raw):
                drop.append(raw)  # deleted, or now behind a symlink git will not follow
            elif raw.endswith(b"/"):
                large.add(os.fsdecode(raw))  # a nested repository: its own business
            elif self._too_big(raw):
                large.add(os.fsdecode(raw))
                drop.append(raw)  # over the cap: out of the tree, never hashed
            else:
                add.append(raw)
        skipped = sorted(large)
        if len(large) != known_large:
            self._set_large_files(large)
        if drop:
            self.git.run("update-index", "-z", "--force-remove", "--stdin",
                         stdin=b"\0".join(drop) + b"\0")  # fmt: skip
        self._progress(f"adding {len(add)} changed file(s) to the checkpoint")
        if head is None and not staged and len(add) > PATHSPEC_LIMIT:
            self.git.import_files(add)  # the first snapshot: one pack, not a file per object
        elif len(add) > PATHSPEC_LIMIT:  # matching many pathspecs costs more than a full add
            self.git.run("add", "-A")
        elif add:
            self.git.run("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul",
                         stdin=b"\0".join(add))  # fmt: skip
        tree = self.git.run("write-tree").decode().strip()
        if head is None:  # status keeps the untracked cache up to date from now on
            self.git.run("update-index", "--untracked-cache", check=False)
        files = sorted({os.fsdecode(p) for p in (*add, *drop, *staged)} - set(skipped))
        return _Snapshot(tree, skipped, files if head is not None else None, survey, head=head)

    def _quick_changes(self, watch: _watch.Watch | None, head: _Head) -> list[bytes] | None:
        """The tracked files that changed, when the watch rules out new or removed files."""
        if watch is None or watch.head != head.tree or watch.index != self._index_signature():
            return None
        if not _watch.unchanged(self.root, watch):
            return None
        proc = self.git.proc(["diff-files", "--name-only", "-z", "--ignore-submodules=all"])
        if proc.returncode != 0:
            return None
        return [p for p in proc.stdout.split(b"\0") if p]

    def _status(self) -> tuple[list[bytes], list[bytes]]:
        """Paths that differ in the work tree (or are new), and in the index, from HEAD."""
        out = self.git.run(  # -unormal: the untracked cache only serves that mode in git 2.39
            "status", "--porcelain=v1", "-z", "-unormal", "--no-renames", "--ignore-submodules=all"
        )
        worktree: list[bytes] = []
        staged: list[bytes] = []
        for item in out.split(b"\0"):
            if len(item) < 4:
                continue
            xy, raw = item[:2], item[3:]
            if xy == b"??" or xy[1:] != b" ":
                worktree.append(raw)
            if xy[:1] not in (b" ", b"?"):
                staged.append(raw)
        return worktree, staged

    def _ignore_rules_moved(self, taken_ns: int, paths: Iterable[bytes]) -> bool:
        """Whether a changed ``.gitignore`` may be newer than the survey that used it."""
        for raw in paths:
            if os.path.basename(raw.rstrip(b"/")) != b".gitignore":
                continue
            try:
                mtime = os.lstat(self.root / os.fsdecode(raw)).st_mtime_ns
            except OSError:
                return True
            if mtime >= taken_ns - _watch.RACY_NS:
                return True
        return False

    def _ignored_dirs(self, dirs: list[str]) -> set[str]:
        """Which of ``dirs`` git ignores (their subdirectories are not watched)."""
        if not dirs:
            return set()
        proc = self.git.proc(
            ["check-ignore", "-z", "--stdin", "--no-index"],
            stdin=b"\0".join(os.fsencode(d) + b"/" for d in dirs) + b"\0",
            # check-ignore refuses literal pathspecs; keel's own list (big files, nested
            # repositories) is not the user's ignore rules: those stay watched
            env={"GIT_LITERAL_PATHSPECS": "0", "GIT_CONFIG_VALUE_0": os.devnull},
        )  # a failure leaves every directory watched: slower, never wrong
        return {os.fsdecode(p).rstrip("/") for p in proc.stdout.split(b"\0") if p}

    def _index_signature(self) -> str:
        try:
            st = os.stat(self.git.index)
        except OSError:
            return "none"
        return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"

    def _remember(self, snap: _Snapshot) -> None:
        """Keep the directory survey for the next checkpoint's quick check, or drop it."""
        if snap.survey is None:
            self.watch_file.unlink(missing_ok=True)
            return
        taken, dirs = snap.survey
        _watch.save(self.watch_file, _watch.Watch(taken, snap.tree, self._index_signature(), dirs))

    def _expand_directories(self, paths: list[bytes]) -> list[bytes]:
        """Untracked directories (``dir/``) as the files in them that are not ignored."""
        dirs = [p for p in paths if p.endswith(b"/")]
        if not dirs:
            return paths
        spec = [os.fsdecode(d) for d in dirs] if len(dirs) <= PATHSPEC_LIMIT else []
        inside = self.git.run("ls-files", "-z", "-o", "--exclude-standard", "--", *spec)
        files = [p for p in paths if not p.endswith(b"/")]
        return files + [p for p in inside.split(b"\0") if p]

    def _large_files(self) -> tuple[set[str], bool]:
        """Files kept out of checkpoints for their size, and whether any came back under."""
        try:
            # names as the file system spells them (``_still_left_out`` encodes them back)
            lines = os.fsdecode(self.large_list.read_bytes())
        except OSError:
            return set(), False
        listed = [_unescape(ln) for ln in lines.splitlines() if ln.startswith("/")]
        still = {p for p in listed if self._still_left_out(p)}
        if len(still) != len(listed):
            self._set_large_files(still)
            return still, True
        return still, False

    def _set_large_files(self, paths: set[str]) -> None:
        body = "".join(f"/{_escape(p)}\n" for p in sorted(paths))
        write_atomic(self.large_list, os.fsencode(LARGE_HEADER + body), prefix="keel-large")

    def _still_left_out(self, rel: str) -> bool:
        if rel.endswith("/"):
            return os.path.lexists(self.root / rel / ".git")
        return self._too_big(os.fsencode(rel))

    def _gone(self, raw: bytes) -> bool:
        path = self.root / os.fsdecode(raw.rstrip(b"/"))
        parent = path.parent
        if os.path.realpath(parent) != os.path.abspath(parent):
            return True
        return not os.path.lexists(path)

    def _too_big(self, raw: bytes) -> bool:
        try:
            st = os.lstat(self.root / os.fsdecode(raw))
        except OSError:
            return False  # deleted: `add -A` records the removal
        return stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes

    def _commit_snapshot(
        self,
        kind: CheckpointKind,
        session_id: str | None,
        tool_use_id: str | None,
        label: str | None,
    ) -> Checkpoint:
        return self._commit(self._snapshot(), kind, session_id, tool_use_id, label)

    def _commit(
        self,
        snap: _Snapshot,
        kind: CheckpointKind,
        session_id: str | None,
        tool_use_id: str | None,
        label: str | None,
    ) -> Checkpoint:
        head = snap.head if snap.head is not None else self._head()
        reused = head is not None and head.tree == snap.tree
        files: list[str] = []
        if head is not None and not reused:
            files = snap.files if snap.files is not None else self._changed(head.tree, snap.tree)
        ts = time.time()
        meta: dict[str, Any] = {
            "v": 1,
            "kind": kind,
            "ts": ts,
            "session_id": session_id,
            "tool_use_id": tool_use_id,
            "label": label,
            "files": files[:MESSAGE_FILES_CAP],
            "files_total": len(files),
            "skipped": snap.skipped[:MESSAGE_FILES_CAP],
        }
        subject = f"keel checkpoint: {kind}" + (f" {label}" if label else "")
        message = f"{subject.splitlines()[0][:200]}\n\n{json.dumps(meta, sort_keys=True)}\n"
        parent = head.commit if head is not None else None
        commit = self.git.write_commit(snap.tree, parent, message, int(ts))
        self._set_head(commit)
        if not snap.quick:
            self._remember(snap)
        return _checkpoint(commit, snap.tree, parent, meta, reused)

    def _changed(self, old_tree: str, new_tree: str) -> list[str]:
        raw = self.git.run("diff-tree", "-r", "-z", "--no-renames", "--name-only",
                           old_tree, new_tree)  # fmt: skip
        return [os.fsdecode(p) for p in raw.split(b"\0") if p]

    def _attribute(
        self, target: Checkpoint, now_tree: str, running: bool = False
    ) -> tuple[set[str], set[str]]:
        """Files changed after ``target`` by the agent (or keel), and by anyone else.

        ``running``: a contained command is running now, so a call with no ``after`` may be.
        """
        chain = self.history()
        start = next((i for i, c in enumerate(chain) if c.id == target.id), None)
        if start is None:
            raise UserError(
                f"checkpoint {target.short} is not in this workspace's history",
                code="workspace.unknown_checkpoint",
            )
        trees = [c.tree for c in chain] + [now_tree]
        owned = _agent_intervals(chain, target.session_id, running=running)
        found: tuple[set[str], set[str]] = (set(), set())
        k = start + 1
        while k < len(trees):
            run_start, side = k, owned[k]
            while k < len(trees) and owned[k] == side:
                k += 1
            a, b = trees[run_start - 1], trees[k - 1]
            if a == b:
                continue
            raw = self.git.run("diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b)
            names = {os.fsdecode(p) for p in raw.split(b"\0") if p}
            if side[0]:
                found[0].update(names)
            if side[1]:
                found[1].update(names)
        return found

    def _progress(self, what: str) -> None:
        if self.on_progress is not None:
            self.on_progress(what)

    def _restore(self, entries: list[_Entry]) -> tuple[list[str], list[str]]:
        self._progress(f"restoring {len(entries)} file(s)")
        blobs = self._read_blobs([e.blob for e in entries if e.status != "A"])
        txn = FileTransaction(self.root)
        restored: list[str] = []
        deleted: list[str] = []
        for e in sorted(entries, key=lambda e: e.path):
            path = self.root / e.path
            if e.status == "A":
                txn.delete(path)
                deleted.append(e.path)
            elif e.mode == "120000":
                txn.symlink(path, os.fsdecode(blobs[e.blob]))
                restored.append(e.path)
            else:
                txn.write(path, blobs[e.blob], _restore_mode(path, e.mode))
                restored.append(e.path)
        txn.commit(prune_dirs=True)
        return restored, deleted

    def _require_blobs(self, shas: list[str]) -> None:
        """``workspace.corrupt`` unless every blob is in the store (read nothing)."""
        missing = sorted(absent(self.git, sorted(set(shas))))
        if missing:
            raise WorkspaceError(
                f"checkpoint object {missing[0]} is missing", code="workspace.corrupt"
            )

    def _read_blobs(self, shas: list[str]) -> dict[str, bytes]:
        unique = sorted(set(shas))
        if not unique:
            return {}
        out = self.git.run("cat-file", "--batch", stdin="".join(s + "\n" for s in unique).encode())
        blobs: dict[str, bytes] = {}
        pos = 0
        for sha in unique:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            if len(header) != 3:
                raise WorkspaceError(
                    f"checkpoint object {sha} is missing", code="workspace.corrupt"
                )
            size = int(header[2])
            blobs[sha] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
        return blobs

    def _journal_checkpoint(self, cp: Checkpoint) -> None:
        if self.journal is not None:
            self.journal.append(checkpoint_event(cp))

    def _journal_recoveries(
        self, recovered: tuple[LockRecovery, ...], session_id: str | None
    ) -> None:
        if self.journal is None:
            return
        for item in recovered:
            self.journal.append(_recovery_event(item, self.git_dir, session_id))

    def _journal_rollback(self, result: RollbackResult) -> None:
        if self.journal is None:
            return
        target = result.target
        payload = CheckpointPayload(
            checkpoint_id=target.short,
            label=f"rollback to {target.short}",
            tool_use_id=target.tool_use_id,
            files=list(result.files[:JOURNAL_FILES_CAP]),
            detail={
                "undo": result.undo.short if result.undo is not None else None,
                "after": result.after.short if result.after is not None else None,
                "restored": len(result.restored),
                "deleted": list(result.deleted[:JOURNAL_FILES_CAP]),
                "overwritten": list(result.overwritten),
                "kept": list(result.kept[:JOURNAL_FILES_CAP]),
            },
        )
        self.journal.append(Event("rollback", target.session_id or MANUAL_SESSION, payload))


def checkpoint_event(cp: Checkpoint) -> Event:
    """The journal event for ``cp`` (what ``create`` appends unless ``journal=False``)."""
    return Event("checkpoint", cp.session_id or MANUAL_SESSION, checkpoint_payload(cp))


def checkpoint_payload(cp: Checkpoint) -> CheckpointPayload:
    """The payload of ``checkpoint_event(cp)``, for a caller that builds its own event."""
    return CheckpointPayload(
        checkpoint_id=cp.short,
        label=cp.label or cp.kind,
        tool_use_id=cp.tool_use_id,
        files=list(cp.files[:JOURNAL_FILES_CAP]),
        detail={
            "kind": cp.kind,
            "id": cp.id,
            "tree": cp.tree,
            "reused": cp.reused,
            "files_total": cp.files_total,
            "skipped": list(cp.skipped[:JOURNAL_FILES_CAP]),
        },
    )


def _recovery_event(item: LockRecovery, git_dir: Path, session_id: str | None) -> Event:
    data = {
        "event": "checkpoint.lock_recovered",
        "message": (
            f"removed a stale git lock {item.lock!r} ({item.age_seconds:.0f}s old) left in the "
            "checkpoint store by a keel process that was killed"
        ),
        "repo": str(git_dir),
        **item.to_dict(),
    }
    return Event("error", session_id or MANUAL_SESSION, DataPayload(data=data))


def _escape(path: str) -> str:
    out = "".join("\\" + ch if ch in "*?[\\" else ch for ch in path)
    return out[:-1] + "\\ " if out.endswith(" ") else out


def _unescape(line: str) -> str:
    out: list[str] = []
    chars = iter(line[1:])
    for ch in chars:
        out.append(next(chars, "") if ch == "\\" else ch)
    return "".join(out)


def _io_error(exc: OSError) -> WorkspaceError:
    return WorkspaceError(
        f"checkpoint storage failed: {exc.strerror or exc} ({exc.filename or 'no file'})",
        code="workspace.io",
        path=str(exc.filename) if exc.filename else None,
    )


def _nothing_of_the_agents(target: Checkpoint, files: list[str]) -> str:
    shown = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    return (
        f"refusing to roll back to {target.short}: nothing to undo. No agent call changed a "
        f"file since that checkpoint; the {len(files)} file(s) changed since were changed by "
        f"you (or another session), and a rollback leaves those alone: {shown}. Pass --force "
        "to reset them to the checkpoint."
    )


def _refusal(files: list[str]) -> str:
    shown = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    return (
        f"refusing to roll back: {len(files)} file(s) the agent changed were also changed by "
        f"someone else (you, or another session) after the checkpoint, and rolling back would "
        f"lose those changes: {shown}. Save your work elsewhere, or pass --force to overwrite."
    )


def _agent_intervals(
    chain: list[Checkpoint], session_id: str | None, *, running: bool = False
) -> list[tuple[bool, bool]]:
    """For each interval k (between checkpoint k-1 and k; k = len is now): (agent's, others').

    With ``session_id`` only that session's calls are the agent, and an interval in which
    another session's call was open counts as someone else's too (it cannot be told apart).
    Without it, every session is the agent. How long a call is open: ``_call_end``.
    """
    n = len(chain)
    mine = [False] * (n + 1)
    foreign = [False] * (n + 1)
    for i, cp in enumerate(chain):
        if cp.kind == "rollback":
            end = i + 1 if i + 1 < n and chain[i + 1].kind == "restored" else i
            _mark(mine, i, end)
        elif cp.kind == "before":
            ours = session_id is None or cp.session_id == session_id
            _mark(mine if ours else foreign, i, _call_end(chain, i, running))
    return [(m, f or not m) for m, f in zip(mine, foreign, strict=True)]


def _call_end(chain: list[Checkpoint], i: int, running: bool = False) -> int:
    """Where the call opened at ``chain[i]`` ended (an index; ``len(chain)`` is now).

    At its ``after`` when it has one, however many checkpoints later (calls of several
    sessions really overlap). A call with no ``after`` was rejected or interrupted, or its
    post-tool hook never ran: it ends at the next checkpoint, whoever took it (its session's
    next step or any other session's checkpoint, whichever comes first), or now when there
    is none. While a contained command is ``running`` it may be that call's: it is open
    until now. See the module docstring for why, and what that costs.
    """
    opened = chain[i]
    for j in range(i + 1, len(chain)):
        cp = chain[j]
        if (
            cp.kind == "after"
            and cp.session_id == opened.session_id
            and cp.tool_use_id == opened.tool_use_id
        ):
            return j
    return len(chain) if running else i + 1


def _commands_running(root: Path) -> bool:
    """True when a contained command (``keel exec``) is running in the workspace now."""
    from keel.core.daemon import process_start
    from keel.sandbox.os._registry import records

    for _, data in records(os.fspath(root)):
        pid, start = data.get("pid"), data.get("start")
        if isinstance(pid, int) and start is not None and process_start(pid) == start:
            return True
    return False


def _mark(owned: list[bool], start: int, end: int) -> None:
    for k in range(start + 1, end + 1):
        owned[k] = True


def _restore_mode(path: Path, git_mode: str) -> int:
    executable = git_mode == "100755"
    try:
        current = stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return (0o777 if executable else 0o666) & ~umask
    if executable:
        return current | ((current & 0o444) >> 2)
    return current & ~0o111


def _parse_diff_tree(raw: bytes) -> list[_Entry]:
    """Parse ``git diff-tree -r -z`` output: the old side of each changed path."""
    parts = raw.split(b"\0")
    entries: list[_Entry] = []
    i = 0
    while i < len(parts) and parts[i]:
        meta = parts[i].decode().lstrip(":").split()
        old_mode, new_mode, old_sha, _new_sha, status = meta[:5]
        letter = status[0]
        if letter in "RC":
            old, new = os.fsdecode(parts[i + 1]), os.fsdecode(parts[i + 2])
            entries.append(_Entry(new, letter, old_mode, old_sha, new_mode, old))
            i += 3
        else:
            entries.append(_Entry(os.fsdecode(parts[i + 1]), letter, old_mode, old_sha, new_mode))
            i += 2
    return entries


def _change(entry: _Entry) -> FileChange:
    match entry.status:
        case "A":
            return FileChange(entry.path, "added")
        case "D":
            return FileChange(entry.path, "deleted")
        case "T":
            return FileChange(entry.path, "type_changed")
        case "R" | "C":
            return FileChange(entry.path, "renamed", entry.old_path)
        case _:
            return FileChange(entry.path, "modified")


def _parse_commit(chunk: str) -> Checkpoint | None:
    fields_ = chunk.strip("\n").split("\x1f")
    if len(fields_) != 4:
        return None
    commit, tree, parent, body = fields_
    _, _, rest = body.partition("\n\n")
    try:
        meta = json.loads(rest)
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("kind") not in CHECKPOINT_KINDS:
        return None
    return _checkpoint(commit, tree, parent.split()[0] if parent else None, meta, None)


def _checkpoint(
    commit: str, tree: str, parent: str | None, meta: dict[str, Any], reused: bool | None
) -> Checkpoint:
    files = tuple(meta.get("files") or ())
    return Checkpoint(
        id=commit,
        tree=tree,
        kind=meta["kind"],
        ts=float(meta.get("ts") or 0.0),
        session_id=meta.get("session_id"),
        tool_use_id=meta.get("tool_use_id"),
        label=meta.get("label"),
        files=files,
        files_total=int(meta.get("files_total") or len(files)),
        skipped=tuple(meta.get("skipped") or ()),
        parent=parent,
        reused=bool(reused) if reused is not None else (parent is not None and not files),
    )
