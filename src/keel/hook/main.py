"""The hook process: one agent tool call from arguments and stdin to an exit code.

Every agent tool call starts a hook process, so this module is kept to the standard
library's C-level and frozen modules (``os``, ``sys``, ``time``, ``select``) and keel's
stdlib-only ones: no typing, no dataclasses, no pathlib. It owns:

- the hook's arguments (``keel hook EVENT --agent A [--fail-open] [--deadline S]
  [--workspace DIR]``, parsed into ``keel.hook.wire.HookArgs``) and the deadline
  (``KEEL_HOOK_DEADLINE``);
- reading stdin under a time limit, and the exit code: ``main`` exits only with 0 or the
  client's blocking code 2, whatever happens (an open stdin, a crash, a strange daemon
  answer), through ``os._exit`` so that interpreter shutdown cannot abort the process.

The workspace is ``keel.core.root.hook_root`` (the rule the CLI and ``keel exec`` use too).
``main`` first offers the call to the workspace's resident ``keel hookd`` through
``keel.hook.relay`` (``keel.hook.server`` is the other end, ``keel.hook.wire`` the messages);
when that does not answer, for whatever reason, the call is decided in this process by
``keel.hook.runner.answer``, the same function the daemon runs.
"""

import gc
import os
import sys

from keel.core.root import hook_root
from keel.hook.relay import relay
from keel.hook.wire import BLOCK, HookArgs

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import NoReturn

DEFAULT_DEADLINE = 20.0
"""Seconds keel gives itself per hook call; below ``HOOK_TIMEOUT`` so keel answers first."""
HOOK_TIMEOUT = 30
"""Seconds the client waits for keel's hook before it gives up (and would fail open)."""
STDIN_IDLE = 0.5
"""Seconds of silence after which a held-open stdin that already holds JSON is used."""
DEADLINE_ENV = "KEEL_HOOK_DEADLINE"
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


def parse_hook_args(
    argv: "list[str] | tuple[str, ...]", env: "Mapping[str, str] | None" = None
) -> HookArgs:
    """The options of ``keel hook ARGV`` as ``HookArgs``; ``ValueError`` on bad usage."""
    environ = os.environ if env is None else env
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
        deadline=parse_deadline(deadline if deadline is not None else environ.get(DEADLINE_ENV)),
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

    ``argv`` defaults to the process's arguments, a leading ``hook`` skipped: the command
    ``keel init`` registers is ``python -I -S -c PROGRAM ROOT hook EVENT ...``
    (``keel.hook.install.HOOK_PROGRAM`` takes ROOT out; ``python -S -c PROGRAM hook EVENT ...``
    before issue 22). The launcher, ``python -I -S <keel>/_launch.py hook EVENT ...`` (before
    issue 24), passes what follows ``hook``.
    """
    # One short process per tool call, ended by os._exit: the cyclic collector would only
    # walk the objects the imports create (~0.5 ms) and free nothing that matters. (hookd is
    # its own process, started with posix_spawn: it collects as usual.)
    gc.disable()
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
