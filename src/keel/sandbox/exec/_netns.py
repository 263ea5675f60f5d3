"""The proxy's listening socket inside a bwrap sandbox's network namespace, made from the host.

bwrap gives a contained command its own network namespace: a loopback and no route out. The
command reaches allowed hosts through the proxy, at ``127.0.0.1:PORT`` in that namespace. A
socket stays in the namespace it was created in wherever its descriptor goes, so keel makes
the listening socket inside the namespace and keeps it on the host, where the proxy (``keel
hookd``'s, or ``keel exec``'s own thread) accepts the command's connections directly: no relay
process inside, no second interpreter in front of every command.

How: bwrap runs with ``--block-fd`` (it stops just before it executes the command) and
reports its child's pid and the id of the network namespace it made (``--json-status-fd``).
A forked process opens the child's ``/proc/PID/ns/net``, checks it is the namespace bwrap
reported, joins the user namespace that owns it (bwrap made it for this user, who holds
every capability there and only there) and then the network namespace, binds
``127.0.0.1:PORT`` (``IP_FREEBIND``: bwrap may not have brought the loopback up yet), sends
the socket back over a socketpair (``SCM_RIGHTS``) and exits; then keel unblocks bwrap.
Nothing of the command runs before the socket exists, and the namespace keeps no route out:
the socket adds only the proxy. The work is done in a fork because joining a user namespace
cannot be undone, and the kernel allows it only to a single-threaded process.

Who forks: ``keel hookd`` keeps a small helper process (``Helper``: this file run as a
script, ``main``) that forks once per request, which costs little; without a daemon ``keel
exec`` forks itself (``Placer``: forked before bwrap starts, so that its start overlaps
bwrap's; a fork of the bigger ``keel exec`` process costs it ~2 ms of copied pages).

The same fork also caps the sandbox's processes when the request asks (root's runs: the pid
namespace's own ``pid_max``, see ``_pidns``): before it joins anything else it checks the
sandbox's pid namespace is the one bwrap reported, joins it (``setns``: its own children are
created in it) and forks a writer inside, which writes the namespace's ``pid_max`` (never the
host's: ``write_pid_max``) while the fork places the listener; it answers only once the
writer is done. So a run served by the daemon forks nothing of its own for either.

``setns`` and the ``NS_GET_USERNS`` ioctl are called through ``_ctypes`` (Python 3.11 has no
``os.setns``; the ``ctypes`` package costs ~3 ms to import, its C module ~0.4 ms). Standard
library only and no keel import: the helper runs this file as a script.
"""

from __future__ import annotations

import _socket
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Calls = tuple[Callable[..., int], Callable[..., int], Callable[[], int]]
    Cap = tuple[int, int]
    """A request's processes cap: the pid namespace id bwrap reported, and its ``pid_max``."""

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
PID_MAX = "/proc/sys/kernel/pid_max"
NS_GET_USERNS = 0xB701
"""``ioctl`` on a namespace descriptor: a descriptor of the user namespace that owns it."""
IP_FREEBIND = 15
REPLY_TIMEOUT = 10.0
EXIT_EOF = 3
_INT = 4
_CALLS: list[Callable[..., int]] = []


class Placer:
    """``keel exec``'s own fork that makes the listener inside one sandbox (see the module).

    Forked before bwrap is started; ``ask`` asks it for the socket once bwrap has reported
    its namespace, ``listener`` receives it; ``close`` ends it whatever happened.
    """

    def __init__(self) -> None:
        """Fork the helper; it waits for ``ask``'s request.

        Raises:
            OSError: no fork.
        """
        calls = _libc()
        self.conn, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self.pid: int | None = _fork()
            if self.pid == 0:  # pragma: no cover - the fork; its work is seen by the parent
                self.conn.close()
                _answer_and_exit(theirs, calls)
        except BaseException:
            self.conn.close()
            raise
        finally:
            theirs.close()

    def ask(self, pid: int, net_ns: int, port: int, cap: Cap | None = None) -> None:
        """Ask for a socket listening on ``127.0.0.1:port`` in the network namespace of ``pid``.

        ``net_ns`` is the id bwrap reported for the namespace it made: the fork joins that
        namespace or none. ``cap``: also set the ``pid_max`` of the pid namespace of ``pid``
        (see the module). ``listener`` waits for the answer.

        Raises:
            OSError: the fork is gone.
        """
        send_request(self.conn, pid, net_ns, port, cap)

    def listener(self) -> int:
        """The socket ``ask`` asked for, once it (and the cap) is done.

        Raises:
            OSError: a namespace is not the one reported, or the socket could not be made.
        """
        return receive_listener(self.conn)

    def close(self) -> None:
        """End the fork (it exits by itself once it answered) and reap it."""
        self.conn.close()  # one still waiting reads end of file and exits
        pid, self.pid = self.pid, None
        if not pid:
            return
        try:
            os.waitpid(pid, 0)
        except OSError:
            return  # reaped already (SIGCHLD ignored by the embedding program)


