"""From a model spec and ``[model]`` to a backend and its client.

A spec names the backend and the model: ``openai:MODEL``, ``anthropic:MODEL``, ``local`` (or
``local:FILE.gguf``), ``script:FILE`` or ``replay:SESSION``. Where each setting comes from,
first match wins:

- the base URL: the ``base_url`` argument (``--base-url``), ``OPENAI_BASE_URL`` /
  ``ANTHROPIC_BASE_URL``, ``[model] base_url``, the SDK's default;
- the key: the variable ``[model] api_key_env`` names, else ``OPENAI_API_KEY`` /
  ``ANTHROPIC_API_KEY``. An OpenAI-compatible server at a non-default URL may need no key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.core.errors import ModelError, UsageError
from keel.core.schema import MODEL_BACKENDS
from keel.models._base import Model, Provider, StructuredMode
from keel.models._client import Budget, EventSink, ModelClient, Prices, Retry
from keel.models._types import Sampling

if TYPE_CHECKING:
    from keel.core.schema import ModelConfig

BACKENDS = MODEL_BACKENDS  # one list, in keel.core.schema ([judge] model checks it too)
NO_KEY = "keel-no-key"
"""Sent as the key to OpenAI-compatible servers that need none (the SDK insists on one)."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed spec: the backend and what it names (a model, a file, a session)."""

    provider: Provider
    target: str

    def __str__(self) -> str:
        """The spec as written."""
        return f"{self.provider}:{self.target}" if self.target else self.provider


def parse_spec(text: str) -> ModelSpec:
    """Parse a spec: ``openai:M``, ``anthropic:M``, ``local[:FILE]``, ``script:F``, ``replay:S``.

    Raises:
        UsageError: an unknown backend or a missing name (``usage.model``).
    """
    provider, _, target = text.strip().partition(":")
    if provider not in BACKENDS:
        raise UsageError(
            f"unknown model {text!r}: use openai:MODEL, anthropic:MODEL, local, script:FILE "
            f"or replay:SESSION",
            code="usage.model",
        )
    if not target and provider != "local":
        raise UsageError(
            f"{provider}: needs a name after the colon ({provider}:...)", code="usage.model"
        )
    return ModelSpec(provider, target)  # pyright: ignore[reportArgumentType]


REMOTE_ENV_PREFIXES = ("OPENAI_", "ANTHROPIC_")
"""The environment of the remote providers (keel's ``{PROVIDER}_BASE_URL`` and
``{PROVIDER}_API_KEY``, and what their SDKs read besides: organisation, project, headers)."""


def model_environment(environ: Mapping[str, str], key_vars: Iterable[str] = ()) -> dict[str, str]:
    """What a model opened in another process's environment needs of ``environ``.

    The remote providers' variables, and the ``[model] api_key_env`` variables ``key_vars``
    name (those set).
    """
    wanted = set(key_vars)
    return {
        name: value
        for name, value in environ.items()
        if name.startswith(REMOTE_ENV_PREFIXES) or name in wanted
    }


def open_model(
    spec: str | None,
    settings: ModelConfig | None = None,
    *,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    workspace: Path | None = None,
) -> Model:
    """The backend ``spec`` (else ``[model] spec``) names, configured from ``settings``.

    Raises:
        UsageError: no model was named, or the spec is malformed (``usage.model``).
        ModelError: the backend's extra is not installed (``model.not_installed``), the key
            is missing (``model.no_key``), or a script or journal cannot be read.
    """
    env = os.environ if environ is None else environ
    chosen = spec or (settings.spec if settings is not None else None)
    if not chosen:
        raise UsageError(
            "no model: pass --model (openai:MODEL, anthropic:MODEL, local, script:FILE) or set "
            "[model] spec in keel.toml",
            code="usage.model",
        )
    parsed = parse_spec(chosen)
    mode = settings.structured_output if settings is not None else "auto"
    match parsed.provider:
        case "openai" | "anthropic":
            return _remote(parsed, settings, base_url, env, mode)
        case "local":
            from keel.models._local import LocalModel

            path = parsed.target or (settings.local_path if settings is not None else None)
            return LocalModel(
                _resolve(path, workspace) if path else None,
                chat_format=settings.local_chat_format if settings is not None else None,
                context=settings.local_context if settings is not None else 4096,
                threads=settings.local_threads if settings is not None else None,
                structured="off" if mode == "off" else "json_object",
                name=str(parsed),
            )
        case "script":
            from keel.models.testing import ScriptedModel

            return ScriptedModel.from_file(_resolve(parsed.target, workspace), name=str(parsed))
        case "replay":
            return _replay(parsed, workspace)
        case _:  # pragma: no cover - parse_spec admits only the cases above
            raise UsageError(f"unknown model {chosen!r}", code="usage.model")


