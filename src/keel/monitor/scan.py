"""``keel monitor scan``: the monitor's detectors over a recorded agent run.

``scan_file(path)`` reads the run (see ``keel.monitor.formats``), feeds each session's events
to a fresh ``Monitor`` through ``observe`` and reports every diagnostic with its step (the
1-based index of the tool call), detector, level and evidence. The levels are what keel would
have done live: the ladder escalates a problem that comes back after guidance.

Commands and scope are judged by the policy of the workspace (``workspace``, else the current
directory's), as the live hook judges them: ``command_facts`` reads every command line, and
``in_scope`` takes paths relative to the workspace and absolute paths inside it alike.

As a CI gate (``keel monitor scan --fail-on LEVEL``), ``ScanReport.exit_code(level)`` is
``FAIL_EXIT`` (3) when any diagnostic is at ``level`` or above on the ladder hint < correct <
replan < stop, else 0; an unreadable file or unknown format is an error (exit 1) instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from keel.core.decision import GUIDANCE_LEVELS, GUIDANCE_RANK, GuidanceLevel
from keel.monitor._monitor import Monitor
from keel.monitor._state import Diagnostic
from keel.monitor.formats import ScanFormat, read_run

if TYPE_CHECKING:
    from keel.core.events import Event
    from keel.core.schema import KeelConfig

FAIL_EXIT = 3
"""The exit code of ``keel monitor scan --fail-on LEVEL`` when a diagnostic reached LEVEL."""


@dataclass(frozen=True, slots=True)
class RunScan:
    """The diagnostics of one session of a recorded run."""

    session_id: str
    steps: int
    """Tool calls in the session."""
    events: int
    diagnostics: tuple[Diagnostic, ...]
    stopped_at: int | None
    """The step at which keel would have stopped the session, if it would have."""
    recorded: tuple[Event, ...] = field(default=(), repr=False, compare=False)
    """The session's events as read (for ``keel monitor scan --judge``; not in ``to_dict``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "session_id": self.session_id,
            "steps": self.steps,
            "events": self.events,
            "stopped_at": self.stopped_at,
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


@dataclass(frozen=True, slots=True)
class ScanReport:
    """What ``scan_file`` found in one file."""

    file: str
    format: ScanFormat
    runs: tuple[RunScan, ...]

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """Every diagnostic of every run, in order."""
        return tuple(d for run in self.runs for d in run.diagnostics)

    def at_or_above(self, level: GuidanceLevel) -> tuple[Diagnostic, ...]:
        """The diagnostics at ``level`` or higher on the guidance ladder.

        Raises:
            UsageError: ``level`` is not one of ``GUIDANCE_LEVELS`` (code ``usage.fail_on``).
        """
        floor = _rank(level)
        return tuple(d for d in self.diagnostics if GUIDANCE_RANK[d.level] >= floor)

    def exit_code(self, fail_on: GuidanceLevel | None = None) -> int:
        """What ``keel monitor scan`` exits with: ``FAIL_EXIT`` when ``fail_on`` was reached.

        Args:
            fail_on: The lowest level that fails the scan; None never fails it.

        Returns:
            ``FAIL_EXIT`` (3) when a diagnostic is at ``fail_on`` or above, else 0.
        """
        if fail_on is None:
            return 0
        return FAIL_EXIT if self.at_or_above(fail_on) else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "file": self.file,
            "format": self.format,
            "runs": [run.to_dict() for run in self.runs],
            "diagnostics": len(self.diagnostics),
        }


def scan_file(
    path: Path,
    *,
    format: ScanFormat | Literal["auto"] = "auto",
    config: KeelConfig | None = None,
    session: str | None = None,
    workspace: Path | None = None,
) -> ScanReport:
    """Run the detectors over the recorded run in ``path``.

    ``config`` defaults to keel's defaults, ``workspace`` to the current directory's
    (``keel.core.root.find_root``).

    Raises:
        UserError: the file cannot be read, or ``session`` is not in it.
        PayloadError: the file is not in the given (or any known) format.
    """
    from keel.core.events import is_own_session
    from keel.core.root import find_root
    from keel.policy import Policy

    if config is None:
        from keel.core.schema import KeelConfig

        config = KeelConfig()
    policy = Policy.from_config(config, workspace or find_root())
    fmt, events = read_run(path, format)
    sessions: dict[str, list[Any]] = {}
    for event in events:
        sessions.setdefault(event.session_id, []).append(event)
    if session is not None:
        chosen = _one_session(path, session, sessions)
        sessions = {chosen: sessions[chosen]}
    else:  # keel doctor's synthetic `rm -rf /`, keel exec's records: scanned only when named
        sessions = {s: e for s, e in sessions.items() if not is_own_session(s)}
    runs: list[RunScan] = []
    for session_id, session_events in sessions.items():
        monitor = Monitor(
            config, in_scope=policy.in_scope, facts=policy.command_facts, session_id=session_id
        )
        found: list[Diagnostic] = []
        stopped_at: int | None = None
        for event in session_events:
            found += monitor.observe(event)
            if stopped_at is None and monitor.state.stopped:
                stopped_at = monitor.state.step
        runs.append(
            RunScan(
                session_id,
                monitor.state.step,
                len(session_events),
                tuple(found),
                stopped_at,
                tuple(session_events),
            )
        )
    return ScanReport(str(path), fmt, tuple(runs))


def fail_level(text: str) -> GuidanceLevel:
    """The guidance level ``text`` names (``--fail-on``; any case, spaces ignored).

    Raises:
        UsageError: it is not one of ``GUIDANCE_LEVELS`` (code ``usage.fail_on``).
    """
    level = text.strip().lower()
    for known in GUIDANCE_LEVELS:
        if level == known:
            return known
    from keel.core.errors import UsageError

    raise UsageError(
        f"unknown level {text!r}; one of {', '.join(GUIDANCE_LEVELS)}", code="usage.fail_on"
    )


def _rank(level: str) -> int:
    return GUIDANCE_RANK[fail_level(level)]


def render_text(report: ScanReport) -> str:
    """The report as plain text: one block per run, one line per diagnostic plus its evidence."""
    count = len(report.diagnostics)
    lines = [
        f"{report.file} ({report.format}): {len(report.runs)} run(s), "
        f"{count} diagnostic{'s' if count != 1 else ''}"
    ]
    for run in report.runs:
        lines.append(f"session {run.session_id}: {run.steps} tool calls, {run.events} events")
        for d in run.diagnostics:
            lines.append(f"  step {d.step:>4}  {d.detector:<17} {d.level:<8} {d.message}")
            lines.append(
                f"             evidence: {json.dumps(d.evidence, ensure_ascii=False, default=str)}"
            )
        if not run.diagnostics:
            lines.append("  no problems found")
        if run.stopped_at is not None:
            lines.append(f"  keel would have stopped this session at step {run.stopped_at}.")
    return "\n".join(lines) + "\n"


def _one_session(path: Path, prefix: str, sessions: dict[str, list[Any]]) -> str:
    """The session ``prefix`` names (an id or a unique prefix, as ``keel show`` takes it)."""
    from keel.core.errors import UsageError, UserError
    from keel.journal.timeline import match_session

    try:
        return match_session(prefix, sessions)
    except UsageError:
        raise
    except UserError as exc:  # the same message, in the words of a scanned file
        code = "monitor.session_unknown" if exc.code == "journal.session_unknown" else exc.code
        raise UserError(f"{path}: {exc.message}", code=code) from None
