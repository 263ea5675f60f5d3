"""What ``keel exec`` writes to the workspace's journal: every run, every refused connection.

Both go to the session ``keel-exec`` (``keel.core.events.EXEC_SESSION``), so ``keel log -s
keel-exec`` lists them, whoever ran the command (``keel monitor scan`` and ``keel show`` leave
it out unless it is named: it is no agent's run):

- ``exec``: one per run (``keel wrap``'s excepted), once it is over: ``argv``, ``cwd``,
  ``exit_code`` (``keel exec``'s own), ``duration_ms``, ``backend``, ``timed_out``,
  ``stopped``, ``interrupted``, the files ``quarantined`` and ``restored``, the ``prompts``
  changed, ``unchecked``, and ``report`` (the id the hook that rewrote the call gave it);
- ``network.denied``: one per connection the proxy refused, as it refuses it: ``host``,
  ``port``, ``command`` (the run's argv), ``rule``, ``reason`` (with the entry that would
  allow it) and ``report``.

The journal costs ``keel exec`` ~40 ms of imports, more than a whole ``keel exec -- true``, so
the command line hands a run's event to the workspace's ``keel hookd`` when one is there
(``_proxyd.send_run``: the daemon has the journal open and answers in well under a
millisecond), else writes it from a detached fork once the command is over (``detach``):
neither its caller nor ``keel stop`` waits for the journal's imports. A refusal is journaled by the
proxy's connection thread after the client has its answer, and the proxy waits for those
writes when it closes. Journaling never changes a run's result: a journal that cannot be
written loses the event (the proxy log, ``.keel/exec/proxy.log``, still has every decision).

Standard library only at import time.
"""

from __future__ import annotations

import os

from keel.core.root import STATE_DIR
from keel.sandbox.os._registry import EXEC_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from keel.core.events import EventKind
    from keel.sandbox.exec._proxy import ProxyDecision

RUN_KIND: EventKind = "exec"
DENIED_KIND: EventKind = "network.denied"


def record_run(root: str, data: dict[str, Any], *, detach: bool) -> None:
    """Journal one run (``data``: the fields above, ``_exec`` fills them); never raises.

    ``detach``: from a fork that outlives this process (the command line, which exits next);
    otherwise here and now.
    """
    if detach:
        _detached(lambda: append(root, RUN_KIND, data))
    else:
        append(root, RUN_KIND, data)


def denial_recorder(
    root: str, command: Sequence[str] | None, report: str | None
) -> Callable[[ProxyDecision], None]:
    """The proxy's ``on_deny`` for one run: journal each refused connection of ``command``."""
    argv = list(command) if command is not None else None

    def record(decision: ProxyDecision) -> None:
        data = {
            "host": decision.host,
            "port": decision.port,
            "method": decision.method,
            "command": argv,
            "rule": decision.rule,
            "reason": decision.reason,
            "report": report,
        }
        append(root, DENIED_KIND, data)

    return record


def run_of(root: str, pid: int) -> tuple[list[str] | None, str | None]:
    """``(argv, report)`` of the ``keel exec`` with ``pid`` from its record in ``.keel/exec``."""
    import json

    try:
        with open(os.path.join(root, EXEC_DIR, f"{pid}.json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None, None
    argv = data.get("argv") if isinstance(data, dict) else None
    report = data.get("report") if isinstance(data, dict) else None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        argv = None
    return argv, report if isinstance(report, str) else None


def append(root: str, kind: EventKind, data: dict[str, Any]) -> bool:
    """One ``kind`` event of the session ``keel-exec`` with ``data``; never raises.

    False: it was not journaled.

    Not when ``.keel/`` is gone (``keel exec`` made it before the run): a workspace removed
    meanwhile is not brought back by a journal nobody will read.
    """
    if not os.path.isdir(os.path.join(root, STATE_DIR)):
        return False
    try:
        from keel.core.events import EXEC_SESSION, DataPayload, Event, trace_id_for
        from keel.journal import open_journal

        event = Event(
            kind=kind,
            session_id=EXEC_SESSION,
            payload=DataPayload(data),
            trace_id=trace_id_for(EXEC_SESSION),
        )
        with open_journal(root) as journal:
            journal.append(event)
    except Exception:  # the run's result stands; the proxy log keeps its decisions
        return False
    return True


def _detached(work: Callable[[], object]) -> None:
    """Run ``work`` in a fork of its own session that outlives this process; never raises.

    The fork lets go of every descriptor first: a caller reading this process's output until
    end of file is not kept waiting, and the fork is reparented when this process exits.
    """
    from keel.sandbox.exec._netns import _fork

    try:
        pid = _fork()
    except OSError:
        return
    if pid != 0:
        return
    try:  # pragma: no cover - the fork; the journal shows its work
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, _max_fd())
        work()
    finally:
        os._exit(0)


def _max_fd() -> int:
    try:
        return max(os.sysconf("SC_OPEN_MAX"), 3)
    except (OSError, ValueError):
        return 65536
