"""Contained execution (``keel exec``) as a library: the API the hooks and ``keel stop`` use.

``run_contained`` runs one command in place in the workspace, as the invoking user, with its
stdio inherited, inside the exec sandbox (bubblewrap, else Landlock): writes only to the
workspace, a private ``/tmp`` and ``[sandbox] writable``; keel's and the agents' control files
read-only and new ones quarantined; a fresh HOME without secrets; a filtered environment; the
network only through a host-side proxy that enforces the policy's allowlist; its own pid
namespace; a wall-clock limit. ``exec_argv`` is the command line that does the same from a
shell (``keel.sandbox.exec.line`` makes it, and the line an agent's shell call is rewritten
to, and reads that line back); ``kill_contained`` ends every contained command of a
workspace (``keel stop``). See ``keel.sandbox.exec._exec`` for the exit codes.
"""

from __future__ import annotations

import os
import sys

from keel.core.frozen import Frozen
from keel.sandbox.exec import exec_backend as exec_backend
from keel.sandbox.exec._context import (
    EXIT_NOT_FOUND,
    EXIT_QUARANTINED,
    EXIT_REFUSED,
    EXIT_TIMEOUT,
    EXIT_UNAVAILABLE,
    exit_status,
    report_refusal,
)
from keel.sandbox.exec._exec import execute, final_code
from keel.sandbox.exec.line import LAUNCHER, exec_argv
from keel.sandbox.os._registry import kill_contained as _kill_contained

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import TextIO

    from keel.sandbox.exec._context import Outcome
    from keel.sandbox.exec._proxy import ProxyDecision

__all__ = [
    "EXIT_NOT_FOUND",
    "EXIT_QUARANTINED",
    "EXIT_REFUSED",
    "EXIT_TIMEOUT",
    "EXIT_UNAVAILABLE",
    "LAUNCHER",
    "ExecResult",
    "exec_argv",
    "exec_backend",
    "exit_status",
    "kill_contained",
    "report_refusal",
    "run_contained",
]


class ExecResult(Frozen):
    """What one contained command did."""

    __slots__ = (
        "backend",
        "connections",
        "duration_ms",
        "exit_code",
        "quarantined",
        "restored",
        "timed_out",
    )
    exit_code: int
    """``keel exec``'s exit status: the command's, ``128 + N`` for signal N, 123 (control
    files quarantined), 124 (time limit) or 126 (``keel stop`` killed it)."""
    backend: str
    """``bwrap`` or ``landlock``."""
    timed_out: bool
    quarantined: tuple[str, ...]
    """Control files the command created, moved to ``.keel/quarantine/<stamp>/``."""
    restored: tuple[str, ...]
    """Control files the command changed and keel put back (Landlock only)."""
    connections: tuple[ProxyDecision, ...]
    """Every connection asked of the proxy, allowed or not."""
    duration_ms: float

    def __init__(
        self,
        exit_code: int,
        backend: str,
        timed_out: bool,
        quarantined: tuple[str, ...],
        restored: tuple[str, ...],
        connections: tuple[ProxyDecision, ...],
        duration_ms: float,
    ) -> None:
        self._init(
            exit_code=exit_code,
            backend=backend,
            timed_out=timed_out,
            quarantined=quarantined,
            restored=restored,
            connections=connections,
            duration_ms=duration_ms,
        )

    @classmethod
    def of(cls, outcome: Outcome, err: TextIO) -> ExecResult:
        """The public view of ``outcome`` (a timeout or an interruption is reported on ``err``)."""
        return cls(
            final_code(outcome, err),
            outcome.backend,
            outcome.timed_out,
            outcome.quarantined,
            outcome.restored,
            outcome.connections,
            outcome.duration_ms,
        )


def run_contained(
    command: Sequence[str],
    *,
    workspace: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    backend: str | None = None,
    environ: Mapping[str, str] | None = None,
    err: TextIO | None = None,
) -> ExecResult:
    """Run ``command`` contained in ``workspace`` (stdio inherited) and wait for it.

    Args:
        command: The argv, e.g. ``["bash", "-c", "make test"]``.
        workspace: The workspace root.
        cwd: Where to run; the root unless it is inside the workspace.
        timeout: Wall-clock seconds; ``[sandbox] exec_timeout_seconds`` when ``None``.
        backend: ``auto``, ``bwrap`` or ``landlock``; ``[sandbox] backend`` when ``None``.
        environ: The environment to filter; ``os.environ`` when ``None``.
        err: Where keel's own one-line notices go (``sys.stderr``).

    Raises:
        StopRequested: the emergency stop is set (``stop.active``).
        SandboxError: the command cannot be contained here (``sandbox.*``); it did not run.
        ConfigError: keel.toml is invalid.
        UsageError: an empty command or a workspace that is not a directory.
    """
    outcome = execute(
        command,
        workspace=os.fspath(workspace),
        cwd=os.fspath(cwd) if cwd is not None else None,
        timeout=timeout,
        backend=backend,
        environ=environ,
        err=err,
    )
    return ExecResult.of(outcome, err or sys.stderr)


def kill_contained(
    root: str | os.PathLike[str], *, meanwhile: Callable[[], object] | None = None
) -> int:
    """Kill every contained command running in the workspace at ``root``; how many there were.

    Each one's sandbox is SIGKILLed (its pid namespace takes every child along) and its
    ``keel exec`` SIGTERMed, so it still quarantines what the command planted before it exits
    (126: the emergency stop). ``meanwhile`` runs once the kills are sent, before waiting for
    the commands to end (``keel stop`` journals the stop then).
    """
    return _kill_contained(os.fspath(root), meanwhile)
