"""Journal commands: ``keel log``, ``keel show``, ``keel verify``, ``keel export``."""

from __future__ import annotations

import collections
import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, fail, print_json, workspace_root
from keel.errors import JournalError, KeelError
from keel.journal import Journal, MemoryJournal, journal_path, read_journal, verify_journal

T = TypeVar("T")

SessionOpt = Annotated[
    str | None, typer.Option("--session", "-s", help="A session id or a unique prefix of one.")
]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", "-n", min=1, help="Only the most recent N entries.")
]


@contextmanager
def _journal(root: Path) -> Iterator[Journal]:
    """The workspace's journal, read-only; an empty one if there is none yet.

    Reading never creates, migrates or recovers anything: a broken journal stays as it is.
    """
    if not journal_path(root).exists():
        yield MemoryJournal()
        return
    with read_journal(root) as journal:
        yield journal


def _last(items: Iterable[T], limit: int | None) -> list[T]:
    if limit is None:
        return list(items)
    return list(collections.deque(items, maxlen=limit))


def _log(root: Path, session: str | None, as_json: bool, limit: int | None) -> None:
    from keel.journal.timeline import render_line, render_sessions, resolve_session

    with _journal(root) as journal:
        if session is None:
            sessions = _last(journal.sessions(), limit)
            if as_json:
                print_json([s.to_dict() for s in sessions])
            elif not sessions:
                typer.echo(f"nothing in the journal yet ({journal_path(root)})")
            else:
                typer.echo(render_sessions(sessions), nl=False)
            return
        summary = resolve_session(journal, session)
        events = _last(journal.events(session_id=summary.session_id), limit)
        if as_json:
            print_json([e.to_dict() for e in events])
        else:
            for event in events:
                typer.echo(render_line(event))


def _show(root: Path, session: str, as_json: bool) -> None:
    from keel.journal.timeline import render_timeline, resolve_session

    with _journal(root) as journal:
        summary = resolve_session(journal, session)
        events = list(journal.events(session_id=summary.session_id))
        if as_json:
            print_json({"session": summary.to_dict(), "events": [e.to_dict() for e in events]})
        else:
            typer.echo(render_timeline(summary, events), nl=False)


def _verify(root: Path, as_json: bool) -> None:
    from keel.journal.timeline import render_problems

    report = verify_journal(root)
    if as_json:
        print_json(report.to_dict())
    else:
        typer.echo(render_problems(report.problems, report.events), nl=False)
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

    with _journal(root) as journal:
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


def register(app: typer.Typer) -> None:
    """Add ``log``, ``show``, ``verify`` and ``export`` to ``app``."""

    @app.command("log")
    def log_cmd(
        ctx: typer.Context,
        session: SessionOpt = None,
        as_json: JsonOpt = False,
        limit: LimitOpt = None,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """List the sessions in the journal, or the events of one session."""
        try:
            _log(workspace_root(ctx, workspace), session, as_json, limit)
        except KeelError as err:
            fail(err, as_json=as_json)

    @app.command("show")
    def show_cmd(
        ctx: typer.Context,
        session: Annotated[str, typer.Argument(help="A session id or a unique prefix of one.")],
        as_json: JsonOpt = False,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """Show the timeline of one session."""
        try:
            _show(workspace_root(ctx, workspace), session, as_json)
        except KeelError as err:
            fail(err, as_json=as_json)

    @app.command("verify")
    def verify_cmd(
        ctx: typer.Context,
        as_json: JsonOpt = False,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """Check the journal's keyed chain, its recorded head and its breaks; exit 1 naming each.

        Read-only: a broken journal is reported and left where it is (the next decision moves
        it aside and records the break, which verify then keeps reporting).
        """
        try:
            _verify(workspace_root(ctx, workspace), as_json)
        except KeelError as err:
            fail(err, as_json=as_json)

    @app.command("export")
    def export_cmd(
        ctx: typer.Context,
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
                "--include-arguments", help="otlp-json: add tool arguments (may hold secrets)."
            ),
        ] = False,
        workspace: WorkspaceOpt = None,
    ) -> None:
        """Export journal events as JSON Lines or OpenTelemetry OTLP/JSON traces."""
        try:
            _export(workspace_root(ctx, workspace), fmt, session, output, include_arguments)
        except KeelError as err:
            fail(err)
