"""``openai:MODEL``: Chat Completions through the ``openai`` SDK (``keel install openai``).

Works with any OpenAI-compatible server (vLLM, llama.cpp's server, Ollama) through the base
URL. Structured output has a per-backend switch: ``json_schema`` sends OpenAI's
``response_format: {"type": "json_schema", ...}``; ``json_object`` sends llama.cpp's form,
``{"type": "json_object", "schema": ...}`` (its server rejects ``json_schema`` with HTTP 500);
``off`` sends none. The SDK's own retries are off: :class:`keel.models.ModelClient` retries.
"""

from __future__ import annotations

import json
from typing import Any

from keel.core.errors import ModelError
from keel.core.installed import hint
from keel.models._base import ModelInfo, StructuredMode
from keel.models._redact import register_secret, safe_url
from keel.models._sdkerrors import call_sdk
from keel.models._types import Message, ModelRequest, ModelResponse, ModelToolCall, Usage


def _sdk() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ModelError(
            f"the openai backend needs the openai SDK: {hint('openai')}",
            code="model.not_installed",
        ) from exc
    return openai


class OpenAIModel:
    """A model behind an OpenAI-compatible Chat Completions API."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        structured: StructuredMode = "json_schema",
        name: str | None = None,
    ) -> None:
        """Open a client for ``model`` at ``base_url`` (the SDK's default when None).

        Raises:
            ModelError: the ``openai`` SDK is not installed (``model.not_installed``).
        """
        openai = _sdk()
        register_secret(api_key)
        self._openai = openai
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)
        self._info = ModelInfo(
            name=name or f"openai:{model}",
            provider="openai",
            model=model,
            endpoint=safe_url(str(self._client.base_url)),
            structured=structured,
        )

    @property
    def info(self) -> ModelInfo:
        """The model's name, endpoint and abilities."""
        return self._info

    def close(self) -> None:
        """Close the SDK's connections."""
        self._client.close()

    def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """One Chat Completions call."""
        kwargs = chat_kwargs(request, self._info.model, self._info.structured)
        reply = call_sdk(
            self._openai,
            "OpenAIError",
            self._info,
            timeout,
            lambda: self._client.chat.completions.create(**kwargs, timeout=timeout),
        )
        return parse_chat(reply, self._info.name)


def chat_kwargs(request: ModelRequest, model: str, structured: StructuredMode) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments for ``request``: every setting explicit."""
    sampling = request.sampling
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [_message(m) for m in request.messages],
        "temperature": sampling.temperature,
        "max_tokens": sampling.max_tokens,
        "stream": False,
    }
    if sampling.seed is not None:
        kwargs["seed"] = sampling.seed
    if sampling.top_p is not None:
        kwargs["top_p"] = sampling.top_p
    if request.tools:
        kwargs["tools"] = [{"type": "function", "function": t.to_dict()} for t in request.tools]
        if request.tool_choice is not None:
            kwargs["tool_choice"] = _tool_choice(request.tool_choice)
    if request.output is not None and structured == "json_schema":
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.output.name, "schema": dict(request.output.schema)},
        }
    elif request.output is not None and structured == "json_object":
        kwargs["extra_body"] = {
            "response_format": {"type": "json_object", "schema": dict(request.output.schema)}
        }
    return kwargs


def _message(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]  # fmt: skip
    if message.role == "tool":
        data["tool_call_id"] = message.tool_call_id
    return data


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def parse_chat(reply: Any, name: str) -> ModelResponse:
    """A ``ChatCompletion`` (or a llama-cpp-python dict of the same shape) as a response."""
    get = _getter(reply)
    choices = get(reply, "choices") or []
    if not choices:
        raise ModelError(f"{name}: the answer has no choices", code="model.bad_response")
    choice = choices[0]
    message = get(choice, "message")
    if message is None:
        raise ModelError(f"{name}: the answer has no message", code="model.bad_response")
    calls: list[ModelToolCall] = []
    for index, call in enumerate(get(message, "tool_calls") or []):
        function = get(call, "function")
        if function is None:
            continue  # a custom (non-function) tool call: keel offers none
        arguments = get(function, "arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            ModelToolCall(str(get(call, "id") or f"call_{index}"), str(get(function, "name")),
                          arguments)
        )  # fmt: skip
    usage = get(reply, "usage")
    return ModelResponse(
        content=str(get(message, "content") or ""),
        tool_calls=tuple(calls),
        finish_reason=str(get(choice, "finish_reason") or "stop"),
        usage=Usage(
            int((get(usage, "prompt_tokens") if usage is not None else 0) or 0),
            int((get(usage, "completion_tokens") if usage is not None else 0) or 0),
        ),
        model=str(get(reply, "model") or ""),
    )


def _getter(reply: Any) -> Any:
    if isinstance(reply, dict):
        return lambda obj, key: obj.get(key) if isinstance(obj, dict) else None
    return lambda obj, key: getattr(obj, key, None)
