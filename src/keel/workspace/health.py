"""The checkpoint store's health, for ``keel status``: cheap and read-only.

``checkpoint_health(root)`` says whether checkpoints can be taken now: the store is not
created yet, another process holds it (which, and whether it is stopped), a git lock file a
killed process left is waiting to be cleared (keel clears it on the next checkpoint), and
which stale lock keel cleared last. When the store is idle it also checks that every
checkpoint's objects are there (``_damage``: one git process, within ``OBJECT_CHECK_SECONDS``;
more only when something is missing), so damage shows before a rollback needs it.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from keel.core.errors import WorkspaceError
from keel.core.root import state_dir
from keel.workspace import _lock
from keel.workspace._damage import Damage, scan
from keel.workspace._git import HEAD_REF, ShadowGit
from keel.workspace._lock import LockHolder, LockRecovery

HealthState = Literal["ok", "not_initialised", "locked", "stale_lock", "unreadable", "damaged"]
ObjectsState = Literal["complete", "damaged", "unchecked"]
OBJECT_CHECK_SECONDS = 5.0
"""How long ``keel status`` spends checking the checkpoints' objects, at most."""


@dataclass(frozen=True, slots=True)
class StaleLock:
    """A git lock file in the shadow repository while no keel process holds it."""

    lock: str
    """Its path in the shadow repository, e.g. ``keel-index.lock``."""
    age_seconds: float


@dataclass(frozen=True, slots=True)
class CheckpointHealth:
    """What ``checkpoint_health`` found."""

    state: HealthState
    """``ok``; ``not_initialised`` (no checkpoint yet); ``locked`` (another process holds the
    store: callers wait); ``stale_lock`` (a dead process's git lock, cleared on next use);
    ``unreadable`` (the store could not be examined: ``error`` says why); ``damaged``
    (objects some checkpoints need are gone: ``damage`` says which lost what)."""
    repo: str
    holder: LockHolder | None = None
    """Who holds the store, when ``locked`` and it said so."""
    stale_locks: tuple[StaleLock, ...] = ()
    last_recovery: tuple[LockRecovery, ...] = ()
    """The stale locks keel removed the last time it found any."""
    error: str | None = None
    objects: ObjectsState = "unchecked"
    """Whether every checkpoint's objects are there; ``unchecked`` while the store is busy,
    when there is no checkpoint, or past the time budget (``note`` says which)."""
    damage: Damage | None = None
    """When ``damaged``: which checkpoints lost what."""
    note: str | None = None
    """Why ``ok`` comes with ``objects`` unchecked."""

    @property
    def ok(self) -> bool:
        """True when a checkpoint can be taken now without waiting, and none is damaged."""
        return self.state in ("ok", "not_initialised", "stale_lock")

    def summary(self, now: float | None = None) -> str:
        """One line for ``keel status``."""
        line = self._headline()
        if self.last_recovery:
            now = time.time() if now is None else now
            last = self.last_recovery[-1]
            names = ", ".join(r.lock for r in self.last_recovery)
            line += (
                f" (cleared a stale {names} {_span(now - last.recovered_at)} ago, "
                f"{_span(last.age_seconds)} old)"
            )
        return line

    def _headline(self) -> str:
        match self.state:
            case "not_initialised":
                return "none yet"
            case "ok":
                return "ok" if self.note is None else f"ok ({self.note})"
            case "locked":
                holder = self.holder
                if holder is None:
                    return "busy: held by another keel process"
                line = f"busy: held by {holder.describe()}"
                if holder.stopped:
                    line += f"; keel calls wait until it resumes (`kill -CONT {holder.pid}`)"
                return line
            case "unreadable":
                return f"unreadable: {self.error}"
            case "damaged":
                summary = self.damage.summary() if self.damage else "objects are missing"
                return f"DAMAGED: {summary} (`keel diff` and `keel rollback` refuse them)"
            case "stale_lock":
                stale = self.stale_locks
                locks = ", ".join(f"{x.lock} ({_span(x.age_seconds)} old)" for x in stale)
                return f"stale git lock left by a killed process: {locks}; cleared on next use"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "state": self.state,
            "ok": self.ok,
            "repo": self.repo,
            "holder": self.holder.to_dict() if self.holder else None,
            "stale_locks": [asdict(s) for s in self.stale_locks],
            "last_recovery": [r.to_dict() for r in self.last_recovery],
            "error": self.error,
            "objects": self.objects,
            "damage": self.damage.to_dict() if self.damage else None,
            "note": self.note,
        }


def checkpoint_health(
    root: Path, *, objects: bool = True, budget: float = OBJECT_CHECK_SECONDS
) -> CheckpointHealth:
    """The state of ``root``'s checkpoint store, without changing or waiting for anything.

    ``objects``: also check that every checkpoint's objects are there, for at most
    ``budget`` seconds (state ``damaged`` when some are gone).
    """
    root = Path(root).resolve()
    git_dir = state_dir(root) / "checkpoints"
    try:
        health = _examine(git_dir)
        if objects and health.state in ("ok", "stale_lock"):
            return _check_objects(health, root, git_dir, budget)
        return health
    except OSError as exc:
        return CheckpointHealth("unreadable", str(git_dir), error=f"{exc.strerror or exc}")
    except WorkspaceError as exc:  # no git, or a store that points elsewhere
        return CheckpointHealth("unreadable", str(git_dir), error=exc.message)


def _examine(git_dir: Path) -> CheckpointHealth:
    if not (git_dir / "HEAD").is_file():
        return CheckpointHealth("not_initialised", str(git_dir))
    recovered = _lock.last_recoveries(git_dir)
    lock_file = git_dir / _lock.LOCK_NAME
    with _lock.idle(lock_file) as idle:
        if not idle:
            holder = _lock.read_holder(lock_file)
            return CheckpointHealth("locked", str(git_dir), holder, last_recovery=recovered)
        stale = _stale_locks(git_dir)  # nobody can be running git while this looks
    state: HealthState = "stale_lock" if stale else "ok"
    return CheckpointHealth(state, str(git_dir), stale_locks=stale, last_recovery=recovered)


def _check_objects(
    health: CheckpointHealth, root: Path, git_dir: Path, budget: float
) -> CheckpointHealth:
    """``health`` with what the object check found (``_damage.scan``)."""
    git = ShadowGit(root, git_dir)
    head = git.read_ref(HEAD_REF)
    if head is None:
        return replace(health, note="no checkpoint yet")
    damage = scan(git, head, deadline=time.monotonic() + budget)
    if damage is None:
        return replace(health, note=f"objects not checked: over the {budget:g} s budget")
    if not damage.found:
        return replace(health, objects="complete")
    return replace(health, state="damaged", objects="damaged", damage=damage)


def _stale_locks(git_dir: Path) -> tuple[StaleLock, ...]:
    now = time.time()
    found: list[StaleLock] = []
    for path in _lock.git_locks(git_dir):
        try:
            mtime = os.lstat(path).st_mtime
        except OSError:
            continue  # gone since it was listed
        found.append(StaleLock(path.relative_to(git_dir).as_posix(), round(now - mtime, 3)))
    return tuple(found)


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
