"""``keel exec`` with bubblewrap: the command in place, as the invoking user, confined by mounts.

bwrap runs as the invoking user (root included) with a new user namespace mapping that user to
itself, so files the command creates belong to the caller. Root inside is still the host's
uid 0, so confinement comes from what is mounted, not from the uid: nothing but the view is
bound (no ``/etc/shadow``, no ``/root``), every capability is dropped (bounding set included),
no_new_privs is set, the seccomp ``exec`` profile refuses mount, unshare, ptrace, keyrings,
bpf... and ``/proc`` is mounted read-only (bwrap covers ``/proc/sys`` and
``/proc/sysrq-trigger`` only for unprivileged callers; uid 0 could otherwise write both).

The mount table, in order: ``/usr`` and the root links, the ``/etc`` entries, ``/proc``, a
read-only ``/dev`` with a sized ``/dev/shm``, a sized ``/tmp``; then, shallowest destination
first, a sized empty HOME, the read-only view, the workspace and ``[sandbox] writable`` (bound
from descriptors), every git directory bound onto itself (so it cannot be renamed away), each
control file read-only from the descriptor the scan opened, an empty read-only tmpfs over the
root's ``.keel/`` (the hook daemon's sockets included), masks over secrets inside read-only
trees, the filtered git configs, and (``keel wrap``) the proxy's directory at ``/run/keel``.
``keel exec``'s proxy needs no mount: its listener is made inside the sandbox's network
namespace from the host (``_netns``). Then ``/`` is
remounted read-only. No mount point is ever created inside the workspace: every destination
there exists already (``scan_controls`` found it).
"""

from __future__ import annotations

import os
import select

from keel.core.root import STATE_DIR
from keel.sandbox.exec._control import Scan
from keel.sandbox.exec._view import View, etc_mirror
from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Mapping, Sequence
else:  # the C module: ``signal`` builds three enums at import (2 ms on this path)
    import _signal

PROXY_MOUNT = "/run/keel"
ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
TEARDOWN_SECONDS = 5.0
_ORDER = {"tmpfs": 0, "rw": 1, "ro": 2, "mask": 3, "data": 3}


