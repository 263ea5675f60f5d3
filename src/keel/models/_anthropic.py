"""``anthropic:MODEL``: the Messages API through its SDK (``keel install anthropic``).

keel's messages map onto Anthropic's: system messages become ``system``; an assistant's tool
calls become ``tool_use`` blocks; tool results become ``tool_result`` blocks of one user turn.
Structured output is ``output_config.format`` (``json_schema``). ``temperature`` (and ``top_p``
when set) go in the request body directly: SDK 1.0 dropped them from ``messages.create``'s
signature, the API still takes them (models that refuse sampling settings accept only
``temperature = 1.0``). There is no seed. Finish reasons
are given in OpenAI's words (``end_turn`` is ``stop``, ``tool_use`` is ``tool_calls``,
``max_tokens`` is ``length``). The SDK's own retries are off.
"""

from __future__ import annotations

import json
from typing import Any

from keel.core.errors import ModelError
from keel.core.installed import hint
from keel.models._base import ModelInfo, StructuredMode
from keel.models._redact import register_secret, safe_url
from keel.models._sdkerrors import call_sdk
from keel.models._types import ModelRequest, ModelResponse, ModelToolCall, Usage

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
           "max_tokens": "length", "refusal": "content_filter"}  # fmt: skip


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ModelError(
            f"the anthropic backend needs the anthropic SDK: {hint('anthropic')}",
            code="model.not_installed",
        ) from exc
    return anthropic


class AnthropicModel:
    """A model behind Anthropic's Messages API."""

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
            ModelError: the ``anthropic`` SDK is not installed (``model.not_installed``).
        """
        anthropic = _sdk()
        register_secret(api_key)
        self._anthropic = anthropic
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0)
        self._info = ModelInfo(
            name=name or f"anthropic:{model}",
            provider="anthropic",
            model=model,
            endpoint=safe_url(str(self._client.base_url)),
            structured="off" if structured == "off" else "json_schema",
        )

    @property
    def info(self) -> ModelInfo:
        """The model's name, endpoint and abilities."""
        return self._info

    def close(self) -> None:
        """Close the SDK's connections."""
        self._client.close()

    def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """One Messages call."""
        kwargs = messages_kwargs(request, self._info.model, self._info.structured)
        reply = call_sdk(
            self._anthropic,
            "AnthropicError",
            self._info,
            timeout,
            lambda: self._client.messages.create(**kwargs, timeout=timeout),
        )
        return parse_message(reply)


def messages_kwargs(
    request: ModelRequest, model: str, structured: StructuredMode
) -> dict[str, Any]:
    """The ``messages.create`` arguments for ``request``: every setting explicit."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        match message.role:
            case "system":
                continue
            case "tool":
                block = {"type": "tool_result", "tool_use_id": message.tool_call_id,
                         "content": message.content}  # fmt: skip
                if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                    turns[-1]["content"].append(block)
                else:
                    turns.append({"role": "user", "content": [block]})
            case "assistant" if message.tool_calls:
                blocks: list[dict[str, Any]] = []
                if message.content:
                    blocks.append({"type": "text", "text": message.content})
                blocks.extend(
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c)}
                    for c in message.tool_calls
                )
                turns.append({"role": "assistant", "content": blocks})
            case _:
                turns.append({"role": message.role, "content": message.content})
    sampling = request.sampling
    body: dict[str, Any] = {"temperature": sampling.temperature}
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": turns,
        "max_tokens": sampling.max_tokens,
        "extra_body": body,
    }
    if system:
        kwargs["system"] = system
    if request.tools:
        kwargs["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in request.tools
        ]
        if request.tool_choice is not None:
            kwargs["tool_choice"] = _tool_choice(request.tool_choice)
    if request.output is not None and structured != "off":
        body["output_config"] = {
            "format": {"type": "json_schema", "schema": dict(request.output.schema)}
        }
    return kwargs


def _input(call: ModelToolCall) -> Any:
    try:
        return call.parsed()
    except ValueError:
        return {"_raw": call.arguments}


def _tool_choice(choice: str) -> dict[str, Any]:
    match choice:
        case "auto":
            return {"type": "auto"}
        case "required":
            return {"type": "any"}
        case "none":
            return {"type": "none"}
        case _:
            return {"type": "tool", "name": choice}


def parse_message(reply: Any) -> ModelResponse:
    """An Anthropic ``Message`` as a response."""
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    for block in getattr(reply, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
        elif kind == "tool_use":
            calls.append(ModelToolCall(str(block.id), str(block.name), json.dumps(block.input)))
    usage = getattr(reply, "usage", None)
    stop = str(getattr(reply, "stop_reason", None) or "end_turn")
    return ModelResponse(
        content="".join(texts),
        tool_calls=tuple(calls),
        finish_reason=_FINISH.get(stop, stop),
        usage=Usage(
            int(getattr(usage, "input_tokens", 0) or 0),
            int(getattr(usage, "output_tokens", 0) or 0),
        ),
        model=str(getattr(reply, "model", "") or ""),
    )
