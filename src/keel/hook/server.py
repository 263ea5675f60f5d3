"""``keel hookd``: answers the hook calls of one workspace with everything already loaded.

Started on demand by a hook (``keel.hook.relay.spawn``: ``python -I -S <keel>/_launch.py hookd
ROOT``, isolated from the workspace, its directory ``ROOT/.keel`` before anything is imported;
``-I`` keeps the directory a request is answered in off ``sys.path`` too), it holds
``<root>/.keel/hookd.lock`` (a second daemon exits at once), listens on
``<root>/.keel/hookd.sock`` (mode 0600; a peer of another uid is refused; anything but a socket
found there is moved aside to ``hookd.sock.stale-N``, ``socket_problem``), keeps the
workspace's network proxy on ``<root>/.keel/proxy.sock`` (``keel.sandbox.exec._proxyd``:
``keel exec`` hands it each sandbox to serve instead of starting a proxy of its own), records
its pid and start time in ``<root>/.keel/hookd.pid`` (the relay and ``keel exec`` trust only
that process), and exits after ``KEEL_HOOKD_IDLE`` seconds without a request or a proxied
command (default 600), as soon as its socket is removed or replaced, or when the workspace
disappears; commands still running keep their proxy until they end.

Each connection gets ``keel.hook.wire.ACK`` at once (the relay's sign of life: a daemon that
sends nothing is hung, and replaced); each request is answered by ``keel.hook.runner.answer``,
the very code a hook process runs, one request at a time, with the request's environment and
working directory swapped in. The daemon keeps one journal connection and one guard per session
in memory (so the monitor's state is not read and written as a file per call); a guard is
rebuilt when keel.toml changed or another process wrote the session's state since. The emergency
stop is read afresh on every decision. Every request carries the hook process's request id and
the instant it stops waiting: the guard commits nothing after it, and a request the hook process
re-decided in process is never journaled twice. A relay of another keel version, or any request
after a loaded keel source file changed, gets ``retry`` (and the daemon exits, so the next call
starts a current one). With ``[export] otlp_endpoint`` set, the sessions it answers are pushed as
OpenTelemetry traces (``keel.journal.push``): read from the committed journal on a thread of
their own, woken after each answer is sent, never on a request's path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from keel.core.configview import config_stamp
from keel.core.daemon import RECORD_NAME, peer_credentials, process_start, read_record
from keel.core.errors import KeelError, WorkspaceError
from keel.core.root import ensure_state_dir, state_dir
from keel.guard.judging import SubprocessJudging
from keel.hook.main import parse_hook_args
from keel.hook.wire import (
    ACK,
    BLOCK,
    LOCK_NAME,
    MAX_MESSAGE,
    SOCKET_NAME,
    Request,
    netstrings,
    parse_netstrings,
    parse_request,
    reply_fields,
)
from keel.sandbox.exec._proxyd import ProxyService

if TYPE_CHECKING:
    from collections.abc import Callable

    from keel.guard import Guard
    from keel.hook.protocol import HookInput
    from keel.journal import Journal
    from keel.journal.push import LivePush

DEFAULT_IDLE = 600.0
POLL = 1.0
STALE_SUFFIX = ".stale-"
"""What is found at the socket path and is no socket is renamed ``hookd.sock.stale-N``."""
MAX_GUARDS = 64
PUSH_POLL = 5.0
"""Seconds between two looks of the trace push (``[export]``) when no answer woke it."""
_WORK = threading.Lock()


def socket_path(root: Path) -> Path:
    """Where the daemon of ``root`` listens."""
    return state_dir(root) / SOCKET_NAME


def socket_problem(root: Path) -> WorkspaceError | None:
    """What at ``root``'s socket path keeps a daemon from listening there; None: nothing.

    Anything but a socket (a directory, a file, a link): hooks then decide in process, more
    slowly. A daemon moves it aside when it starts (``serve``); the error names it and the
    fix for when that cannot be done: ``code`` ``workspace.hookd_socket``, and ``path``,
    ``kind`` (what it is), ``reason`` and ``fix`` in ``context``.
    """
    path = socket_path(root.resolve())
    kind = _not_a_socket(path)
    return None if kind is None else _socket_error(path, kind)


def _not_a_socket(path: Path) -> str | None:
    """What is at ``path`` (``a directory``...) when it is there and is no socket."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    kinds = (
        (stat.S_ISSOCK, None),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def _socket_error(path: Path, kind: str, failure: str = "") -> WorkspaceError:
    reason = (
        f"{path} is {kind}, not a socket{failure}: no daemon can listen there, so every hook "
        "decides in process (slower)"
    )
    fix = f"remove it (rm -r {path}); a daemon that starts moves it aside itself when it can"
    return WorkspaceError(
        f"{reason}; {fix}",
        code="workspace.hookd_socket",
        path=str(path),
        kind=kind,
        reason=reason,
        fix=fix,
    )


