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
    from collections.abc import Callable, Mapping

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


# -- the registry of workspaces ----------------------------------------------------------------
#
# ``keel init`` records every workspace it initialises in ``workspaces.json`` here, so that
# ``keel stop --all`` reaches each of them from anywhere. Writers take ``workspaces.lock``
# (``flock``) and replace the file atomically; readers never lock and never fail: a missing
# or damaged registry reads as empty.

REGISTRY_NAME = "workspaces.json"
_REGISTRY_LOCK = "workspaces.lock"


def registered_workspaces(env: Mapping[str, str] | None = None) -> dict[str, dict[str, object]]:
    """The workspaces keel was initialised in on this machine: ``{root: {"since", "agents"}}``."""
    import json

    path = os.path.join(user_state_dir(env), REGISTRY_NAME)
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return {}
    found = data.get("workspaces") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, dict)}


def register_workspace(
    root: str, agent: str | None = None, env: Mapping[str, str] | None = None
) -> None:
    """Record ``root`` (and the client registered there, if any) in the registry.

    Raises:
        OSError: the per-user state directory cannot be written.
    """
    _update_registry(lambda found: _add(found, os.path.abspath(root), agent), env)


def forget_workspace(root: str, env: Mapping[str, str] | None = None) -> None:
    """Take ``root`` out of the registry (it was deleted or is no workspace any more).

    Raises:
        OSError: the per-user state directory cannot be written.
    """
    _update_registry(lambda found: found.pop(os.path.abspath(root), None), env)


def _add(found: dict[str, dict[str, object]], root: str, agent: str | None) -> None:
    import time

    entry = found.setdefault(root, {"since": time.time(), "agents": []})
    agents = entry.get("agents")
    names = [str(a) for a in agents] if isinstance(agents, list) else []
    if agent and agent not in names:
        names.append(agent)
    entry["agents"] = sorted(names)


def _update_registry(
    change: Callable[[dict[str, dict[str, object]]], object], env: Mapping[str, str] | None
) -> None:
    import fcntl
    import json

    base = ensure_user_state_dir(env)
    lock = os.open(os.path.join(base, _REGISTRY_LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = registered_workspaces(env)
        change(found)
        path = os.path.join(base, REGISTRY_NAME)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"version": 1, "workspaces": found}, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    finally:
        os.close(lock)
