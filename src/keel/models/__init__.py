"""Models: one small seam, real backends, and a client layer that journals every call.

``Model`` (:mod:`keel.models._base`) answers one :class:`ModelRequest` with one
:class:`ModelResponse`; the backends translate to their APIs:

- ``openai:MODEL``: Chat Completions through the ``openai`` SDK, for OpenAI and any
  OpenAI-compatible server (vLLM, llama.cpp's server, Ollama) (``keel install openai``);
- ``anthropic:MODEL``: the Messages API through the ``anthropic`` SDK (``keel install anthropic``);
- ``local``: a small GGUF model in process through llama-cpp-python, offline
  (``keel install local``): for plumbing and replayable demos, not quality;
- ``script:FILE`` and ``replay:SESSION``: the shipped doubles (:mod:`keel.models.testing`).

:class:`ModelClient` wraps any of them with what is done once for all: budgets per session
(refused calls are journaled and never sent), retries with backoff on 429, 5xx, connection
errors and timeouts, token and cost accounting, and a ``model.request`` / ``model.response``
event pair per call in the session's trace. :func:`open_model` and :func:`client_for` build
both from a spec and ``[model]``. Prompts are packaged templates (:func:`load_prompt`).

Nothing here imports a model SDK until a backend that needs it is opened.
"""

from keel.models._base import Model, ModelInfo, Provider, StructuredMode
from keel.models._client import (
    CHARS_PER_TOKEN,
    Budget,
    EventSink,
    ModelClient,
    Prices,
    Retry,
    Spend,
    estimate_tokens,
)
from keel.models._prompts import PromptTemplate, load_prompt
from keel.models._spec import (
    ModelSpec,
    client_for,
    model_environment,
    open_model,
    parse_spec,
    sampling_of,
)
from keel.models._types import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    OutputSchema,
    Sampling,
    TemplateUse,
    Tool,
    Usage,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "Budget",
    "EventSink",
    "Message",
    "Model",
    "ModelClient",
    "ModelInfo",
    "ModelRequest",
    "ModelResponse",
    "ModelSpec",
    "ModelToolCall",
    "OutputSchema",
    "Prices",
    "PromptTemplate",
    "Provider",
    "Retry",
    "Sampling",
    "Spend",
    "StructuredMode",
    "TemplateUse",
    "Tool",
    "Usage",
    "client_for",
    "estimate_tokens",
    "load_prompt",
    "model_environment",
    "open_model",
    "parse_spec",
    "sampling_of",
]
