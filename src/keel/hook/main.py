"""The hook path: what one hook call needs before it is decided, each fact once.

Every agent tool call starts a hook process, so this module is kept to the standard
library's C-level and frozen modules (``os``, ``sys``, ``time``, ``select``): no typing,
no dataclasses, no pathlib. It owns, for every other module on the hook path:

- the hook's arguments (``keel hook EVENT --agent A [--fail-open] [--deadline S]
  [--workspace DIR]``) and the deadline (``KEEL_HOOK_DEADLINE``);
- where each client says its project is (``PROJECT_DIR_VARS``) and root discovery
  (``find_root``: the nearest ancestor with ``keel.toml``, else the git root, else the
  directory itself);
- the emergency-stop check (``stop_reason``);
- reading stdin under a time limit, and the exit code: ``main`` exits only with 0 or the
  client's blocking code 2, whatever happens (an open stdin, a crash, a strange daemon
  answer), through ``os._exit`` so that interpreter shutdown cannot abort the process.

``main`` first offers the call to the workspace's resident ``keel hookd`` through the
relay below (``keel.hook.server`` is the other end); when that does not answer, for
whatever reason, the call is decided in this process by ``keel.hook.runner.answer``,
the same function the daemon runs.
"""

import os
import sys

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import NoReturn

DEFAULT_DEADLINE = 20.0
"""Seconds keel gives itself per hook call; below ``HOOK_TIMEOUT`` so keel answers first."""
HOOK_TIMEOUT = 30
"""Seconds the client waits for keel's hook before it gives up (and would fail open)."""
BLOCK = 2
"""The exit code every client treats as "block" (reason on stderr)."""
STATE_DIR = ".keel"
CONFIG_NAME = "keel.toml"
STOP_FILE = "STOP"
STDIN_IDLE = 0.5
"""Seconds of silence after which a held-open stdin that already holds JSON is used."""
DEADLINE_ENV = "KEEL_HOOK_DEADLINE"
PROJECT_DIR_VARS = {
    "claude": ("KEEL_WORKSPACE", "CLAUDE_PROJECT_DIR"),
    "codex": ("KEEL_WORKSPACE",),
    "gemini": ("KEEL_WORKSPACE", "GEMINI_PROJECT_DIR", "CLAUDE_PROJECT_DIR"),
}
"""Where each client says its project is; Codex says nothing and runs hooks in the project."""
USAGE = (
    "usage: keel hook EVENT --agent claude|codex|gemini "
    "[--fail-open] [--deadline S] [--workspace DIR]"
)
HELP = """
Answer one tool call of an agent client: read the client's hook JSON on stdin, decide
(policy, emergency stop, scope, monitor, checkpoints) and answer in that client's dialect.
Exit 0 (the answer is on stdout) or 2 (blocked; the reason is on stderr), whatever happens:
bad usage, an error inside keel or a timeout blocks. `keel init --agent X` registers it.

  EVENT              the client's hook event (PreToolUse, PostToolUse, BeforeTool, ...)
  --agent NAME       claude, codex or gemini: the client and its dialect
  --fail-open        on an error inside keel, let the call run (journaled) instead of blocking
  --deadline S       seconds keel gives itself (default 20; KEEL_HOOK_DEADLINE)
  --workspace DIR    the workspace (default: from the client's project variable, else found
                     from the current directory)
  -h, --help         this page (only as the one argument: in a call it blocks)

Examples:
  echo '{"tool_name": "Bash", "tool_input": {"command": "ls"}}' \\
    | keel hook PreToolUse --agent claude
  keel hook BeforeTool --agent gemini --deadline 10 < call.json
"""
"""``keel hook -h``: the page after ``USAGE``."""


def is_help(argv: "list[str] | tuple[str, ...]") -> bool:
    """Whether ``argv`` asks for the help page: ``-h`` or ``--help`` as its only argument.

    Only alone: a hook call always names its EVENT, so a call that also carries ``--help``
    is bad usage and blocks, and help (exit 0) can never answer, and so allow, a tool call.
    """
    return len(argv) == 1 and argv[0] in ("-h", "--help")


