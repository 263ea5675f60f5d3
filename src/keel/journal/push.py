"""Live push: the spans of each committed event, sent while a session runs (``[export]``).

``keel hookd`` and ``keel run`` each hold one :class:`LivePush`. It never sits on a decision's
path: it reads what the journal has *committed*, on a thread of its own, after the answer
(``wake``; ``keel run`` also polls), and hands the spans that are done to the SDK's batch thread
(:mod:`keel.journal.otlp`). The mapping is :class:`keel.journal.export.SessionTrace`'s, the one
that ``keel export`` uses: a decision's span goes at once, a call's at its result (or its
deny), a model call's at its response, the session's root at ``session.end``; whatever is still
open when the process stops goes then, as far as the journal says.

``keel hookd`` pushes the sessions whose hook calls it answers (``watch``), ``keel run`` its
run. How far each session was pushed is kept in ``.keel/otlp-push.json`` (the journal's id,
the endpoint, and per session the last ``seq`` and the spans not sent yet), so a daemon that
stops when idle and the next one started by a hook, or ``keel run --resume``, go on where the
last left off: the trace is rebuilt from the journal up to that point and nothing is sent twice.

A batch the backend did not take (after the exporter's retries) is journaled as an ``error``
event (``export.failed``) in each session it held, at most once per ``FAILURE_INTERVAL``
seconds per session, with the number of failures left out meanwhile. Nothing here raises into
its caller or changes a decision: export is advice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from keel.core.errors import KeelError
from keel.core.events import is_own_session
from keel.core.root import state_path
from keel.journal.export import SessionTrace

if TYPE_CHECKING:
    from keel.core.schema import ExportConfig
    from keel.journal import Journal
    from keel.journal.export import Span
    from keel.journal.otlp import FailureHandler, OtlpTarget

CURSOR_NAME = "otlp-push.json"
LOCK_NAME = "otlp-push.lock"
FAILURE_INTERVAL = 300.0
"""Seconds between two ``export.failed`` events of one session (the ones between are counted)."""
MAX_SESSIONS = 64
"""Sessions one process pushes at a time (the least recently active are dropped, and picked up
again from the cursor file when they come back)."""
MAX_CURSORS = 1024
"""Sessions remembered in the cursor file (the oldest are forgotten)."""


class Sender(Protocol):
    """What the push hands spans to: ``keel.journal.otlp.SpanSender``, or a test's recorder."""

    target: OtlpTarget

    def send(self, session_id: str, spans: Iterable[Span]) -> int:
        """Queue ``spans`` of ``session_id``; how many."""
        ...

    def close(self) -> None:
        """Send what is queued and stop."""
        ...


def _sdk_sender(target: OtlpTarget, on_failure: FailureHandler) -> Sender:
    from keel.journal.otlp import SpanSender

    return SpanSender(target, on_failure)


