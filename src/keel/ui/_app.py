"""The Starlette application of ``keel ui``: the page, its data, its live stream, two writes.

Routes (every one behind :class:`keel.ui._security.Gate`):

- ``GET /``: the single page; ``/static/{name}``: its script, style sheet and icon;
- ``GET /api/meta``: the workspace, keel's version, the write token (``csrf``), the stop;
- ``GET /api/sessions``, ``/api/timeline?session=``, ``/api/evidence?session=``,
  ``/api/diff?checkpoint=``, ``/api/verify``: JSON from ``keel.ui._workspace``;
- ``GET /api/stream[?session=&after=]``: server-sent events: ``overview`` whenever the
  journal's head or the stop changes, and with a session ``items`` (new or updated timeline
  items) as they are journaled;
- ``POST /api/stop`` ``{"reason"}`` and ``POST /api/resume`` ``{"session"}``: ``keel stop``
  and ``keel resume``.

Errors are ``{"error": {"code", "message"}}``: 404 for an unknown session or checkpoint, 400
for other mistakes, 500 when keel failed. Reads run in a worker thread (SQLite and git
block); the journal is polled every ``POLL_INTERVAL`` seconds for the stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from keel.core.errors import KeelError, UsageError, UserError
from keel.ui import _workspace
from keel.ui._security import Gate, Secrets

POLL_INTERVAL = 0.5
"""Seconds between two looks at the journal for a live stream (as ``keel log --follow``)."""
PING_EVERY = 30
"""Polls without news before the stream sends a comment, so idle proxies keep it open."""
STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
NOT_FOUND = ("journal.session_unknown", "workspace.unknown_checkpoint")
MAX_REASON = 500


def build_app(root: Path, guard: Secrets) -> Gate:
    """The ASGI application serving ``root``'s journal, behind the token gate."""
    pages = Pages(root, guard)
    routes = [
        Route("/", pages.index),
        Route("/static/{name}", pages.static),
        Route("/api/meta", pages.meta),
        Route("/api/sessions", pages.read(lambda r: _workspace.sessions(root))),
        Route("/api/timeline", pages.read(lambda r: _workspace.timeline(root, _arg(r, "session")))),
        Route("/api/evidence", pages.read(lambda r: _workspace.evidence(root, _arg(r, "session")))),
        Route(
            "/api/diff",
            pages.read(lambda r: _workspace.checkpoint_diff(root, _arg(r, "checkpoint"))),
        ),
        Route("/api/verify", pages.read(lambda r: _workspace.verify(root))),
        Route("/api/stream", pages.stream),
        Route("/api/stop", pages.stop, methods=["POST"]),
        Route("/api/resume", pages.resume, methods=["POST"]),
    ]
    return Gate(Starlette(routes=routes), guard)


class Pages:
    """The endpoints, bound to one workspace and one server's tokens."""

    def __init__(self, root: Path, guard: Secrets) -> None:
        self.root = root
        self.guard = guard
        here = files("keel.ui").joinpath("static")
        self._static = {name: here.joinpath(name).read_bytes() for name in STATIC}
        self._index = here.joinpath("index.html").read_bytes()

    def index(self, request: Request) -> Response:
        """The page."""
        return Response(self._index, media_type="text/html; charset=utf-8")

    def static(self, request: Request) -> Response:
        """One of the page's files, by name (only those in ``STATIC``)."""
        name = request.path_params["name"]
        if name not in STATIC:
            return _error(UserError(f"no such file: {name[:80]!r}", code="ui.not_found"), 404)
        return Response(self._static[name], media_type=STATIC[name])

    def meta(self, request: Request) -> Response:
        """What the page needs first: the workspace, the version, the write token, the stop."""
        from keel import __version__

        return _json({**_workspace.overview(self.root), "version": __version__,
                      "csrf": self.guard.csrf})  # fmt: skip

    def read(self, fn: Callable[[Request], dict[str, Any]]) -> Callable[[Request], Response]:
        """An endpoint answering ``fn(request)`` as JSON (run in a worker thread)."""

        def endpoint(request: Request) -> Response:
            return _answer(lambda: fn(request))

        return endpoint

    async def stop(self, request: Request) -> Response:
        """``keel stop``, with the reason the page sends."""
        body = await _body(request)
        reason = body.get("reason")
        why = str(reason)[:MAX_REASON].strip() if reason else None
        return await run_in_threadpool(_answer, lambda: _workspace.stop(self.root, why or None))

    async def resume(self, request: Request) -> Response:
        """``keel resume``; with ``{"session": ID}`` the monitor's hold of that session."""
        body = await _body(request)
        session = body.get("session")
        target = str(session) if session else None
        return await run_in_threadpool(_answer, lambda: _workspace.resume(self.root, target))

    async def stream(self, request: Request) -> Response:
        """Server-sent events: ``overview`` on changes, ``items`` for the named session."""
        session = request.query_params.get("session")
        live = None
        if session:
            try:
                after = int(request.query_params.get("after") or 0)
                sid = await run_in_threadpool(_workspace.session_id, self.root, session)
                live = await run_in_threadpool(_workspace.LiveTimeline, self.root, sid, after)
            except KeelError as exc:
                return _failure(exc)
            except ValueError:
                return _error(UsageError("after is not a number", code="usage.after"), 400)
        headers = {"X-Accel-Buffering": "no"}
        return StreamingResponse(
            self._events(live), media_type="text/event-stream", headers=headers
        )

    async def _events(self, live: _workspace.LiveTimeline | None) -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        seen: dict[str, Any] | None = None
        quiet = 0
        while True:
            items = await run_in_threadpool(live.poll) if live is not None else []
            if items:
                yield _event("items", [i.to_dict() for i in items])
            head = await run_in_threadpool(_workspace.overview, self.root)
            if head != seen:
                yield _event("overview", head)
            quiet = 0 if items or head != seen else quiet + 1
            seen = head
            if quiet >= PING_EVERY:
                yield ": ping\n\n"
                quiet = 0
            await anyio.sleep(POLL_INTERVAL)


def _arg(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise UsageError(f"the {name} parameter is missing", code=f"usage.{name}")
    return value


async def _body(request: Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _answer(fn: Callable[[], dict[str, Any]]) -> Response:
    """``fn()`` as JSON; a keel error as ``{"error": ...}`` with its status."""
    try:
        return _json(fn())
    except KeelError as exc:
        return _failure(exc)


def _failure(exc: KeelError) -> Response:
    """A keel error's answer: 404 for what is not there, 400 for a mistake, else 500."""
    if exc.code in NOT_FOUND:
        return _error(exc, 404)
    return _error(exc, 400 if isinstance(exc, UserError) else 500)


def _error(exc: KeelError, status: int) -> Response:
    return _json({"error": exc.to_dict()}, status)


def _json(data: Any, status: int = 200) -> Response:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return Response(text, status_code=status, media_type="application/json")


def _event(name: str, data: Any) -> str:
    """One server-sent event; JSON keeps it on one ``data:`` line."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"
