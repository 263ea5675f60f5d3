"""A readable, plain-text timeline of one session, for ``keel show`` and ``keel log``.

One line per event in journal order: the UTC time, the ``seq``, the kind and what matters for
that kind (the tool and its command or paths; the verdict, rule, reason and suggestion; the
checkpoint and its files; the detector's level and message; the probe's result; the gate's
outcome; the stop reason). Kinds without a dedicated rendering get a generic line.
``render_full`` prints every field of an event instead, nothing clipped.

Also here: the one session resolver (``match_session``: an id or a unique prefix) and the
filters of ``keel log`` (``parse_since``, ``filter_events``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, assert_never

from keel.core.errors import UsageError, UserError
from keel.core.events import (
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
from keel.journal._breaks import JournalBreak

MAX_FIELD = 160
KIND_WIDTH = 14
DECISIONS = ("allow", "ask", "deny")
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)", re.ASCII)
_AGE_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def match_session(prefix: str, ids: Iterable[str]) -> str:
    """The one id in ``ids`` that is ``prefix`` or starts with it; an exact id always wins.

    Every command that takes a session (``show``, ``log``, ``export``, ``diff``, ``rollback``,
    ``checkpoint list``) resolves it with this.

    Raises:
        UserError: no id matches (``journal.session_unknown``) or several do
            (``journal.session_ambiguous``).
        UsageError: ``prefix`` is empty (``usage.session``).
    """
    if not prefix:  # a prefix of every id: never "the only session" by accident
        raise UsageError("the session id is empty", code="usage.session")
    unique = list(dict.fromkeys(ids))
    if prefix in unique:
        return prefix
    matches = [i for i in unique if i.startswith(prefix)]
    if not matches:
        raise UserError(f"no session matches {clip(prefix)!r}", code="journal.session_unknown")
    if len(matches) > 1:
        shown = ", ".join(repr(clip(i)) for i in matches[:5])  # repr escapes controls
        raise UserError(
            f"{clip(prefix)!r} matches {len(matches)} sessions: {shown}",
            code="journal.session_ambiguous",
        )
    return matches[0]


def resolve_session(journal: Journal, prefix: str) -> SessionSummary:
    """The one session of ``journal`` whose id is ``prefix`` or starts with it.

    Raises:
        UserError: no session matches (``journal.session_unknown``) or several do
            (``journal.session_ambiguous``).
        UsageError: ``prefix`` is empty (``usage.session``).
    """
    sessions = {s.session_id: s for s in journal.sessions()}
    return sessions[match_session(prefix, sessions)]


def parse_since(text: str, now: float) -> float:
    """The instant ``--since TEXT`` names, as a Unix time.

    ``TEXT`` is an age (``90s``, ``30m``, ``2h``, ``1d``, ``1w``: that long before ``now``) or
    an ISO 8601 date or time (``2024-05-01``, ``2024-05-01T10:30``), UTC unless it carries
    an offset, as every time keel prints is UTC.

    Raises:
        UsageError: ``TEXT`` is neither (``usage.since``).
    """
    spec = text.strip()
    age = _AGE.fullmatch(spec.lower())
    if age:
        return now - float(age.group(1)) * _AGE_UNITS[age.group(2)]
    try:
        moment = datetime.fromisoformat(spec)
    except ValueError:
        raise UsageError(
            f"--since {clip(text)!r} is neither an age (30m, 2h, 1d) nor an ISO date or time "
            "(2024-05-01, 2024-05-01T10:30)",
            code="usage.since",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def decision_of(event: Event) -> str | None:
    """The verdict of a ``decision`` event (``allow``, ``ask``, ``deny``); None for others."""
    payload = event.payload
    return payload.decision if isinstance(payload, DecisionPayload) else None


def filter_events(
    events: Iterable[Event],
    *,
    since: float | None = None,
    decisions: Collection[str] | None = None,
) -> Iterator[Event]:
    """The events at or after ``since`` and, with ``decisions``, only decisions among them."""
    for event in events:
        if since is not None and event.ts < since:
            continue
        if decisions is not None and decision_of(event) not in decisions:
            continue
        yield event


def active_since(sessions: Iterable[SessionSummary], since: float) -> list[SessionSummary]:
    """The sessions with an event at or after ``since``."""
    return [s for s in sessions if s.last_ts >= since]


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
        case DataPayload() if event.kind in ("model.request", "model.response"):
            return describe_model_call(event.kind, payload.data)
        case DataPayload() if event.kind == "judgement":
            return describe_judgement(payload.data)
        case DataPayload():
            return _compact(payload.data) if payload.data else ""
        case _:
            assert_never(payload)


def render_line(event: Event, *, session: bool = False) -> str:
    """One timeline line: time, seq, kind and :func:`describe`.

    With ``session`` the line also carries the date and the session id (for lines from
    several sessions).
    """
    when = format_time(event.ts, date=session)
    who = f"  {shown_id(event.session_id)}" if session else ""
    head = f"{when}{who}  #{event.seq:<5} {event.kind:<{KIND_WIDTH}}"
    return f"{head} {clip(describe(event))}".rstrip()


def render_full(event: Event) -> str:
    """Every field of ``event``, one per line, nothing clipped; ends with a newline.

    Payload fields are listed as ``payload.NAME``; a text with several lines (a tool's
    output) follows on indented lines, and nested values are indented JSON. Control
    characters other than newlines are escaped, as the values come from agents.
    """
    data = event.to_dict()
    payload = data.pop("payload", {}) or {}
    lines = [f"#{event.seq} {event.kind}  {format_time(event.ts, date=True)} UTC"]
    fields = {k: v for k, v in data.items() if k not in ("seq", "kind")}
    fields.update({f"payload.{k}": v for k, v in payload.items()})
    for name, value in fields.items():
        lines.extend(_field_lines(name, value))
    return "\n".join(lines) + "\n"


def _field_lines(name: str, value: Any) -> list[str]:
    if isinstance(value, str):
        text = value
    elif isinstance(value, dict | list) and value:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    parts = [_printable(part) for part in text.split("\n")]
    if len(parts) == 1:
        return [f"  {name}: {parts[0]}"]
    return [f"  {name}:", *(f"    {part}" for part in parts)]


def _printable(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def render_header(summary: SessionSummary) -> list[str]:
    """The lines above a session's timeline."""
    return [
        f"session {shown_id(summary.session_id)}  agent {shown_id(summary.agent)}  "
        f"trace {summary.trace_id}",
        f"{summary.events} events, {format_time(summary.first_ts, date=True)} .. "
        f"{format_time(summary.last_ts, date=True)} UTC",
    ]


