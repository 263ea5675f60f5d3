"""Library functions behind ``keel stop``, ``keel resume`` and ``keel status``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from keel.errors import JournalError, KeelError
from keel.events import Event, StopPayload
from keel.stop import StopStatus, clear_stop, set_stop, stop_status

ADMIN_SESSION = "keel-admin"


def emergency_stop(root: Path, reason: str | None = None) -> StopStatus:
    """Set the stop flag and journal it."""
    status = set_stop(root, reason)
    _journal(
        root,
        Event(
            kind="stop",
            session_id=ADMIN_SESSION,
            payload=StopPayload(status.reason or "", status.by),
        ),
        done="the emergency stop IS set",
    )
    return status


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
    from keel.config import CONFIG_NAME, config_for
    from keel.journal import journal_health, read_journal

    config_path = root / CONFIG_NAME
    config = config_for(root)
    journal: dict[str, Any] = {"events": 0, "sessions": 0}
    if (root / ".keel" / "journal.db").exists():
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