def _remote(
    spec: ModelSpec,
    settings: ModelConfig | None,
    base_url: str | None,
    env: Mapping[str, str],
    mode: str,
) -> Model:
    upper = spec.provider.upper()
    url = base_url or env.get(f"{upper}_BASE_URL") or (settings.base_url if settings else None)
    key_var = (settings.api_key_env if settings else None) or f"{upper}_API_KEY"
    key = env.get(key_var) or None
    if key is None:
        if spec.provider == "openai" and url:
            key = NO_KEY  # a local OpenAI-compatible server
        else:
            raise ModelError(
                f"{spec}: no API key: set {key_var} (or name another variable in "
                f"[model] api_key_env)",
                code="model.no_key",
            )
    structured: StructuredMode = "json_schema" if mode == "auto" else mode  # pyright: ignore[reportAssignmentType]
    if spec.provider == "openai":
        from keel.models._openai import OpenAIModel

        return OpenAIModel(spec.target, api_key=key, base_url=url, structured=structured,
                           name=str(spec))  # fmt: skip
    from keel.models._anthropic import AnthropicModel

    return AnthropicModel(spec.target, api_key=key, base_url=url, structured=structured,
                          name=str(spec))  # fmt: skip


def _resolve(path: str, workspace: Path | None) -> Path:
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists() or workspace is None:
        return candidate
    return workspace / candidate


def _replay(spec: ModelSpec, workspace: Path | None) -> Model:
    from keel.journal import open_journal
    from keel.journal.timeline import resolve_session
    from keel.models.testing import ReplayModel

    root = workspace or Path.cwd()
    with open_journal(root) as journal:
        try:
            session = resolve_session(journal, spec.target)
        except Exception as exc:
            raise ModelError(f"{spec}: {exc}", code="model.replay") from exc
        kinds = ("model.request", "model.response")
        events = list(journal.events(session_id=session.session_id, kinds=kinds))
    model = ReplayModel.from_events(events, name=str(spec))
    if not model.records:
        raise ModelError(f"{spec}: the session recorded no model calls", code="model.replay")
    return model


def sampling_of(settings: ModelConfig | None) -> Sampling:
    """The sampling settings of ``[model]``."""
    if settings is None:
        return Sampling()
    return Sampling(settings.temperature, settings.max_output_tokens, settings.seed, settings.top_p)


def client_for(
    model: Model,
    settings: ModelConfig | None,
    *,
    session_id: str,
    journal: EventSink | None = None,
    **extra: Any,
) -> ModelClient:
    """A :class:`ModelClient` for ``model`` with ``[model]``'s budget, retries and prices."""
    if settings is None:
        return ModelClient(model, session_id=session_id, journal=journal, **extra)
    prices = None
    if settings.input_price_per_mtok is not None and settings.output_price_per_mtok is not None:
        prices = Prices(settings.input_price_per_mtok, settings.output_price_per_mtok)
    return ModelClient(
        model,
        session_id=session_id,
        journal=journal,
        budget=Budget(settings.max_calls, settings.max_tokens, settings.max_cost_usd),
        retry=Retry(
            max_retries=settings.max_retries,
            backoff_seconds=settings.retry_backoff_seconds,
            timeout_seconds=settings.timeout_seconds,
        ),
        prices=prices,
        **extra,
    )
