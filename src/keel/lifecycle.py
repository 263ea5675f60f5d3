"""Library functions behind ``keel stop``, ``keel resume`` and ``keel status``.

Two kinds of stop exist, and both are shown and cleared here:

- the **emergency stop** of a workspace (``keel.core.stop``: a flag file; every call denied);
- a **monitor stop** of one session (``MonitorState.stopped``, and a pending ``replan``, kept
  in the session's state record in the journal): that session's calls are denied until the
  user clears it with ``resume_session`` or gives the agent a new prompt.

A stop must never land where no agent runs: ``require_workspace`` refuses a directory that is
not a workspace and names the workspaces below it, and ``stop_all`` reaches every workspace
``keel init`` registered (``keel.core.userstate.registered_workspaces``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import JournalError, KeelError, UsageError
from keel.core.events import Event, StopPayload
from keel.core.root import CONFIG_NAME, is_repository
from keel.core.stop import StopStatus, clear_stop, set_stop, stop_status

ADMIN_SESSION = "keel-admin"
SEARCH_DEPTH = 4
"""How many directory levels below a non-workspace ``require_workspace`` searches."""
SEARCH_BUDGET = 5000
"""How many directories that search looks at, at most."""
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "dist", "build"})


@dataclass(frozen=True, slots=True)
class MonitorStop:
    """A session the monitor stopped (every call denied) or holds for a new plan."""

    session_id: str
    stopped: str | None
    """Why the monitor stopped the session; None when only a replan is pending."""
    detector: str | None
    replan: str | None
    """Why a new plan is required (calls that change anything are denied); None if not."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "session": self.session_id,
            "stopped": self.stopped,
            "detector": self.detector,
            "replan": self.replan,
        }

    def describe(self) -> str:
        """One line for people."""
        if self.stopped:
            by = f" ({self.detector})" if self.detector else ""
            return f"stopped by the monitor{by}: {self.stopped}"
        return f"held for a new plan: {self.replan}"


@dataclass(frozen=True, slots=True)
class StopAllResult:
    """What ``stop_all`` did in one registered workspace."""

    root: Path
    stopped: bool
    detail: str
    killed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "root": str(self.root),
            "stopped": self.stopped,
            "detail": self.detail,
            "killed": self.killed,
        }


def is_workspace(root: Path) -> bool:
    """True when ``root`` holds a keel.toml or is a git work tree's root.

    ``find_root`` falls back to the directory itself when neither is found above it; such a
    directory is no workspace (a ``.keel/`` alone does not make one: it may be what an earlier
    stop left there).
    """
    return (root / CONFIG_NAME).is_file() or is_repository(root)


def nearby_workspaces(
    start: Path, *, depth: int = SEARCH_DEPTH, limit: int = 10, budget: int = SEARCH_BUDGET
) -> list[Path]:
    """Workspaces (directories with keel.toml) below ``start``, nearest first.

    The search is breadth first, at most ``depth`` levels and ``budget`` directories deep,
    skips hidden and dependency directories and never follows symlinks; workspaces keel
    registered below ``start`` are added even when deeper.
    """
    from keel.core.userstate import registered_workspaces

    found: list[Path] = []
    level = [start]
    seen = 0
    for _ in range(depth):
        below: list[Path] = []
        for directory in level:
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if seen >= budget:
                    break
                name = entry.name
                if name.startswith(".") or name in _SKIP_DIRS:
                    continue
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                seen += 1
                path = Path(entry.path)
                if (path / CONFIG_NAME).is_file():
                    found.append(path)
                else:
                    below.append(path)
        level = below
    for registered in sorted(registered_workspaces()):
        path = Path(registered)
        if path not in found and path.is_relative_to(start) and path != start and path.is_dir():
            found.append(path)
    return found[:limit]


