"""The hook-side relay to ``keel hookd``: C-level modules only (``_socket``, ``os``, ``sys``).

``relay(argv)`` returns the exit code when the daemon answered (its stdout and stderr are
already written), the stdin bytes it consumed when the caller must decide in process, or
``None`` when it did nothing (relaying is off, or the arguments need the full parser's
error message). When no daemon listens it starts one for the next call, at most once every
``SPAWN_BACKOFF`` seconds, and only when no other daemon holds the workspace's lock.

Wire format (both ways): netstrings ``<len>:<bytes>,``. Request: ``MAGIC``, keel's version,
root, cwd, argc, argv..., envc, ``KEY=VALUE``..., stdin. Reply: ``MAGIC``, ``"ok"``, exit code,
stdout, stderr; or ``MAGIC``, ``"retry"`` (decide in process).

``KEEL_HOOKD=0`` turns relaying and starting the daemon off.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Mapping

MAGIC = b"keel-hookd/1"
SOCKET_NAME = "hookd.sock"
LOCK_NAME = "hookd.lock"
SPAWN_STAMP = "hookd.spawn"
SPAWN_BACKOFF = 10.0
DEFAULT_DEADLINE = 20.0
MAX_SOCKET_PATH = 100
_PROJECT_VARS = {
    "claude": ("KEEL_WORKSPACE", "CLAUDE_PROJECT_DIR"),
    "codex": ("KEEL_WORKSPACE",),
    "gemini": ("KEEL_WORKSPACE", "GEMINI_PROJECT_DIR", "CLAUDE_PROJECT_DIR"),
}


def enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``KEEL_HOOKD`` says off (``0``, ``off``, ``no``, ``false``)."""
    value = (os.environ if env is None else env).get("KEEL_HOOKD", "1")
    return value.strip().lower() not in ("0", "off", "no", "false")


class Unread(bytes):
    """The start of a stdin that did not end in time: the caller reads the rest itself."""

    __slots__ = ()


def relay(argv: list[str]) -> int | bytes | None:
    """Have the daemon answer ``keel hook ARGV``; see the module docstring for the result.

    A returned ``Unread`` is stdin's start when it did not end within half the deadline;
    the caller goes on reading it under what is left of its deadline (and so fails closed).
    """
    if not enabled():
        return None
    opts = _options(argv)
    if opts is None:
        return None
    workspace, agent, deadline, fail_open = opts
    root = _root(workspace, agent)
    keel_dir = os.path.join(root, ".keel")
    sock_path = os.path.join(keel_dir, SOCKET_NAME)
    if len(sock_path) > MAX_SOCKET_PATH or not os.path.isdir(keel_dir):
        return None
    start = _now()
    data, complete = _read_stdin(deadline / 2)
    if not complete:
        return Unread(data)
    try:
        reply = _ask(sock_path, _request(root, argv, data), deadline / 2 - (_now() - start))
    except Exception:  # whatever the daemon or the relay got wrong: decide in process
        reply = None
    if reply is None:
        _spawn(root, keel_dir)
        return data
    code, out, err = reply
    try:
        _write_all(1, out)
        _write_all(2, err)
    except OSError:
        return 0 if fail_open else 2
    return code


def netstrings(fields: list[bytes]) -> bytes:
    """``fields`` as netstrings."""
    return b"".join(b"%d:%s," % (len(f), f) for f in fields)


def parse_netstrings(buf: bytes) -> list[bytes] | None:
    """The fields of ``buf``, or ``None`` if it is not a complete run of netstrings."""
    out: list[bytes] = []
    i = 0
    while i < len(buf):
        colon = buf.find(b":", i, i + 12)
        if colon < 0 or not buf[i:colon].isdigit():
            return None
        end = colon + 1 + int(buf[i:colon])
        if end >= len(buf) or buf[end : end + 1] != b",":
            return None
        out.append(buf[colon + 1 : end])
        i = end + 1
    return out


