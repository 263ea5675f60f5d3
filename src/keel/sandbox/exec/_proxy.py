"""The host side of a contained command's network: an HTTP(S) proxy that enforces the allowlist.

The design is sandbox-runtime's: the contained command has no route out (its own network
namespace with bwrap; Landlock allows TCP connect to this proxy's port only), and reaches
allowed hosts through this proxy, on the host: the workspace's one proxy in ``keel hookd``
(``_proxyd``), or a thread of ``keel exec`` when no daemon answers (and always for Landlock
and ``keel wrap``). With bwrap it accepts on a socket made inside the sandbox's network
namespace (``_netns``). It speaks just enough HTTP/1.1 for package managers:

- ``CONNECT host:port`` (what clients send for ``https://``): the tunnel is opened, the TLS
  inside is the client's and the server's business;
- an absolute-URI request (``GET http://host:port/path``): forwarded in origin form with
  ``Connection: close``, one request per connection.

Each connection's host and port are judged by the policy's own host check
(``Policy.check_host``, so ``[policy] network_allow`` and the preset decide: an entry without a
port allows ports 80 and 443, ``host:port`` exactly that port). A denied request gets ``403``
with a one-line reason and the policy's suggestion; for a host on the list but not on that
port the suggestion names the entry that would allow it, so ``CONNECT github.com:22`` with
``github.com`` allowed answers ``add "github.com:22" to [policy] network_allow``. A host
*name* that resolves to a loopback, link-local or unspecified address is refused unless it is
``localhost`` (DNS cannot smuggle a connection to the host's own services); the proxy connects
to the address it checked. Every decision is kept (``decisions``) and appended as a JSON line
to the log file, if one is given; every refusal is also handed to ``on_deny`` (``keel exec``
journals it: ``_journal``) once the client has its answer, and ``close`` waits for those.

A refusal names the ``network_allow`` entry that would allow the connection, and the command
that adds it: ``add "HOST" to [policy] network_allow in keel.toml, or run `keel allow-host
HOST``` (``HOST:PORT`` for a port other than 80 and 443).

Starting it costs ``keel exec`` little: the listener is a ``_socket`` socket served by a
``_thread`` thread; ``socket``, ``threading`` and the rest are imported by that thread when
the first connection arrives, not before.
"""

from __future__ import annotations

import _socket
import _thread
import os
import time

from keel.core.frozen import Frozen
from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from typing import Any

    Check = Callable[[str, int], tuple[bool, str, str]]

HEAD_LIMIT = 64 << 10
CONNECT_TIMEOUT = 30.0
IDLE_TIMEOUT = 600.0
REPORT_TIMEOUT = 10.0
"""How long ``close`` waits for the refusals still being handed to ``on_deny``."""
_NAMED = ("network.not_allowed", "network.port_not_allowed")
"""The refusals an allowlist entry would lift: their answer names it."""
_HOP_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


