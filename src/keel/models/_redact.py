"""Keeping secrets out of everything keel writes about model calls.

An API key is read from the environment once, when a backend is opened, and registered here;
:func:`scrub` then replaces it, and anything shaped like a credential (``Bearer ...``,
``sk-...``, ``x-api-key: ...``), in any text or JSON value before it reaches the journal, an
export or an error message. The journal never receives headers at all; this is the second line.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted]"
_SECRETS: set[str] = set()
_PATTERNS = re.compile(
    r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:(?:x-api-key|api[-_]?key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{8,}"
    r"|\bsk-[A-Za-z0-9*_-]{8,}"
)
MIN_SECRET = 8
"""Shorter values are not registered: replacing them would mangle ordinary text."""


def register_secret(value: str | None) -> None:
    """Remember ``value`` (an API key) so :func:`scrub` removes it wherever it appears."""
    if value and len(value) >= MIN_SECRET:
        _SECRETS.add(value)


def scrub_text(text: str) -> str:
    """``text`` with every registered secret and credential-shaped token replaced."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _PATTERNS.sub(_replacement, text)


def _replacement(match: re.Match[str]) -> str:
    whole = match.group(0)
    if match.group(1):  # "Bearer " kept, the token dropped
        return match.group(1) + REDACTED
    cut = re.match(r"(?i)(x-api-key|api[-_]?key|authorization)[\"']?\s*[:=]\s*[\"']?", whole)
    return (cut.group(0) if cut else "") + REDACTED


def scrub(value: Any) -> Any:
    """``value`` (text, or JSON made of dicts, lists and scalars) with secrets replaced."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def safe_url(url: str | None) -> str | None:
    """``url`` without user, password, query or fragment: what may be written down."""
    if not url:
        return url
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "[unparseable url]"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