class HookArgs:
    """The parsed arguments of one ``keel hook`` call."""

    __slots__ = ("agent", "argv", "deadline", "event", "fail_open", "workspace")

    def __init__(
        self,
        event: str,
        agent: str,
        *,
        fail_open: bool = False,
        deadline: float = DEFAULT_DEADLINE,
        workspace: "str | None" = None,
        argv: "tuple[str, ...]" = (),
    ) -> None:
        """Hold the options of one call (see ``parse_hook_args``)."""
        self.event = event
        self.agent = agent
        self.fail_open = fail_open
        self.deadline = deadline
        self.workspace = workspace
        self.argv = argv

    def __repr__(self) -> str:
        """``HookArgs(event, agent, ...)``."""
        return (
            f"HookArgs({self.event!r}, {self.agent!r}, fail_open={self.fail_open}, "
            f"deadline={self.deadline}, workspace={self.workspace!r})"
        )


def parse_hook_args(argv: "list[str] | tuple[str, ...]", env: "dict[str, str] | None" = None):
    """The options of ``keel hook ARGV`` as ``HookArgs``; ``ValueError`` on bad usage."""
    env = os.environ if env is None else env  # pyright: ignore[reportAssignmentType]
    event: str | None = None
    agent: str | None = None
    fail_open = False
    deadline: str | None = None
    workspace: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg == "--fail-open":
            fail_open = True
        elif name in ("--agent", "--deadline", "--workspace", "-w"):
            if not eq:
                i += 1
                if i >= len(argv):
                    raise ValueError(f"{name} needs a value")
                inline = argv[i]
            if name == "--agent":
                agent = inline
            elif name == "--deadline":
                deadline = inline
            else:
                workspace = inline
        elif arg.startswith("-"):
            raise ValueError(f"unknown option {arg}")
        elif event is None:
            event = arg
        else:
            raise ValueError(f"unexpected argument {arg!r}")
        i += 1
    if not event:
        raise ValueError("missing EVENT")
    if not agent:
        raise ValueError("missing --agent")
    return HookArgs(
        event,
        agent,
        fail_open=fail_open,
        deadline=parse_deadline(deadline if deadline is not None else env.get(DEADLINE_ENV)),  # pyright: ignore[reportOptionalMemberAccess]
        workspace=workspace,
        argv=tuple(argv),
    )


def parse_deadline(text: "str | None") -> float:
    """Seconds from ``--deadline``/``KEEL_HOOK_DEADLINE``; ``ValueError`` unless positive."""
    if text is None or text == "":
        return DEFAULT_DEADLINE
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"--deadline must be a number of seconds, got {text!r}") from None
    if not 0 < seconds < float("inf"):  # also refuses nan
        raise ValueError(f"--deadline must be a positive number of seconds, got {text!r}")
    return seconds


# -- the workspace ---------------------------------------------------------------------------


def find_root(start: "str | None" = None, override: "str | None" = None) -> str:
    """The workspace root of ``start`` (default: the current directory).

    ``override`` wins; else the nearest ancestor holding ``keel.toml``, else the git root,
    else ``start`` itself. The result is absolute and has symlinks resolved.
    """
    if override:
        try:
            return os.path.realpath(os.path.expanduser(override))
        except (OSError, RuntimeError):  # a symlink loop: callers find it is no directory
            return os.path.abspath(os.path.expanduser(override))
    here = os.path.realpath(start or os.getcwd())
    chain = [here]
    while os.path.dirname(chain[-1]) != chain[-1]:
        chain.append(os.path.dirname(chain[-1]))
    for candidate in chain:
        if os.path.isfile(os.path.join(candidate, CONFIG_NAME)):
            return candidate
    for candidate in chain:
        if os.path.lexists(os.path.join(candidate, ".git")):
            return candidate
    return here


def hook_root(agent: str, workspace: "str | None", env: "dict[str, str] | None" = None) -> str:
    """The workspace of a hook call: ``--workspace``, else the client's project dir, else cwd."""
    if workspace:
        return find_root(override=workspace)
    env = os.environ if env is None else env  # pyright: ignore[reportAssignmentType]
    for var in PROJECT_DIR_VARS.get(agent, ("KEEL_WORKSPACE",)):
        value = env.get(var)  # pyright: ignore[reportOptionalMemberAccess]
        if value and os.path.isdir(value):
            return find_root(start=value)
    return find_root()