class Helper:
    """``keel hookd``'s helper process: a listener in a sandbox's namespace per request.

    A small interpreter (``python -I -S`` this file) started once, which forks per request
    (a fork of a small process is cheap); requests are answered one at a time.
    """

    def __init__(self, python: str | None = None) -> None:
        """Start the helper (``python``: the interpreter, by default this one).

        Raises:
            OSError: it cannot be started.
        """
        import threading

        self.lock = threading.Lock()
        self.conn, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            fd = theirs.fileno()
            os.set_inheritable(fd, True)
            argv = [python or sys.executable, "-I", "-S", os.path.abspath(__file__), str(fd)]
            null = os.open(os.devnull, os.O_RDWR)
            try:
                actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1)]
                self.pid = os.posix_spawn(argv[0], argv, {}, file_actions=actions)
            finally:
                os.close(null)
        except BaseException:
            self.conn.close()
            raise
        finally:
            theirs.close()

    def listener(self, pid: int, net_ns: int, port: int, cap: Cap | None = None) -> int:
        """As ``Placer.ask`` and ``listener``; a helper that failed once is not asked again.

        Raises:
            OSError: as there, or the helper is gone.
        """
        with self.lock:
            return request(self.conn, pid, net_ns, port, cap)

    def close(self) -> None:
        """Stop the helper (it exits at end of file) and reap it."""
        self.conn.close()
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            return  # reaped already


def request(conn: _socket.socket, pid: int, net_ns: int, port: int, cap: Cap | None = None) -> int:
    """Ask the fork or helper on ``conn`` for the listener (and ``cap``); the descriptor received.

    Raises:
        OSError: it refused or failed (its reason), or did not answer.
    """
    send_request(conn, pid, net_ns, port, cap)
    return receive_listener(conn)


def send_request(
    conn: _socket.socket, pid: int, net_ns: int, port: int, cap: Cap | None = None
) -> None:
    """The first half of ``request``: send it."""
    conn.settimeout(REPLY_TIMEOUT)
    capping = "" if cap is None else f" {cap[0]} {cap[1]}"
    conn.sendall(f"{pid} {net_ns} {port}{capping}\n".encode())


def receive_listener(conn: _socket.socket) -> int:
    """The second half of ``request``: the descriptor received.

    Raises:
        OSError: it refused or failed (its reason), or did not answer.
    """
    conn.settimeout(REPLY_TIMEOUT)
    message, ancillary, _, _ = conn.recvmsg(512, _socket.CMSG_SPACE(_INT))
    fds = received_fds(ancillary)
    if message != b"ok" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        reason = message.decode("utf-8", "replace") or "no answer"
        raise OSError(f"cannot listen inside the sandbox: {reason}")
    return fds[0]


def received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors of the ``SCM_RIGHTS`` messages in ``ancillary`` (from ``recvmsg``)."""
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % _INT
            fds += [
                int.from_bytes(data[i : i + _INT], sys.byteorder) for i in range(0, usable, _INT)
            ]
    return fds


def _answer_and_exit(conn: _socket.socket, calls: Calls) -> None:  # pragma: no cover - a fork
    """Read one request on ``conn``, answer it (``_place``), exit."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = conn.recv(1)  # one byte at a time: the next request is the next fork's
        if not chunk:
            os._exit(EXIT_EOF)  # the parent gave up, or the daemon is done
        line += chunk
    _place(conn, calls, line)


def _place(conn: _socket.socket, calls: Calls, line: bytes) -> None:  # pragma: no cover - a fork
    """Do what the request ``line`` asks (cap, join, listen), send the socket back; exit."""
    setns, ioctl, errno = calls
    code = 1
    writer = None
    try:
        fields = [int(field) for field in line.split()]
        if len(fields) not in (3, 5):
            raise ValueError(f"a request of {len(fields)} fields")
        pid, net_ns, port = fields[:3]
        netns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        if os.fstat(netns).st_ino != net_ns:
            raise OSError("the sandbox's network namespace is not the one bwrap reported")
        if len(fields) == 5:  # first, from the host's user namespace, as _pidns.cap does
            writer = _cap(setns, pid, fields[3], fields[4])
        owner = ioctl(netns, NS_GET_USERNS)
        if owner < 0:
            raise OSError(errno(), "NS_GET_USERNS")
        if setns(owner, CLONE_NEWUSER) != 0:
            raise OSError(errno(), "setns(user)")
        if setns(netns, CLONE_NEWNET) != 0:
            raise OSError(errno(), "setns(net)")
        listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        listener.setsockopt(_socket.SOL_IP, IP_FREEBIND, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        _reap(writer)  # the cap is set before bwrap may go on
        writer = None
        fd = listener.fileno().to_bytes(_INT, sys.byteorder)
        conn.sendmsg([b"ok"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd)])
        code = 0
    except BaseException as exc:
        try:
            conn.sendall(f"{exc}".encode("utf-8", "replace")[:500])
        except OSError:
            code = 2  # the parent is gone: no one to tell
    finally:
        _reap(writer)  # never left to the sandbox's init
        os._exit(code)