def require_workspace(root: Path, *, command: str = "keel stop") -> None:
    """Refuse ``root`` unless it is a workspace, naming the nearest workspaces below it.

    ``command`` is what the user ran (``keel checkpoint create``): the hint says how to run
    it in a workspace.

    Raises:
        UsageError: ``usage.no_workspace``, with the workspaces found in ``workspaces``.
    """
    if is_workspace(root):
        return
    near = nearby_workspaces(root)
    what = f"{root} is not a keel workspace (no keel.toml and no git repository here or above)"
    stop = command == "keel stop"
    if near:
        names = ", ".join(_shown(p, root) for p in near)
        hint = (
            "Stop one with `keel stop -w DIR`, or every workspace keel was initialised in "
            "with `keel stop --all`"
            if stop
            else f"Run `{command}` in one of them, or pass -w DIR"
        )
        message = f"{what}; workspaces below it: {names}. {hint}"
    else:
        hint = (
            "pass -w DIR, or use `keel stop --all`"
            if stop
            else "pass -w DIR, or make this one with `keel init`"
        )
        message = (
            f"{what}, and none was found below it ({SEARCH_DEPTH} levels). Run it inside the "
            f"workspace, {hint}"
        )
    raise UsageError(message, code="usage.no_workspace", workspaces=[str(p) for p in near])


def _shown(path: Path, base: Path) -> str:
    try:
        return f"{path.relative_to(base).as_posix()}/"
    except ValueError:
        return str(path)


def emergency_stop(root: Path, reason: str | None = None) -> StopStatus:
    """Set the stop flag and journal it (``stop_workspace`` also kills contained commands)."""
    status = set_stop(root, reason)
    _journal_stop(root, status)
    return status


def stop_workspace(root: Path, reason: str | None = None) -> tuple[StopStatus, int]:
    """Set the emergency stop, kill the contained commands, journal it; ``(stop, killed)``.

    In that order, and the stop is journaled while the killed sandboxes are torn down: a slow
    or broken journal never delays or prevents a kill. Killing is best effort (the stop
    holds whatever happens to it).

    Raises:
        JournalError: the stop is set and the commands killed (``killed`` says how many),
            but it could not be journaled.
    """
    from keel.sandbox import kill_contained

    status = set_stop(root, reason)
    journaled: list[bool] = []
    failed: list[KeelError] = []

    def journal() -> None:
        journaled.append(True)
        try:
            _journal_stop(root, status)
        except KeelError as exc:
            failed.append(exc)

    try:
        killed = kill_contained(root, meanwhile=journal)
    except Exception:  # the stop holds; killing is best effort
        killed = 0
        if not journaled:
            journal()
    if failed:
        raise JournalError(failed[0].message, code=failed[0].code, killed=killed)
    return status, killed


def _journal_stop(root: Path, status: StopStatus) -> None:
    _journal(
        root,
        Event(
            kind="stop",
            session_id=ADMIN_SESSION,
            payload=StopPayload(status.reason or "", status.by),
        ),
        done="the emergency stop IS set",
    )


def emergency_resume(root: Path) -> bool:
    """Clear the stop flag and journal it; True if it was set."""
    was_set = clear_stop(root)
    if was_set:
        _journal(
            root,
            Event(
                kind="resume", session_id=ADMIN_SESSION, payload=StopPayload("resumed by the user")
            ),
            done="the emergency stop IS cleared",
        )
    return was_set


def workspace_status(root: Path) -> dict[str, Any]:
    """Root, config file, preset, stop flag and journal size, as a dict."""
    from keel.config import config_for
    from keel.journal import has_journal, journal_health, read_journal

    config_path = root / CONFIG_NAME
    config = config_for(root)
    journal: dict[str, Any] = {"events": 0, "sessions": 0}
    if has_journal(root):
        try:
            with read_journal(root) as j:  # status only reads: it never recovers or migrates
                sessions = j.sessions()
                journal = {"events": sum(s.events for s in sessions), "sessions": len(sessions)}
        except JournalError:
            journal = {"events": None, "sessions": None}
    health = journal_health(root)
    journal["ok"] = health.ok
    journal["problem"] = health.problem
    journal["breaks"] = [b.describe() for b in health.breaks]
    return {
        "root": str(root),
        "config": str(config_path) if config_path.exists() else None,
        "preset": config.policy.preset,
        "stop": stop_status(root).to_dict(),
        "journal": journal,
    }


