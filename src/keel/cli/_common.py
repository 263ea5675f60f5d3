"""Shared pieces of the CLI: options, help pages, colour, progress, sessions, error exit.

Output rules every command follows:

- Colour only on a terminal: ``NO_COLOR`` (any non-empty value) and ``TERM=dumb`` turn it off,
  ``FORCE_COLOR`` turns it on off a terminal; piped output is plain text, no escape codes
  (``keel.core.color``).
- Progress (a transient spinner with the elapsed time) goes to stderr, only on a terminal, and
  only once the work has taken ``PROGRESS_DELAY`` seconds.
- ``--json`` prints exactly one JSON object on stdout per run; errors are
  ``{"error": {"code", "message", ...}}`` on stderr.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TextIO

import typer

# The colour rule lives in keel.core.color (standard library only, shared with the fast path of
# ``keel policy check``); the typer commands take it from here.
from keel.core.color import DECISION_COLORS as DECISION_COLORS
from keel.core.color import color_enabled as color_enabled
from keel.core.color import paint as paint
from keel.core.color import paint_decision as paint_decision
from keel.core.color import paint_diff as paint_diff
from keel.core.errors import KeelError, UsageError
from keel.core.root import find_root

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

    from keel.journal import Journal

HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
"""``context_settings`` for every typer app and sub-app: ``-h`` is ``--help``."""
PROGRESS_DELAY = 0.5
"""Seconds of silence before a long operation shows a spinner (on a terminal)."""
PROGRESS_DELAY_ENV = "KEEL_PROGRESS_DELAY"
"""Overrides ``PROGRESS_DELAY`` (seconds; 0 shows the spinner at once)."""

WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace", "-w", help="Workspace root (default: found from the current directory)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


def workspace_root(ctx: typer.Context, workspace: Path | None = None) -> Path:
    """The root from a command's own --workspace, else the global one, else discovery.

    Raises:
        UsageError: a given --workspace is not an existing directory (``usage.workspace``):
            nothing is created in a mistyped place.
    """
    chosen = workspace or (ctx.obj or {}).get("workspace") if ctx is not None else workspace
    root = Path(find_root(override=str(chosen) if chosen else None))
    if chosen and not root.is_dir():
        what = "is not a directory" if os.path.lexists(root) else "does not exist"
        raise UsageError(f"workspace {str(chosen)!r} {what}", code="usage.workspace")
    return root


def named_workspace(ctx: typer.Context, workspace: Path | None = None) -> bool:
    """Whether the user named the workspace: the command's ``--workspace`` or the global one."""
    return bool(workspace or (ctx.obj or {}).get("workspace"))


def existing_workspace(ctx: typer.Context, workspace: Path | None, command: str) -> Path:
    """``workspace_root``, refused when it is no workspace and ``--workspace`` did not name it.

    For the commands that must not act where no agent works: ``keel stop`` (a stop nobody
    sees) and ``keel checkpoint create`` (a snapshot of a whole unrelated directory).

    Raises:
        UsageError: ``usage.no_workspace`` naming the workspaces below
            (``keel.lifecycle.require_workspace``), before anything is written.
    """
    root = workspace_root(ctx, workspace)
    if not named_workspace(ctx, workspace):
        from keel.lifecycle import require_workspace

        require_workspace(root, command=command)
    return root


def fail(
    error: KeelError | str, *, as_json: bool = False, exit_code: int | None = None
) -> NoReturn:
    """Print an error (text or JSON on stderr) and exit: 2 for usage errors, else 1."""
    err = error if isinstance(error, KeelError) else KeelError(error)
    if as_json:
        sys.stderr.write(json.dumps({"error": err.to_dict()}, default=str) + "\n")
    else:
        sys.stderr.write(f"keel: error: {one_line(err.message)} [{err.code}]\n")
    code = exit_code if exit_code is not None else (2 if isinstance(err, UsageError) else 1)
    raise typer.Exit(code)


def utf8_text(text: str) -> str:
    """``text`` from the command line with undecodable bytes spelled out (``\\xff``)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def one_line(text: str, limit: int = 2000) -> str:
    """``text`` on one line, clipped, control characters escaped (so input cannot drive a tty)."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_json(value: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(value, indent=2, default=str, ensure_ascii=False) + "\n")


# -- help pages ------------------------------------------------------------------------------

_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def escape_markup(text: str) -> str:
    """``text`` with every ``[word]`` escaped, so rich help pages print it instead of eating it.

    typer renders help as rich markup, where ``[scope]`` is a (meaningless) style tag.
    """
    return _MARKUP_TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", text)


def examples(*lines: str) -> str:
    """A help page epilog listing example command lines (a typer ``epilog``)."""
    # The leading newline keeps the indentation: typer dedents all but the first line.
    body = "\n".join(f"  {escape_markup(line)}" for line in lines)
    return f"\nExamples:\n{body}"


