"""``keel wrap``: the client's own state, writable, with its settings out of the agent's reach.

The client's state (``ClientProfile.state``: ``~/.claude``, ``~/.claude.json``, ``$CODEX_HOME``,
``~/.gemini``) is bound read-write into the fresh HOME, from descriptors opened before the run.
Everything the client spawns can therefore write there too, and a client reads its settings
from there the next time it starts, perhaps without ``keel wrap``. So:

- the settings entries that exist (``ClientProfile.settings``: hooks, MCP servers, providers,
  commands, instructions) are bound read-only over the writable state, each from an
  ``O_NOFOLLOW`` descriptor (a symbolic link is left alone: it resolves inside the sandbox);
- after the run, a settings entry that appeared or changed (one that did not exist, or a link)
  is renamed aside to ``NAME.keel-quarantined-STAMP`` (a changed link is put back);
- in the JSON files the client rewrites itself (``~/.claude.json``), the keys that start
  programs or grant permissions (``mcpServers``, and per project ``mcpServers``,
  ``allowedTools`` and the project MCP switches) are put back as they were before the run; the
  changed file is kept beside it as ``NAME.keel-quarantined-STAMP``.

A state path is refused (``wrap.client_state``) when it is or holds HOME, a system tree, the
workspace, keel's state directory or another secret of HOME.

Standard library only.
"""

from __future__ import annotations

import os
import stat

from keel.core.errors import ExecRefused
from keel.sandbox.exec._view import HOME_SECRETS, NEVER_WRITABLE, within
from keel.sandbox.os import _quiet
from keel.sandbox.wrap._clients import OWN_STATE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from keel.sandbox.exec._bwrap import Mounts
    from keel.sandbox.wrap._clients import ClientProfile

GUARDED_TOP = ("mcpServers",)
GUARDED_PROJECT = (
    "mcpServers",
    "allowedTools",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "enableAllProjectMcpServers",
)
JSON_CAP = 64 << 20
ASIDE = ".keel-quarantined-"
"""The suffix (then the run's stamp) of a settings file the run planted or changed, set aside."""
_MISSING = object()

Ident = tuple[str, int, int, str]


class ClientState:
    """The binds of one wrapped client's state and what is checked after the run."""

    def __init__(self, profile: ClientProfile, home: str, root: str, state_dir: str) -> None:
        """Check and open the state of ``profile`` (creating a missing state directory).

        Raises:
            ExecRefused: a state path overlaps HOME, a system tree, the workspace, keel's
                state or another secret (``wrap.client_state``), or cannot be created.
        """
        self.profile = profile
        self.binds: list[tuple[str, int]] = []
        self.protected: list[tuple[str, int]] = []
        self.before: dict[str, Ident | None] = {}
        self.json: dict[str, bytes | None] = {}
        try:
            own = tuple(os.path.join(home, n) for n in OWN_STATE.get(profile.name, ()))
            for index, path in enumerate(profile.state):
                _refuse_overlap(path, home, root, state_dir, own)
                fd = _open_state(path, create=index == 0)
                if fd is not None:
                    self.binds.append((path, fd))
            self._open_settings()
            self.json = {path: _read(path) for path in profile.guarded}
        except BaseException:
            self.close()
            raise

    def _open_settings(self) -> None:
        for path in self.profile.settings:
            ident = _ident(path)
            self.before[path] = ident
            if ident is None or ident[0] == "link":
                continue
            try:
                fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            self.protected.append((path, fd))

    def mounts(self, mounts: Mounts) -> list[int]:
        """Add the binds to ``mounts``; the descriptors, now the caller's to close."""
        for path, fd in self.binds:
            mounts.add("rw", path, ["--bind-fd", str(fd), path], fd)
        for path, fd in self.protected:
            mounts.add("ro", path, ["--ro-bind-fd", str(fd), path], fd)
        handed = [fd for _, fd in (*self.binds, *self.protected)]
        self.binds, self.protected = [], []
        return handed

    def after(self, stamp: str) -> tuple[list[str], list[str]]:
        """After the run: ``(settings renamed aside, JSON files with guarded keys restored)``."""
        moved = [p for p in self.profile.settings if self._settle(p, stamp)]
        restored = [p for p, was in self.json.items() if was and _restore(p, was, stamp)]
        return moved, restored

    def _settle(self, path: str, stamp: str) -> bool:
        """Rename aside a settings entry the run created or changed; True if it did."""
        old, now = self.before.get(path), _ident(path)
        if now is None or now == old:
            return False
        aside = f"{path}{ASIDE}{stamp}"
        if not _quiet.call(os.rename, path, aside):
            return False
        if old is not None and old[0] == "link":
            _quiet.call(os.symlink, old[3], path)
        return True

    def close(self) -> None:
        """Close the descriptors (bwrap has its own copies once it runs)."""
        for _, fd in (*self.binds, *self.protected):
            _quiet.close(fd)
        self.binds, self.protected = [], []