def stop_reason(root: str) -> "str | None":
    """The emergency-stop reason while it is set, else None; an ``lstat`` when it is not."""
    if not os.path.lexists(os.path.join(root, STATE_DIR, STOP_FILE)):
        return None
    from pathlib import Path

    from keel.core.stop import stop_reason as read_reason

    return read_reason(Path(root)) or "emergency stop"


# -- stdin and the process -------------------------------------------------------------------


def read_stdin(limit: float, fd: int = 0) -> "tuple[bytes, bool]":
    """Stdin within ``limit`` seconds, and whether it ended (EOF).

    A client that leaves stdin open is answered all the same: once it has been silent for
    ``STDIN_IDLE`` seconds and what arrived is one JSON object, that is the input.
    """
    import select
    import time

    chunks: list[bytes] = []
    end = time.monotonic() + max(limit, 0.0)
    while True:
        now = time.monotonic()
        wait = min(end - now, STDIN_IDLE) if chunks else end - now
        try:
            ready, _, _ = select.select([fd], [], [], max(wait, 0.0))
            if not ready:
                if time.monotonic() >= end or (chunks and _is_json_object(b"".join(chunks))):
                    return b"".join(chunks), False
                continue
            chunk = os.read(fd, 65536)
        except (OSError, ValueError):
            return b"".join(chunks), False
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)


def _is_json_object(data: bytes) -> bool:
    import json

    try:
        return isinstance(json.loads(data), dict)
    except (ValueError, RecursionError):
        return False


def run(
    argv: "list[str]", *, stdin_fd: int = 0, data: "bytes | None" = None
) -> "tuple[int, bytes, bytes]":
    """One ``keel hook ARGV`` call: ``(exit code, stdout, stderr)``; never raises.

    The input is ``data`` if given, else what ``stdin_fd`` delivers in time. The exit code
    is 0 or ``BLOCK``; ``--fail-open`` turns a failure of keel into 0.
    """
    import time

    started = time.monotonic()
    if is_help(argv):  # never read stdin, never decide: the page and exit 0
        return 0, (USAGE + "\n" + HELP).encode(), b""
    fail_open = "--fail-open" in argv
    try:
        args = parse_hook_args(argv)
    except ValueError as exc:
        text = f"keel hook: {exc}; blocked to be safe\n{USAGE}\n"
        return (0 if fail_open else BLOCK), b"", text.encode()
    try:
        return _run(args, started, stdin_fd, data)
    except BaseException as exc:  # every failure must become an answer
        text = f"keel hook: internal error ({type(exc).__name__}); blocked to be safe\n"
        return (0 if fail_open else BLOCK), b"", text.encode()


def _run(
    args: HookArgs, started: float, stdin_fd: int, given: "bytes | None"
) -> "tuple[int, bytes, bytes]":
    import time

    if args.workspace and not os.path.isdir(args.workspace):  # a typo must not drop keel.toml
        what = "is not a directory" if os.path.lexists(args.workspace) else "does not exist"
        text = f"keel hook: --workspace {args.workspace!r} {what}; blocked to be safe\n"
        return (0 if args.fail_open else BLOCK), b"", text.encode()
    deadline_at = started + args.deadline
    data = given if given is not None else read_stdin(args.deadline / 4, stdin_fd)[0]
    request_id = os.urandom(8).hex()
    root = hook_root(args.agent, args.workspace)
    reply = relay(root, args, data, request_id, deadline_at)
    if reply is None:
        _enable_site()
        from keel.hook.runner import answer

        reply = answer(args, data, request_id=request_id, deadline_at=deadline_at, root=root)
    code, out, err = reply
    if code not in (0, BLOCK):
        code = 0 if args.fail_open and time.monotonic() < deadline_at else BLOCK
    return code, out, err


