"""The emergency stop: one flag file that every keel process checks before deciding anything.

While ``<root>/.keel/STOP`` exists every decision is deny, in every process, with the reason
written into the flag. The flag is checked on every call (an ``lstat``, ``stop_set``), not
cached, so a stop set from another terminal holds for the very next tool call. A flag that
cannot be read still stops: an unreadable flag is a set flag.

This module is the one definition of the flag (its name, its path, the check, its content).
Only ``os`` and keel's own stdlib-only modules at import (``json`` and ``time`` when the flag
is read or written): the hook process imports it on every tool call.
"""

import os

from keel.core.frozen import Frozen
from keel.core.root import state_path

TYPE_CHECKING = False  # typing costs ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any

STOP_FILE = "STOP"
"""The flag's name in ``.keel/``."""


class StopStatus(Frozen):
    """Whether the emergency stop is set, why, since when and by whom."""

    __slots__ = ("active", "by", "reason", "since")
    active: bool
    reason: "str | None"
    since: "float | None"
    by: "str | None"

    def __init__(
        self,
        active: bool,
        reason: "str | None" = None,
        since: "float | None" = None,
        by: "str | None" = None,
    ) -> None:
        """The status; ``active`` False needs nothing else."""
        self._init(active=active, reason=reason, since=since, by=by)

    def to_dict(self) -> "dict[str, Any]":
        """A JSON-ready dict."""
        return {"active": self.active, "reason": self.reason, "since": self.since, "by": self.by}


def stop_path(root: "str | os.PathLike[str]") -> str:
    """Where the flag of the workspace ``root`` lives: ``<root>/.keel/STOP``."""
    return state_path(root, STOP_FILE)


def stop_set(root: "str | os.PathLike[str]") -> bool:
    """Whether a flag exists (an ``lstat``): the fast check, before anything is read.

    Only "no such file" means no stop: a flag that cannot even be looked at (``.keel``
    unreadable, not a directory, an I/O error) counts as set, as in ``keel exec``.
    """
    try:
        os.lstat(stop_path(root))
    except FileNotFoundError:
        return False
    except (OSError, ValueError):  # EACCES, ENOTDIR, ELOOP, EIO; a NUL in the path
        return True
    return True


def stop_status(root: "str | os.PathLike[str]") -> StopStatus:
    """Read the flag; any flag that exists counts, even if it cannot be parsed."""
    import json

    try:
        with open(stop_path(root), "rb") as fh:
            raw = fh.read()
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


def stop_reason(root: "str | os.PathLike[str]") -> "str | None":
    """The stop reason while the stop is set, else None (an ``lstat`` when it is not).

    A flag seen and gone before it could be read still stops this decision: fail closed.
    """
    if not stop_set(root):
        return None
    status = stop_status(root)
    return (status.reason if status.active else None) or "emergency stop"


def set_stop(
    root: "str | os.PathLike[str]", reason: "str | None" = None, by: "str | None" = None
) -> StopStatus:
    """Set the flag atomically (write, fsync, rename) and return the new status."""
    import json
    import time

    from keel.core.files import write_atomic

    status = StopStatus(True, reason or "emergency stop set by the user", time.time(), by or _who())
    path = stop_path(root)
    body = json.dumps({"reason": status.reason, "since": status.since, "by": status.by})
    try:
        os.makedirs(state_path(root), exist_ok=True)
        write_atomic(path, body, fsync=True)
    except OSError as exc:
        raise _flag_error("cannot set the emergency stop", path, exc) from exc
    return status


def clear_stop(root: "str | os.PathLike[str]") -> bool:
    """Remove the flag; True if it was set."""
    path = stop_path(root)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _flag_error("cannot clear the emergency stop", path, exc) from exc
    return True


def _flag_error(what: str, path: str, exc: OSError) -> Exception:
    from keel.core.errors import WorkspaceError

    where = exc.filename or path  # may be .keel itself, e.g. when it is a file
    return WorkspaceError(f"{what}: {where}: {exc.strerror}", code="workspace.stop_flag")


def _float(value: object) -> "float | None":
    return float(value) if isinstance(value, int | float) else None


def current_user() -> str:
    """Who is acting: the login name, else ``$USER``, else the uid."""
    return _who()


def _who() -> str:
    try:
        return os.getlogin()
    except OSError:
        return os.environ.get("USER") or str(os.getuid())
