"""``keel hookd``: answers the hook calls of one workspace with everything already loaded.

Started on demand by a hook (``python -m keel.daemon.server ROOT``), it holds
``<root>/.keel/hookd.lock`` (a second daemon exits at once), listens on
``<root>/.keel/hookd.sock`` (mode 0600; a peer of another uid is refused) and exits after
``KEEL_HOOKD_IDLE`` seconds without a request (default 600), or as soon as its socket is
removed or replaced, or the workspace disappears.

Each request is answered by ``keel.cli.hook.answer``, the very code a hook process runs,
one request at a time, with the request's environment and working directory swapped in for
the duration: the emergency stop, keel.toml and the session state are read afresh every
time, so the daemon decides exactly as the hook process would. A relay of another keel
version, or any request after a loaded keel source file changed, gets ``retry`` (and the
daemon exits, so the next call starts a current one).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from keel.daemon.relay import LOCK_NAME, MAGIC, SOCKET_NAME, netstrings, parse_netstrings

DEFAULT_IDLE = 600.0
POLL = 1.0
MAX_REQUEST = 64 * 1024 * 1024
_WORK = threading.Lock()


def socket_path(root: Path) -> Path:
    """Where the daemon of ``root`` listens."""
    return root / ".keel" / SOCKET_NAME


def daemon_running(root: Path) -> bool:
    """True if a daemon serves ``root`` (its socket accepts a connection)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2)
        sock.connect(str(socket_path(root.resolve())))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def stop_daemon(root: Path) -> bool:
    """Make the daemon of ``root`` exit (within a second) by removing its socket.

    Returns:
        True if there was a socket to remove. Hooks decide in process until a later hook
        starts a new daemon.
    """
    try:
        socket_path(root.resolve()).unlink()
    except (FileNotFoundError, NotADirectoryError):  # no socket, or no .keel/ to hold one
        return False
    return True