def render_timeline(summary: SessionSummary, events: Iterable[Event], *, full: bool = False) -> str:
    """The whole timeline of one session as text, ending with a newline.

    With ``full`` each event is :func:`render_full` (every field, nothing clipped), with a
    blank line between events.
    """
    head = "\n".join(render_header(summary)) + "\n\n"
    if full:
        return head + "\n".join(render_full(e) for e in events)
    return head + "".join(render_line(e) + "\n" for e in events)


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


def render_problems(
    problems: Iterable[Problem], events: int, acknowledged: Iterable[JournalBreak] = ()
) -> str:
    """The text ``keel verify`` prints: one line per problem, or a line saying all is well.

    Acknowledged incidents are listed first, marked so, and do not make the journal fail.
    """
    listed, seen = list(problems), list(acknowledged)
    lines = [f"seq {i.seq}: {i.code} (acknowledged): {i.describe()}" for i in seen]
    also = f"; {len(seen)} acknowledged incident(s) listed above" if seen else ""
    if not listed:
        lines.append(f"journal intact: {events} events, {HASH_ALGORITHM} chain verified{also}")
        return "\n".join(lines) + "\n"
    lines.extend(f"seq {p.seq}: {p.code}: {p.message}" for p in listed)
    lines.append(f"journal NOT intact: {len(listed)} problem(s) in {events} events{also}")
    return "\n".join(lines) + "\n"


def describe_judgement(data: dict[str, Any]) -> str:
    """The model judge's answer on one line: the verdict, its status, why it was asked."""
    why = ",".join(str(t) for t in data.get("triggers") or []) or "?"
    where = f"after step {data.get('step', '?')} ({why})"
    status = data.get("status", "?")
    verdict = data.get("verdict")
    if isinstance(verdict, dict):
        cached = ", cached" if data.get("cached") else ""
        found = f"{verdict.get('category', '?')} {float(verdict.get('confidence') or 0):.2f}"
        return f"{found} {status}{cached} {where}"
    reason = data.get("reason") or data.get("message") or data.get("error") or ""
    return f"{status} {where}: {reason}".rstrip(": ")


def describe_model_call(kind: str, data: dict[str, Any]) -> str:
    """A model call on one line: the model, what was asked or answered, tokens, cost, time."""
    model = data.get("model", "?")
    if kind == "model.request":
        refused = data.get("refused")
        used = data.get("templates") or []
        templates = ", ".join(f"{t.get('id')}@{t.get('version')}" for t in used)
        text = f"{model}: {len(data.get('messages') or [])} message(s)"
        text += f", {len(data.get('tools') or [])} tool(s)" if data.get("tools") else ""
        text += f", templates {templates}" if templates else ""
        text += f", {str(data.get('request_hash', ''))[:19]}"
        return f"{text}; REFUSED: {refused.get('message')}" if refused else text
    error = data.get("error")
    usage = data.get("usage") or {}
    cost = data.get("cost_usd")
    tail = f"{usage.get('input_tokens', 0)}+{usage.get('output_tokens', 0)} tokens"
    tail += f", ${cost:.4f}" if isinstance(cost, int | float) else ""
    tail += f", {data.get('latency_ms', 0):.0f} ms, attempt(s) {data.get('attempts', 1)}"
    if error:
        return f"{model}: FAILED {error.get('code')}: {error.get('message')} ({tail})"
    calls = ", ".join(
        f"{c.get('name')}({c.get('arguments', '')})" for c in data.get("tool_calls") or []
    )
    said = calls or _compact(data.get("content") or "")
    return f"{model}: {data.get('finish_reason')} ({tail}): {said}"
