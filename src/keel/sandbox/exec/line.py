"""The ``keel exec`` line: the one codec of a contained shell call (issue 23).

The hooks rewrite an allowed shell command to ``encode(...)``; keel's own agent runs the same
words (``shell_argv``); the guard reads the line a client reports back with ``decode``: the
command as the agent wrote it (a line that is no ``keel exec`` line of a shell command is a
client that ignored the rewrite) and the ``--report`` id of what the run left behind.

``decode`` also reads the line keel wrote before issue 22 (``python -S
<keel>/sandbox/_launch.py exec ...``). Only a call answered by the keel of before an upgrade
carries one: it is no sign that the client ran a command outside the sandbox (the client ran
what keel said, and with that launcher gone it cannot even start), and it must not lock the
session.

On the hook path: nothing heavier than ``shlex`` is imported, and only when a line is made
or read.
"""

from __future__ import annotations

import os

from keel.core import isolated as _isolated
from keel.core.frozen import Frozen

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["LAUNCHER", "ExecLine", "command_of", "decode", "encode", "exec_argv", "shell_argv"]

LAUNCHER = _isolated.LAUNCHER
"""The script ``exec_argv`` runs: keel's isolated launcher (``keel.core.isolated``)."""
LAUNCHER_BEFORE_22 = os.path.join(os.path.dirname(LAUNCHER), "sandbox", "_launch.py")
"""The script the line of before issue 22 ran (``python -S <it> exec ...``)."""
SHELL = ("bash", "-c")
"""How a contained shell line runs: as the client would have run it."""


class ExecLine(Frozen):
    """A ``keel exec`` line read back: its options and the command it contains."""

    __slots__ = ("argv", "legacy", "options")
    options: tuple[str, ...]
    """``keel exec``'s options as written (``--workspace W``, ``--timeout S``, ``--report ID``)."""
    argv: tuple[str, ...]
    """The contained command (the words after the first ``--``; none without a ``--``)."""
    legacy: bool
    """The line of before issue 22 (``python -S <keel>/sandbox/_launch.py exec ...``)."""

    def __init__(self, options: tuple[str, ...], argv: tuple[str, ...], legacy: bool) -> None:
        self._init(options=options, argv=argv, legacy=legacy)

    @property
    def command(self) -> str | None:
        """The shell line it runs under ``bash -c``, as the agent wrote it; else None."""
        return self.argv[2] if len(self.argv) == 3 and self.argv[:2] == SHELL else None

    @property
    def report(self) -> str | None:
        """The ``--report ID`` (where ``keel exec`` writes what the run left behind)."""
        return self.option("--report")

    @property
    def workspace(self) -> str | None:
        """The ``--workspace`` the command is contained in."""
        return self.option("--workspace")

    @property
    def timeout(self) -> float | None:
        """The ``--timeout`` in seconds; None without one or when it is no number."""
        value = self.option("--timeout")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None

    def option(self, name: str) -> str | None:
        """The word after the first ``name`` among the options, if there is one."""
        at = self.options.index(name) if name in self.options else -1
        return self.options[at + 1] if 0 <= at < len(self.options) - 1 else None


def exec_argv(
    workspace: str | os.PathLike[str],
    command: Sequence[str],
    *,
    timeout: float | None = None,
    python: str | None = None,
    report: str | None = None,
) -> list[str]:
    """The fastest command line that runs ``command`` contained in ``workspace``.

    ``[python, "-I", "-S", <keel>/_launch.py, "exec", "--workspace", W, ("--timeout", S),
    "--", *command]``: isolated (it starts in the workspace, which must not reach keel's
    ``sys.path``, and ignores ``PYTHON*`` variables), the interpreter skips ``site`` and the
    launcher puts keel on ``sys.path`` itself. ``python`` defaults to the running interpreter.
    ``report``: ``keel exec --report ID`` (what the run left behind, for the hook's journal).
    """
    argv = _isolated.launcher_argv(
        "exec", "--workspace", os.fspath(workspace), python=python, site=False
    )
    if timeout is not None:
        argv += ["--timeout", f"{timeout:g}"]
    if report is not None:
        argv += ["--report", report]
    return [*argv, "--", *command]


def shell_argv(
    workspace: str | os.PathLike[str],
    command: str,
    *,
    timeout: float | None = None,
    report: str | None = None,
    python: str | None = None,
) -> list[str]:
    """The words of ``encode``'s line: ``command`` (a shell line) under ``bash -c``, contained."""
    return exec_argv(workspace, [*SHELL, command], timeout=timeout, python=python, report=report)


def encode(
    workspace: str | os.PathLike[str],
    command: str,
    *,
    timeout: float | None = None,
    report: str | None = None,
    python: str | None = None,
) -> str:
    """The shell line that runs ``command`` (a shell line) inside ``keel exec``.

    It runs where the client's shell is (``keel exec`` keeps a working directory inside the
    workspace), under ``bash -c`` as the client would have run it. With ``report`` (hex),
    ``keel exec`` writes what the run left behind where the guard reads it (``decode``).
    """
    import shlex

    argv = shell_argv(workspace, command, timeout=timeout, report=report, python=python)
    return shlex.join(argv)


def decode(line: str) -> ExecLine | None:
    """The ``keel exec`` line ``line`` is (any interpreter runs it), or None for any other line.

    Only keel's launcher in isolated mode without site (``-I -S``), or the launcher of before
    issue 22 under ``-S``, running ``exec``, counts; ``ExecLine.command`` is None unless the
    command is exactly ``bash -c LINE``.
    """
    import shlex

    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if words[1:5] == ["-I", "-S", LAUNCHER, "exec"]:
        rest, legacy = words[5:], False
    elif words[1:4] == ["-S", LAUNCHER_BEFORE_22, "exec"]:
        rest, legacy = words[4:], True
    else:
        return None
    if "--" not in rest:
        return ExecLine(tuple(rest), (), legacy)
    at = rest.index("--")
    return ExecLine(tuple(rest[:at]), tuple(rest[at + 1 :]), legacy)


def command_of(line: str) -> str | None:
    """The shell command an ``encode`` line runs, as the agent wrote it; None for any other line.

    A client reports the command it ran: None for a shell call keel rewrote means the client
    ran something else than the ``keel exec`` line keel answered with.
    """
    found = decode(line)
    return found.command if found is not None else None
