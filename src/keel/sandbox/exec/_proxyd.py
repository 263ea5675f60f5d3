"""The workspace's one proxy, kept by ``keel hookd``: both ends of ``.keel/proxy.sock``.

``keel exec`` (bwrap) asks the daemon's ``ProxyService`` to put the proxy's listening socket
inside its sandbox's network namespace (``_netns.Helper``) and serve it, with the policy
already loaded, until ``keel exec`` closes the connection; then the daemon closes the listener
and sends back the run's decisions. ``connect`` returns ``None`` when no daemon can take it
(none is recorded: ``keel.core.daemon.recorded_proxy``, or another process listens) and
``Session.placed`` False when the daemon does not (another keel version, or it failed):
``keel exec`` then makes and serves the listener itself (``_netns.Placer``, ``_proxy.Proxy``).
Either way the sandbox has no route out; the listener is its only way to a host, and the
command starts only once it is there.

Trust: ``keel exec`` asks only the daemon keel started (``keel.core.daemon.is_daemon``: the
listening process is this uid's, with the pid and start time recorded in
``.keel/hookd.pid``), as the hook relay does. ``.keel/`` is an empty tmpfs inside the sandbox,
so no contained command can bind the socket or write the record. The daemon serves peers of
its own uid only, and places a listener only in the namespace of a sandbox of the asking
process (the pid named must be the child of the asker's child: bwrap's), never its own.

Refusals are journaled by the daemon as they happen, with the command the run's record in
``.keel/exec/<pid>.json`` names (``_journal``; the asker's pid is its peer credentials').

The allowlist: the daemon's policy is rebuilt when keel.toml changes (``_proxy.policy_check``
checks its stat on every connection), so the proxy enforces the current keel.toml, as the
hooks do. Handing it the allowlist per connection instead would need the policy's host rules
(wildcards, ports, the resolver's loopback rule) in ``keel exec``, which is the import this
avoids.

Wire: the client sends ``MAGIC <keel version> <sandbox pid> <net namespace id> <port>``, for
root's runs also ``<pid namespace id> <pid_max>`` (the processes cap, ``_pidns``: the helper's
fork sets it in the same request), and a newline; the daemon answers ``ok`` once it serves the
listener, the cap set (anything else, or nothing: the client places its own, and caps). When
the command is over the client shuts down its writing side; the daemon closes the listener,
writes one JSON object per decision, a line each, and closes.

A run's own ``exec`` event goes the same way when the daemon is there (``send_run``):
``MAGIC <keel version> record <JSON>`` and a newline, on the connection that served the run's
proxy in place of its end of file (when ``keel exec`` collects no decisions), else on a
connection of its own; the daemon answers ``ok`` once it has it, then journals it (its stop
waits for that, as for a run it serves); anything else, or nothing: ``keel exec`` journals it
from a detached fork. The daemon has the journal open already; a fork of ``keel exec`` would
import it (~40 ms of CPU per command, which back-to-back commands wait for on a small
machine).

Only ``os``, ``time``, ``_socket`` and core modules at import: ``connect`` runs for
every networked command.
"""

from __future__ import annotations

import _socket
import os
import time

from keel.core.daemon import (
    PROXY_SOCKET_NAME,
    is_daemon,
    peer_credentials,
    process_stat,
    recorded_proxy,
)
from keel.core.root import state_path
from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable

    from keel.sandbox.exec._netns import Cap, Helper
    from keel.sandbox.exec._proxy import ProxyDecision

MAGIC = b"keel-proxy/1"
OK = b"ok"
CONNECT_TIMEOUT = 0.5
PLACE_TIMEOUT = 5.0
REQUEST_TIMEOUT = 30.0
"""How long the daemon waits for a connected run's request (bwrap starts in between)."""
DECISIONS_TIMEOUT = 5.0
RECORD = b"record"
"""The request word of a run's own event (``Session.record``)."""
RECORD_TIMEOUT = 2.0
"""How long ``keel exec`` waits for the daemon to journal its run before doing it itself."""
MAX_REQUEST = 1 << 20
"""The longest request line the daemon reads (a run's event with its file lists)."""


def _hello() -> bytes:
    from keel import __version__

    return MAGIC + b" " + __version__.encode()


# -- keel exec's end ----------------------------------------------------------------------------


