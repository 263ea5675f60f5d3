"""Test doubles for the model seam, shipped with keel (after mini-swe-agent's DeterministicModel).

- :class:`ScriptedModel` answers from a list of steps, in order, and raises ``ModelError``
  ``model.script_exhausted`` when asked once more than it has answers; ``assert_complete()``
  fails while steps are left. ``script:FILE`` opens one from a JSON or YAML file.
- :class:`FunctionModel` answers with a plain function of the request.
- :class:`ReplayModel` answers with the responses a journal recorded for a session, found by
  request hash, in order with ``ordered`` (``model.replay_diverged`` names the JSON pointer
  of the first field where an unrecorded request differs from the next recorded one).
  ``replay:SESSION`` opens one from the workspace's journal.

Every double records the requests it got in ``calls``.

A script step is a string (the answer's text) or an object with any of ``content``, ``json``
(a value sent as JSON text), ``tool_calls`` (``[{"name", "arguments"}]``; arguments an object
or JSON text), ``finish_reason``, ``usage`` (``{"input_tokens", "output_tokens"}``), or
``error`` (``{"code", "message", "status", "retryable"}``: the call fails that way).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from keel.core.errors import ModelError
from keel.core.events import DataPayload, Event
from keel.models._base import ModelInfo
from keel.models._types import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    Usage,
)

Step = str | Mapping[str, Any]
STEP_KEYS = ("content", "json", "tool_calls", "finish_reason", "usage", "error")
"""The keys a script step object may have (README: "The script: model")."""


class ScriptedModel:
    """Answers from a script, in order; running out is an error, not a default answer."""

    def __init__(self, steps: Sequence[Step], *, name: str = "script", tools: bool = True) -> None:
        """A model answering with ``steps``; ``tools`` says whether it claims tool support."""
        self.steps = [_check_step(s, i) for i, s in enumerate(steps)]
        self.calls: list[ModelRequest] = []
        self._info = ModelInfo(name, "script", name, supports_tools=tools, free=True)

    @property
    def info(self) -> ModelInfo:
        """A free model named after its script."""
        return self._info

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return len(self.steps) - len(self.calls)

    def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """The next step's answer.

        Raises:
            ModelError: the script has no step left (``model.script_exhausted``), or the step
                is an ``error`` step.
        """
        index = len(self.calls)
        self.calls.append(request)
        if index >= len(self.steps):
            raise ModelError(
                f"{self._info.name}: the script ran out: it has {len(self.steps)} answer(s) "
                f"and this is call {index + 1}",
                code="model.script_exhausted",
            )
        return step_response(self.steps[index], index)

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` when steps are left unused."""
        if self.remaining > 0:
            raise AssertionError(f"{self.remaining} scripted answer(s) were never asked for")

    @classmethod
    def from_file(cls, path: str | Path, *, name: str | None = None) -> ScriptedModel:
        """Load a script: a JSON or YAML list of steps, or ``{"responses": [...]}``.

        Raises:
            ModelError: the file cannot be read or is not a script (``model.script``).
        """
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
            if file.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
            else:
                data = json.loads(text)
        except (OSError, ValueError) as exc:
            raise ModelError(
                f"cannot read the script {str(file)!r}: {exc}", code="model.script"
            ) from exc
        except Exception as exc:  # yaml's errors
            raise ModelError(
                f"cannot read the script {str(file)!r}: {exc}", code="model.script"
            ) from exc
        if isinstance(data, dict) and "responses" in data:
            data = data["responses"]
        if not isinstance(data, list):
            raise ModelError(
                f"the script {str(file)!r} must be a list of answers", code="model.script"
            )
        return cls(data, name=name or f"script:{file.name}")


def _check_step(step: Any, index: int) -> Step:
    if isinstance(step, str):
        return step
    known = set(STEP_KEYS)
    if not isinstance(step, Mapping) or set(step) - known:
        raise ModelError(
            f"script step {index + 1} must be text or an object with {sorted(known)}",
            code="model.script",
        )
    return step


def step_response(step: Step, index: int) -> ModelResponse:
    """The response (or the raised error) a script step stands for."""
    if isinstance(step, str):
        return ModelResponse(step, usage=Usage(0, 0))
    error = step.get("error")
    if error is not None:
        raise ModelError(
            str(error.get("message") or "scripted failure"),
            code=str(error.get("code") or "model.scripted"),
            status=error.get("status"),
            retryable=bool(error.get("retryable", False)),
        )
    content = step.get("content") or ""
    if "json" in step:
        content = json.dumps(step["json"], indent=2, ensure_ascii=False)
    calls = tuple(
        ModelToolCall(
            str(c.get("id") or f"call_{index}_{n}"),
            str(c["name"]),
            c["arguments"] if isinstance(c.get("arguments"), str)
            else json.dumps(c.get("arguments") or {}, ensure_ascii=False),
        )
        for n, c in enumerate(step.get("tool_calls") or ())
    )  # fmt: skip
    usage = step.get("usage") or {}
    return ModelResponse(
        content=str(content),
        tool_calls=calls,
        finish_reason=str(step.get("finish_reason") or ("tool_calls" if calls else "stop")),
        usage=Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))),
        model="script",
    )