def _clear_socket_path(path: Path) -> None:
    """Make room to bind ``path``: a stale socket is removed, anything else moved aside.

    Only the daemon holding the workspace's lock calls this, so a socket there is stale.

    Raises:
        WorkspaceError: ``workspace.hookd_socket``, when what is there cannot be moved aside.
    """
    kind = _not_a_socket(path)
    if kind is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    n = 1
    while os.path.lexists(aside := f"{path}{STALE_SUFFIX}{n}"):
        n += 1
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _socket_error(path, kind, f" and cannot be moved aside ({exc.strerror})") from exc


def daemon_running(root: Path) -> bool:
    """True if this user's recorded daemon of ``root`` is alive and its socket accepts."""
    root = root.resolve()
    if read_record(str(state_dir(root))) is None:
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2)
        sock.connect(str(socket_path(root)))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def stop_daemon(root: Path, *, wait: float = 1.0) -> bool:
    """Make the daemon of ``root`` exit: remove its socket, then kill it if it lingers.

    A daemon that is hung or stopped (``SIGSTOP``) is killed (``SIGKILL`` reaches a stopped
    process). Returns True if there was a daemon or a socket. Hooks decide in process until
    a later hook starts a new daemon.
    """
    import signal

    root = root.resolve()
    record = read_record(str(state_dir(root)))
    removed = False
    path = socket_path(root)
    if _not_a_socket(path) is None:  # anything else is no daemon's: left to socket_problem
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed = True
    if record is None:
        return removed
    pid, start = record
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + wait
    while time.monotonic() < end and process_start(pid) == start:
        time.sleep(0.02)
    if process_start(pid) == start:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return True


