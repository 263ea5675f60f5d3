"""One translation of the official SDKs' errors into ``ModelError``, for every HTTP backend.

The ``openai`` and ``anthropic`` SDKs share one error tree (``APIStatusError`` with the HTTP
status and body, ``APITimeoutError``, ``APIConnectionError`` and a base error), so the codes,
what is retryable and how a server's message is read are decided here once. Every message
is scrubbed of registered secrets before it leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from keel.core.errors import ModelError
from keel.models._base import ModelInfo
from keel.models._redact import scrub_text

RETRY_STATUSES = frozenset({408, 409, 429})
"""HTTP statuses below 500 worth another attempt."""

T = TypeVar("T")


def call_sdk(
    sdk: Any, base_error: str, info: ModelInfo, timeout: float, send: Callable[[], T]
) -> T:
    """``send()``, with the SDK's errors (``sdk.<base_error>`` and its family) as ``ModelError``.

    Raises:
        ModelError: ``model.auth``, ``model.rate_limited``, ``model.server_error`` or
            ``model.rejected`` for an HTTP status; ``model.timeout``; ``model.connection``;
            ``model.bad_response`` for anything else the SDK raises.
    """
    try:
        return send()
    except sdk.APIStatusError as exc:
        raise status_error(info.name, exc.status_code, server_message(exc), exc) from None
    except sdk.APITimeoutError:
        raise ModelError(
            f"{info.name}: no answer within {timeout:g} s", code="model.timeout", retryable=True
        ) from None
    except sdk.APIConnectionError as exc:
        raise ModelError(
            f"{info.name}: cannot reach {info.endpoint}: {scrub_text(str(exc))}",
            code="model.connection",
            retryable=True,
        ) from None
    except getattr(sdk, base_error) as exc:
        raise ModelError(
            f"{info.name}: {scrub_text(str(exc))}", code="model.bad_response"
        ) from None


def server_message(exc: Any) -> str:
    """The server's own words from an error body (``{"error": {"message"}}`` or its forms)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return str(getattr(exc, "message", "") or exc)


def status_error(name: str, status: int, detail: str, exc: Any) -> ModelError:
    """A ``ModelError`` for an HTTP error status: retryable for 408, 409, 429 and 5xx."""
    retryable = status in RETRY_STATUSES or status >= 500
    if status in (401, 403):
        code, detail = "model.auth", "the API key was refused (check the key's variable)"
    elif status == 429:
        code = "model.rate_limited"
    elif status >= 500:
        code = "model.server_error"
    else:
        code = "model.rejected"
    return ModelError(
        f"{name}: HTTP {status}: {scrub_text(detail)[:500]}",
        code=code,
        retryable=retryable,
        status=status,
        retry_after=_retry_after(exc),
    )


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        return float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None
