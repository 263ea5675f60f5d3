"""The model seam: a ``Model`` answers one :class:`ModelRequest` with one :class:`ModelResponse`.

A backend does only the translation: keel's request to its API, the API's answer (or error)
back. It raises :class:`keel.core.errors.ModelError` for every failure, with ``retryable`` set for
those worth another attempt (429, 5xx, connection errors, timeouts). Retries, budgets, token
and cost accounting and the journal are done once, for every backend, by
:class:`keel.models.ModelClient`. Test doubles are in :mod:`keel.models.testing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from keel.models._types import ModelRequest, ModelResponse

Provider = Literal["openai", "anthropic", "local", "script", "replay", "function"]
StructuredMode = Literal["json_schema", "json_object", "off"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What a model is, for the journal and for callers that adapt to it."""

    name: str
    """The spec it was opened with: ``openai:gpt-4.1-mini``, ``local``, ``script:FILE``."""
    provider: Provider
    model: str
    """The model name sent to the API (or the file of a local or scripted model)."""
    endpoint: str | None = None
    """The API's base URL, without credentials or query (None in process)."""
    supports_tools: bool = True
    structured: StructuredMode = "json_schema"
    """How structured output is asked for: OpenAI's ``json_schema``, llama.cpp's
    ``json_object`` with a schema, or ``off`` (the schema is only described in the prompt)."""
    free: bool = False
    """True when calls cost nothing (in-process and scripted models)."""


class Model(Protocol):
    """A chat model: one request in, one response out.

    A backend holding connections also has ``close()``; :meth:`ModelClient.close` calls it.
    """

    @property
    def info(self) -> ModelInfo:
        """Its name, provider, endpoint and abilities."""
        ...

    def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """Answer ``request`` within ``timeout`` seconds, or raise ``ModelError``."""
        ...
