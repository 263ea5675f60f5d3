"""A readable, plain-text timeline of one session, for ``keel show``.

One line per event in journal order: the UTC time, the ``seq``, the kind and what matters for
that kind (the tool and its command or paths; the verdict, rule, reason and suggestion; the
checkpoint and its files; the detector's level and message; the probe's result; the gate's
outcome; the stop reason). Kinds without a dedicated rendering get a generic line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, assert_never

from keel.errors import UsageError, UserError
from keel.events import (
    CheckpointPayload,
    DataPayload,
    DecisionPayload,
    DiagnosticPayload,
    Event,
    GatePayload,
    GuidancePayload,
    ProbePayload,
    StopPayload,
    ToolCallPayload,
    ToolResultPayload,
)
from keel.journal._base import HASH_ALGORITHM, Journal, Problem, SessionSummary

MAX_FIELD = 160
KIND_WIDTH = 14


def resolve_session(journal: Journal, prefix: str) -> SessionSummary:
    """The one session whose id is ``prefix`` or starts with it.

    Raises:
        UserError: no session matches (``journal.session_unknown``) or several do
            (``journal.session_ambiguous``).
        UsageError: ``prefix`` is empty (``usage.session``).
    """
    if not prefix:  # a prefix of every id: never "the only session" by accident
        raise UsageError("the session id is empty", code="usage.session")
    sessions = journal.sessions()
    exact = [s for s in sessions if s.session_id == prefix]
    if exact:
        return exact[0]
    matches = [s for s in sessions if s.session_id.startswith(prefix)]
    if not matches:
        raise UserError(f"no session matches {clip(prefix)!r}", code="journal.session_unknown")
    if len(matches) > 1:
        ids = ", ".join(repr(clip(s.session_id)) for s in matches[:5])  # repr escapes controls
        raise UserError(
            f"{clip(prefix)!r} matches {len(matches)} sessions: {ids}",
            code="journal.session_ambiguous",
        )
    return matches[0]


def clip(text: str, limit: int = MAX_FIELD) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def shown_id(text: str) -> str:
    """A session id as printed: clipped, control characters escaped (ids come from agents)."""
    flat = clip(text)
    return flat if flat.isprintable() else repr(flat)[1:-1]


def format_time(ts: float, *, date: bool = False) -> str:
    """``HH:MM:SS.mmm`` in UTC, with the date in front when ``date``."""
    moment = datetime.fromtimestamp(ts, UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S.%f" if date else "%H:%M:%S.%f")
    return text[:-3]


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def describe(event: Event) -> str:
    """What matters about ``event``, on one line, without time or kind."""
    payload = event.payload
    match payload:
        case ToolCallPayload():
            target = payload.command or payload.url or ", ".join(payload.paths)
            return f"{payload.tool} ({payload.kind}){': ' + target if target else ''}"
        case ToolResultPayload():
            status = "ok" if payload.ok else "FAILED"
            code = f" exit {payload.exit_code}" if payload.exit_code is not None else ""
            error = f": {payload.error}" if payload.error else ""
            return f"{payload.tool} {status}{code}{error}"
        case DecisionPayload():
            text = f"{payload.decision.upper()} [{payload.rule}] {payload.reason}"
            if payload.subject:
                text += f" (on {payload.subject})"
            if payload.suggestion:
                text += f"; suggestion: {payload.suggestion}"
            return text
        case CheckpointPayload():
            label = f" {payload.label!r}" if payload.label else ""
            files = f"; files: {', '.join(payload.files)}" if payload.files else ""
            return f"{payload.checkpoint_id}{label}{files}"
        case DiagnosticPayload():
            return f"[{payload.level}] {payload.detector}: {payload.message}"
        case GuidancePayload():
            return f"[{payload.level}] {payload.detector}: {payload.message}"
        case ProbePayload():
            args = ", ".join(f"{k}={_compact(v)}" for k, v in payload.args.items())
            outcome = (
                f"-> {_compact(payload.result)}"
                if payload.ok
                else f"ERROR {_compact(payload.error)}"
            )
            return f"step {payload.step_id}: {payload.function}({args}) {outcome}"
        case GatePayload():
            status = "PASS" if payload.passed else "FAIL"
            code = f" (exit {payload.exit_code})" if payload.exit_code is not None else ""
            return f"{payload.command}: {status}{code}"
        case StopPayload():
            by = f" (by {payload.by})" if payload.by else ""
            return f"{payload.reason}{by}"
        case DataPayload():
            return _compact(payload.data) if payload.data else ""
        case _:
            assert_never(payload)


def render_line(event: Event) -> str:
    """One timeline line: time, seq, kind and :func:`describe`."""
    head = f"{format_time(event.ts)}  #{event.seq:<5} {event.kind:<{KIND_WIDTH}}"
    return f"{head} {clip(describe(event))}".rstrip()


def render_header(summary: SessionSummary) -> list[str]:
    """The lines above a session's timeline."""
    return [
        f"session {shown_id(summary.session_id)}  agent {shown_id(summary.agent)}  "
        f"trace {summary.trace_id}",
        f"{summary.events} events, {format_time(summary.first_ts, date=True)} .. "
        f"{format_time(summary.last_ts, date=True)} UTC",
    ]


def render_timeline(summary: SessionSummary, events: Iterable[Event]) -> str:
    """The whole timeline of one session as text, ending with a newline."""
    lines = [*render_header(summary), ""]
    lines.extend(render_line(e) for e in events)
    return "\n".join(lines) + "\n"


def session_timeline(journal: Journal, session: str) -> str:
    """The timeline of the session ``session`` names (an id or an id prefix)."""
    summary = resolve_session(journal, session)
    return render_timeline(summary, journal.events(session_id=summary.session_id))


def render_sessions(summaries: Iterable[SessionSummary]) -> str:
    """A table of sessions, one line each: id, agent, events, first and last time."""
    rows = [
        (
            shown_id(s.session_id),
            shown_id(s.agent),
            str(s.events),
            format_time(s.first_ts, date=True),
            format_time(s.last_ts, date=True),
        )
        for s in summaries
    ]
    header = ("SESSION", "AGENT", "EVENTS", "FIRST (UTC)", "LAST (UTC)")
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in (header, *rows)
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def render_problems(problems: Iterable[Problem], events: int) -> str:
    """The text ``keel verify`` prints: one line per problem, or a line saying all is well."""
    listed = list(problems)
    if not listed:
        return f"journal intact: {events} events, {HASH_ALGORITHM} chain verified\n"
    lines = [f"seq {p.seq}: {p.code}: {p.message}" for p in listed]
    lines.append(f"journal NOT intact: {len(listed)} problem(s) in {events} events")
    return "\n".join(lines) + "\n"
