"""The registry of running contained commands, so that ``keel stop`` can end them.

Each ``keel exec`` writes ``.keel/exec/<pid>.json`` before it starts the sandbox and removes it
when it is done: its own pid and start time (``/proc/<pid>/stat`` field 22, so a recycled pid
is never mistaken for it), and, once known, the sandbox's processes (bwrap and the pid
namespace's init, each with its start time) or, for Landlock, the process group and the run
marker. ``.keel/`` is hidden from contained commands, so they cannot edit their own record.

``kill_contained(root)`` SIGTERMs the ``keel exec`` itself (which then quarantines and exits
126), SIGKILLs every recorded sandbox process (the pid namespace takes the whole tree with it),
and waits a little for them to finish.

Standard library only.
"""

from __future__ import annotations

import os
import time

from keel.core.daemon import process_start, process_stat
from keel.core.root import STATE_DIR
from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable
    from typing import Any
else:  # the C module: ``signal`` builds three enums at import (2 ms on this path)
    import _signal

EXEC_DIR = os.path.join(STATE_DIR, "exec")
"""``.keel/exec``: the run records, and ``keel exec``'s reports, caches and logs."""
PROXY_LOG = os.path.join(EXEC_DIR, "proxy.log")
"""Where a workspace's proxy logs its decisions (relative to the root)."""
WAIT_SECONDS = 5.0


class Registration:
    """This process's record; ``update`` adds the sandbox's processes, ``remove`` deletes it."""

    def __init__(self, root: str, data: dict[str, Any]) -> None:
        """Write the record for this process under ``root``."""
        self.path = os.path.join(root, EXEC_DIR, f"{os.getpid()}.json")
        pid = os.getpid()
        self.data: dict[str, Any] = {"pid": pid, "start": process_start(pid), **data}
        self._write()

    def update(self, **fields: Any) -> None:
        """Add fields to the record."""
        self.data.update(fields)
        self._write()

    def remove(self) -> None:
        """Delete the record."""
        _quiet.unlink(self.path)

    def _write(self) -> None:
        tmp = f"{self.path}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(dumps(self.data))
        os.replace(tmp, self.path)


def dumps(value: Any) -> str:
    """JSON for the record's plain values (dicts, lists, tuples, str, int, bool, None).

    Written by hand because ``json`` costs ``keel exec`` 2 ms of imports; ``records`` reads it
    back with ``json``.
    """
    if isinstance(value, dict):
        items = (f"{dumps(str(k))}: {dumps(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c >= " " else f"\\u{ord(c):04x}" for c in text) + '"'


def records(root: str) -> list[tuple[str, dict[str, Any]]]:
    """``(path, record)`` of every registered ``keel exec`` of the workspace."""
    folder = os.path.join(root, EXEC_DIR)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return []
    import json

    out: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.append((path, data))
    return out


def kill_contained(root: str, meanwhile: Callable[[], object] | None = None) -> int:
    """Kill every contained command of the workspace at ``root``; how many were running.

    Stale records (their ``keel exec`` is gone) are removed. Once every kill is sent,
    ``meanwhile`` runs (``keel stop`` journals the stop while the sandboxes are torn down);
    then this waits up to ``WAIT_SECONDS`` for the killed ``keel exec`` processes to exit.
    """
    live: list[tuple[int, int]] = []
    for path, data in records(root):
        pid, start = data.get("pid"), data.get("start")
        if not isinstance(pid, int) or start is None or process_start(pid) != start:
            _unlink(path)
            continue
        # keel exec first: told before its sandbox dies, it reports the stop (exit 126), not
        # a sandbox that ended on its own; the SIGKILLs do not wait for it to act.
        _send(pid, start, _signal.SIGTERM)
        _kill_sandbox(data)
        live.append((pid, start))
    killed = len(live)
    try:
        if meanwhile is not None:
            meanwhile()
    finally:
        deadline = time.monotonic() + WAIT_SECONDS
        while live and time.monotonic() < deadline:
            live = [(p, s) for p, s in live if process_start(p) == s]
            if live:
                time.sleep(0.02)
    return killed


def _kill_sandbox(data: dict[str, Any]) -> None:
    for pid, start in data.get("processes", []):
        # A sandbox process starts after its keel exec: a record naming an older process
        # (pid 1, a daemon) is not believed.
        if isinstance(start, int) and start >= data["start"]:
            _send(pid, start, _signal.SIGKILL)
    group = data.get("pgid")
    if isinstance(group, int) and group > 1 and (process_start(group) or -1) >= data["start"]:
        _quiet.call(os.killpg, group, _signal.SIGKILL)
    marker = data.get("marker")
    if isinstance(marker, str):
        from keel.sandbox.os._process import kill_marked

        kill_marked(marker, os.getuid())


def _send(pid: int, start: int, sig: int) -> None:
    if process_start(pid) != start:
        return
    _quiet.call(os.kill, pid, sig)


_unlink = _quiet.unlink


def freeze_contained(root: str) -> list[tuple[int, int]]:
    """Stop (SIGSTOP) every process of the workspace's running contained commands.

    A client's file tools (Read, Write, Edit, apply_patch) run outside the sandbox: a
    contained command still running in the background could swap a directory for a symlink
    between keel's check of a path and the client's use of it. Frozen for that moment, it
    cannot. The sandbox trees are stopped top-down (a stopped parent forks no more children,
    and the children it has are found after it stopped); Landlock runs by their process
    group. Returns ``(pid, start)`` of every stopped process, for ``thaw``.
    """
    stopped: list[tuple[int, int]] = []
    for _, data in records(root):
        pid, start = data.get("pid"), data.get("start")
        if not isinstance(pid, int) or start is None or process_start(pid) != start:
            continue
        queue: list[tuple[int, int | None]] = [
            (p, s) for p, s in data.get("processes", []) if isinstance(s, int) and s >= start
        ]
        group = data.get("pgid")
        if isinstance(group, int) and group > 1 and (process_start(group) or -1) >= start:
            _quiet.call(os.killpg, group, _signal.SIGSTOP)
            queue.append((group, process_start(group)))
        while queue:
            node, node_start = queue.pop(0)
            if node_start is None or process_start(node) != node_start:
                continue
            _quiet.call(os.kill, node, _signal.SIGSTOP)
            stopped.append((node, node_start))
            # The stop is delivered asynchronously: wait until it holds (a system call in
            # flight, such as a rename, completes first), and only then list the children,
            # so one forked a moment ago is not missed.
            _wait_stopped(node)
            queue.extend((child, process_start(child)) for child in _children(node))
    return stopped


def _wait_stopped(pid: int, limit: float = 0.5) -> None:
    """Until ``pid`` is stopped (``T``), gone, or ``limit`` seconds passed."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        fields = process_stat(pid)
        if not fields or fields[0] in (b"T", b"t", b"Z", b"X"):
            return
        time.sleep(0.0005)


def thaw(stopped: list[tuple[int, int]] | list[list[int]]) -> None:
    """Continue (SIGCONT) the processes ``freeze_contained`` stopped, if they still exist."""
    for pid, start in stopped:
        _send(int(pid), int(start), _signal.SIGCONT)


def _children(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's), from ``/proc``."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return out