class Session:
    """A connection to the verified daemon's proxy, for one run (``connect``)."""

    def __init__(self, sock: _socket.socket) -> None:
        """Keep the connection ``connect`` opened."""
        self.sock = sock

    def ask(self, pid: int, net_ns: int, port: int, cap: Cap | None = None) -> bool:
        """Ask the daemon to serve a listener on ``port`` in the sandbox of ``pid``.

        ``net_ns``: the namespace id bwrap reported; ``cap``: also set the ``pid_max`` of the
        sandbox's pid namespace (its id as reported, the value). ``placed`` says whether it
        did. False: the request could not be sent (the connection is closed; the caller
        places its own and caps).
        """
        capping = "" if cap is None else f" {cap[0]} {cap[1]}"
        try:
            self.sock.settimeout(PLACE_TIMEOUT)
            self.sock.sendall(_hello() + f" {pid} {net_ns} {port}{capping}\n".encode())
            return True
        except OSError:
            self.sock.close()
            return False

    def placed(self) -> bool:
        """Whether the daemon did what ``ask`` asked; False: the connection is closed."""
        try:
            if self.sock.recv(len(OK)) == OK:
                return True
        except OSError:
            pass
        self.sock.close()
        return False

    def finish(self) -> list[ProxyDecision]:
        """Tell the daemon the run is over; the decisions its proxy made for it.

        Decisions that do not arrive in time are left out (they are in the proxy log).
        """
        data = b""
        try:
            self.sock.shutdown(_socket.SHUT_WR)
            self.sock.settimeout(DECISIONS_TIMEOUT)
            while chunk := self.sock.recv(65536):
                data += chunk
        except OSError:
            pass
        finally:
            self.sock.close()
        return _decisions(data)

    def close(self) -> None:
        """Drop the connection (the daemon stops serving this run)."""
        self.sock.close()

    def record(self, data: bytes) -> bool:
        """Send the daemon ``data`` (a run's ``exec`` event, JSON) to journal; ``recorded`` waits.

        False: it could not be sent (the connection is closed; the caller journals it another
        way).
        """
        try:
            self.sock.settimeout(RECORD_TIMEOUT)
            self.sock.sendall(_hello() + b" " + RECORD + b" " + data + b"\n")
            return True
        except OSError:
            self.sock.close()
            return False

    def recorded(self) -> bool:
        """Whether the daemon said it has the event ``record`` sent; closes the connection."""
        try:
            return self.sock.recv(len(OK)) == OK
        except OSError:
            return False
        finally:
            self.sock.close()


def connect(root: str, record: tuple[int, int]) -> Session | None:
    """A connection to the proxy of ``root``'s daemon, if the recorded process answers.

    ``record``: the daemon's ``(pid, start)`` (``keel.core.daemon.recorded_proxy``).
    """
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(os.path.join(state_path(root), PROXY_SOCKET_NAME))
        if is_daemon(sock, record):
            return Session(sock)
    except OSError:
        pass
    sock.close()
    return None


def send_run(root: str, data: bytes, served: Session | None = None) -> Session | None:
    """Send the run's ``exec`` event (``data``: JSON) to the workspace's daemon to journal.

    On ``served``, the connection that served the run's proxy, else on a new one. The
    connection to wait on (``Session.recorded``), or None: the caller journals it its own way
    (``_journal.record_run``). Never raises.
    """
    try:
        if served is None:
            record = recorded_proxy(state_path(root), os.environ)
            served = connect(root, record) if record is not None else None
        return served if served is not None and served.record(data) else None
    except Exception:
        if served is not None:
            served.close()
        return None


def _decisions(data: bytes) -> list[ProxyDecision]:
    if not data.strip():
        return []
    import json

    from keel.sandbox.exec._proxy import ProxyDecision

    out: list[ProxyDecision] = []
    for line in data.splitlines():
        try:
            out.append(ProxyDecision(**json.loads(line)))
        except (ValueError, TypeError):
            continue  # a line cut short by the timeout
    return out


# -- the daemon's end ---------------------------------------------------------------------------


