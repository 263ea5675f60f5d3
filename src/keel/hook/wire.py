"""Both ends of the hook process <-> ``keel hookd`` protocol, and the values that cross it.

A hook process (``keel.hook.relay``) sends one request on ``.keel/hookd.sock`` and reads one
reply; the daemon (``keel.hook.server``, and ``keel wrap``'s decision service) reads the
request and writes the reply. Both sides encode and decode here, so the format exists once.

Wire format (both ways): netstrings ``<len>:<bytes>,``. A request (``Request``): ``MAGIC``,
keel's version, root, cwd, request id, reply-by (a ``time.monotonic()`` instant: the daemon
commits nothing after it), argc, argv..., envc, ``KEY=VALUE``..., stdin. A reply: ``MAGIC``,
``"ok"``, exit code (0 or ``BLOCK``, nothing else is ever passed on), stdout, stderr; or
``MAGIC``, ``"retry"`` (decide in process). The sender shuts down its writing side after
the last field: a message is whatever arrives before end of file. The daemon sends a reply's
first field (``ACK``) as soon as it has the connection, before it reads the request: the relay's
sign of life, so a daemon that is alive but hung is told from a slow one at once. Neither end
reads a message longer than ``MAX_MESSAGE``.

``HookArgs`` (a call's parsed arguments) is the value both ends hand to
``keel.hook.runner.answer``. Values here are ``Frozen`` (not dataclasses: ``dataclasses``
costs more to import than the whole hook process otherwise does).

Only ``os``, ``keel.core.daemon`` and ``keel.core.frozen`` at import: the hook process
imports this on every call.
"""

import os

from keel.core.frozen import Frozen

MAGIC = b"keel-hookd/2"
"""The first field of every request and reply; a changed format gets a new one."""
SOCKET_NAME = "hookd.sock"
"""The daemon's socket in ``.keel/`` (mode 0600)."""
LOCK_NAME = "hookd.lock"
"""The lock the one daemon of a workspace holds in ``.keel/``."""
BLOCK = 2
"""The exit code every client treats as "block" (reason on stderr); with 0 the only one."""
RETRY = b"retry"
OK = b"ok"
MAX_MESSAGE = 64 * 1024 * 1024
"""Bytes of the longest request or reply either end reads; a longer one is a protocol error.

A request is the hook's input (at most 8 MB reach a decision: ``keel.hook.protocol``'s
``MAX_INPUT_BYTES``) and its environment; a reply echoes that input at most a few times,
JSON-escaped. A peer that sends more is not keel's daemon or relay, or no longer works.
"""


class HookArgs(Frozen):
    """The parsed arguments of one ``keel hook`` call (``keel.hook.main.parse_hook_args``)."""

    __slots__ = ("agent", "argv", "deadline", "event", "fail_open", "workspace")
    event: str
    agent: str
    fail_open: bool
    deadline: float
    """Seconds keel gives itself for the call."""
    workspace: "str | None"
    argv: "tuple[str, ...]"
    """The arguments as given, relayed to the daemon as they are."""

    def __init__(
        self,
        event: str,
        agent: str,
        *,
        fail_open: bool,
        deadline: float,
        workspace: "str | None",
        argv: "tuple[str, ...]",
    ) -> None:
        """Hold the options of one call."""
        self._init(
            event=event,
            agent=agent,
            fail_open=fail_open,
            deadline=deadline,
            workspace=workspace,
            argv=argv,
        )


class Request(Frozen):
    """One hook call as relayed to the daemon."""

    __slots__ = ("argv", "cwd", "data", "env", "reply_by", "request_id", "root", "version")
    version: str
    """keel's version in the hook process; a daemon of another version answers ``retry``."""
    root: str
    cwd: str
    request_id: str
    reply_by: float
    argv: "tuple[str, ...]"
    env: "dict[str, str]"
    data: bytes
    """The hook's stdin."""

    def __init__(
        self,
        *,
        version: str,
        root: str,
        cwd: str,
        request_id: str,
        reply_by: float,
        argv: "tuple[str, ...]",
        env: "dict[str, str]",
        data: bytes,
    ) -> None:
        """A request; every field by name."""
        self._init(
            version=version,
            root=root,
            cwd=cwd,
            request_id=request_id,
            reply_by=reply_by,
            argv=argv,
            env=env,
            data=data,
        )


# -- requests ----------------------------------------------------------------------------------


def request_fields(request: Request) -> "list[bytes]":
    """The fields of ``request``, in wire order (``netstrings`` makes them bytes)."""
    fields = [MAGIC, request.version.encode(), os.fsencode(request.root), os.fsencode(request.cwd)]
    fields += [request.request_id.encode(), repr(request.reply_by).encode()]
    fields.append(str(len(request.argv)).encode())
    fields.extend(os.fsencode(a) for a in request.argv)
    fields.append(str(len(request.env)).encode())
    fields.extend(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in request.env.items())
    fields.append(request.data)
    return fields


def encode_request(request: Request) -> bytes:
    """``request`` as the bytes a relay sends."""
    return netstrings(request_fields(request))


def parse_request(fields: "list[bytes]") -> "Request | None":
    """The request in a relay's fields, or None when they are not one."""
    try:
        if fields[0] != MAGIC:
            return None
        version, root, cwd = fields[1].decode(), os.fsdecode(fields[2]), os.fsdecode(fields[3])
        request_id, reply_by = fields[4].decode("ascii"), float(fields[5])
        argc = int(fields[6])
        argv = tuple(os.fsdecode(a) for a in fields[7 : 7 + argc])
        envc = int(fields[7 + argc])
        pairs = fields[8 + argc : 8 + argc + envc]
        data = fields[8 + argc + envc]
        if len(fields) != 9 + argc + envc or len(argv) != argc or not request_id.isalnum():
            return None
    except (IndexError, ValueError, UnicodeDecodeError):
        return None
    env: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition(b"=")
        if eq:
            env[os.fsdecode(key)] = os.fsdecode(value)
    return Request(
        version=version,
        root=root,
        cwd=cwd,
        request_id=request_id,
        reply_by=reply_by,
        argv=argv,
        env=env,
        data=data,
    )


# -- replies -----------------------------------------------------------------------------------


def reply_fields(reply: "tuple[int, bytes, bytes] | None") -> "list[bytes]":
    """The fields of the daemon's answer ``(exit code, stdout, stderr)``; None: ``retry``.

    A code other than 0 and ``BLOCK`` is sent as ``BLOCK``.
    """
    if reply is None:
        return [MAGIC, RETRY]
    code, out, err = reply
    return [MAGIC, OK, b"0" if code == 0 else str(BLOCK).encode(), out, err]


def decode_reply(buf: bytes) -> "tuple[int, bytes, bytes] | None":
    """The answer in a daemon's reply, or None: ``retry``, or not a well-formed reply."""
    fields = parse_netstrings(buf)
    if not fields or len(fields) != 5 or fields[0] != MAGIC or fields[1] != OK:
        return None
    if fields[2] not in (b"0", str(BLOCK).encode()):
        return None  # only allow-or-block codes are ever passed on
    return int(fields[2]), fields[3], fields[4]


# -- netstrings ---------------------------------------------------------------------------------


def netstrings(fields: "list[bytes]") -> bytes:
    """``fields`` as netstrings."""
    return b"".join(b"%d:%s," % (len(f), f) for f in fields)


ACK = netstrings([MAGIC])
"""A reply's first field, ``MAGIC``: sent by the daemon the moment it has the connection."""


def parse_netstrings(buf: bytes) -> "list[bytes] | None":
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