def serve(root: Path, *, idle: float = DEFAULT_IDLE, ready: threading.Event | None = None) -> int:
    """Serve hook calls for ``root`` until idle; 0 also when another daemon already serves."""
    root = root.resolve()
    keel_dir = ensure_state_dir(root)
    lock_fd = os.open(keel_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        return 0
    path = socket_path(root)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    inode = -1
    state = _State(time.monotonic(), root, push=True)
    proxy = ProxyService(str(root), current=lambda: _current(state))
    try:
        _clear_socket_path(path)
        old = os.umask(0o177)
        try:
            server.bind(str(path))
        finally:
            os.umask(old)
        server.listen(64)
        server.settimeout(POLL)
        inode = path.stat().st_ino
        with contextlib.suppress(OSError):  # without it keel exec serves its own proxy
            proxy.start()  # before the record: a client that trusts the record finds both
        _write_record(keel_dir)
        if ready is not None:
            ready.set()
        _loop(server, path, inode, idle, state, proxy)
    finally:
        proxy.close()
        server.close()
        state.close()
        with contextlib.suppress(OSError):
            if path.stat().st_ino == inode:
                path.unlink()
        with contextlib.suppress(OSError):
            if read_record(str(keel_dir)) == (os.getpid(), process_start(os.getpid())):
                (keel_dir / RECORD_NAME).unlink()
        os.close(lock_fd)
        if state.push is not None:  # after the lock: a new daemon need not wait for the flush
            state.push.close()
    proxy.wait()  # commands still running keep their proxy; a new daemon may start meanwhile
    return 0


def _live_push(root: Path, guards: _Guards) -> LivePush:
    """``[export] otlp_endpoint``: the sessions this daemon answers are pushed as traces.

    Read from committed journal events on a thread of its own, woken after each answer (and
    every ``PUSH_POLL`` seconds, for what hooks decided in process meanwhile); the SDK is
    imported only once an endpoint is set. Headers come from the environment the daemon
    started with (each request's is swapped in and out of ``os.environ``); a failure is
    appended through the daemon's open journal, which opening one would read.
    """
    from keel.journal.push import LivePush

    environ = dict(os.environ)
    return LivePush(root, environ=environ, poll=PUSH_POLL, writer=lambda: guards.journal)


def _current(state: _State) -> bool:
    """False (and the daemon stops) once a loaded keel source file changed."""
    if _code_changed():
        state.stop = True  # as for a hook request: the next hook starts a current daemon
        return False
    return True


def _write_record(keel_dir: Path) -> None:
    """``hookd.pid``: this process's pid and start time, written atomically."""
    from keel.core.files import write_atomic

    pid = os.getpid()
    write_atomic(keel_dir / RECORD_NAME, f"{pid} {process_start(pid)}\n")


class _State:
    """What the accept loop and the request threads share."""

    def __init__(
        self, now: float, root: Path, *, inside_sandbox: bool = False, push: bool = False
    ) -> None:
        self.last = now
        self.busy = 0
        self.stop = False
        self.lock = threading.Lock()
        self.push: LivePush | None = None
        """Traces of the sessions answered (``_live_push``); None: not pushed."""
        self.guards = _Guards(root, inside_sandbox=inside_sandbox, watch=self._watch)
        if push:
            self.push = _live_push(root, self.guards)

    def _watch(self, session_id: str) -> None:
        if self.push is not None:
            self.push.watch(session_id)

    def close(self) -> None:
        self.guards.close()


class _Guards:
    """One journal connection and one guard per session, kept while they are current."""

    def __init__(
        self,
        root: Path,
        *,
        inside_sandbox: bool = False,
        watch: Callable[[str], None] | None = None,
    ) -> None:
        self.root = root
        self.inside_sandbox = inside_sandbox
        self.watch = watch
        """Told each session a guard is asked for (the live push follows those sessions)."""
        self.journal: Journal | None = None
        self.journal_stamp: tuple[object, ...] | None = None
        self.guards: dict[tuple[str, str], tuple[tuple[object, ...] | None, Guard]] = {}
        self.judging = SubprocessJudging(root, background=True)
        """The model judge, on threads of this daemon (``[judge] model``): off the hook's path."""

    def __call__(self, root: Path, inp: HookInput, deadline_at: float) -> Guard:
        """The session's guard: cached while current; its ``close`` leaves the journal open."""
        from keel.guard import Guard

        journal = self._journal(deadline_at)
        if self.watch is not None:
            self.watch(inp.session_id)
        key = (inp.session_id, inp.agent)
        stamp = config_stamp(self.root)
        cached = self.guards.get(key)
        if cached is not None and cached[0] == stamp and cached[1].journal is journal:
            guard = cached[1]
            if not guard.is_current():
                guard.reload_state()
        else:
            guard = Guard.open(
                self.root,
                session_id=inp.session_id,
                agent=inp.agent,
                journal=journal,
                wait_until=deadline_at,
                inside_sandbox=self.inside_sandbox,
                judging=self.judging,
            )
            self.guards.pop(key, None)
            self.guards[key] = (stamp, guard)
            while len(self.guards) > MAX_GUARDS:
                del self.guards[next(iter(self.guards))]
        return guard

    def _journal(self, deadline_at: float) -> Journal:
        """The shared connection, reopened when journal.db was replaced or keel.toml changed.

        journal.db is replaced when it is moved aside; keel.toml's ``[journal]`` may name
        another database. A lost PostgreSQL connection is reopened by the journal itself.
        """
        from keel.journal import journal_stamp, open_journal

        stamp = journal_stamp(self.root)
        if self.journal is None or stamp != self.journal_stamp:
            self.close()
            self.journal = open_journal(
                self.root, timeout=max(deadline_at - time.monotonic(), 0.01)
            )
            self.journal_stamp = journal_stamp(self.root)
        return self.journal

    def close(self) -> None:
        self.guards.clear()
        if self.journal is not None:
            with contextlib.suppress(Exception):
                self.journal.close()
            self.journal = None


def _loop(
    server: socket.socket, path: Path, inode: int, idle: float, state: _State, proxy: ProxyService
) -> None:
    while not state.stop:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            with state.lock:
                last = max(state.last, proxy.last)
                busy = state.busy or proxy.active or state.guards.judging.active
                quiet = not busy and time.monotonic() - last > idle
            if quiet or not _still_ours(path, inode):
                return
            continue
        except OSError:
            return
        with state.lock:
            state.busy += 1
            state.last = time.monotonic()
        threading.Thread(
            target=_connection, args=(conn, state), name="keel-hookd", daemon=True
        ).start()


def _still_ours(path: Path, inode: int) -> bool:
    try:
        return path.stat().st_ino == inode
    except OSError:
        return False


def _connection(conn: socket.socket, state: _State) -> None:
    try:
        serve_connection(conn, state)
    finally:
        with state.lock:
            state.busy -= 1
            state.last = time.monotonic()


class Service:
    """One workspace's hook service state, for another front end (``keel wrap``)."""

    def __init__(self, root: Path, *, inside_sandbox: bool = False) -> None:
        """The guards and journal of ``root``; ``inside_sandbox`` as in ``Guard.open``."""
        preload()
        _code_changed()  # remember the sources as loaded
        self.state = _State(time.monotonic(), root.resolve(), inside_sandbox=inside_sandbox)

    @property
    def stopped(self) -> bool:
        """True once the service should end (keel's code changed)."""
        return self.state.stop

    def serve(
        self,
        conn: socket.socket,
        rewrite: Callable[[list[bytes]], list[bytes]] | None = None,
        *,
        acked: bool = False,
    ) -> None:
        """Answer the one request on ``conn`` (``rewrite`` may adjust its fields first).

        ``acked``: the front end already sent ``ACK`` on ``conn``.
        """
        serve_connection(conn, self.state, rewrite, acked=acked)

    def close(self) -> None:
        """Close the journal and drop the guards."""
        self.state.close()


def serve_connection(
    conn: socket.socket,
    state: _State,
    rewrite: Callable[[list[bytes]], list[bytes]] | None = None,
    *,
    acked: bool = False,
) -> None:
    """Read one relayed request from ``conn`` (same uid only) and send its answer.

    ``ACK`` goes first, before the request is read (unless ``acked``: it was sent already).
    """
    try:
        with conn:
            conn.settimeout(60)
            if not _same_user(conn):
                return
            if not acked:
                conn.sendall(ACK)  # at once: the relay tells a live daemon from a hung one
            fields = _receive(conn)
            if fields is None:
                return
            if rewrite is not None:
                fields = rewrite(fields)
            conn.sendall(netstrings(_respond(fields, state)[1:]))  # its MAGIC was the ACK
            if state.push is not None:
                state.push.wake()  # after the answer: the push reads what it committed
    except OSError:
        pass


def _same_user(conn: socket.socket) -> bool:
    return peer_credentials(conn)[1] == os.getuid()


def _receive(conn: socket.socket) -> list[bytes] | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_MESSAGE:
            return None
        chunks.append(chunk)
    return parse_netstrings(b"".join(chunks))


def _respond(fields: list[bytes], state: _State) -> list[bytes]:
    """The reply's fields to a request's: the answer, or ``retry`` (decide in process)."""
    from keel import __version__

    request = parse_request(fields)
    if request is None:
        return reply_fields(None)
    if request.version != __version__ or _code_changed():
        state.stop = True  # keel was upgraded or edited: the next hook starts a current daemon
        return reply_fields(None)
    if Path(request.root).resolve() != state.guards.root or time.monotonic() >= request.reply_by:
        return reply_fields(None)
    reply = _answer(request, state)
    if _stray_work():
        state.stop = True  # a call overran its deadline and still runs: never run beside it
    return reply_fields(reply)


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


def _answer(request: Request, state: _State) -> tuple[int, bytes, bytes]:
    """Run the in-process hook with the request's environment and directory, one at a time."""
    from keel.hook.runner import answer

    with _WORK:
        saved_env = dict(os.environ)
        saved_cwd = os.getcwd()
        try:
            os.environ.clear()
            os.environ.update(request.env)
            with contextlib.suppress(OSError):
                os.chdir(request.cwd)
            try:
                args = parse_hook_args(request.argv)
            except ValueError:
                return BLOCK, b"", b"keel hook: bad arguments; blocked to be safe\n"
            return answer(
                args,
                request.data,
                request_id=request.request_id,
                deadline_at=request.reply_by,
                root=str(state.guards.root),
                guard_factory=state.guards,
            )
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            with contextlib.suppress(OSError):
                os.chdir(saved_cwd)


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
    import signal

    def _terminate(signum: int, frame: object) -> None:
        raise SystemExit(0)  # unwinds serve(): the socket and the record are removed

    signal.signal(signal.SIGTERM, _terminate)
    preload()
    _code_changed()  # remember the sources as loaded
    try:
        return serve(Path(args[0]), idle=idle)
    except KeelError as err:  # e.g. workspace.hookd_socket: one line, never a traceback
        sys.stderr.write(f"keel hookd: error: {err.message} [{err.code}]\n")
        return 1


def preload() -> None:
    """Import what every request needs, once."""
    import keel.guard
    import keel.hook.runner
    import keel.journal
    import keel.monitor
    import keel.policy

    keel.policy.preload()


if __name__ == "__main__":
    raise SystemExit(main())