class ProxyDecision(Frozen):
    """One connection the contained command asked the proxy for, and what was decided."""

    __slots__ = ("allowed", "host", "method", "port", "reason", "rule", "time")
    time: float
    method: str
    host: str
    port: int
    allowed: bool
    rule: str
    reason: str

    def __init__(
        self, time: float, method: str, host: str, port: int, allowed: bool, rule: str, reason: str
    ) -> None:
        self._init(
            time=time,
            method=method,
            host=host,
            port=port,
            allowed=allowed,
            rule=rule,
            reason=reason,
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {name: getattr(self, name) for name in self.__slots__}


def policy_check(root: str) -> Check:
    """A host check backed by the workspace's policy, loaded on the first connection.

    The policy is rebuilt when keel.toml changes (``config_stamp``, checked on every
    connection), so a long-lived proxy (``keel hookd``'s) enforces the current allowlist. A
    refusal's reason carries the policy's suggestion (for a port: the entry to add). Any
    failure (an invalid keel.toml, a bug) denies: the check fails closed.
    """
    lock = _thread.allocate_lock()
    cache: list[tuple[object, Any]] = []

    def check(host: str, port: int) -> tuple[bool, str, str]:
        try:
            from keel.core.configview import config_stamp

            stamp = config_stamp(root)
            with lock:
                if not cache or cache[0][0] != stamp:
                    from keel.policy import Policy

                    cache[:] = [(stamp, Policy.for_root(root))]
                policy = cache[0][1]
            decision = policy.check_host(host, port)
            reason = decision.reason
            suggestion = decision.suggestion
            if decision.rule in _NAMED:
                suggestion = allow_hint(host, port)
            if suggestion:  # a refusal says what would allow it (the entry to add)
                reason = f"{reason}; {suggestion}"
            return decision.decision == "allow", decision.rule, reason
        except Exception as exc:  # fail closed: no decision is a deny
            return False, "internal_error", f"the policy check failed: {type(exc).__name__}"

    return check


def allow_hint(host: str, port: int) -> str:
    """What lets ``host:port`` through: the ``network_allow`` entry, and ``keel allow-host``.

    A web port (80, 443) needs the host alone, which allows both; any other port is named.
    """
    from keel.policy import allow_entry, canonical_host, port_allowed

    entry = allow_entry(canonical_host(host), None if port_allowed(None, port) else port)
    return f'add "{entry}" to [policy] network_allow in keel.toml, or run `keel allow-host {entry}`'


class Proxy:
    """An allowlisting HTTP proxy on a Unix socket or a loopback TCP port (see the module)."""

    def __init__(
        self,
        check: Check,
        log_path: str | None = None,
        on_deny: Callable[[ProxyDecision], object] | None = None,
    ) -> None:
        """Serve connections judged by ``check(host, port) -> (allowed, rule, reason)``.

        ``on_deny`` is given every refused connection, after the client had its answer.
        """
        self._check = check
        self._log_path = log_path
        self._on_deny = on_deny
        self._lock = _thread.allocate_lock()
        self._listener: _socket.socket | None = None
        self._reporting: list[Any] = []
        self.decisions: list[ProxyDecision] = []

    def listen_unix(self, path: str) -> None:
        """Listen on a Unix socket at ``path`` (in a private directory)."""
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.bind(path)
        self._serve(sock)

    def listen_tcp(self) -> int:
        """Listen on ``127.0.0.1`` on a free port; returns the port."""
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._serve(sock)
        return sock.getsockname()[1]

    def serve(self, listener: int) -> None:
        """Accept on ``listener``, a listening socket made elsewhere (``_netns.listener_in``).

        The proxy owns the descriptor from now on (``close`` closes it).
        """
        self._serve(_socket.socket(fileno=listener))

    def close(self, *, wait: bool = True) -> None:
        """Stop accepting (open tunnels end when their peers close).

        ``wait``: then wait for the refusals still being handed to ``on_deny``
        (``wait_reports``).
        """
        listener, self._listener = self._listener, None
        if listener is not None:
            _quiet.call(listener.shutdown, _socket.SHUT_RDWR)  # wakes the thread in accept
            listener.close()
        if wait:
            self.wait_reports()

    def wait_reports(self) -> None:
        """Wait (``REPORT_TIMEOUT`` at most) until ``on_deny`` has every refusal so far."""
        deadline = time.monotonic() + REPORT_TIMEOUT
        with self._lock:
            reporting = list(self._reporting)
        for thread in reporting:
            thread.join(max(deadline - time.monotonic(), 0))

    def _serve(self, sock: _socket.socket) -> None:
        sock.listen(128)
        self._listener = sock
        _thread.start_new_thread(self._accept, (sock,))

    def _accept(self, sock: _socket.socket) -> None:
        while True:
            try:
                fd, _ = sock._accept()  # pyright: ignore[reportAttributeAccessIssue]
            except OSError:
                return
            # Imported only now: a command that never connects never pays for them.
            import socket
            import threading

            conn = socket.socket(fileno=fd)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        refused: ProxyDecision | None = None
        try:
            refused = self._serve_one(conn)
        except OSError:
            return  # the client or the server went away: nothing to tell anyone
        finally:
            conn.close()
        if refused is not None and self._on_deny is not None:
            self._report(refused, self._on_deny)

    def _report(self, refused: ProxyDecision, on_deny: Callable[[ProxyDecision], object]) -> None:
        import threading

        with self._lock:
            self._reporting.append(threading.current_thread())
        try:
            on_deny(refused)
        except Exception:  # the decision is in the log and in ``decisions`` all the same
            return

    def _serve_one(self, conn: socket.socket) -> ProxyDecision | None:
        """Answer one client: refuse it, or connect and relay until both sides are done.

        Returns the decision when the connection was refused (its answer sent), else ``None``.
        """
        conn.settimeout(IDLE_TIMEOUT)
        head, rest = _read_head(conn)
        if head is None:
            _reply(conn, 400, "keel: a malformed or oversized request")
            return None
        request = _parse(head)
        if isinstance(request, str):
            _reply(conn, 400, f"keel: {request}")
            return None
        method, host, port, forward = request
        upstream = self._open(method, host, port, conn)
        if upstream is None or isinstance(upstream, ProxyDecision):
            return upstream
        try:
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                upstream.sendall(forward + rest)
            _relay(conn, upstream)
        finally:
            upstream.close()
        return None

    def _open(
        self, method: str, host: str, port: int, conn: socket.socket
    ) -> socket.socket | ProxyDecision | None:
        """The upstream connection, or what the client was told instead.

        The decision when the connection was refused (403); ``None`` when the host could not
        be reached (502).
        """
        allowed, rule, reason = self._check(host, port)
        address: tuple[str, int] | None = None
        if allowed:
            address, why = _resolve(host, port)
            if address is None:
                allowed, rule, reason = False, "network.resolve", why
        decision = ProxyDecision(time.time(), method, host, port, allowed, rule, reason)
        self._record(decision)
        if not allowed or address is None:
            _reply(conn, 403, f"keel: {host}:{port} refused: {reason} [{rule}]")
            return decision
        import socket

        try:
            return socket.create_connection(address, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            _reply(conn, 502, f"keel: cannot reach {host}:{port}: {exc.strerror or exc}")
            return None

    def _record(self, decision: ProxyDecision) -> None:
        with self._lock:
            self.decisions.append(decision)
            if self._log_path is None:
                return
            import json

            line = json.dumps(decision.to_dict(), sort_keys=True) + "\n"
            try:
                fd = os.open(
                    self._log_path,
                    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                )
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
            except OSError:
                pass  # the decision is still returned in the result


def _read_head(conn: socket.socket) -> tuple[bytes | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            return None, b""
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _parse(head: bytes) -> tuple[str, str, int, bytes] | str:
    """``(method, host, port, request to forward)``, or why the request is refused."""
    lines = head.split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return "not an HTTP request"
    method, target, version = parts
    if method == "CONNECT":
        host, port = _split_host_port(target, None)
        return ("CONNECT", host, port, b"") if host and port else f"bad CONNECT target {target!r}"
    if not target.lower().startswith("http://"):
        return "only CONNECT (for https) and absolute http:// URLs go through this proxy"
    authority, _, path = target[7:].partition("/")
    host, port = _split_host_port(authority.rsplit("@", 1)[-1], 80)
    if not host or not port:
        return f"bad URL {target!r}"
    headers = [h for h in lines[1:] if h.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
    first = f"{method} /{path} {version}".encode("latin-1")
    forward = b"\r\n".join([first, *headers, b"Connection: close", b"", b""])
    return method, host, port, forward


def _split_host_port(text: str, default: int | None) -> tuple[str, int | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, ""
    if not port_text:
        return host.lower(), default
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return "", None
    return host.lower(), int(port_text)


def _resolve(host: str, port: int) -> tuple[tuple[str, int] | None, str]:
    """The address to connect to, or why not: names may not point at the host's own services."""
    import ipaddress
    import socket

    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return None, f"cannot resolve {host}: {exc}"
    if not infos:
        return None, f"{host} has no address"
    first = str(infos[0][4][0])  # the one connected to: checked, then used (no second lookup)
    address = ipaddress.ip_address(first)
    local = address.is_loopback or address.is_link_local or address.is_unspecified
    if literal is None and local and host != "localhost":
        return None, f"{host} resolves to the local address {address}"
    return (first, port), ""


def _reply(conn: socket.socket, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        conn.sendall(head.encode() + body)
    except OSError:
        return  # the client is gone: it needs no answer


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until both directions are closed."""
    import selectors
    import socket

    a.settimeout(None)
    b.settimeout(None)
    peer = {a: b, b: a}
    with selectors.DefaultSelector() as sel:
        sel.register(a, selectors.EVENT_READ)
        sel.register(b, selectors.EVENT_READ)
        while sel.get_map():
            events = sel.select(IDLE_TIMEOUT)
            if not events:
                return
            for key, _ in events:
                src: socket.socket = key.fileobj  # pyright: ignore[reportAssignmentType]
                data = src.recv(65536)
                if data:
                    peer[src].sendall(data)
                    continue
                sel.unregister(src)
                try:
                    peer[src].shutdown(socket.SHUT_WR)
                except OSError:
                    continue  # the other side is gone already