class FunctionModel:
    """Answers with ``fn(request)``."""

    def __init__(
        self, fn: Callable[[ModelRequest], ModelResponse], *, name: str = "function",
        tools: bool = True,
    ) -> None:  # fmt: skip
        """A model whose every answer is ``fn(request)``."""
        self.fn = fn
        self.calls: list[ModelRequest] = []
        self._info = ModelInfo(name, "function", name, supports_tools=tools, free=True)

    @property
    def info(self) -> ModelInfo:
        """A free model named ``name``."""
        return self._info

    def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """``fn(request)``."""
        self.calls.append(request)
        return self.fn(request)


class ReplayModel:
    """Answers with a journal's recorded responses, found by request hash.

    It presents itself as the recorded model did (tools, structured output), so code that
    adapts its requests to the model builds the same requests again.
    """

    def __init__(self, records: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], *,
                 name: str = "replay", ordered: bool = False) -> None:  # fmt: skip
        """Replay ``(request record, response record)`` pairs, as the journal holds them.

        With ``ordered`` (``keel replay``), recorded response *k* answers only the *k*-th
        request, and only if it hashes as recorded request *k*; otherwise any unused recorded
        call with the request's hash answers.
        """
        self.records = list(records)
        self.ordered = ordered
        self.calls: list[ModelRequest] = []
        self._used: set[int] = set()
        first = self.records[0][0] if self.records else {}
        self.recorded_model = str(first.get("model") or name)
        settings = first.get("settings") or {}
        structured = settings.get("structured_output", "json_schema")
        self._info = ModelInfo(
            name, "replay", self.recorded_model,
            supports_tools=bool(settings.get("supports_tools", True)),
            structured=structured if structured in ("json_schema", "json_object", "off")
            else "json_schema",
            free=True,
        )  # fmt: skip

    @property
    def info(self) -> ModelInfo:
        """A free model that answers as the recorded one did."""
        return self._info

    @classmethod
    def from_events(cls, events: Iterable[Event], *, name: str = "replay") -> ReplayModel:
        """The calls of a session's journaled events, paired by call id."""
        requests: dict[str, Mapping[str, Any]] = {}
        pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
        for event in events:
            if not isinstance(event.payload, DataPayload):
                continue
            data = event.payload.data
            if event.kind == "model.request" and not data.get("refused"):
                requests[str(data.get("call_id"))] = data
            elif event.kind == "model.response" and str(data.get("call_id")) in requests:
                pairs.append((requests.pop(str(data.get("call_id"))), data))
        return cls(pairs, name=name)

    def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """The recorded answer to ``request``, found by its request hash.

        Each recorded call answers once; of several with the same hash, the earliest unused
        one answers (a session that asked the same question twice replays in order).

        Raises:
            ModelError: no unused recorded call has this hash (``model.replay_diverged``,
                naming the first field that differs from the next unused call, or
                ``model.script_exhausted`` when none is left), or the recorded call failed
                (its code).
        """
        self.calls.append(request)
        actual = request.request_hash(self.recorded_model)
        unused = [i for i in range(len(self.records)) if i not in self._used]
        if self.ordered:
            unused = unused[:1]
        match = next((i for i in unused if self.records[i][0].get("request_hash") == actual), None)
        if match is None:
            if not unused:
                raise ModelError(
                    f"replay: the journal recorded {len(self.records)} call(s), all replayed; "
                    f"this is call {len(self.calls)}",
                    code="model.script_exhausted",
                )
            recorded = self.records[unused[0]][0]
            where = pointer_diff(_recorded_request(recorded).canonical(), request.canonical())[0]
            raise ModelError(
                f"replay: call {len(self.calls)} ({actual[:19]}) was not recorded; it differs "
                f"from recorded call {unused[0] + 1} at {where}",
                code="model.replay_diverged",
            )
        self._used.add(match)
        answer = self.records[match][1]
        error = answer.get("error")
        if error:
            raise ModelError(
                str(error.get("message")), code=str(error.get("code")), status=error.get("status")
            )
        return ModelResponse.from_dict(answer)


def _recorded_request(data: Mapping[str, Any]) -> ModelRequest:
    from keel.models._types import OutputSchema, Sampling, Tool

    settings = data.get("settings") or {}
    output = data.get("output")
    return ModelRequest(
        messages=tuple(Message.from_dict(m) for m in data.get("messages") or ()),
        tools=tuple(
            Tool(t["name"], t["description"], t["parameters"]) for t in data.get("tools") or ()
        ),
        tool_choice=data.get("tool_choice"),
        output=OutputSchema(output["name"], output["schema"]) if output else None,
        sampling=Sampling(
            settings.get("temperature", 0.0), settings.get("max_tokens", 2048),
            settings.get("seed"), settings.get("top_p"),
        ),
    )  # fmt: skip


def pointer_diff(a: Any, b: Any, pointer: str = "") -> tuple[str, Any, Any]:
    """The JSON pointer (RFC 6901) of the first place ``a`` and ``b`` differ, and both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key):
                escaped = str(key).replace("~", "~0").replace("/", "~1")
                return pointer_diff(a.get(key), b.get(key), f"{pointer}/{escaped}")
        return pointer, a, b
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return pointer_diff(x, y, f"{pointer}/{index}")
        index = min(len(a), len(b))
        return (
            f"{pointer}/{index}",
            a[index] if index < len(a) else None,
            b[index] if index < len(b) else None,
        )
    return pointer, a, b
