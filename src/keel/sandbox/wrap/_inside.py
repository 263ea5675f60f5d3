"""The sandbox side of ``keel wrap``: proxy, loopback relays and the hook relay, then the client.

bwrap starts, as the sandbox's main process::

    python -I -S <keel>/sandbox/wrap/_inside.py PROXY_PORT PROXY_SOCKET RELAYS HOOK_FD RECORD_FD
        DECIDE_SOCKET -- CLIENT...

It listens on ``127.0.0.1:PROXY_PORT`` (where ``HTTP(S)_PROXY`` point) and on
``127.0.0.1:PORT`` for each ``host:port`` of ``RELAYS`` (comma-separated, ``-`` for none: the
allowlisted loopback servers, such as a local model server). It then forks one relay daemon
(its own session, reparented to the sandbox's init, gone with the pid namespace) that:

- pipes each proxy connection to the host proxy's Unix socket ``PROXY_SOCKET``;
- tunnels each connection to a relayed port through the same proxy with ``CONNECT host:port``
  (so the host proxy judges it again), for clients that ignore the proxy variables;
- calls ``listen`` on ``HOOK_FD``, a Unix socket keel wrap bound on the host at what is
  ``<workspace>/.keel/hookd.sock`` inside, and pipes each connection to ``DECIDE_SOCKET``,
  where keel wrap's host-side decision service answers. Having listened, it writes its pid
  and start time to ``RECORD_FD`` (``hookd.pid`` in the same read-only directory): the
  hook's relay (``keel.hook.relay.relay``) trusts only the listener recorded there.

Only when the daemon is ready does this process become the client (``execvp``): the client
keeps pid, signals and exit status, and none of these descriptors.

Standard library only, and nothing imported before the ``exec`` but ``os``, ``sys``,
``_socket`` and keel's ``_bridge`` (next to this file).
"""

from __future__ import annotations

import _socket
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from keel.sandbox.exec import _bridge
else:  # run as a script under ``-I -S``: the module from ../exec, next to this package
    sys.path.insert(
        0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "exec")
    )
    import _bridge


def main(argv: list[str]) -> None:
    """Listen, fork the relay daemon, wait until it is ready, exec the client."""
    split = argv.index("--")
    spec, command = argv[:split], argv[split + 1 :]
    proxy_port, proxy_socket, relays = int(spec[0]), spec[1], _relays(spec[2])
    hook_fd, record_fd, decide_socket = int(spec[3]), int(spec[4]), spec[5]
    listeners: list[tuple[_socket.socket, str | None]] = [(_listen(proxy_port), None)]
    listeners += [(_listen(port), target) for target, port in relays]
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(ready_r)
        if os.fork() == 0:
            _daemon(listeners, proxy_socket, (hook_fd, record_fd, decide_socket), ready_w)
        os._exit(0)
    os.waitpid(child, 0)
    os.close(ready_w)
    for sock, _ in listeners:
        sock.close()
    for fd in (hook_fd, record_fd):
        os.close(fd)
    os.read(ready_r, 1)  # end of file: the daemon listens (or died, and the hooks then deny)
    os.close(ready_r)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"keel wrap: {command[0]}: {exc.strerror}\n")
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def _relays(text: str) -> list[tuple[str, int]]:
    if text == "-":
        return []
    out: list[tuple[str, int]] = []
    for target in text.split(","):
        out.append((target, int(target.rpartition(":")[2])))
    return out


def _listen(port: int) -> _socket.socket:
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def _daemon(
    listeners: list[tuple[_socket.socket, str | None]],
    proxy_socket: str,
    hook: tuple[int, int, str],
    ready: int,
) -> None:
    """Serve every listener (one thread each) until the sandbox ends."""
    try:
        hook_fd, record_fd, decide_socket = hook
        hook_sock = _socket.socket(fileno=hook_fd)
        hook_sock.listen(64)
        os.write(record_fd, f"{os.getpid()} {_start_time()}\n".encode())
        os.close(record_fd)
        os.close(ready)  # the client may start now
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        import threading

        serving = [(s, proxy_socket, t) for s, t in listeners] + [(hook_sock, decide_socket, None)]
        threads = [threading.Thread(target=_accept, args=a, daemon=True) for a in serving]
        for thread in threads:
            thread.start()
        threads[0].join()
    finally:
        os._exit(0)


def _accept(listener: _socket.socket, path: str, target: str | None) -> None:
    import socket
    import threading

    while True:
        try:
            conn, _ = listener._accept()  # pyright: ignore[reportAttributeAccessIssue]
        except OSError:
            return
        args = (socket.socket(fileno=conn), path, target)
        threading.Thread(target=_bridge._pipe, args=args, daemon=True).start()


def _start_time() -> int:
    """This process's start time in clock ticks since boot (``/proc/self/stat`` field 22)."""
    with open("/proc/self/stat", "rb") as fh:
        raw = fh.read()
    return int(raw[raw.rindex(b")") + 2 :].split()[19])


if __name__ == "__main__":
    main(sys.argv[1:])
