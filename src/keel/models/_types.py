"""The values a model call is made of: messages, tools, settings, the request and the response.

Every value is frozen. A :class:`ModelRequest` is provider-neutral (OpenAI Chat Completions'
vocabulary: ``system``/``user``/``assistant``/``tool`` roles, function tools, finish reasons
``stop``/``length``/``tool_calls``); each backend translates it to its API and the answer back.
:meth:`ModelRequest.canonical` is the request with its volatile fields removed (tool-call ids,
which servers invent, become their position), and :meth:`ModelRequest.request_hash` hashes it,
so the same question asked twice has the same hash on any server, at any time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from keel.core.events import canonical_json

Role = Literal["system", "user", "assistant", "tool"]
ToolChoice = Literal["auto", "required", "none"] | str
"""``auto``, ``required``, ``none``, or the name of the one tool the model must call."""


@dataclass(frozen=True, slots=True)
class ModelToolCall:
    """A tool call the model asked for: its id, the tool's name and the arguments as JSON text."""

    id: str
    name: str
    arguments: str
    """The arguments exactly as the model wrote them (JSON text, possibly invalid)."""

    def parsed(self) -> Any:
        """The arguments as JSON; raises ``ValueError`` when the model wrote invalid JSON."""
        return json.loads(self.arguments or "{}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelToolCall:
        """Rebuild from :meth:`to_dict`."""
        return cls(str(data["id"]), str(data["name"]), str(data.get("arguments") or ""))


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: Role
    content: str = ""
    tool_calls: tuple[ModelToolCall, ...] = ()
    """On an assistant message: the tools it called."""
    tool_call_id: str | None = None
    """On a tool message: the call it answers."""

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls("system", text)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message."""
        return cls("user", text)

    @classmethod
    def tool(cls, call_id: str, text: str) -> Message:
        """The result of tool call ``call_id``."""
        return cls("tool", text, tool_call_id=call_id)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (empty fields left out)."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Rebuild from :meth:`to_dict`."""
        calls = tuple(ModelToolCall.from_dict(c) for c in data.get("tool_calls") or ())
        return cls(data["role"], str(data.get("content") or ""), calls, data.get("tool_call_id"))


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call, with a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """Structured output: the answer must be JSON matching ``schema``."""

    name: str
    schema: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.name, "schema": dict(self.schema)}


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling settings, all sent explicitly: servers' defaults differ."""

    temperature: float = 0.0
    max_tokens: int = 2048
    """The most tokens the answer may have."""
    seed: int | None = 0
    """Sent where the backend supports it (not Anthropic)."""
    top_p: float | None = None
    """Sent when set (Anthropic refuses ``temperature`` and ``top_p`` together on some models)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "top_p": self.top_p,
        }


@dataclass(frozen=True, slots=True)
class TemplateUse:
    """A prompt template a request was built from: its id, version and the hash of its text."""

    id: str
    version: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"id": self.id, "version": self.version, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to a model: the conversation, the tools, the output shape and the settings."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None
    output: OutputSchema | None = None
    sampling: Sampling = field(default_factory=Sampling)
    templates: tuple[TemplateUse, ...] = ()
    """The prompt templates the messages came from (recorded, not sent)."""

    def canonical(self) -> dict[str, Any]:
        """The request without volatile fields: tool-call ids become their position."""
        ids: dict[str, str] = {}
        messages: list[dict[str, Any]] = []
        for message in self.messages:
            data = message.to_dict()
            if message.tool_calls:
                data["tool_calls"] = [
                    {"id": ids.setdefault(c.id, f"call_{len(ids)}"), "name": c.name,
                     "arguments": c.arguments}
                    for c in message.tool_calls
                ]  # fmt: skip
            if message.tool_call_id is not None:
                data["tool_call_id"] = ids.get(message.tool_call_id, "call_?")
            messages.append(data)
        return {
            "messages": messages,
            "tools": [t.to_dict() for t in self.tools],
            "tool_choice": self.tool_choice,
            "output": self.output.to_dict() if self.output else None,
            "sampling": self.sampling.to_dict(),
        }

    def request_hash(self, model: str) -> str:
        """``sha256:<hex>`` of the canonical request for ``model`` (a spec such as ``openai:x``)."""
        body = canonical_json({"model": model, **self.canonical()})
        return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a call used, from the response's own accounting."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        """A JSON-ready dict."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total,
        }


FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error"] | str


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """What the model answered."""

    content: str
    tool_calls: tuple[ModelToolCall, ...] = ()
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    """The model that answered, as the server named it."""

    def message(self) -> Message:
        """The answer as an assistant message, to continue the conversation with."""
        return Message("assistant", self.content, self.tool_calls)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "content": self.content,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage.to_dict(),
            "model": self.model,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelResponse:
        """Rebuild from :meth:`to_dict` or a journaled ``model.response``.

        A journaled response names keel's model spec in ``model`` and the server's name for
        the model in ``response_model``; the latter is the response's ``model``.
        """
        usage = data.get("usage") or {}
        model = data["response_model"] if "response_model" in data else data.get("model")
        return cls(
            content=str(data.get("content") or ""),
            tool_calls=tuple(ModelToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            finish_reason=str(data.get("finish_reason") or "stop"),
            usage=Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))),
            model=str(model or ""),
        )


def messages_of(items: Sequence[Message | Mapping[str, Any]]) -> tuple[Message, ...]:
    """Messages from messages or their dicts."""
    return tuple(m if isinstance(m, Message) else Message.from_dict(m) for m in items)
