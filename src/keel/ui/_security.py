"""The only way into ``keel ui``: the token on every request, and more for the two writes.

The server binds 127.0.0.1 alone, yet any web page the user opens can send requests there,
and any process of the machine can connect. So, on every request (pages, data, the live
stream, static files):

- ``Host`` must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (a DNS-rebinding page names its
  own host);
- the random token of the printed URL must come with it: as ``?token=`` (the first visit),
  the ``X-Keel-Token`` header, or the cookie the first visit sets (``HttpOnly``,
  ``SameSite=Strict``: another site's requests never carry it; named with the port, as
  cookies do not tell ports apart).

The writes (``POST``: stop, resume) also need ``Origin`` to be this server and the
``X-Keel-CSRF`` header to hold this server's second token, which only a page that read
``/api/meta`` with the first one knows (a cross-site page can send a request but cannot read
the answer). Every answer carries a strict Content-Security-Policy (scripts and styles from
this server only, nothing inline, no framing), ``nosniff``, no referrer (the token stays out
of other sites' logs) and ``no-store``. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keel.core.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_PARAM = "token"
TOKEN_HEADER = "x-keel-token"
CSRF_HEADER = "x-keel-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD"})
CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


@dataclass(frozen=True, slots=True)
class Secrets:
    """The two random tokens of one ``keel ui`` server, and the port they belong to."""

    token: str
    """In the printed URL; required on every request."""
    csrf: str
    """Required (in ``X-Keel-CSRF``) on the writes; the page reads it from ``/api/meta``."""
    port: int

    @classmethod
    def new(cls, port: int) -> Secrets:
        """Fresh tokens (256 bits each) for a server on ``port``."""
        return cls(secrets.token_urlsafe(32), secrets.token_urlsafe(32), port)

    @property
    def url(self) -> str:
        """The URL to print and open: the token in it, as Jupyter does."""
        return f"http://127.0.0.1:{self.port}/?{TOKEN_PARAM}={self.token}"

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port, as cookies do not tell ports apart."""
        return f"keel_ui_{self.port}"

    @property
    def hosts(self) -> frozenset[str]:
        """The ``Host`` headers this server answers."""
        return frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request was refused: a stable code and a message (answered with 403)."""

    code: str
    message: str

    def body(self) -> bytes:
        """The JSON answer: ``{"error": {"code", "message"}}``."""
        error = UserError(self.message, code=self.code).to_dict()
        return json.dumps({"error": error}).encode()


def refusal(
    guard: Secrets, method: str, headers: Mapping[str, str], query: Mapping[str, str],
    cookies: Mapping[str, str],
) -> Refusal | None:  # fmt: skip
    """Why this request may not pass (see the module), or None when it may."""
    if headers.get("host", "") not in guard.hosts:
        return Refusal("ui.host", "keel ui answers only to 127.0.0.1 and localhost on its port")
    offered = query.get(TOKEN_PARAM) or headers.get(TOKEN_HEADER) or cookies.get(guard.cookie)
    if not _same(offered, guard.token):
        return Refusal("ui.token", "open keel ui with the URL it printed: the token is missing")
    if method in SAFE_METHODS:
        return None
    if headers.get("origin") not in {f"http://{host}" for host in guard.hosts}:
        return Refusal("ui.origin", "a change must come from keel ui's own page (Origin)")
    if not _same(headers.get(CSRF_HEADER), guard.csrf):
        return Refusal("ui.csrf", "a change must carry keel ui's page token (X-Keel-CSRF)")
    return None


def _same(offered: str | None, expected: str) -> bool:
    if not offered:
        return False
    return hmac.compare_digest(offered.encode("utf-8", "replace"), expected.encode())


class Gate:
    """ASGI middleware: refuses what ``refusal`` refuses; adds the security headers to all."""

    def __init__(self, app: ASGIApp, guard: Secrets) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass, or answer 403; every answer gets the headers (and the cookie, on arrival)."""
        if scope["type"] == "websocket":  # keel ui has none: refused before the app sees it
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        request = Request(scope)
        refused = refusal(
            self.guard, request.method, request.headers, request.query_params, request.cookies
        )
        if refused is not None:
            await self._refuse(refused, send)
            return
        arrived = TOKEN_PARAM in request.query_params
        await self.app(scope, receive, self._sender(send, arrived))

    def _sender(self, send: Send, set_cookie: bool) -> Send:
        extra = list(SECURITY_HEADERS)
        if set_cookie:
            value = f"{self.guard.cookie}={self.guard.token}; Path=/; HttpOnly; SameSite=Strict"
            extra.append((b"set-cookie", value.encode()))

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return sending

    async def _refuse(self, refused: Refusal, send: Send) -> None:
        body = refused.body()
        headers: list[Any] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *SECURITY_HEADERS,
        ]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})
