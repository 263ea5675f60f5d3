"""HTTP probes: HEAD and GET to allowlisted hosts only, with a timeout; off by default.

They run on the host (the sandbox has no network). The host must match a glob in keel.toml
``[probes] http_allow``; redirects are reported, not followed; bodies are capped.
"""

from __future__ import annotations

import fnmatch
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from keel.probes._fs import ProbeContext
from keel.probes._result import Failure

BODY_CAP = 64 * 1024
_HEADERS = ("content-type", "content-length", "location", "server", "etag", "last-modified")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _check(ctx: ProbeContext, url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Failure("http.bad_url", f"{url!r} is not an http(s) URL")
    if not ctx.http_allow:
        raise Failure("http.disabled", "http probes are off; allow hosts in [probes] http_allow")
    host = parts.hostname.lower()
    if not any(fnmatch.fnmatchcase(host, glob.lower()) for glob in ctx.http_allow):
        raise Failure("http.not_allowed", f"host {host!r} is not in [probes] http_allow")


def _request(ctx: ProbeContext, url: str, method: str) -> dict[str, Any]:
    _check(ctx, url)
    deadline = time.monotonic() + max(0.5, min(ctx.timeout, 30.0))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    request = urllib.request.Request(url, method=method, headers={"User-Agent": "keel-probe"})
    try:
        response = opener.open(request, timeout=max(0.5, min(ctx.timeout, 30.0)))
    except urllib.error.HTTPError as exc:
        response = exc
    except TimeoutError as exc:
        raise Failure("http.timeout", f"{url} did not answer in time") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Failure("http.unreachable", f"{url}: {reason}") from exc
    with response:
        headers = {k.lower(): v for k, v in response.headers.items() if k.lower() in _HEADERS}
        result: dict[str, Any] = {"status": response.status, "headers": headers}
        if method == "GET":
            body = _read_body(response, deadline)
            if len(body) > BODY_CAP:
                ctx.note(f"the body was cut at {BODY_CAP} bytes")
            result["body"] = body[:BODY_CAP].decode("utf-8", "replace")
    return result


def _read_body(response: Any, deadline: float) -> bytes:
    """At most ``BODY_CAP + 1`` bytes, and no later than ``deadline`` (a slow drip is cut)."""
    chunks: list[bytes] = []
    size = 0
    while size <= BODY_CAP:
        if time.monotonic() > deadline:
            raise Failure("http.timeout", "the body did not arrive in time")
        chunk = getattr(response, "read1", response.read)(min(16384, BODY_CAP + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def head(ctx: ProbeContext, url: str) -> dict[str, Any]:
    """HEAD ``url``: status and a few headers."""
    return _request(ctx, url, "HEAD")


def get(ctx: ProbeContext, url: str) -> dict[str, Any]:
    """GET ``url``: status, a few headers and the body (first 64 KiB, as text)."""
    return _request(ctx, url, "GET")