def _options(argv: list[str]) -> tuple[str | None, str, float, bool] | None:
    """``(workspace, agent, deadline, fail_open)``, or None to leave the args to the parser."""
    workspace: str | None = None
    agent: str | None = None
    deadline: str | None = os.environ.get("KEEL_HOOK_DEADLINE")
    fail_open = False
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name in ("--workspace", "-w", "--agent", "--deadline"):
            if not eq:
                i += 1
                if i >= len(argv):
                    return None
                value = argv[i]
            if name == "--agent":
                agent = value
            elif name == "--deadline":
                deadline = value
            else:
                workspace = value
        elif argv[i] == "--fail-open":
            fail_open = True
        i += 1
    try:
        seconds = DEFAULT_DEADLINE if deadline is None else float(deadline)
    except ValueError:
        return None
    if agent is None or not seconds > 0:
        return None
    return workspace, agent, seconds, fail_open


def _root(workspace: str | None, agent: str) -> str:
    """The workspace root, as ``keel.root.find_root`` and the runner would pick it."""
    if workspace:
        return os.path.realpath(os.path.expanduser(workspace))
    start = None
    for var in _PROJECT_VARS.get(agent, ("KEEL_WORKSPACE",)):
        value = os.environ.get(var)
        if value and os.path.isdir(value):
            start = value
            break
    here = os.path.realpath(start or os.getcwd())
    for marker, is_file in (("keel.toml", True), (".git", False)):
        candidate = here
        while True:
            path = os.path.join(candidate, marker)
            if os.path.isfile(path) if is_file else os.path.exists(path):
                return candidate
            parent = os.path.dirname(candidate)
            if parent == candidate:
                break
            candidate = parent
    return here


def _now() -> float:
    import time  # a built-in module: no file to load

    return time.monotonic()


def _read_stdin(timeout: float) -> tuple[bytes, bool]:
    """What stdin held within ``timeout``, and whether that was all of it."""
    import select

    chunks: list[bytes] = []
    end = _now() + max(timeout, 0.0)
    while True:
        try:
            ready, _, _ = select.select([0], [], [], max(end - _now(), 0.0))
            if not ready:
                return b"".join(chunks), False
            chunk = os.read(0, 65536)
        except (OSError, ValueError):
            return b"".join(chunks), False
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)


def _request(root: str, argv: list[str], data: bytes) -> bytes:
    from keel import __version__

    enc = sys.getfilesystemencoding()
    fields = [MAGIC, __version__.encode(), os.fsencode(root)]
    try:
        fields.append(os.fsencode(os.getcwd()))
    except OSError:
        fields.append(os.fsencode(root))
    fields.append(str(len(argv)).encode())
    fields.extend(a.encode(enc, "surrogateescape") for a in argv)
    env = os.environb if hasattr(os, "environb") else {}
    fields.append(str(len(env)).encode())
    fields.extend(k + b"=" + v for k, v in env.items())
    fields.append(data)
    return netstrings(fields)


def _ask(sock_path: str, request: bytes, timeout: float) -> tuple[int, bytes, bytes] | None:
    """The daemon's ``(exit code, stdout, stderr)``, or None for every kind of failure."""
    import _socket

    if timeout <= 0:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(sock_path)
        sock.sendall(request)
        sock.shutdown(_socket.SHUT_WR)
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        sock.close()
    fields = parse_netstrings(b"".join(chunks))
    if not fields or fields[0] != MAGIC or len(fields) != 5 or fields[1] != b"ok":
        return None
    try:
        code = int(fields[2])
    except ValueError:
        return None
    return code, fields[3], fields[4]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _spawn(root: str, keel_dir: str) -> None:
    """Start ``keel hookd`` for ``root`` unless one runs or one was started a moment ago."""
    try:
        stamp = os.path.join(keel_dir, SPAWN_STAMP)
        try:
            if _wall() - os.stat(stamp).st_mtime < SPAWN_BACKOFF:
                return
        except FileNotFoundError:
            pass
        if _locked(os.path.join(keel_dir, LOCK_NAME)):
            return
        with open(stamp, "w"):
            pass
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-m", "keel.daemon.server", root],
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


def _wall() -> float:
    import time

    return time.time()


def _locked(path: str) -> bool:
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