def _cap(setns: Callable[..., int], pid: int, pid_ns: int, value: int) -> int | None:
    """In a fork of its own: start the writer of the pid namespace's ``pid_max`` (``_pidns``).

    Its pid, or None where it cannot be set (the run goes on uncapped, as ``_pidns.cap``'s).

    Raises:
        OSError: the namespace is not the one bwrap reported.
    """
    opened = open_pid_namespace(pid, pid_ns)
    if opened is None:
        return None
    try:
        return start_writer(setns, *opened, value)
    finally:
        for fd in opened:
            os.close(fd)


def _reap(pid: int | None) -> None:
    if pid is not None:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            return  # reaped already


def open_pid_namespace(pid: int, pid_ns: int) -> tuple[int, int] | None:
    """Descriptors of the pid namespace of ``pid`` and of the host's ``pid_max`` (close both).

    ``pid_ns``: the id bwrap reported. None: the host's ``pid_max`` cannot be opened, so
    nothing would tell the namespace's table from the host's (not capped).

    Raises:
        OSError: the namespace is not the one bwrap reported.
    """
    ns = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if os.fstat(ns).st_ino != pid_ns:
            raise OSError("the sandbox's pid namespace is not the one bwrap reported")
    except BaseException:
        os.close(ns)
        raise
    try:
        host = os.open(PID_MAX, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        os.close(ns)
        return None
    return ns, host


def start_writer(setns: Callable[..., int], ns: int, host: int, value: int) -> int | None:
    """Join the pid namespace ``ns`` and fork the process that writes its ``pid_max``.

    Call it in a fork of its own: its later children are created in that namespace. The
    writer's pid (reap it), or None if the namespace cannot be joined (not capped).
    """
    if setns(ns, CLONE_NEWPID) != 0:
        return None
    writer = os.fork()
    if writer == 0:  # pragma: no cover - a process inside the sandbox
        write_pid_max(host, value)
    return writer


def write_pid_max(host: int, value: int) -> None:  # pragma: no cover - inside the sandbox
    """Inside the namespace: write its ``pid_max``, never the host's (``host``); exit."""
    code = 2
    try:
        fd = os.open(PID_MAX, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_ino != os.fstat(host).st_ino:  # the same: the host's own limit
                os.write(fd, str(value).encode())
                code = 0
        finally:
            os.close(fd)
    finally:
        os._exit(code)


def _fork() -> int:
    """``os.fork()``; Python 3.12+ warns when other threads exist (the fork only makes a socket)."""
    if sys.version_info < (3, 12):
        return os.fork()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _libc() -> Calls:
    """``setns``, ``ioctl`` (descriptor, request) and errno, from the C library, once."""
    if not _CALLS:
        import _ctypes

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class ULong(_ctypes._SimpleCData):
            _type_ = "L"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Int

        libc = _ctypes.dlopen(None, os.RTLD_NOW)  # pyright: ignore[reportArgumentType]
        setns = Function(_ctypes.dlsym(libc, "setns"))
        setns.argtypes = (Int, Int)
        ioctl = Function(_ctypes.dlsym(libc, "ioctl"))
        ioctl.argtypes = (Int, ULong)
        _CALLS.extend((setns, ioctl, _ctypes.get_errno))
    return _CALLS[0], _CALLS[1], _CALLS[2]


def main(argv: list[str]) -> None:  # pragma: no cover - the helper process
    """The helper: a fork answers each request on the socket ``argv[0]``, until end of file.

    The next fork is made as soon as the last one is done, so that it is already waiting
    when a request comes: a run waits for no fork.
    """
    conn = _socket.socket(fileno=int(argv[0]))
    calls = _libc()
    while True:
        pid = os.fork()
        if pid == 0:
            _answer_and_exit(conn, calls)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_EOF:
            return  # end of file: the daemon is done


if __name__ == "__main__":
    main(sys.argv[1:])
