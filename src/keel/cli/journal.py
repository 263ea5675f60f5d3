"""Journal commands: ``keel log``, ``show``, ``verify``, ``export`` and ``journal migrate``.

``--json`` prints one object: ``log`` ``{"sessions": [...]}`` when it lists sessions, else
``{"session": {...} | null, "events": [...]}`` (as ``show``); ``verify`` the report
(``{"ok", "events", "problems", "acknowledged"}``, and ``"acknowledged_now"`` with
``--acknowledge``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer

from keel.cli._common import (
    DECISION_COLORS,
    HELP_OPTIONS,
    JsonOpt,
    WorkspaceOpt,
    color_enabled,
    echo,
    examples,
    fail,
    one_line,
    paint,
    print_json,
    read_only_journal,
    utf8_text,
    workspace_root,
)
from keel.core.errors import JournalError, KeelError, UsageError, UserError
from keel.core.events import Event
from keel.journal import acknowledge_journal, journal_location, verify_journal

T = TypeVar("T")

SessionOpt = Annotated[
    str | None, typer.Option("--session", "-s", help="A session id or a unique prefix of one.")
]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", "-n", min=1, help="Only the most recent N entries.")
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only what happened since: an age (30m, 2h, 1d) or an ISO date or time "
        "(2024-05-01, 2024-05-01T10:30; UTC unless it has an offset).",
    ),
]
DecisionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--decision",
        "-d",
        help="Only decision events with this verdict: allow, ask or deny (repeatable, or "
        "comma-separated). Without --session: across every session.",
    ),
]


def _last(items: Iterable[T], limit: int | None) -> list[T]:
    if limit is None:
        return list(items)
    return list(collections.deque(items, maxlen=limit))


def _decisions(values: list[str] | None) -> set[str] | None:
    from keel.journal.timeline import DECISIONS

    if not values:
        return None
    chosen = {v.strip().lower() for item in values for v in item.split(",")}
    unknown = sorted(chosen - set(DECISIONS))
    if unknown:
        shown = ", ".join(repr(one_line(u, 80)) for u in unknown)
        raise UsageError(f"--decision takes allow, ask or deny, not {shown}", code="usage.decision")
    return chosen


def _echo_events(events: Iterable[Event], *, session: bool) -> None:
    """Timeline lines, each decision in its colour on a terminal."""
    from keel.journal.timeline import decision_of, render_line

    color = color_enabled(sys.stdout)
    for event in events:
        style = DECISION_COLORS.get(decision_of(event) or "")
        echo(paint(render_line(event, session=session), style, color))


def _log(
    root: Path,
    session: str | None,
    as_json: bool,
    limit: int | None,
    since_text: str | None = None,
    decision: list[str] | None = None,
) -> None:
    from keel.journal.timeline import (
        active_since,
        filter_events,
        parse_since,
        render_sessions,
        resolve_session,
    )

    since = parse_since(since_text, time.time()) if since_text is not None else None
    decisions = _decisions(decision)
    with read_only_journal(root) as journal:
        if session is None and decisions is None:
            sessions = journal.sessions()
            sessions = _last(sessions if since is None else active_since(sessions, since), limit)
            if as_json:
                print_json({"sessions": [s.to_dict() for s in sessions]})
            elif not sessions:
                what = "since then" if since is not None else f"yet ({journal_location(root)})"
                typer.echo(f"nothing in the journal {what}")
            else:
                typer.echo(render_sessions(sessions), nl=False)
            return
        summary = resolve_session(journal, session) if session is not None else None
        kinds = ["decision"] if decisions is not None else None
        found = journal.events(session_id=summary.session_id if summary else None, kinds=kinds)
        events = _last(filter_events(found, since=since, decisions=decisions), limit)
        if as_json:
            print_json(
                {
                    "session": summary.to_dict() if summary else None,
                    "events": [e.to_dict() for e in events],
                }
            )
            return
        _echo_events(events, session=summary is None)


def _latest_session(journal: Any) -> str:
    """The session with the most recent event (keel's own, ``is_own_session``, left out).

    Raises:
        UserError: the journal has no session (``journal.empty``).
    """
    from keel.core.events import is_own_session

    sessions = [s for s in journal.sessions() if not is_own_session(s.session_id)]
    if not sessions:
        raise UserError("nothing in the journal yet: no session to show", code="journal.empty")
    return max(sessions, key=lambda s: s.last_ts).session_id


FOLLOW_INTERVAL = 0.5
"""Seconds between two looks at the journal under ``keel log --follow``."""


def _follow(
    root: Path,
    session: str | None,
    as_json: bool,
    since_text: str | None,
    decision: list[str] | None,
    limit: int | None,
) -> None:
    """Print the matching events, then each new one as it is journaled, until interrupted.

    ``--json`` prints one event object a line (JSON Lines). The journal is opened afresh for
    every look, so a journal made after the start (the first hook call) is found too.
    """
    from keel.journal.timeline import filter_events, parse_since, resolve_session

    since = parse_since(since_text, time.time()) if since_text is not None else None
    decisions = _decisions(decision)
    kinds = ["decision"] if decisions is not None else None
    session_id: str | None = None
    last_seq, first = 0, True
    try:
        while True:
            with read_only_journal(root) as journal:
                if session is not None and session_id is None:
                    session_id = resolve_session(journal, session).session_id
                found = journal.events(session_id=session_id, kinds=kinds, after_seq=last_seq)
                events = list(filter_events(found, since=since, decisions=decisions))
            if first:
                events, first = _last(events, limit), False
            for event in events:
                if as_json:
                    sys.stdout.write(json.dumps(event.to_dict(), default=str) + "\n")
                else:
                    _echo_events([event], session=session_id is None)
                last_seq = max(last_seq, event.seq)
            sys.stdout.flush()
            time.sleep(FOLLOW_INTERVAL)
    except KeyboardInterrupt:
        return


def _show(root: Path, session: str | None, as_json: bool, full: bool = False) -> None:
    from keel.journal.timeline import render_full, render_header, resolve_session

    with read_only_journal(root) as journal:
        summary = resolve_session(
            journal, session if session is not None else _latest_session(journal)
        )
        events = list(journal.events(session_id=summary.session_id))
        if as_json:
            print_json({"session": summary.to_dict(), "events": [e.to_dict() for e in events]})
            return
        typer.echo("\n".join(render_header(summary)) + "\n")
        if not full:
            _echo_events(events, session=False)
            return
        from keel.journal.timeline import decision_of

        color = color_enabled(sys.stdout)
        for i, event in enumerate(events):
            head, _, rest = render_full(event).partition("\n")
            style = DECISION_COLORS.get(decision_of(event) or "")
            echo(("\n" if i else "") + paint(head, style, color) + "\n" + rest, nl=False)


_INCIDENT_CODES = ("journal.break", "journal.head_unrecorded")


def _verify(
    root: Path, as_json: bool, acknowledge: bool = False, reason: str | None = None
) -> None:
    from keel.journal.timeline import render_problems

    report = verify_journal(root)
    now = []
    if acknowledge:
        from keel.core.stop import current_user

        why = utf8_text(reason) if reason else None
        now = acknowledge_journal(root, report, why, current_user())
        if now:
            report = verify_journal(root)
    if as_json:
        data = report.to_dict()
        if acknowledge:
            data["acknowledged_now"] = [i.to_dict() for i in now]
        print_json(data)
    else:
        typer.echo(render_problems(report.problems, report.events, report.acknowledged), nl=False)
        if acknowledge:
            done = ", ".join(f"seq {i.seq} ({i.code})" for i in now)
            typer.echo(f"acknowledged: {done}" if now else "nothing to acknowledge", err=True)
        elif any(p.code in _INCIDENT_CODES for p in report.problems):
            typer.echo(
                'seen them? `keel verify --acknowledge --reason "..."` records that you have; '
                "verify then passes until the next one",
                err=True,
            )
    if not report.ok:
        raise typer.Exit(1)


def _export(
    root: Path,
    fmt: Literal["jsonl", "otlp-json"],
    session: str | None,
    output: Path | None,
    include_arguments: bool,
) -> None:
    from keel.journal.export import write_export
    from keel.journal.timeline import resolve_session

    with read_only_journal(root) as journal:
        session_id = resolve_session(journal, session).session_id if session is not None else None
        events = journal.events(session_id=session_id)
        if output is None:
            write_export(events, fmt, sys.stdout, include_arguments=include_arguments)
            return
        # A regular file is written beside and renamed, so a failed export leaves no half file;
        # anything else (/dev/stdout, a FIFO) is written in place.
        regular = not output.exists() or output.is_file()
        target = output.with_name(f".{output.name}.{os.getpid()}.tmp") if regular else output
        try:
            try:
                with target.open("w", encoding="utf-8") as out:
                    count = write_export(events, fmt, out, include_arguments=include_arguments)
                if regular:
                    os.replace(target, output)
            finally:
                if regular:
                    with contextlib.suppress(OSError):
                        target.unlink()
        except OSError as exc:
            raise JournalError(
                f"cannot write {output}: {exc.strerror or exc}", code="journal.export_write"
            ) from exc
    typer.echo(f"wrote {count} events to {output}", err=True)


def _send(root: Path, url: str, session: str | None, include_arguments: bool) -> None:
    """``keel export --otlp URL``: the sessions' spans to an OTLP/HTTP receiver, now."""
    from keel.core.schema import otlp_endpoint
    from keel.journal.otlp import OtlpTarget, send_events
    from keel.journal.timeline import resolve_session

    try:
        endpoint = str(otlp_endpoint(url, "--otlp"))
    except ValueError as exc:
        raise UsageError(f"--otlp: {exc}", code="usage.otlp") from exc
    from keel.core.configview import config_view

    timeout = config_view(root).export.timeout_seconds
    target = OtlpTarget.resolve(
        endpoint, os.environ, timeout=timeout, include_arguments=include_arguments
    )
    with read_only_journal(root) as journal:
        session_id = resolve_session(journal, session).session_id if session is not None else None
        report = send_events(journal.events(session_id=session_id), target)
    for failure in report.failures:
        typer.echo(f"keel export: not sent: {failure}", err=True)
    if report.failures:
        raise typer.Exit(1)
    typer.echo(f"sent {report.spans} spans of {report.sessions} session(s) to {target.shown()}")


def _migrate(
    root: Path, url: str, name: str | None, as_json: bool, timeout: float | None = None
) -> None:
    from keel.journal import migrate_journal

    report = migrate_journal(root, url, workspace=name, timeout=timeout)
    if as_json:
        print_json(report.to_dict())
    else:
        typer.echo(f"copied {report.events} events (seq 1..{report.last_seq}) to {report.target}")
        if report.source_problems:
            typer.echo(
                f"the SQLite journal had {len(report.source_problems)} problem(s) before the "
                "copy (`keel verify` lists them): the copy keeps them as evidence",
                err=True,
            )
        for problem in report.target_problems:
            typer.echo(f"seq {problem.seq}: {problem.code}: {problem.message}")
        if report.ok:
            typer.echo(f"the copy verifies; {report.source} was left as it was")
            typer.echo(
                f'to use it, in keel.toml: [journal] url = "{url}"'
                + ("" if name is None else f', workspace = "{name}"'),
                err=True,
            )
    if not report.ok:
        raise typer.Exit(1)


def _register_storage(app: typer.Typer) -> None:
    """``keel journal migrate``: the journal's storage."""
    sub = typer.Typer(
        name="journal",
        help="The journal's storage: copy a workspace's SQLite journal into PostgreSQL.",
        no_args_is_help=True,
        context_settings=HELP_OPTIONS,
    )

    @sub.command(
        "migrate",
        epilog=examples(
            "PGPASSWORD=... keel journal migrate --to postgresql://keel@db.internal:5432/keel",
            "keel journal migrate --to postgresql://keel@127.0.0.1/keel --name acme-api --json",
        ),
    )
    def migrate_cmd(
        ctx: typer.Context,
        to: Annotated[
            str,
            typer.Option(
                "--to",
                help="postgresql://USER@HOST:PORT/DATABASE; the password comes from "
                "PGPASSWORD (or [journal] password_env), never from the URL.",
            ),
        ],
        name: Annotated[
            str | None,
            typer.Option(
                "--name",
                help="The workspace's name in the database (default: [journal] workspace, "
                "else HOST:/real/path).",
            ),
        ] = None,
        as_json: JsonOpt = False,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """Copy this workspace's SQLite journal, its keyed chain as it is, into PostgreSQL.

        The events keep their seq and hashes, with the request outcomes and session states,
        in one transaction into a workspace of the database that holds no events yet; the
        copy is then verified (exit 1 if it does not verify). .keel/journal.db is only read.
        """
        try:
            _migrate(workspace_root(ctx, workspace), to, name, as_json)
        except KeelError as err:
            fail(err, as_json=as_json)

    app.add_typer(sub, name="journal")


def register(app: typer.Typer) -> None:
    """Add ``log``, ``show``, ``verify``, ``export`` and ``journal migrate`` to ``app``."""
    _register_storage(app)

    @app.command(
        "log",
        epilog=examples(
            "keel log                          # the sessions, oldest first",
            "keel log --since 2h               # sessions active in the last two hours",
            "keel log -s 3f2a --decision deny  # what keel denied in one session",
            "keel log --decision deny,ask --since 2024-05-01 --json",
            "keel log --follow --decision deny  # each denial as it happens",
        ),
    )
    def log_cmd(
        ctx: typer.Context,
        session: SessionOpt = None,
        since: SinceOpt = None,
        decision: DecisionOpt = None,
        as_json: JsonOpt = False,
        limit: LimitOpt = None,
        follow: Annotated[
            bool,
            typer.Option(
                "--follow",
                "-f",
                help="Print events as they are journaled (all sessions, or --session's), "
                "until Ctrl-C.",
            ),
        ] = False,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """List the sessions in the journal, or events: one session's, or decisions.

        --json prints {"sessions": [...]} for sessions, {"session": ..., "events": [...]}
        for events ("session" is null across sessions); with --follow, one event object a
        line (JSON Lines).
        """
        try:
            root = workspace_root(ctx, workspace)
            if follow:
                _follow(root, session, as_json, since, decision, limit)
            else:
                _log(root, session, as_json, limit, since, decision)
        except KeelError as err:
            fail(err, as_json=as_json)

    @app.command(
        "show",
        epilog=examples(
            "keel show                 # the latest session",
            "keel show 3f2a            # the timeline of the session whose id starts 3f2a",
            "keel show 3f2a --full     # every field of every event, nothing cut",
            "keel show 3f2a --json",
        ),
    )
    def show_cmd(
        ctx: typer.Context,
        session: Annotated[
            str | None,
            typer.Argument(help="A session id or a unique prefix of one (default: the latest)."),
        ] = None,
        full: Annotated[
            bool,
            typer.Option("--full", help="Every field of every event, one per line, not cut."),
        ] = False,
        as_json: JsonOpt = False,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """Show the timeline of one session: calls, decisions, checkpoints, guidance.

        --json prints {"session": {...}, "events": [...]}, every field of every event.
        """
        try:
            _show(workspace_root(ctx, workspace), session, as_json, full)
        except KeelError as err:
            fail(err, as_json=as_json)

    @app.command(
        "verify",
        epilog=examples(
            "keel verify",
            "keel verify --json",
            'keel verify --acknowledge --reason "restored from backup"  # seen the break',
        ),
    )
    def verify_cmd(
        ctx: typer.Context,
        acknowledge: Annotated[
            bool,
            typer.Option(
                "--acknowledge",
                help="Record (journaled, keyed, with your name) that you have seen the breaks "
                "and unrecorded heads listed; they stay listed but no longer fail. A later "
                "one fails again.",
            ),
        ] = False,
        reason: Annotated[
            str | None,
            typer.Option("--reason", help="With --acknowledge: why, kept with it."),
        ] = None,
        as_json: JsonOpt = False,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """Check the journal's keyed chain, its recorded head, the file and its incidents.

        Exits 1 naming each problem: a broken or unkeyed link, a head that disagrees with (or
        is missing from) the record kept outside the workspace, damage SQLite's integrity
        check finds, and every break or unrecorded head not acknowledged yet.

        Read-only without --acknowledge: a broken journal is reported and left where it is
        (the next decision moves it aside and records the break, which verify then keeps
        reporting until you acknowledge it).
        """
        try:
            if reason is not None and not acknowledge:
                raise UsageError("--reason goes with --acknowledge", code="usage.reason")
            _verify(workspace_root(ctx, workspace), as_json, acknowledge, reason)
        except KeelError as err:
            fail(err, as_json=as_json)

    @app.command(
        "export",
        epilog=examples(
            "keel export > journal.jsonl",
            "keel export --format otlp-json --session 3f2a -o trace.json",
            "keel export --otlp http://127.0.0.1:4318/v1/traces 3f2a",
        ),
    )
    def export_cmd(
        ctx: typer.Context,
        session_arg: Annotated[
            str | None,
            typer.Argument(
                metavar="[SESSION]", help="The session (as --session); default: every one."
            ),
        ] = None,
        fmt: Annotated[
            Literal["jsonl", "otlp-json"],
            typer.Option("--format", "-f", help="jsonl (one event a line) or otlp-json."),
        ] = "jsonl",
        session: SessionOpt = None,
        output: Annotated[
            Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
        ] = None,
        include_arguments: Annotated[
            bool,
            typer.Option(
                "--include-arguments",
                help="otlp-json and --otlp: add tool arguments (may hold secrets).",
            ),
        ] = False,
        otlp: Annotated[
            str | None,
            typer.Option(
                "--otlp",
                metavar="URL",
                help="Send the spans to this OTLP/HTTP traces URL instead (keel install otel; "
                "headers from OTEL_EXPORTER_OTLP_HEADERS).",
            ),
        ] = None,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """Export journal events as JSON Lines or OpenTelemetry OTLP/JSON traces, or send
        them to an OpenTelemetry backend (--otlp)."""
        try:
            if session_arg is not None and session is not None and session_arg != session:
                raise UsageError(
                    "name the session once: SESSION or --session", code="usage.session"
                )
            session = session if session is not None else session_arg
            root = workspace_root(ctx, workspace)
            if otlp is not None:
                if output is not None:
                    raise UsageError("--otlp sends the spans: no --output", code="usage.otlp")
                _send(root, otlp, session, include_arguments)
                return
            _export(root, fmt, session, output, include_arguments)
        except KeelError as err:
            fail(err)