def _enable_site() -> None:
    """Load site-packages when the launcher ran under ``-S`` and the call is decided here."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def main(argv: "list[str] | None" = None) -> "NoReturn":
    """The hook launcher's entry: answer, write, and exit with 0 or 2 only (``os._exit``).

    ``argv`` defaults to the process's arguments, a leading ``hook`` skipped (``python -S -c
    PROGRAM hook EVENT ...``, registered before issue 22). The command ``keel init`` registers
    now, ``python -I -S <keel>/_launch.py hook EVENT ...``, passes what follows ``hook``.
    """
    if argv is None:
        argv = sys.argv[1:]
        if argv[:1] == ["hook"]:
            argv = argv[1:]
    code = 0 if "--fail-open" in argv else BLOCK
    try:
        code, out, err = run(list(argv))
        _write_all(1, out)
        _write_all(2, err)
    except BaseException:  # a write error or a signal: the code stands
        pass
    os._exit(code if code in (0, BLOCK) else BLOCK)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- the relay to keel hookd ----------------------------------------------------------------
#
# ``relay(root, args, data, request_id, deadline_at)`` returns the daemon's ``(exit code,
# stdout, stderr)``, or ``None`` when the caller must decide in process. It trusts only the
# daemon keel started: the listening process's peer credentials (``SO_PEERCRED``) must name
# this process's uid and the pid recorded in ``.keel/hookd.pid`` together with that pid's
# start time, so a process that bound ``hookd.sock`` itself is never asked. While it waits
# it watches the daemon: one that is stopped (``SIGSTOP``), gone, or past the time it was
# given is killed (the next hook starts a new one) and the call is decided in process with
# the same request id, so a decision the daemon already committed is answered again rather
# than made twice. Exit codes other than 0 and 2 from the socket are never passed on.
#
# Wire format (both ways): netstrings ``<len>:<bytes>,``. Request: ``MAGIC``, keel's version,
# root, cwd, request id, reply-by (a ``time.monotonic()`` instant: the daemon commits nothing
# after it), argc, argv..., envc, ``KEY=VALUE``..., stdin. Reply: ``MAGIC``, ``"ok"``, exit
# code, stdout, stderr; or ``MAGIC``, ``"retry"`` (decide in process). ``KEEL_HOOKD=0`` turns
# relaying and starting the daemon off.

MAGIC = b"keel-hookd/2"
SOCKET_NAME = "hookd.sock"
LOCK_NAME = "hookd.lock"
PID_NAME = "hookd.pid"
SPAWN_STAMP = "hookd.spawn"
SPAWN_BACKOFF = 10.0
MAX_SOCKET_PATH = 100
CONNECT_TIMEOUT = 0.5
POLL = 0.05
IN_PROCESS_RESERVE = 5.0
"""Seconds of a call's deadline kept for deciding in process when the daemon fails."""
_SO_PEERCRED = 17


def daemon_enabled(env: "dict[str, str] | None" = None) -> bool:
    """False when ``KEEL_HOOKD`` says off (``0``, ``off``, ``no``, ``false``)."""
    value = (os.environ if env is None else env).get("KEEL_HOOKD", "1")
    return value.strip().lower() not in ("0", "off", "no", "false")


def relay(
    root: str, args: object, data: bytes, request_id: str, deadline_at: float
) -> "tuple[int, bytes, bytes] | None":
    """The daemon's answer to one hook call, or ``None``: decide in process."""
    if not daemon_enabled():
        return None
    keel_dir = os.path.join(root, ".keel")
    sock_path = os.path.join(keel_dir, SOCKET_NAME)
    if len(sock_path) > MAX_SOCKET_PATH or not os.path.isdir(keel_dir):
        return None
    if os.path.lexists(os.path.join(keel_dir, "STOP")):
        return None  # the stop is decided in process, never by a socket
    record = read_record(keel_dir)
    if record is None:
        spawn(root, keel_dir)
        return None
    deadline = getattr(args, "deadline", 20.0)
    by = min(deadline_at - min(IN_PROCESS_RESERVE, deadline / 2), deadline_at)
    try:
        reply = _ask(sock_path, record, _request(root, args, data, request_id, by), by)
    except Exception:  # whatever the daemon or the relay got wrong
        reply = None
    if reply is None:
        spawn(root, keel_dir)
    return reply


def read_record(keel_dir: str) -> "tuple[int, int] | None":
    """The daemon's ``(pid, start time)`` from ``hookd.pid``, if it is alive and matches."""
    try:
        with open(os.path.join(keel_dir, PID_NAME), "rb") as fh:
            pid_text, start_text = fh.read(64).split()[:2]
        pid, start = int(pid_text), int(start_text)
    except (OSError, ValueError):
        return None
    if pid <= 1 or process_start(pid) != start:
        return None
    return pid, start


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


