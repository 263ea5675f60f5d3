"""Who may answer on the sockets of a workspace's ``.keel/``: the daemon keel started.

``keel hookd`` records its pid and start time in ``.keel/hookd.pid`` (``RECORD_NAME``). A
client (the hook relay, ``keel exec`` handing its sandbox's proxy socket over) trusts a
socket in ``.keel/`` only when the listening process's peer credentials (``SO_PEERCRED``) name
this process's uid and the recorded pid, whose start time still matches (``is_daemon``): a
process that bound the socket itself is never asked. ``KEEL_HOOKD=0`` turns the daemon off
(``daemon_enabled``).

Only ``os`` and ``sys`` at import: the hook process reads this on every call.
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    from collections.abc import Mapping

RECORD_NAME = "hookd.pid"
"""``<pid> <start time>`` of the daemon in ``.keel/``: the only listener a client trusts."""
MAX_SOCKET_PATH = 100
"""Longer socket paths do not fit ``sockaddr_un``: such a workspace has no daemon sockets."""
PROXY_SOCKET_NAME = "proxy.sock"
"""The daemon's proxy socket in ``.keel/`` (mode 0600): ``keel exec`` hands its sandbox over."""
_SO_PEERCRED = 17


def daemon_enabled(env: "Mapping[str, str] | None" = None) -> bool:
    """False when ``KEEL_HOOKD`` says off (``0``, ``off``, ``no``, ``false``).

    Then no daemon is started or asked: neither by the hooks nor by ``keel exec`` for its proxy.
    """
    value = (os.environ if env is None else env).get("KEEL_HOOKD", "1")
    return value.strip().lower() not in ("0", "off", "no", "false")


def read_record(keel_dir: str) -> "tuple[int, int] | None":
    """The daemon's ``(pid, start time)`` from ``hookd.pid``, if it is alive and matches."""
    try:
        with open(os.path.join(keel_dir, RECORD_NAME), "rb") as fh:
            pid_text, start_text = fh.read(64).split()[:2]
        pid, start = int(pid_text), int(start_text)
    except (OSError, ValueError):
        return None
    if pid <= 1 or process_start(pid) != start:
        return None
    return pid, start


def recorded_proxy(
    keel_dir: str, env: "Mapping[str, str] | None" = None
) -> "tuple[int, int] | None":
    """The ``(pid, start)`` of the daemon whose proxy ``keel exec`` may ask, if one is recorded.

    None when ``env`` turns the daemon off, the proxy socket's path in ``keel_dir`` is too long
    for a socket, or no live daemon is recorded there (``read_record``).
    """
    too_long = len(os.path.join(keel_dir, PROXY_SOCKET_NAME)) > MAX_SOCKET_PATH
    if not daemon_enabled(env) or too_long:
        return None
    return read_record(keel_dir)


def process_stat(pid: int) -> "list[bytes] | None":
    """The fields of ``/proc/PID/stat`` after the command name (state first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


def process_start(pid: int) -> "int | None":
    """The start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    fields = process_stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def peer_credentials(sock: "_socket.socket") -> "tuple[int, int, int]":
    """``(pid, uid, gid)`` of the process at the other end of the unix socket ``sock``."""
    import _socket

    raw = sock.getsockopt(_socket.SOL_SOCKET, _SO_PEERCRED, 12)
    return (
        int.from_bytes(raw[0:4], sys.byteorder, signed=True),
        int.from_bytes(raw[4:8], sys.byteorder, signed=True),
        int.from_bytes(raw[8:12], sys.byteorder, signed=True),
    )


def is_daemon(sock: "_socket.socket", record: "tuple[int, int]") -> bool:
    """True if the peer of ``sock`` is this uid's daemon with the recorded pid and start."""
    pid, uid, _ = peer_credentials(sock)
    return uid == os.getuid() and pid == record[0] and process_start(pid) == record[1]