class ProxyService:
    """The workspace's proxy in ``keel hookd``: a listener in each asking run's sandbox.

    ``current()`` says whether the daemon's code is still the installed one; when it is not,
    runs are refused (the client places its own listener with its current code). The
    namespace helper (``_netns.Helper``) is started with the first run that asks.
    """

    def __init__(self, root: str, *, current: Callable[[], bool] | None = None) -> None:
        """The service of the workspace ``root`` (not listening until ``start``)."""
        import threading

        from keel.sandbox.exec._proxy import policy_check

        self.root = root
        self.path = os.path.join(state_path(root), PROXY_SOCKET_NAME)
        self.check = policy_check(root)
        self.current = current or (lambda: True)
        self.active = 0
        """Runs being served now (the daemon does not go idle while one is)."""
        self.last = time.monotonic()
        """When a run last started or ended (``time.monotonic()``)."""
        self.changed = threading.Condition()
        self.server: socket.socket | None = None
        self.inode = -1
        self.helper: Helper | None = None
        self.helper_lock = threading.Lock()

    def start(self) -> None:
        """Listen on ``.keel/proxy.sock`` (mode 0600) and serve each run on its own thread."""
        import socket
        import threading

        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _quiet.unlink(self.path)  # a stale one: the caller holds the daemon's lock
        old = os.umask(0o177)
        try:
            server.bind(self.path)
        finally:
            os.umask(old)
        server.listen(64)
        self.inode = os.stat(self.path).st_ino
        self.server = server
        accept = threading.Thread(target=self._accept, args=(server,), name="keel-proxyd")
        accept.daemon = True
        accept.start()

    def close(self) -> None:
        """Stop taking runs (the ones being served go on); remove the socket if it is ours."""
        server, self.server = self.server, None
        if server is not None:
            try:
                if os.stat(self.path).st_ino == self.inode:
                    os.unlink(self.path)
            except OSError:
                pass
            _quiet.call(server.shutdown, _socket.SHUT_RDWR)  # wakes the thread in accept
            server.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no run is served; False if some still are after ``timeout`` seconds.

        Then the namespace helper is stopped.
        """
        with self.changed:
            done = self.changed.wait_for(lambda: self.active == 0, timeout)
        with self.helper_lock:
            helper, self.helper = self.helper, None
        if helper is not None:
            helper.close()
        return done

    def _accept(self, server: socket.socket) -> None:
        import threading

        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with self.changed:
                self.active += 1
                self.last = time.monotonic()
            run = threading.Thread(target=self._session, args=(conn,), name="keel-proxy")
            run.daemon = True
            run.start()

    def _session(self, conn: socket.socket) -> None:
        try:
            with conn:
                self._serve_run(conn)
        except OSError:
            pass
        finally:
            with self.changed:
                self.active -= 1
                self.last = time.monotonic()
                self.changed.notify_all()

    def _serve_run(self, conn: socket.socket) -> None:
        """Place one run's listener, serve it until the run ends, answer its decisions."""
        from keel.sandbox.exec._journal import denial_recorder, run_of
        from keel.sandbox.exec._proxy import Proxy
        from keel.sandbox.os._registry import PROXY_LOG

        if not self.current():  # checked as the run connects, while it starts bwrap
            return
        conn.settimeout(REQUEST_TIMEOUT)
        line = _read_line(conn)
        if line.split(b" ")[2:3] == [RECORD]:
            self._record(conn, line)
            return
        listener = self._place(conn, line)
        if listener is None:
            return
        try:
            conn.sendall(OK)  # first: connections wait in the listener's backlog meanwhile
        except OSError:
            os.close(listener)
            raise
        command, report = run_of(self.root, peer_credentials(conn)[0])  # the run's record
        on_deny = denial_recorder(self.root, command, report)
        proxy = Proxy(self.check, os.path.join(self.root, PROXY_LOG), on_deny)
        proxy.serve(listener)
        try:
            conn.settimeout(None)
            # the run is over when keel exec shuts its side, or sends the run's event
            line = _read_line(conn)
        finally:
            proxy.close(wait=False)
        try:
            if line:
                self._record(conn, line, proxy.wait_reports)
            else:
                _send_decisions(conn, proxy.decisions)  # first: keel exec waits for them
        finally:
            proxy.wait_reports()  # the refusals' journal events

    def _record(
        self, conn: socket.socket, line: bytes, before: Callable[[], object] | None = None
    ) -> None:
        """Journal the run's event the request ``line`` carries; answer ``ok`` once it is.

        ``before``: called between the answer and the event (the run's refusals go first).
        """
        import json

        from keel.sandbox.exec._journal import RUN_KIND, append

        prefix = _hello() + b" " + RECORD + b" "
        if peer_credentials(conn)[1] != os.getuid() or not line.startswith(prefix):
            return
        try:
            data = json.loads(line[len(prefix) :])
        except ValueError:
            return
        if isinstance(data, dict):
            conn.sendall(OK)  # first: keel exec exits on it; the daemon's stop waits for this
            if before is not None:
                before()
            append(self.root, RUN_KIND, data)

    def _place(self, conn: socket.socket, line: bytes) -> int | None:
        """The listener the request ``line`` asks for, if the asker may have it."""
        asker, uid, _ = peer_credentials(conn)
        fields = line.split(b" ")
        if uid != os.getuid() or len(fields) not in (5, 7) or b" ".join(fields[:2]) != _hello():
            return None
        try:
            pid, net_ns, port, *capping = (int(f) for f in fields[2:])
        except ValueError:
            return None
        if pid <= 1 or _parent(_parent(pid)) != asker or os.getpid() == asker:
            return None  # only a sandbox of the asker's (bwrap is its child)
        cap = (capping[0], capping[1]) if capping else None  # its pid namespace, checked there
        try:
            return self._helper().listener(pid, net_ns, port, cap)
        except OSError:
            with self.helper_lock:
                helper, self.helper = self.helper, None
            if helper is not None:
                helper.close()  # the next run starts a fresh one
            return None

    def _helper(self) -> Helper:
        with self.helper_lock:
            if self.helper is None:
                from keel.sandbox.exec._netns import Helper

                self.helper = Helper()
            return self.helper


def _read_line(conn: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n") and len(line) < MAX_REQUEST:
        chunk = conn.recv(65536)
        if not chunk:
            break
        line += chunk
    return line.strip()


def _parent(pid: int | None) -> int | None:
    """The parent pid of ``pid`` (``/proc/PID/stat``), or None."""
    fields = process_stat(pid) if pid is not None and pid > 0 else None
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


def _send_decisions(conn: socket.socket, decisions: list[ProxyDecision]) -> None:
    import json

    lines = [json.dumps(d.to_dict(), sort_keys=True) + "\n" for d in decisions]
    conn.settimeout(DECISIONS_TIMEOUT)
    conn.sendall("".join(lines).encode())
