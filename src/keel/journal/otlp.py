"""Sending traces to an OpenTelemetry backend over OTLP/HTTP (``keel-guard[otel]``).

The spans are :mod:`keel.journal.export`'s, the one mapping of events onto the GenAI semantic
conventions; this module hands them to the official SDK: a ``TracerProvider`` with a
``BatchSpanProcessor`` (its own thread batches them) and the ``OTLPSpanExporter`` of
``opentelemetry-exporter-otlp-proto-http`` (it retries 429, 502-504 and connection errors
until ``timeout_seconds``). Each span keeps the ids the journal gave its event, through the
SDK's ``IdGenerator`` seam, so the same session sent twice names the same spans, and a backend
can be searched by a ``keel show`` id; start and end times are the events'.

``keel hookd`` swaps the environment of each request in and out of ``os.environ``, so what
matters is read from a copy taken when the daemon started (:meth:`OtlpTarget.resolve`: headers
from ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or ``OTEL_EXPORTER_OTLP_HEADERS``, a CA file from
``OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE``, proxies from ``HTTPS_PROXY``/``HTTP_PROXY``/
``NO_PROXY``), and the HTTP session ignores the environment (``requests`` would read the
proxies from it at every request); the SDK reads only its own switches at construction.

A failed batch is reported to ``on_failure`` (with the exporter's last log lines), never
raised: sending is advice, and never changes a decision.

The SDK is imported only here, and only when a target is used: the hook path never loads it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from keel import __version__
from keel.core.errors import RunError
from keel.core.events import Event
from keel.journal.export import SCOPE_NAME, SPAN_KIND_CLIENT, Span, session_traces, unix_nanos

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

FailureHandler = Callable[[list[str], str, int], None]
"""Called with the sessions of a batch that could not be sent, why, and its size in spans."""

MAX_EVENTS_PER_SPAN = 1024
"""Span events kept on one span (a session's root gathers one per prompt, checkpoint...)."""
BATCH_SIZE = 512
QUEUE_SIZE = 8192
SCHEDULE_DELAY_MS = 500


def sdk_missing() -> RunError | None:
    """The error to raise when the OpenTelemetry SDK or its OTLP/HTTP exporter is missing."""
    from importlib.util import find_spec

    wanted = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
    try:
        missing = [name for name in wanted if find_spec(name) is None]
    except ImportError:  # a parent package is missing altogether
        missing = list(wanted)
    if not missing:
        return None
    from keel.core.installed import hint

    return RunError(
        f"pushing traces needs the OpenTelemetry SDK and its OTLP/HTTP exporter "
        f"({', '.join(missing)} not found): {hint('otel')}",
        code="export.not_installed",
    )


def safe_endpoint(url: str) -> str:
    """``url`` without user, password, query or fragment: what may be journaled or shown."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "[unparseable url]"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True, slots=True)
class OtlpTarget:
    """Where and how spans are sent; made once from keel.toml and a copy of the environment."""

    endpoint: str
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 10.0
    include_arguments: bool = False
    proxies: tuple[tuple[str, str], ...] = ()
    certificate: str | None = None

    @classmethod
    def resolve(
        cls,
        endpoint: str,
        environ: Mapping[str, str],
        *,
        timeout: float = 10.0,
        include_arguments: bool = False,
    ) -> OtlpTarget:
        """The target for ``endpoint``, with headers, CA file and proxies from ``environ``.

        Raises:
            RunError: the SDK is not installed (``export.not_installed``), or the headers
                variable is malformed (``export.headers``).
        """
        missing = sdk_missing()
        if missing is not None:
            raise missing
        from opentelemetry.util.re import parse_env_headers

        raw = environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or environ.get(
            "OTEL_EXPORTER_OTLP_HEADERS", ""
        )
        try:
            headers = parse_env_headers(raw, liberal=True)
        except Exception as exc:  # a third-party parser: its failure is the user's variable
            raise RunError(
                f"OTEL_EXPORTER_OTLP_HEADERS cannot be read as name=value,...: {exc}",
                code="export.headers",
            ) from exc
        certificate = environ.get("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE") or environ.get(
            "OTEL_EXPORTER_OTLP_CERTIFICATE"
        )
        return cls(
            endpoint=endpoint,
            headers=tuple(sorted(headers.items())),
            timeout=timeout,
            include_arguments=include_arguments,
            proxies=_proxies(endpoint, environ),
            certificate=certificate or None,
        )

    def shown(self) -> str:
        """The endpoint as it may be shown: no credentials, no query."""
        return safe_endpoint(self.endpoint)


def _proxies(endpoint: str, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The proxies ``requests`` would take from ``environ`` for ``endpoint`` (none if bypassed)."""
    from urllib.parse import urlsplit

    found: dict[str, str] = {}
    for name, value in environ.items():  # lowercase wins, as in urllib
        lower = name.lower()
        if value and lower.endswith("_proxy") and (name == lower or lower not in environ):
            found[lower[: -len("_proxy")]] = value
    host = (urlsplit(endpoint).hostname or "").lower()
    if _bypassed(host, found.pop("no", "")):
        return ()
    return tuple(sorted((k, v) for k, v in found.items() if k in ("http", "https", "all")))


def _bypassed(host: str, no_proxy: str) -> bool:
    """True if ``NO_PROXY`` names ``host``: ``*``, the host, or a domain it is in."""
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        name = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        name = name.strip("[]").lstrip(".")
        if entry == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


class _JournalIds:
    """The SDK's ``IdGenerator`` seam: each span gets the ids its journal event has."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id

    def is_trace_id_random(self) -> bool:
        return False  # derived from the session id (``trace_id_for``), not drawn at random


class _LastLog(logging.Handler):
    """Keeps why the exporter last failed: its final error line and the last refusal."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""
        self.transport = ""
        """The last exception or HTTP error of the exporter's requests (set by its session)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed log call in a dependency: keep what we have
            return
        if record.levelno >= logging.ERROR:
            self.last = message

    def take(self) -> str:
        """The failure as one line (then forgotten)."""
        parts = [p for p in (self.last, self.transport) if p]
        self.last = self.transport = ""
        return "; last error: ".join(parts) or "the exporter gave up"


@dataclass(slots=True)
class SendReport:
    """What one :func:`send_events` did."""

    spans: int = 0
    sessions: int = 0
    failures: list[str] = field(default_factory=list[str])
    """Why batches failed (empty: every batch was accepted)."""


class SpanSender:
    """Spans to one :class:`OtlpTarget`, batched and sent by the SDK's own thread.

    Every method may be called from any thread; ``send`` never blocks on the network.
    """

    def __init__(self, target: OtlpTarget, on_failure: FailureHandler | None = None) -> None:
        """Set up the SDK pipeline for ``target`` (nothing is sent yet).

        Raises:
            RunError: the SDK is not installed (``export.not_installed``).
        """
        missing = sdk_missing()
        if missing is not None:
            raise missing
        import requests
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanLimits, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON

        self.target = target
        self._on_failure = on_failure
        self._sessions: dict[int, str] = {}
        self._lock = threading.Lock()
        self._log = _LastLog()
        logging.getLogger("opentelemetry").addHandler(self._log)  # also keeps stderr quiet
        log = self._log

        class Session(requests.Session):
            """Notes the last refusal (an exception, an HTTP error) for the journal."""

            def request(self, *args: Any, **kwargs: Any) -> requests.Response:
                try:
                    answer = super().request(*args, **kwargs)
                except Exception as exc:
                    log.transport = f"{type(exc).__name__}: {exc}"
                    raise
                if answer.status_code >= 400:
                    log.transport = f"HTTP {answer.status_code} {answer.reason}"
                return answer

        session = Session()
        session.trust_env = False  # see the module: the environment was read into the target
        session.proxies.update(dict(target.proxies))
        exporter = OTLPSpanExporter(
            endpoint=target.endpoint,
            certificate_file=target.certificate,
            headers=dict(target.headers),
            timeout=target.timeout,
            session=session,
        )
        self._ids = _JournalIds()
        self._processor = BatchSpanProcessor(
            _reporting(exporter, self._failed),
            max_queue_size=QUEUE_SIZE,
            schedule_delay_millis=SCHEDULE_DELAY_MS,
            max_export_batch_size=BATCH_SIZE,
            export_timeout_millis=target.timeout * 1000,
        )
        self._provider = TracerProvider(
            sampler=ALWAYS_ON,
            resource=Resource({"service.name": "keel", "service.version": __version__}),
            id_generator=self._ids,  # pyright: ignore[reportArgumentType]
            span_limits=SpanLimits(
                max_attributes=128,
                max_events=MAX_EVENTS_PER_SPAN,
                max_links=0,
                max_span_attributes=128,
                max_event_attributes=64,
                max_link_attributes=0,
                max_attribute_length=SpanLimits.UNSET,
                max_span_attribute_length=SpanLimits.UNSET,
            ),
            shutdown_on_exit=False,
        )
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer(SCOPE_NAME, __version__)

    def send(self, session_id: str, spans: Iterable[Span]) -> int:
        """Queue ``spans`` of ``session_id`` for sending; how many were queued."""
        from opentelemetry import trace
        from opentelemetry.context import Context
        from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
        from opentelemetry.trace.status import Status, StatusCode

        count = 0
        with self._lock:  # the ids are handed to the SDK through _JournalIds, one span at a time
            for span in spans:
                trace_id, span_id = int(span.trace_id, 16), int(span.span_id, 16)
                self._sessions[trace_id] = session_id
                parent = Context()
                if span.parent_span_id:
                    ctx = SpanContext(
                        trace_id,
                        int(span.parent_span_id, 16),
                        is_remote=False,
                        trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    )
                    parent = trace.set_span_in_context(NonRecordingSpan(ctx))
                self._ids.trace_id, self._ids.span_id = trace_id, span_id
                kind = SpanKind.CLIENT if span.kind == SPAN_KIND_CLIENT else SpanKind.INTERNAL
                otel = self._tracer.start_span(
                    span.name,
                    context=parent,
                    kind=kind,
                    attributes=sdk_attributes(span.attrs),
                    start_time=unix_nanos(span.start),
                )
                for event in span.events:
                    otel.add_event(
                        event.name, sdk_attributes(event.attrs), timestamp=unix_nanos(event.ts)
                    )
                if span.error is not None:
                    otel.set_status(Status(StatusCode.ERROR, span.error))
                otel.end(end_time=unix_nanos(max(span.end, span.start)))
                count += 1
        return count

    def flush(self, timeout: float | None = None) -> bool:
        """Send what is queued now; False if that took longer than ``timeout`` seconds."""
        limit = self.target.timeout * 2 if timeout is None else timeout
        return self._processor.force_flush(int(limit * 1000))

    def close(self) -> None:
        """Send what is queued (within the target's timeout, twice over) and stop."""
        try:
            self.flush()
            self._provider.shutdown()
        finally:
            logging.getLogger("opentelemetry").removeHandler(self._log)

    def _failed(self, spans: Sequence[ReadableSpan], why: str) -> None:
        if self._on_failure is None:
            return
        sessions: dict[str, None] = {}
        for span in spans:
            context = span.context
            session = self._sessions.get(context.trace_id) if context is not None else None
            if session is not None:
                sessions[session] = None
        detail = self._log.take() if why == "failed" else why
        with contextlib.suppress(Exception):  # reporting must not fail the SDK's thread
            self._on_failure(list(sessions), detail, len(spans))


def _reporting(
    inner: SpanExporter, failed: Callable[[Sequence[ReadableSpan], str], None]
) -> SpanExporter:
    """``inner``, with a failed batch (a result or an exception) reported to ``failed``.

    The class is made here, not at import: its base is the SDK's, imported only when used.
    """
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Reporting(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            try:
                result = inner.export(spans)
            except Exception as exc:  # the SDK would only log it
                failed(spans, f"{type(exc).__name__}: {exc}")
                return SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                failed(spans, "failed")
            return result

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return Reporting()


def sdk_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as the SDK takes them: ``None`` dropped, lists of one type kept, the rest JSON."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool | int | float | str):
            out[key] = value
        elif isinstance(value, list | tuple):
            items: Sequence[Any] = value
            kinds = {type(v) for v in items}
            if len(kinds) <= 1 and kinds <= {str, bool, int, float}:
                out[key] = tuple(items)
            else:
                out[key] = json.dumps(list(items), sort_keys=True, default=str)
        else:
            out[key] = json.dumps(value, sort_keys=True, default=str)
    return out


def send_events(
    events: Iterable[Event], target: OtlpTarget, *, include_arguments: bool | None = None
) -> SendReport:
    """Send every session in ``events`` to ``target`` now (``keel export --otlp``).

    Every span is sent, finished or not, as far as the journal says; the call returns when
    every batch was answered or the target's timeout ran out.

    Raises:
        RunError: the SDK is not installed (``export.not_installed``).
    """
    report = SendReport()

    def failed(sessions: list[str], why: str, count: int) -> None:
        report.failures.append(f"{count} span(s) of {len(sessions)} session(s): {why}")

    arguments = target.include_arguments if include_arguments is None else include_arguments
    traces = session_traces(events, include_arguments=arguments)
    sender = SpanSender(target, failed)
    try:
        for session_id, trace in traces.items():
            report.spans += sender.send(session_id, trace.take(final=True))
            report.sessions += 1
    finally:
        sender.close()
    return report