# -- colour and progress ---------------------------------------------------------------------


def echo(text: str = "", *, nl: bool = True) -> None:
    """Write ``text`` to stdout as it is, escape codes included.

    ``typer.echo`` strips escape codes whenever stdout is not a terminal, which would undo
    ``FORCE_COLOR``; text painted by ``paint`` has already been through ``color_enabled``.
    """
    sys.stdout.write(text + "\n" if nl else text)


def make_console(*, stderr: bool = False) -> Console:
    """A rich console for stdout (or stderr) that honours ``NO_COLOR`` fully: no bold either.

    Off a terminal rich writes no escape codes by itself (unless ``FORCE_COLOR``).
    """
    from rich.console import Console

    from keel.core.color import color_off

    return Console(stderr=stderr, color_system=None if color_off() else "auto", highlight=False)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """A running ``progress`` block: change what it says, or pause it around a prompt.

    Off a terminal every method does nothing, so callers never ask where they print.
    """

    def __init__(self, label: str, console: Console | None) -> None:
        self._label = label
        self._lock = threading.Lock()
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self._shown = False
        self._closed = False
        self._paused = False
        if console is not None:
            from rich.progress import Progress as RichProgress
            from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._bar.add_task(label, total=None)

    @property
    def shown(self) -> bool:
        """Whether the spinner has been on the screen (the block outlasted the delay)."""
        return self._shown

    def update(self, label: str) -> None:
        """Say ``label`` from now on (``Checkpoints.on_progress`` and the like call this)."""
        self._label = label
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=label)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Take the spinner off the screen while the block runs (a prompt, say)."""
        with self._lock:
            was_live = self._shown and not self._closed and not self._paused
            self._paused = True
            if was_live and self._bar is not None:
                self._bar.stop()
        try:
            yield
        finally:
            with self._lock:
                self._paused = False
                if was_live and not self._closed and self._bar is not None:
                    self._bar.start()

    def _show(self) -> None:
        with self._lock:
            if self._closed or self._paused or self._bar is None:
                return
            self._bar.start()
            self._shown = True

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._shown and not self._paused and self._bar is not None:
                self._bar.stop()


def progress_delay() -> float:
    """``KEEL_PROGRESS_DELAY`` when it is a number of seconds >= 0, else ``PROGRESS_DELAY``."""
    try:
        delay = float(os.environ.get(PROGRESS_DELAY_ENV, ""))
    except ValueError:
        return PROGRESS_DELAY
    return delay if 0 <= delay < float("inf") else PROGRESS_DELAY


@contextmanager
def progress(
    label: str, *, delay: float | None = None, console: Console | None = None
) -> Iterator[Progress]:
    """Show a transient spinner with ``label`` on stderr once the block has run ``delay`` s.

    ``delay`` defaults to ``progress_delay()``; at 0 the spinner shows at once. Only on a
    terminal (or on ``console``, for tests), never under ``TERM=dumb``; the line is erased
    when the block ends, so nothing of it stays in the output. The hook path never calls
    this: a hook's stderr is the client's, and its time is the agent's.
    """
    if console is None and _is_tty(sys.stderr) and os.environ.get("TERM") != "dumb":
        console = make_console(stderr=True)
    handle = Progress(label, console)
    wait = progress_delay() if delay is None else delay
    timer: threading.Timer | None = None
    if console is not None and wait <= 0:
        handle._show()
    elif console is not None:
        timer = threading.Timer(wait, handle._show)
        timer.daemon = True
        timer.start()
    try:
        yield handle
    finally:
        if timer is not None:
            timer.cancel()
        handle._close()


# -- sessions --------------------------------------------------------------------------------


@contextmanager
def read_only_journal(root: Path) -> Iterator[Journal]:
    """The workspace's journal, read-only; an empty one if there is none yet.

    Reading never creates, migrates or recovers anything: a broken journal stays as it is.
    """
    from keel.journal import MemoryJournal, has_journal, read_journal

    if not has_journal(root):
        yield MemoryJournal()
        return
    with read_journal(root) as journal:
        yield journal


def resolve_session_id(root: Path, prefix: str, *, also: Iterable[str] = ()) -> str:
    """The session id ``prefix`` names: an id, or a unique prefix of one, as ``keel show`` takes.

    The candidates are the sessions in the workspace's journal plus ``also`` (for example the
    sessions of checkpoints). An exact id wins over longer ids it is a prefix of.

    Raises:
        UserError: no session matches (``journal.session_unknown``) or several do
            (``journal.session_ambiguous``).
        UsageError: ``prefix`` is empty (``usage.session``).
    """
    from keel.journal.timeline import match_session

    with read_only_journal(root) as journal:
        ids = [s.session_id for s in journal.sessions()]
    return match_session(prefix, [*ids, *also])