def _request(root: str, args: object, data: bytes, request_id: str, by: float) -> bytes:
    from keel import __version__

    enc = sys.getfilesystemencoding()
    fields = [MAGIC, __version__.encode(), os.fsencode(root)]
    try:
        fields.append(os.fsencode(os.getcwd()))
    except OSError:
        fields.append(os.fsencode(root))
    argv: tuple[str, ...] = getattr(args, "argv", ())
    fields += [request_id.encode(), repr(by).encode(), str(len(argv)).encode()]
    fields.extend(a.encode(enc, "surrogateescape") for a in argv)
    env = os.environb
    fields.append(str(len(env)).encode())
    fields.extend(k + b"=" + v for k, v in env.items())
    fields.append(data)
    return netstrings(fields)


def _ask(
    sock_path: str, record: "tuple[int, int]", request: bytes, by: float
) -> "tuple[int, bytes, bytes] | None":
    """Send ``request`` to the verified daemon; its answer, or None (after replacing it)."""
    import _socket
    import select
    import time

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(sock_path)
        if not _is_daemon(sock, record):
            return None
        sock.sendall(request)
        sock.shutdown(_socket.SHUT_WR)
        sock.setblocking(False)
        chunks: list[bytes] = []
        while True:
            ready, _, _ = select.select([sock], [], [], POLL)
            if ready:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            elif not _alive(record[0]) or time.monotonic() > by:
                replace_daemon(record)
                return None
    finally:
        sock.close()
    return _parse_reply(b"".join(chunks))


def _is_daemon(sock: "object", record: "tuple[int, int]") -> bool:
    """True if the peer of ``sock`` is this uid's daemon with the recorded pid and start."""
    import _socket

    raw = sock.getsockopt(_socket.SOL_SOCKET, _SO_PEERCRED, 12)  # pyright: ignore[reportAttributeAccessIssue]
    pid = int.from_bytes(raw[0:4], sys.byteorder, signed=True)
    uid = int.from_bytes(raw[4:8], sys.byteorder, signed=True)
    return uid == os.getuid() and pid == record[0] and process_start(pid) == record[1]


def _alive(pid: int) -> bool:
    """False once ``pid`` is gone, a zombie, or stopped (``SIGSTOP``, traced)."""
    fields = process_stat(pid)
    return bool(fields) and fields[0] not in (b"T", b"t", b"Z", b"X", b"x")  # pyright: ignore[reportOptionalSubscript]


def replace_daemon(record: "tuple[int, int]") -> bool:
    """Kill the daemon of ``record`` (if it is still that process); the next hook starts one."""
    import signal

    pid, start = record
    if process_start(pid) != start:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return False
    return True


def _parse_reply(buf: bytes) -> "tuple[int, bytes, bytes] | None":
    fields = parse_netstrings(buf)
    if not fields or len(fields) != 5 or fields[0] != MAGIC or fields[1] != b"ok":
        return None
    if fields[2] not in (b"0", b"2"):
        return None  # only allow-or-block codes are ever passed on
    return int(fields[2]), fields[3], fields[4]


def netstrings(fields: "list[bytes]") -> bytes:
    """``fields`` as netstrings."""
    return b"".join(b"%d:%s," % (len(f), f) for f in fields)


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


def spawn(root: str, keel_dir: str) -> None:
    """Start ``keel hookd`` for ``root`` unless one runs or one was started a moment ago.

    The daemon runs isolated from the workspace (``keel.core.isolated``: ``python -I -S``, a script
    by absolute path, its directory ``root/.keel``), with this process's environment.
    """
    import time

    try:
        stamp = os.path.join(keel_dir, SPAWN_STAMP)
        try:
            if time.time() - os.stat(stamp).st_mtime < SPAWN_BACKOFF:
                return
        except FileNotFoundError:
            pass
        if locked(os.path.join(keel_dir, LOCK_NAME)):
            return
        with open(stamp, "w"):
            pass
        from keel.core.isolated import launcher_argv

        # isolated, a script by path: the daemon inherits the hook's directory (the project)
        # and environment, and the launcher leaves the directory for .keel/ before importing
        argv = launcher_argv("hookd", root, site=False)
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.posix_spawn(
                argv[0],
                argv,
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


def locked(path: str) -> bool:
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
