"""The sandbox side of the proxy: a loopback listener relayed to the host proxy, then the command.

bwrap starts ``python -I -S /run/keel/bridge.py PORT SOCKET COMMAND...`` (a copy of this file)
as the sandbox's main process. It listens on ``127.0.0.1:PORT`` in the sandbox's own network
namespace (where ``HTTP_PROXY`` points), double-forks a relay daemon that connects each
accepted connection to the host proxy's Unix socket ``SOCKET``, and then *becomes* the command
(``execvp``): the command's exit status, signals and process tree are exactly what they would
be without the bridge, and the relay dies with the sandbox's pid namespace. The relay is
reparented to the sandbox's init and sits in its own session, so the command's job control
cannot stop it.

Standard library only, and nothing imported before the ``exec`` but ``os``, ``sys`` and
``_socket``: this runs in front of every networked contained command.
"""

from __future__ import annotations

import _socket
import os
import sys


def main(argv: list[str]) -> None:
    """Listen, fork the relay, exec the command (see the module docstring)."""
    port, path, command = int(argv[0]), argv[1], argv[2:]
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            _daemon(listener.detach(), path)
        os._exit(0)
    os.waitpid(child, 0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"keel exec: {command[0]}: {exc.strerror}\n")
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def _daemon(fd: int, path: str) -> None:
    """Accept forever; one thread per connection (imports wait for the first one)."""
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        listener = _socket.socket(fileno=fd)
        while True:
            conn, _ = listener._accept()  # pyright: ignore[reportAttributeAccessIssue]
            import socket
            import threading

            args = (socket.socket(fileno=conn), path)
            threading.Thread(target=_pipe, args=args, daemon=True).start()
    finally:
        os._exit(0)


def _pipe(conn: object, path: str, target: str | None = None) -> None:
    """Relay ``conn`` to the Unix socket ``path``; through ``CONNECT target`` when given.

    With ``target`` (``host:port``; ``keel wrap``'s loopback relays) the proxy is asked for a
    tunnel first, and ``conn`` is closed unless it answers ``200``.
    """
    import selectors
    import socket

    assert isinstance(conn, socket.socket)
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        if target is not None:
            rest = _tunnel(upstream, target)
            if rest is None:
                return
            conn.sendall(rest)
        peer = {conn: upstream, upstream: conn}
        with selectors.DefaultSelector() as sel:
            sel.register(conn, selectors.EVENT_READ)
            sel.register(upstream, selectors.EVENT_READ)
            while sel.get_map():
                for key, _ in sel.select():
                    src = key.fileobj
                    assert isinstance(src, socket.socket)
                    data = src.recv(65536)
                    if data:
                        peer[src].sendall(data)
                    else:
                        sel.unregister(src)
                        peer[src].shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        conn.close()
        upstream.close()


def _tunnel(upstream: object, target: str) -> bytes | None:
    """Ask the proxy on ``upstream`` for ``CONNECT target``.

    Returns what the server already sent past the proxy's ``200`` answer, or ``None`` when
    the proxy refused.
    """
    import socket

    assert isinstance(upstream, socket.socket)
    upstream.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        chunk = upstream.recv(4096)
        if not chunk:
            return None
        head += chunk
    head, _, rest = head.partition(b"\r\n\r\n")
    return rest if head.split(b" ", 2)[1:2] == [b"200"] else None


def source() -> str:
    """This module's source, to put where the sandbox can run it."""
    with open(__file__, encoding="utf-8") as fh:
        return fh.read()


if __name__ == "__main__":
    main(sys.argv[1:])
