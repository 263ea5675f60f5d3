"""Which backend ``keel exec`` uses, decided once per machine state and cached.

``auto`` takes bubblewrap when it can build the exec sandbox here (a probe run of ``true``
with the exec flags, as the invoking user), else Landlock when the kernel has it, else
nothing (``keel exec`` then refuses). The verdict is cached in keel's per-user state directory,
keyed by the bwrap binary (path, size, mtime), the kernel release, the uid and keel's version,
so a normal ``keel exec`` neither imports the probing code nor runs a probe. A sandbox that
then fails to start drops the cache (``forget``), so the next run probes again.
"""

from __future__ import annotations

import marshal
import os

from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CACHE_NAME = "exec-backend.marshal"
PROBE_TIMEOUT = 10.0


class Choice:
    """The chosen backend (``bwrap`` or ``landlock``), the bwrap binary, and why."""

    __slots__ = ("binary", "name", "reason")

    def __init__(self, name: str | None, binary: str | None, reason: str) -> None:
        """``name`` is ``None`` when no backend works here (``reason`` says why)."""
        self.name = name
        self.binary = binary
        self.reason = reason


def choose(requested: str, state_dir: str, *, refresh: bool = False) -> Choice:
    """The backend for ``requested`` (``auto``, ``bwrap`` or ``landlock``)."""
    if requested == "landlock":
        return _landlock_choice('[sandbox] backend = "landlock"')
    bwrap = _bwrap_verdict(state_dir, refresh)
    if bwrap["ok"]:
        return Choice("bwrap", bwrap["path"], f"bwrap {bwrap['version']} works here")
    if requested == "bwrap":
        return Choice(None, None, f"bwrap cannot run here: {bwrap['reason']}")
    fallback = _landlock_choice(f"bwrap cannot run here ({bwrap['reason']})")
    return fallback


def forget(state_dir: str) -> None:
    """Drop the cached verdict (after a sandbox failed to start)."""
    _quiet.unlink(os.path.join(state_dir, "cache", CACHE_NAME))


def _landlock_choice(why: str) -> Choice:
    from keel.sandbox.os._landlock_abi import landlock_abi

    abi = landlock_abi()
    if abi < 1:
        return Choice(None, None, f"{why}, and Landlock is not enabled in this kernel")
    return Choice("landlock", None, f"{why}: Landlock ABI {abi}")


def _bwrap_verdict(state_dir: str, refresh: bool) -> dict[str, Any]:
    path = os.path.join(state_dir, "cache", CACHE_NAME)
    if not refresh:
        cached = _load(path)
        if cached is not None:
            return cached
    verdict = _probe()
    verdict["key"] = _key(verdict.get("path"))
    _store(path, verdict)
    return verdict


def _key(binary: str | None) -> list[Any]:
    from keel import __version__

    try:
        st = os.stat(binary) if binary else None
    except OSError:
        st = None
    stamp = [st.st_size, st.st_mtime_ns] if st is not None else None
    return [__version__, binary, stamp, os.uname().release, os.getuid()]


def _load(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as fh:
            data = marshal.load(fh)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(data, dict) or data.get("key") != _key(data.get("path")):
        return None
    return data


def _store(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(tmp, "wb") as fh:
            marshal.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        _quiet.unlink(tmp)


def _probe() -> dict[str, Any]:
    """Find bwrap and run ``true`` in an exec-shaped sandbox as the invoking user."""
    from keel.sandbox.probe._bwrap import find_bwrap

    binary = find_bwrap(os.getuid(), os.getgid())
    if isinstance(binary, str):
        return {"ok": False, "path": None, "version": None, "reason": binary}
    found = {"path": binary.path, "version": binary.version_text}
    problem = _probe_run(binary.path)
    return {**found, "ok": problem is None, "reason": problem or f"from {binary.source}"}


def _probe_run(binary: str) -> str | None:
    import subprocess

    from keel.sandbox.exec._bwrap import ROOT_LINKS

    args = [binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
    args += ["--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
    for link in ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
    args += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]
    args += ["--size", "1048576", "--perms", "1777", "--tmpfs", "/tmp", "--remount-ro", "/"]
    try:
        done = subprocess.run(
            [*args, "--", "/usr/bin/true"],
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
            env={},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run {binary}: {exc}"
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        return message.splitlines()[-1]
    return None