def _journal(root: Path, event: Event, *, done: str) -> None:
    """Journal ``event``; a failure says that the flag change (``done``) took effect anyway."""
    from keel.journal import open_journal

    try:
        with open_journal(root) as journal:
            journal.append(event)
    except KeelError as exc:
        raise JournalError(
            f"{done}, but it could not be journaled: {exc.message}", code=exc.code
        ) from exc


def stop_all(reason: str | None = None) -> list[StopAllResult]:
    """Set the emergency stop in every workspace ``keel init`` registered on this machine.

    Each workspace is stopped on its own: one that is gone or cannot be written is reported,
    and the others are stopped all the same. Contained commands are killed in each.
    """
    from keel.core.userstate import registered_workspaces

    results: list[StopAllResult] = []
    for registered in sorted(registered_workspaces()):
        root = Path(registered)
        if not root.is_dir() or not is_workspace(root):
            results.append(StopAllResult(root, False, "skipped: no longer a workspace"))
            continue
        try:
            status, killed = stop_workspace(root, reason)
        except KeelError as exc:
            stopped = stop_status(root).active
            killed = exc.context.get("killed", 0)
            results.append(StopAllResult(root, stopped, exc.message, killed))
            continue
        results.append(StopAllResult(root, True, status.reason or "", killed))
    return results


def resume_all() -> list[tuple[Path, bool]]:
    """Clear the emergency stop in every registered workspace; ``(root, was set)`` each.

    Raises:
        KeelError: a stop flag that cannot be removed, or a resume that cannot be journaled.
    """
    from keel.core.userstate import registered_workspaces

    done: list[tuple[Path, bool]] = []
    for registered in sorted(registered_workspaces()):
        root = Path(registered)
        if root.is_dir():
            done.append((root, emergency_resume(root)))
    return done


def monitor_stops(root: Path) -> list[MonitorStop]:
    """Sessions the monitor stopped or holds for a new plan, from the journal's state records.

    Raises:
        JournalError: the journal cannot be read.
    """
    from keel.journal import has_journal, read_journal

    if not has_journal(root):
        return []
    found: list[MonitorStop] = []
    with read_journal(root) as journal:
        for summary in journal.sessions():
            stored = journal.session_state(summary.session_id)
            held = _held(summary.session_id, stored[1] if stored else None)
            if held is not None:
                found.append(held)
    return found


def resume_session(root: Path, session: str) -> MonitorStop | None:
    """Clear the monitor's stop and pending replan of ``session`` (an id or a unique prefix).

    The session's state record is rewritten in the same journal transaction as a ``resume``
    event, so a hook process or ``keel hookd`` reloads it before its next decision.

    Returns:
        What was cleared, or None when the session was neither stopped nor held.

    Raises:
        UserError: no session or more than one matches ``session``.
        JournalError: the journal cannot be read or written.
    """
    from keel.core.events import trace_id_for
    from keel.core.stop import current_user
    from keel.journal import open_journal
    from keel.journal.timeline import resolve_session

    with open_journal(root) as journal:
        session_id = resolve_session(journal, session).session_id
        stored = journal.session_state(session_id)
        data = dict(stored[1]) if stored else {}
        held = _held(session_id, data)
        if held is None:
            return None
        monitor = dict(data["monitor"])
        monitor.update(
            stopped=None,
            stop_detector=None,
            replan=None,
            replan_detector=None,
            ladder={},
            last_guidance=None,
            pending_hint=None,
        )
        data["monitor"] = monitor
        was = held.describe()
        event = Event(
            kind="resume",
            session_id=session_id,
            payload=StopPayload(f"the user cleared the monitor's hold ({was})", current_user()),
            trace_id=trace_id_for(session_id),
        )
        journal.append_many([event], session_state=(session_id, data))
    return held


def _held(session_id: str, data: dict[str, Any] | None) -> MonitorStop | None:
    monitor = data.get("monitor") if isinstance(data, dict) else None
    if not isinstance(monitor, dict):
        return None
    stopped, replan = monitor.get("stopped"), monitor.get("replan")
    if not stopped and not replan:
        return None
    detector = monitor.get("stop_detector") or monitor.get("replan_detector")
    return MonitorStop(
        session_id,
        str(stopped) if stopped else None,
        str(detector) if detector else None,
        str(replan) if replan else None,
    )
