"""The hook process's end of ``keel hookd``: ask the workspace's daemon, or start one.

``relay(root, args, data, request_id, deadline_at)`` returns the daemon's ``(exit code,
stdout, stderr)``, or ``None`` when the caller must decide in process. It trusts only the
daemon keel started: the listening process's peer credentials (``SO_PEERCRED``) must name
this process's uid and the pid recorded in ``.keel/hookd.pid`` together with that pid's start
time (``keel.core.daemon``), so a process that bound ``hookd.sock`` itself is never asked.
While it waits it watches the daemon: one that is stopped (``SIGSTOP``) or gone, that sends
nothing within ``FIRST_BYTE`` seconds (a live daemon sends ``keel.hook.wire.ACK`` at once: it
is hung), whose reply is not complete by the time it was given (checked on every read, so a
trickle cannot hold the call), or longer than ``keel.hook.wire.MAX_MESSAGE``, is killed (the
next hook starts a new one) and the call is decided in process with the same request id, so
a decision the daemon already committed is answered again rather than made twice. While the
emergency stop is set nothing is relayed: the stop is decided in process, never by a socket.
``KEEL_HOOKD=0`` turns relaying and starting the daemon off.

The messages are ``keel.hook.wire``'s; the other end is ``keel.hook.server``. Only ``os``,
``sys`` and stdlib-only keel modules at import: this runs on every hook call.
"""

import os

from keel.core.daemon import (
    MAX_SOCKET_PATH,
    daemon_enabled,
    is_daemon,
    process_start,
    process_stat,
    read_record,
)
from keel.core.root import state_path
from keel.core.stop import stop_set
from keel.hook.wire import (
    LOCK_NAME,
    MAX_MESSAGE,
    SOCKET_NAME,
    HookArgs,
    Request,
    decode_reply,
    encode_request,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket

SPAWN_STAMP = "hookd.spawn"
"""Touched in ``.keel/`` when a hook starts a daemon: no second start within the backoff."""
SPAWN_BACKOFF = 10.0
CONNECT_TIMEOUT = 0.5
FIRST_BYTE = 1.5
"""Seconds from connecting to the daemon's first byte; one that sends nothing by then is hung.

A hung daemon so costs a call at most this long, once: it is replaced. Generous beside the
milliseconds a live daemon takes (it answers ``ACK`` from a fresh thread, before any work).
"""
POLL = 0.05
IN_PROCESS_RESERVE = 5.0
"""Seconds of a call's deadline kept for deciding in process when the daemon fails."""


def relay(
    root: str, args: HookArgs, data: bytes, request_id: str, deadline_at: float
) -> "tuple[int, bytes, bytes] | None":
    """The daemon's answer to one hook call, or ``None``: decide in process."""
    if not daemon_enabled():
        return None
    keel_dir = state_path(root)
    sock_path = os.path.join(keel_dir, SOCKET_NAME)
    if len(sock_path) > MAX_SOCKET_PATH or not os.path.isdir(keel_dir):
        return None
    if stop_set(root):
        return None  # the stop is decided in process, never by a socket
    record = read_record(keel_dir)
    if record is None:
        spawn(root, keel_dir)
        return None
    by = min(deadline_at - min(IN_PROCESS_RESERVE, args.deadline / 2), deadline_at)
    try:
        reply = _ask(sock_path, record, _request(root, args, data, request_id, by), by)
    except Exception:  # whatever the daemon or the relay got wrong
        reply = None
    if reply is None:
        spawn(root, keel_dir)
    return reply


def _request(root: str, args: HookArgs, data: bytes, request_id: str, by: float) -> bytes:
    """This process's call, with its directory and environment, as the daemon reads it."""
    from keel import __version__

    try:
        cwd = os.getcwd()
    except OSError:
        cwd = root
    return encode_request(
        Request(
            version=__version__,
            root=root,
            cwd=cwd,
            request_id=request_id,
            reply_by=by,
            argv=args.argv,
            env=dict(os.environ),
            data=data,
        )
    )


# -- asking -------------------------------------------------------------------------------------


def _ask(
    sock_path: str, record: "tuple[int, int]", request: bytes, by: float
) -> "tuple[int, bytes, bytes] | None":
    """Send ``request`` to the verified daemon; its answer, or None (after replacing it)."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(sock_path)
        if not is_daemon(sock, record):
            return None
        reply = _exchange(sock, record[0], request, by)
    finally:
        sock.close()
    if reply is None:
        replace_daemon(record)
        return None
    return decode_reply(reply)


def _exchange(sock: "_socket.socket", pid: int, request: bytes, by: float) -> "bytes | None":
    """What the daemon ``pid`` sent before end of file; None: it failed, replace it.

    It fails when it is stopped or gone, sends nothing within ``FIRST_BYTE`` seconds, has not
    finished by ``by`` (checked before every read, whatever arrives), or sends more than
    ``MAX_MESSAGE`` bytes.
    """
    import _socket
    import select
    import time

    first_by = min(time.monotonic() + FIRST_BYTE, by)
    try:
        sock.settimeout(max(first_by - time.monotonic(), 0.001))
        sock.sendall(request)  # it reads at once too: one that does not is hung
        sock.shutdown(_socket.SHUT_WR)
    except TimeoutError:
        return None
    except OSError:  # it closed the connection: a reply that is not one
        return b""
    sock.setblocking(False)
    chunks: list[bytes] = []
    size = 0
    while True:
        limit = by if chunks else first_by
        left = limit - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([sock], [], [], min(left, POLL))
        if not ready:
            if not _alive(pid):
                return None
            continue
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_MESSAGE:
            return None
        chunks.append(chunk)


def _alive(pid: int) -> bool:
    """False once ``pid`` is gone, a zombie, or stopped (``SIGSTOP``, traced)."""
    fields = process_stat(pid)
    if not fields:
        return False
    return fields[0] not in (b"T", b"t", b"Z", b"X", b"x")


def replace_daemon(record: "tuple[int, int]") -> bool:
    """Kill the daemon of ``record`` (if it is still that process); the next hook starts one."""
    import signal

    pid, start = record
    if process_start(pid) != start:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return False
    return True


# -- starting one -------------------------------------------------------------------------------


def spawn(root: str, keel_dir: str) -> None:
    """Start ``keel hookd`` for ``root`` unless one runs or one was started a moment ago.

    The daemon runs isolated from the workspace (``keel.core.isolated``: ``python -I -S``, a
    script by absolute path, its directory ``root/.keel``), with this process's environment.
    """
    import time

    try:
        stamp = os.path.join(keel_dir, SPAWN_STAMP)
        try:
            if time.time() - os.stat(stamp).st_mtime < SPAWN_BACKOFF:
                return
        except FileNotFoundError:
            pass
        if locked(os.path.join(keel_dir, LOCK_NAME)):
            return
        with open(stamp, "w"):
            pass
        from keel.core.isolated import launcher_argv

        # isolated, a script by path: the daemon inherits the hook's directory (the project)
        # and environment, and the launcher leaves the directory for .keel/ before importing
        argv = launcher_argv("hookd", root, site=False)
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.posix_spawn(
                argv[0],
                argv,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0),
                    (os.POSIX_SPAWN_DUP2, null, 1),
                    (os.POSIX_SPAWN_DUP2, null, 2),
                ],
                setsid=True,
            )
        finally:
            os.close(null)
    except Exception:  # no daemon only costs speed
        pass


def locked(path: str) -> bool:
    """True if a daemon holds the workspace's lock."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False