def serve(root: Path, *, idle: float = DEFAULT_IDLE, ready: threading.Event | None = None) -> int:
    """Serve hook calls for ``root`` until idle; 0 also when another daemon already serves."""
    root = root.resolve()
    keel_dir = root / ".keel"
    keel_dir.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(keel_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        return 0
    path = socket_path(root)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    inode = -1
    try:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale: its daemon is gone, since we hold the lock
        old = os.umask(0o177)
        try:
            server.bind(str(path))
        finally:
            os.umask(old)
        server.listen(64)
        server.settimeout(POLL)
        inode = path.stat().st_ino
        state = _State(time.monotonic())
        if ready is not None:
            ready.set()
        _loop(server, root, path, inode, idle, state)
    finally:
        server.close()
        with contextlib.suppress(OSError):
            if path.stat().st_ino == inode:
                path.unlink()
        os.close(lock_fd)
    return 0


class _State:
    """What the accept loop and the request threads share."""

    def __init__(self, now: float) -> None:
        self.last = now
        self.busy = 0
        self.stop = False
        self.lock = threading.Lock()


def _loop(
    server: socket.socket, root: Path, path: Path, inode: int, idle: float, state: _State
) -> None:
    while not state.stop:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            with state.lock:
                quiet = state.busy == 0 and time.monotonic() - state.last > idle
            if quiet or not _still_ours(path, inode):
                return
            continue
        except OSError:
            return
        with state.lock:
            state.busy += 1
            state.last = time.monotonic()
        threading.Thread(
            target=_connection, args=(conn, root, state), name="keel-hookd", daemon=True
        ).start()


def _still_ours(path: Path, inode: int) -> bool:
    try:
        return path.stat().st_ino == inode
    except OSError:
        return False


def _connection(conn: socket.socket, root: Path, state: _State) -> None:
    try:
        with conn:
            conn.settimeout(60)
            if not _same_user(conn):
                return
            fields = _receive(conn)
            if fields is None:
                return
            conn.sendall(netstrings(_respond(fields, root, state)))
    except OSError:
        pass
    finally:
        with state.lock:
            state.busy -= 1
            state.last = time.monotonic()


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _receive(conn: socket.socket) -> list[bytes] | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_REQUEST:
            return None
        chunks.append(chunk)
    return parse_netstrings(b"".join(chunks))


def _respond(fields: list[bytes], root: Path, state: _State) -> list[bytes]:
    from keel import __version__

    retry = [MAGIC, b"retry"]
    request = _parse_request(fields)
    if request is None:
        return retry
    version, req_root, cwd, argv, env, data = request
    if version != __version__ or _code_changed():
        state.stop = True  # keel was upgraded or edited: the next hook starts a current daemon
        return retry
    if Path(req_root).resolve() != root:
        return retry
    code, out, err = _answer(argv, env, cwd, data)
    if _stray_work():
        state.stop = True  # a call overran its deadline and still runs: never run beside it
    return [MAGIC, b"ok", str(code).encode(), out, err]


def _stray_work() -> bool:
    """True if a hook worker is still running after its call was answered (a missed deadline)."""
    for thread in threading.enumerate():
        if thread.name == "keel-hook":
            thread.join(0.1)  # a finished worker may still be between done.set() and its end
            if thread.is_alive():
                return True
    return False


_SEEN: dict[str, tuple[int, int]] = {}


def _code_changed() -> bool:
    """True if a loaded keel module's source changed since this daemon first saw it."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.startswith("keel") else None
        if not path:
            continue
        try:
            st = os.stat(path)
        except OSError:
            return True
        seen = _SEEN.setdefault(path, (st.st_mtime_ns, st.st_size))
        if seen != (st.st_mtime_ns, st.st_size):
            return True
    return False


def _parse_request(
    fields: list[bytes],
) -> tuple[str, str, str, list[str], dict[str, str], bytes] | None:
    try:
        if fields[0] != MAGIC:
            return None
        version, root, cwd = fields[1].decode(), os.fsdecode(fields[2]), os.fsdecode(fields[3])
        argc = int(fields[4])
        argv = [os.fsdecode(a) for a in fields[5 : 5 + argc]]
        envc = int(fields[5 + argc])
        pairs = fields[6 + argc : 6 + argc + envc]
        data = fields[6 + argc + envc]
        if len(fields) != 7 + argc + envc or len(argv) != argc:
            return None
    except (IndexError, ValueError, UnicodeDecodeError):
        return None
    env: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition(b"=")
        if eq:
            env[os.fsdecode(key)] = os.fsdecode(value)
    return version, root, cwd, argv, env, data


def _answer(
    argv: list[str], env: dict[str, str], cwd: str, data: bytes
) -> tuple[int, bytes, bytes]:
    """Run the in-process hook with the request's environment and directory, one at a time."""
    from keel.cli.hook import answer

    with _WORK:
        saved_env = dict(os.environ)
        saved_cwd = os.getcwd()
        try:
            os.environ.clear()
            os.environ.update(env)
            with contextlib.suppress(OSError):
                os.chdir(cwd)
            code, out, err = answer(argv, data)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            with contextlib.suppress(OSError):
                os.chdir(saved_cwd)
    return code, out.encode("utf-8", "surrogateescape"), err.encode("utf-8", "surrogateescape")


def main(argv: list[str] | None = None) -> int:
    """``keel hookd ROOT``: serve until idle (``KEEL_HOOKD_IDLE`` seconds, default 600)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: keel hookd ROOT\n")
        return 2
    try:
        idle = float(os.environ.get("KEEL_HOOKD_IDLE", DEFAULT_IDLE))
    except ValueError:
        idle = DEFAULT_IDLE
    _preload()
    _code_changed()  # remember the sources as loaded
    return serve(Path(args[0]), idle=idle)


def _preload() -> None:
    """Import what every request needs, once."""
    import keel.adapters.runner
    import keel.guard
    import keel.journal
    import keel.monitor
    import keel.policy._policy
    import keel.policy._shell

    with contextlib.suppress(Exception):
        keel.policy._shell._parser()  # pyright: ignore[reportPrivateUsage]


if __name__ == "__main__":
    raise SystemExit(main())