class Mounts:
    """bwrap mount arguments and the descriptors they use, ordered by destination depth."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int, str, list[str]]] = []
        self.fds: list[int] = []

    def add(self, kind: str, dest: str, args: list[str], fd: int | None = None) -> None:
        """Queue ``args`` (which mount something at ``dest``)."""
        self.items.append((dest.rstrip("/").count("/"), _ORDER[kind], dest, args))
        if fd is not None:
            self.fds.append(fd)

    def args(self) -> list[str]:
        """The arguments, shallowest destination first (a mount never hides a deeper one)."""
        out: list[str] = []
        for _, _, _, args in sorted(self.items, key=lambda i: (i[0], i[1], i[2])):
            out += args
        return out


def system_args(view: View, tmp_bytes: int, state_dir: str) -> list[str]:
    """The fixed part: ``/usr``, root links, ``/etc`` entries, ``/proc``, ``/dev``, ``/tmp``."""
    args = ["--ro-bind", "/usr", "/usr"]
    for path in ROOT_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    mirror = etc_mirror(view.etc, state_dir)
    if mirror is None:
        for entry in view.etc:
            args += ["--ro-bind", entry, entry]
        args += ["--symlink", "../proc/self/mounts", "/etc/mtab"]
    else:
        args += ["--ro-bind", mirror[0], "/etc"]
        for entry in mirror[1]:
            args += ["--ro-bind", entry, entry]
    args += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]
    size = str(tmp_bytes)
    args += ["--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    return [*args, "--size", size, "--perms", "1777", "--tmpfs", "/tmp"]


def user_mounts(
    root: str, root_fd: int, view: View, scan: Scan, tmp_bytes: int, proxy_fd: int | None
) -> Mounts:
    """The HOME, view, workspace, control-file and proxy mounts (see the module docstring)."""
    m = Mounts()
    size = str(tmp_bytes)
    m.add("tmpfs", view.home, ["--size", size, "--perms", "0700", "--tmpfs", view.home])
    for path in view.read_only:
        m.add("ro", path, ["--ro-bind", path, path])
    m.add("rw", root, ["--bind-fd", str(root_fd), root], root_fd)
    for path in view.writable[1:]:
        m.add("rw", path, ["--bind", path, path])
    for rel, fd in scan.gitdir_fds.items():
        m.add("rw", f"{root}/{rel}", ["--bind-fd", str(fd), f"{root}/{rel}"], fd)
    for rel, fd in scan.fds.items():
        dest = f"{root}/{rel}"
        if rel == STATE_DIR:
            m.add("tmpfs", dest, ["--size", "4096", "--tmpfs", dest, "--remount-ro", dest])
        else:
            m.add("ro", dest, ["--ro-bind-fd", str(fd), dest], fd)
    for rel in scan.secrets:  # the workspace's own .env and keys: empty inside
        m.add("mask", f"{root}/{rel}", ["--ro-bind", "/dev/null", f"{root}/{rel}"])
    for path in view.masks:
        if os.path.isdir(path) and not os.path.islink(path):
            m.add("mask", path, ["--size", "4096", "--tmpfs", path, "--remount-ro", path])
        else:
            m.add("mask", path, ["--ro-bind", "/dev/null", path])
    for path, content in view.git_configs:
        fd = _data_fd(content)
        m.add("data", path, ["--ro-bind-data", str(fd), path], fd)
    if proxy_fd is not None:
        m.add("ro", PROXY_MOUNT, ["--ro-bind-fd", str(proxy_fd), PROXY_MOUNT], proxy_fd)
    return m


def bwrap_argv(
    binary: str,
    *,
    system: list[str],
    mounts: Mounts,
    cwd: str,
    seccomp_fd: int,
    status_fd: int,
    command: Sequence[str],
    block_fd: int | None = None,
) -> list[str]:
    """The whole bwrap command line (the environment is bwrap's own, passed at spawn).

    ``block_fd``: bwrap waits, its namespaces made, until a byte can be read there before it
    executes the command (``keel exec`` puts the proxy's listener inside first).
    """
    args = [binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
    args += ["--new-session", "--cap-drop", "ALL"]
    args += [*system, *mounts.args(), "--remount-ro", "/", "--chdir", cwd]
    args += ["--seccomp", str(seccomp_fd), "--json-status-fd", str(status_fd)]
    if block_fd is not None:
        args += ["--block-fd", str(block_fd)]
    return [*args, "--", *command]


def _open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd")]


def _drain(fd: int) -> bytes:
    """What is left in the pipe ``fd`` (its writer is gone)."""
    os.set_blocking(fd, False)
    rest = b""
    try:
        while chunk := os.read(fd, 65536):
            rest += chunk
    except BlockingIOError:
        return rest
    return rest


def _data_fd(content: bytes) -> int:
    fd = os.memfd_create("keel-data", 0)
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class BwrapProcess:
    """A started bwrap: its status pipe, the pid namespace's init, kill and wait."""

    def __init__(
        self, argv: list[str], env: Mapping[str, str], env_fds: Sequence[int], status_read: int
    ) -> None:
        """Spawn ``argv`` with ``env``, which bwrap passes on to the command.

        ``env_fds`` are made inheritable first; the caller closes them.
        """
        for fd in env_fds:
            os.set_inheritable(fd, True)
        # Descriptors keel exec inherited from its caller (a client's pipes, a log) must not
        # reach the sandbox: close every one but stdio and ours in the child.
        keep = {0, 1, 2, *env_fds}
        closes = [(os.POSIX_SPAWN_CLOSE, fd) for fd in _open_fds() if fd not in keep]
        sigs = {_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP}
        self.pid = os.posix_spawn(
            argv[0], argv, env, file_actions=closes, setsigdef=sigs, setsigmask=()
        )
        self.pidfd = os.pidfd_open(self.pid)
        self.status_read = status_read
        self.status: dict[str, int] = {}
        self.init_pid: int | None = None
        self.init_fd: int | None = None
        self.reaped: int | None = None

    def read_child_pid(self) -> int | None:
        """Block until bwrap reports the pid namespace's init (or exits without one)."""
        buffer = b""
        while b"}" not in buffer:
            chunk = os.read(self.status_read, 4096)
            if not chunk:
                break
            buffer += chunk
        self._parse(buffer)
        pid = self.status.get("child-pid")
        if pid is not None and _quiet.call(self._open_init, pid):
            self.init_pid = pid
        return self.init_pid

    def _open_init(self, pid: int) -> None:
        self.init_fd = os.pidfd_open(pid)

    def wait(self, timeout: float) -> int | None:
        """Bwrap's wait status, or ``None`` at the timeout (signals retry the wait)."""
        if self.reaped is not None:
            return self.reaped
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        if not poller.poll(max(timeout, 0) * 1000):
            return None
        _, self.reaped = os.waitpid(self.pid, 0)
        return self.reaped

    def kill(self) -> None:
        """SIGKILL bwrap and the namespace's init: the kernel then kills everything inside."""
        for fd in (self.pidfd, self.init_fd):
            if fd is not None:
                _quiet.call(_signal.pidfd_send_signal, fd, _signal.SIGKILL)

    def finish(self) -> bool:
        """After bwrap exited: wait for the namespace to empty; True if the command started.

        The pid namespace's init exits only when every process inside is gone, so once its
        pidfd is readable nothing of the command is left running.
        """
        if self.init_fd is not None:
            poller = select.poll()
            poller.register(self.init_fd, select.POLLIN)
            if not poller.poll(TEARDOWN_SECONDS * 1000):
                _signal.pidfd_send_signal(self.init_fd, _signal.SIGKILL)
                poller.poll(TEARDOWN_SECONDS * 1000)
        self._parse(_drain(self.status_read))
        return "exit-code" in self.status

    def close(self) -> None:
        """Release the descriptors."""
        for fd in (self.pidfd, self.init_fd, self.status_read):
            _quiet.close(fd)

    def _parse(self, data: bytes) -> None:
        # One JSON object of integers per event (``{"child-pid": 12, ...}``); the first value
        # of each key is bwrap's own, written before the command could touch the descriptor.
        # Parsed by hand: ``json`` would cost this path 2 ms of imports.
        for chunk in data.split(b"{")[1:]:
            for field in chunk.split(b"}")[0].split(b","):
                key, sep, value = field.partition(b":")
                value = value.strip()
                if sep and value.lstrip(b"-").isdigit():
                    self.status.setdefault(key.strip().strip(b'"').decode(), int(value))