class LivePush:
    """Pushes the committed events of the sessions it watches, from a thread of its own."""

    def __init__(
        self,
        root: Path,
        *,
        environ: Mapping[str, str],
        poll: float | None = None,
        config: Callable[[], ExportConfig | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sender: Callable[[OtlpTarget, FailureHandler], Sender] = _sdk_sender,
        writer: Callable[[], Journal | None] | None = None,
    ) -> None:
        """Push for the workspace ``root``; nothing starts until ``watch`` and ``wake``.

        Args:
            root: the workspace whose journal is read.
            environ: a copy of the environment the headers and proxies come from (see
                :mod:`keel.journal.otlp`: never ``os.environ`` itself in ``keel hookd``).
            poll: also look every ``poll`` seconds, not only when woken.
            config: ``[export]`` now (default: keel.toml through ``config_view``, read at each
                pass, so an edit takes effect without a restart; None or a broken file: off).
            clock: for the rate limit of journaled failures.
            sender: makes what the spans are handed to (the SDK's pipeline).
            writer: the open journal failures are appended to (``keel hookd``'s own: opening
                one reads the environment, which the daemon swaps per request); None, or when
                it gives None: the workspace's, opened for the append.
        """
        self.root = Path(root)
        self._environ = dict(environ)
        self._poll = poll
        self._config = config or self._keel_toml
        self._clock = clock
        self._make_sender = sender
        self._writer = writer
        self._lock = threading.Lock()
        self._watched: dict[str, None] = {}
        self._traces: dict[str, SessionTrace] = {}
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._sender: Sender | None = None
        self._reader: Journal | None = None
        self._reader_inode: int | None = None
        self._failures: dict[str, tuple[float, int]] = {}
        self._failure_lock = threading.Lock()

    # -- the caller's side ------------------------------------------------------------------

    def watch(self, session_id: str) -> None:
        """Push ``session_id`` from now on (from where the cursor file says, or its start).

        keel's own sessions (``keel doctor``'s probes, ``keel exec``'s runs) are not pushed.
        """
        if is_own_session(session_id):
            return
        with self._lock:
            self._watched.pop(session_id, None)
            self._watched[session_id] = None
            while len(self._watched) > MAX_SESSIONS:
                dropped = next(iter(self._watched))
                del self._watched[dropped]
                self._traces.pop(dropped, None)

    def wake(self) -> None:
        """Look for newly committed events now (returns at once; starts the thread)."""
        with self._lock:
            if self._stopping:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="keel-otlp", daemon=True)
                self._thread.start()
        self._wake.set()

    def close(self, wait: float = 30.0) -> None:
        """Push what is left, every open span too, and stop; waits at most ``wait`` seconds."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        if thread is None:
            return
        self._wake.set()
        thread.join(wait)

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait(self._poll)
                self._wake.clear()
                stopping = self._stopping
                self._guarded(final=stopping)
                if stopping:
                    return
        finally:
            self._drop_sender()
            self._close_reader()

    def _guarded(self, *, final: bool) -> None:
        """One pass; nothing it meets leaves this thread (a failure is journaled)."""
        try:
            self._pass(final=final)
        except KeelError as err:
            self._failed(self._sessions(), f"{err.message} [{err.code}]", 0)
        except Exception as exc:  # a bug here must never reach the daemon or the run
            self._failed(self._sessions(), f"{type(exc).__name__}: {exc}", 0)

    def _pass(self, *, final: bool) -> None:
        export = self._config()
        if export is None or not export.otlp_endpoint:
            self._drop_sender()
            return
        sender = self._sender_for(export)
        journal = self._journal()
        if journal is None:
            return
        with _cursor_file(self.root) as cursors:
            cursors.check(str(getattr(journal, "journal_id", None) or ""), sender.target.shown())
            for session in self._sessions():
                trace = self._advance(session, journal, cursors, sender.target.include_arguments)
                if trace is None:
                    continue
                spans = trace.take(final=final)
                if spans:
                    sender.send(session, spans)
                cursors.set(session, trace.seq, trace.unsent())

    def _advance(
        self,
        session: str,
        journal: Journal,
        cursors: _Cursors,
        include_arguments: bool,
    ) -> SessionTrace | None:
        """The session's trace with every committed event added (rebuilt when first seen)."""
        trace = self._traces.get(session)
        after = trace.seq if trace is not None else 0
        if trace is None:
            seq, unsent = cursors.get(session)
            if seq:  # another process (or an earlier one) pushed up to seq: rebuild silently
                for event in journal.events(session_id=session):
                    if event.seq > seq:
                        break
                    trace = trace or SessionTrace(event, include_arguments)
                    trace.add(event)
                if trace is not None:
                    trace.settle(unsent)
                after = seq
        for event in journal.events(session_id=session, after_seq=after):
            trace = trace or SessionTrace(event, include_arguments)
            trace.add(event)
        if trace is not None:
            with self._lock:
                if session in self._watched:
                    self._traces[session] = trace
        return trace

    def _sessions(self) -> list[str]:
        with self._lock:
            return list(self._watched)

    def _sender_for(self, export: ExportConfig) -> Sender:
        from keel.journal.otlp import OtlpTarget

        target = OtlpTarget.resolve(
            str(export.otlp_endpoint),
            self._environ,
            timeout=export.timeout_seconds,
            include_arguments=export.include_arguments,
        )
        if self._sender is not None and self._sender.target == target:
            return self._sender
        self._drop_sender()
        with self._lock:
            self._traces.clear()  # another endpoint: its own cursors
        self._sender = self._make_sender(target, self._failed)
        return self._sender

    def _drop_sender(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            with contextlib.suppress(Exception):
                sender.close()

    def _journal(self) -> Journal | None:
        """A read-only connection of this thread, reopened when journal.db was replaced."""
        from keel.journal import journal_path, read_journal

        try:
            inode: int | None = journal_path(self.root).stat().st_ino
        except OSError:
            inode = None  # no file yet, or a journal that is no file
        if self._reader is None or inode != self._reader_inode:
            self._close_reader()
            try:
                self._reader = read_journal(self.root)
            except KeelError:
                return None  # nothing journaled yet: the next pass looks again
            self._reader_inode = inode
            with self._lock:
                self._traces.clear()
        return self._reader

    def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(Exception):
                reader.close()

    def _keel_toml(self) -> ExportConfig | None:
        from keel.core.configview import config_view

        try:
            return config_view(self.root).export
        except KeelError:  # a broken keel.toml: the hook fails closed on it; nothing to push
            return None

    # -- failures ---------------------------------------------------------------------------

    def _failed(self, sessions: list[str], why: str, spans: int) -> None:
        """Journal that ``spans`` of ``sessions`` were not sent, at most once per interval."""
        now = self._clock()
        due: list[tuple[str, int]] = []
        with self._failure_lock:
            for session in sessions:
                last, skipped = self._failures.get(session, (float("-inf"), 0))
                if now - last >= FAILURE_INTERVAL:
                    due.append((session, skipped))
                    self._failures[session] = (now, 0)
                else:
                    self._failures[session] = (last, skipped + 1)
        if not due:
            return
        endpoint = self._sender.target.shown() if self._sender is not None else None
        with contextlib.suppress(Exception):  # an unwritable journal: the hook reports it
            self._journal_failures(due, why, spans, endpoint)

    def _journal_failures(
        self, due: list[tuple[str, int]], why: str, spans: int, endpoint: str | None
    ) -> None:
        from keel.core.events import DataPayload, Event, trace_id_for
        from keel.journal import open_journal

        events = [
            Event(
                "error",
                session,
                DataPayload(
                    {
                        "event": "export.failed",
                        "message": f"traces were not sent: {why}",
                        "endpoint": endpoint,
                        "spans": spans,
                        "suppressed": skipped,
                    }
                ),
                trace_id=trace_id_for(session),
            )
            for session, skipped in due
        ]
        shared = self._writer() if self._writer is not None else None
        if shared is not None:
            shared.append_many(events)
            return
        with open_journal(self.root, timeout=5.0) as journal:
            journal.append_many(events)


class _Cursors:
    """``.keel/otlp-push.json``: per session, the last ``seq`` pushed and the spans not sent."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.changed = False

    def check(self, journal_id: str, endpoint: str) -> None:
        """Start afresh for another journal or endpoint."""
        if self.data.get("journal_id") != journal_id or self.data.get("endpoint") != endpoint:
            self.data = {"journal_id": journal_id, "endpoint": endpoint, "sessions": {}}
            self.changed = True

    def get(self, session: str) -> tuple[int, list[str]]:
        entry = self.data.get("sessions", {}).get(session) or {}
        return int(entry.get("seq") or 0), [str(s) for s in entry.get("unsent") or ()]

    def set(self, session: str, seq: int, unsent: list[str]) -> None:
        sessions: dict[str, Any] = self.data.setdefault("sessions", {})
        entry = {"seq": seq, "unsent": unsent}
        if sessions.get(session) == entry:
            return
        sessions.pop(session, None)
        sessions[session] = entry  # the most recent last: the oldest are forgotten first
        while len(sessions) > MAX_CURSORS:
            del sessions[next(iter(sessions))]
        self.changed = True


@contextlib.contextmanager
def _cursor_file(root: Path) -> Iterator[_Cursors]:
    """The cursors, read and written back under a lock shared by every process of ``root``."""
    from keel.core.files import write_atomic

    path = state_path(root, CURSOR_NAME)
    fd = os.open(state_path(root, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if not isinstance(data, dict):
                data = {}
        except (OSError, ValueError):
            data = {}
        cursors = _Cursors(data)
        yield cursors
        if cursors.changed:
            write_atomic(path, json.dumps(cursors.data, separators=(",", ":")), mode=0o600)
    finally:
        os.close(fd)  # closing releases the lock


def push_session(
    root: Path, export: ExportConfig, session_id: str, *, poll: float = 1.0
) -> LivePush | None:
    """The started live push of one session this process runs (``keel run``), or None.

    None when ``[export] otlp_endpoint`` is unset. It looks every ``poll`` seconds; ``close()``
    it when the session ends (the rest is sent then, within ``timeout_seconds`` or so).
    """
    if not export.otlp_endpoint:
        return None
    push = LivePush(root, environ=dict(os.environ), poll=poll, config=lambda: export)
    push.watch(session_id)
    push.wake()
    return push
