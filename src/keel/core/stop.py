"""The emergency stop: one flag file that every keel process checks before deciding anything.

While ``<root>/.keel/STOP`` exists every decision is deny, in every process, with the reason
written into the flag. The flag is checked on every call (an ``os.stat``), not cached, so a
stop set from another terminal holds for the very next tool call. A flag that cannot be read
still stops: an unreadable flag is a set flag.

Standard library only: this runs on every hook call.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.files import write_atomic
from keel.core.root import STATE_DIR, ensure_state_dir, state_dir

STOP_FILE = "STOP"


@dataclass(frozen=True, slots=True)
class StopStatus:
    """Whether the emergency stop is set, why, since when and by whom."""

    active: bool
    reason: str | None = None
    since: float | None = None
    by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"active": self.active, "reason": self.reason, "since": self.since, "by": self.by}


def stop_path(root: Path) -> Path:
    """Where the flag lives."""
    return state_dir(root) / STOP_FILE


def stop_status(root: Path) -> StopStatus:
    """Read the flag; any flag that exists counts, even if it cannot be parsed."""
    path = stop_path(root)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return StopStatus(active=False)
    except OSError as exc:
        return StopStatus(active=True, reason=f"emergency stop flag present but unreadable: {exc}")
    try:
        data = json.loads(raw)
        reason = str(data.get("reason") or "emergency stop")
        return StopStatus(True, reason, _float(data.get("since")), data.get("by"))
    except (ValueError, AttributeError, UnicodeDecodeError):
        return StopStatus(active=True, reason="emergency stop (flag content unreadable)")


def stop_reason(root: str | os.PathLike[str]) -> str | None:
    """The stop reason while the stop is set, else None (an ``lstat`` when it is not).

    A flag seen and gone before it could be read still stops this decision: fail closed.
    """
    if not os.path.lexists(os.path.join(root, STATE_DIR, STOP_FILE)):
        return None
    status = stop_status(Path(root))
    return (status.reason if status.active else None) or "emergency stop"


def set_stop(root: Path, reason: str | None = None, by: str | None = None) -> StopStatus:
    """Set the flag atomically (write, fsync, rename) and return the new status."""
    status = StopStatus(True, reason or "emergency stop set by the user", time.time(), by or _who())
    path = stop_path(root)
    body = json.dumps({"reason": status.reason, "since": status.since, "by": status.by})
    try:
        ensure_state_dir(root)
        write_atomic(path, body, fsync=True)
    except OSError as exc:
        raise _flag_error("cannot set the emergency stop", path, exc) from exc
    return status


def clear_stop(root: Path) -> bool:
    """Remove the flag; True if it was set."""
    path = stop_path(root)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _flag_error("cannot clear the emergency stop", path, exc) from exc
    return True


def _flag_error(what: str, path: Path, exc: OSError) -> Exception:
    from keel.core.errors import WorkspaceError

    where = exc.filename or path  # may be .keel itself, e.g. when it is a file
    return WorkspaceError(f"{what}: {where}: {exc.strerror}", code="workspace.stop_flag")


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def current_user() -> str:
    """Who is acting: the login name, else ``$USER``, else the uid."""
    return _who()


def _who() -> str:
    try:
        return os.getlogin()
    except OSError:
        return os.environ.get("USER") or str(os.getuid())
