"""keel's per-user state directory, outside every workspace.

What must survive a workspace being wiped, and must never be visible to an agent, lives here:
the journal's HMAC key and the recorded chain heads (``keel.journal``), the registry of
workspaces keel was initialised in. The directory is ``$KEEL_STATE_DIR``, else
``$XDG_STATE_HOME/keel``, else ``~/.local/state/keel``; it is created with mode 0700.
A contained command (``keel exec``) never has it bound: its HOME is a fresh directory.

Standard library only: the journal opens it on every hook call.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Mapping

STATE_ENV = "KEEL_STATE_DIR"


def user_state_dir(env: Mapping[str, str] | None = None) -> str:
    """The absolute path of keel's per-user state directory (not created)."""
    env = os.environ if env is None else env
    explicit = env.get(STATE_ENV)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    xdg = env.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "keel")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".local", "state", "keel")


def ensure_user_state_dir(env: Mapping[str, str] | None = None) -> str:
    """``user_state_dir()``, created with mode 0700 if missing."""
    path = user_state_dir(env)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path
