"""A cap on the processes of a bwrap sandbox run by root: its pid namespace's own ``pid_max``.

``[sandbox] exec_max_processes`` is RLIMIT_NPROC, which the kernel does not enforce for root:
a fork bomb run contained by root filled the host with ~19,500 processes, exhausting its pids,
starving keel of the CPU it needed to kill the run at its timeout, and making the kernel tear
down that many processes once it did (the run ended 11-22 s late). Since Linux 6.14 a pid
namespace has its own ``kernel.pid_max``, enforced on every process created in it, root's
included: with it set to ``exec_max_processes + 2`` (pid 1 is bwrap's init), a bomb stops at
that many processes, and killing the namespace's init (``BwrapProcess.kill``) ends it at once.

How: bwrap waits (``--block-fd``) with its namespaces made and reports its child's pid and
the id of the pid namespace (``--json-status-fd``). A fork of ``keel exec`` opens the child's
``/proc/PID/ns/pid``, checks it is the namespace bwrap reported, joins it (``setns``: its own
children are created in it) and forks a process that, being inside, writes its namespace's
``/proc/sys/kernel/pid_max`` and exits. Only then is bwrap let go, so the command never runs
uncapped. The sysctl is per namespace only where the kernel says so: the writer opens the file
and compares its inode with the host's entry (held open by the fork, so it cannot be evicted
and renumbered meanwhile); the same inode is the global table of an older kernel, which is
never written. There, and where the system refuses the write (a read-only ``/proc/sys`` in a
container), the run goes on uncapped, as before: the cap is a guard against runaway process
trees, like the rlimits (``Limits``), not the boundary of the sandbox.

Who forks: when the run has a proxy, the process that puts its listener in the sandbox
(``keel hookd``'s namespace helper, or ``keel exec``'s own fork without a daemon) does this in
the same request, before it joins the sandbox's user namespace (``_netns``); ``cap`` here is
for runs without one.

Standard library only; the fork's system calls come from ``_netns`` (imported when a run is
capped here).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

PID_MAX_MIN = 301
"""The kernel's lowest ``pid_max`` (``RESERVED_PIDS + 1``), in a namespace too."""
MIN_KERNEL = (6, 14)
"""The first Linux with a ``pid_max`` per pid namespace."""


def supported(release: str | None = None) -> bool:
    """Whether this kernel (``os.uname().release``) has a ``pid_max`` per pid namespace."""
    text = release if release is not None else os.uname().release
    numbers: list[int] = []
    for part in text.split(".")[:2]:
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            return False
        numbers.append(int(digits))
    return len(numbers) == 2 and (numbers[0], numbers[1]) >= MIN_KERNEL


def pid_max_for(processes: int) -> int:
    """The namespace's ``pid_max`` that lets the command run ``processes`` processes."""
    return max(processes + 2, PID_MAX_MIN)


def cap(pid: int, pid_ns: int, processes: int) -> bool:
    """Let the pid namespace of ``pid`` (bwrap's child) hold ``processes`` processes at most.

    ``pid_ns`` is the id bwrap reported for the namespace it made: the one capped, or none.
    False: not capped (the kernel has no ``pid_max`` per namespace, or the system refused).

    Raises:
        OSError: the namespace is not the one bwrap reported, or no fork.
    """
    if not supported():
        return False
    from keel.sandbox.exec._netns import _fork, _libc, open_pid_namespace

    setns = _libc()[0]
    opened = open_pid_namespace(pid, pid_ns)
    if opened is None:
        return False  # nothing to tell the namespace's table from the host's by
    try:
        child = _fork()
        if child == 0:  # pragma: no cover - the fork; its work is seen by the parent
            _join_and_write(setns, *opened, pid_max_for(processes))
        _, status = os.waitpid(child, 0)
    finally:
        for fd in opened:
            os.close(fd)
    return os.waitstatus_to_exitcode(status) == 0


def _join_and_write(  # pragma: no cover - the fork; its work is seen by the parent
    setns: Callable[..., int], ns: int, host: int, value: int
) -> None:
    """In the fork: join the namespace ``ns``, fork a writer inside, pass on its exit code."""
    from keel.sandbox.exec._netns import start_writer

    code = 1
    try:
        writer = start_writer(setns, ns, host, value)
        if writer is not None:
            _, status = os.waitpid(writer, 0)
            code = os.waitstatus_to_exitcode(status)
    finally:
        os._exit(code)