def _refuse_overlap(path: str, home: str, root: str, state_dir: str, own: tuple[str, ...]) -> None:
    for candidate in dict.fromkeys((path, os.path.realpath(path))):
        problem = _overlap(candidate, home, root, state_dir, own)
        if problem is not None:
            raise ExecRefused(
                f"the client's state {path} {problem}: keel wrap binds it writable, so it must "
                "be a directory or file of its own",
                "wrap.client_state",
            )


def _overlap(path: str, home: str, root: str, state_dir: str, own: tuple[str, ...]) -> str | None:
    if path == "/" or any(within(path, t) for t in NEVER_WRITABLE):
        return "is a system path"
    if within(home, path):
        return "is or holds your home directory"
    if within(path, root) or within(root, path):
        return "overlaps the workspace"
    if within(path, state_dir) or within(state_dir, path):
        return "overlaps keel's state directory"
    for rel in HOME_SECRETS:
        secret = os.path.join(home, rel)
        if secret not in own and (within(path, secret) or within(secret, path)):
            return f"overlaps the secret {secret}"
    return None


def _open_state(path: str, *, create: bool) -> int | None:
    """An ``O_PATH`` descriptor of ``path``; the directory is created when ``create``."""
    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise ExecRefused(
                f"cannot create the client's state directory {path}: {exc.strerror}",
                "wrap.client_state",
            ) from exc
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        os.close(fd)
        raise ExecRefused(
            f"the client's state {path} is not a file or directory", "wrap.client_state"
        )
    return fd


def _ident(path: str) -> Ident | None:
    """What is at ``path`` (not following a link): kind, device, inode, link target."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        target = _quiet_readlink(path)
        return ("link", st.st_dev, st.st_ino, target)
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "file"
    return (kind, st.st_dev, st.st_ino, "")


def _quiet_readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _read(path: str) -> bytes | None:
    """The bytes of a regular file (following a link: the user's own), or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > JSON_CAP:
                return None
        return b"".join(chunks)
    finally:
        os.close(fd)


def _restore(path: str, before: bytes, stamp: str) -> bool:
    """Put the guarded keys of ``path`` back as in ``before``; True if anything changed."""
    import json

    now = _read(path)
    if now is None or now == before:
        return False
    try:
        old = json.loads(before)
    except (ValueError, RecursionError):
        return False  # it was not JSON before the run: nothing keel can compare
    try:
        new = json.loads(now)
    except (ValueError, RecursionError):
        new = None
    if not isinstance(old, dict):
        return False
    if isinstance(new, dict):
        was, became = _guarded(old), _guarded(new)
        if was == became:
            return False
        _apply(new, was, became)
        fixed = json.dumps(new, indent=2).encode()
    else:
        fixed = before  # the run left something that is not JSON: the whole file goes back
    _write_beside(f"{path}{ASIDE}{stamp}", now)
    _write_beside(path, fixed)
    return True


def _guarded(data: dict[str, object]) -> dict[tuple[str, ...], object]:
    out: dict[tuple[str, ...], object] = {(k,): data[k] for k in GUARDED_TOP if k in data}
    projects = data.get("projects")
    if isinstance(projects, dict):
        for name, entry in projects.items():
            if isinstance(entry, dict):
                for key in GUARDED_PROJECT:
                    if key in entry:
                        out[("projects", str(name), key)] = entry[key]
    return out


def _apply(
    data: dict[str, object],
    was: dict[tuple[str, ...], object],
    became: dict[tuple[str, ...], object],
) -> None:
    """Set every guarded key of ``data`` that changed back to its value in ``was``."""
    for key in was.keys() | became.keys():
        if was.get(key, _MISSING) == became.get(key, _MISSING):
            continue
        parent: object = data
        for part in key[:-1]:
            if not isinstance(parent, dict):
                break
            parent = parent.setdefault(part, {})
        if not isinstance(parent, dict):
            continue
        if key in was:
            parent[key[-1]] = was[key]
        else:
            parent.pop(key[-1], None)


def _write_beside(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` (mode 0600) through a new file in the same directory.

    A link (the user's own, e.g. from a dotfiles manager) is written through instead.
    """
    if os.path.islink(path):
        _write_fd(os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC), data)
        return
    tmp = f"{path}.keel-tmp-{os.getpid()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    _write_fd(os.open(tmp, flags, 0o600), data)
    os.replace(tmp, path)


def _write_fd(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
