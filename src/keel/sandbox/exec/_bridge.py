"""The sandbox side of ``keel wrap``'s proxy: relay a connection to the host proxy's socket.

``keel wrap``'s process inside the sandbox (``keel.sandbox.wrap._inside``) listens on
``127.0.0.1`` in the sandbox's own network namespace and pipes each connection it accepts to
the host proxy's Unix socket with ``_pipe`` (for a loopback port the client talks to directly,
through a ``CONNECT`` tunnel first, so the proxy judges it again). ``keel exec`` needs none of
this: its proxy accepts on a socket made inside the sandbox (``_netns``).

Standard library only, imported lazily: ``_inside`` runs as a script next to this file.
"""

from __future__ import annotations


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
