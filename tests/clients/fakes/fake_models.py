"""Fake model servers on 127.0.0.1 for driving the real clients offline (stdlib only).

One ``FakeModel`` serves a scripted conversation in the wire format of one provider:

- ``anthropic``: ``POST /v1/messages`` (SSE or JSON), the Messages API Claude Code speaks;
- ``openai``: ``POST /v1/responses`` (SSE), the Responses API Codex speaks;
- ``gemini``: ``:streamGenerateContent?alt=sse`` and ``:generateContent``, Gemini CLI's API.

Scripting is stateless, so client retries cannot desynchronise it: the turn index of a
request is the number of model turns already in its history (assistant messages; function
calls and assistant messages; ``model`` contents). A ``Turn`` is either a tool call or a final
text. Requests without tools are side calls (titles, routing) and get a side answer.

Every main request body is kept in ``requests`` so a test can check what the model was told
(keel's deny reasons, guidance, stop feedback).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One scripted model turn: a tool call (name + input) or a final text."""

    text: str = ""
    tool: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    custom: bool = False
    """OpenAI only: emit a freeform ``custom_tool_call`` (Codex's apply_patch) instead."""


@dataclass
class FakeModel:
    """A scripted fake of one provider's API, served in a thread on 127.0.0.1:0."""

    provider: str
    turns: list[Turn]
    final_text: str = "Done."
    before_turn: Callable[[int], None] | None = None
    """Called with the turn index before each main answer (to change the world mid-run)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    side_requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [], "models": []})
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                model.dispatch(self, self.path, body)

            def _json(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def sse(self, events: list[tuple[str | None, Any]]) -> None:
                chunks = []
                for name, data in events:
                    prefix = f"event: {name}\n" if name else ""
                    chunks.append(f"{prefix}data: {json.dumps(data)}\n\n")
                payload = "".join(chunks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- dispatch ------------------------------------------------------------------------------

    def dispatch(self, handler: Any, path: str, body: dict[str, Any]) -> None:
        match self.provider:
            case "anthropic":
                self._anthropic(handler, path, body)
            case "openai":
                self._openai(handler, path, body)
            case "gemini":
                self._gemini(handler, path, body)
            case _:
                handler._json(500, {"error": f"unknown provider {self.provider}"})

    def turn(self, index: int) -> Turn:
        if self.before_turn is not None:
            self.before_turn(index)
        return self.turns[index] if index < len(self.turns) else Turn(text=self.final_text)

    def all_text(self) -> str:
        """Every main request body as one JSON string, for substring checks."""
        return "\n".join(json.dumps(r) for r in self.requests)

    # -- Anthropic Messages ---------------------------------------------------------------------

    def _anthropic(self, handler: Any, path: str, body: dict[str, Any]) -> None:
        if "/v1/messages" not in path or "count_tokens" in path:
            handler._json(200, {"input_tokens": 10}) if "count_tokens" in path else handler._json(
                404, {}
            )
            return
        if not body.get("tools"):
            self.side_requests.append(body)
            self._anthropic_reply(handler, body, Turn(text="ok"), 0)
            return
        self.requests.append(body)
        index = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        self._anthropic_reply(handler, body, self.turn(index), index)

    def _anthropic_reply(self, handler: Any, body: dict[str, Any], turn: Turn, index: int) -> None:
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        if turn.tool:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_fake{index:04d}{int(time.time() * 1000) % 100000:05d}",
                    "name": turn.tool,
                    "input": turn.input,
                }
            )
        stop = "tool_use" if turn.tool else "end_turn"
        model = body.get("model", "fake")
        usage = {"input_tokens": 10, "output_tokens": 5}
        msg_id = f"msg_fake{index}"
        if not body.get("stream"):
            handler._json(
                200,
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
            return
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 1},
                    },
                },
            ),
            ("ping", {"type": "ping"}),
        ]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                    )
                )
            else:
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {
                                "type": "tool_use",
                                "id": block["id"],
                                "name": block["name"],
                                "input": {},
                            },
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {
                                "type": "input_json_delta",
                                "partial_json": json.dumps(block["input"]),
                            },
                        },
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        handler.sse(events)

    # -- OpenAI Responses -----------------------------------------------------------------------

    def _openai(self, handler: Any, path: str, body: dict[str, Any]) -> None:
        if not path.rstrip("/").endswith("/responses"):
            handler._json(404, {"error": {"message": f"fake: no route {path}"}})
            return
        if not body.get("tools"):
            self.side_requests.append(body)
            self._openai_reply(handler, body, Turn(text="ok"), 0)
            return
        self.requests.append(body)
        index = 0
        for item in body.get("input", []):
            kind = item.get("type")
            if kind in ("function_call", "custom_tool_call", "local_shell_call") or (
                kind == "message" and item.get("role") == "assistant"
            ):
                index += 1
        self._openai_reply(handler, body, self.turn(index), index)

    def _openai_reply(self, handler: Any, body: dict[str, Any], turn: Turn, index: int) -> None:
        model = body.get("model", "fake-model")
        resp_id = f"resp_fake{index}_{int(time.time() * 1000)}"
        if turn.tool and turn.custom:
            item = {
                "type": "custom_tool_call",
                "id": f"ctc_{index}",
                "call_id": f"call_fake{index:04d}",
                "name": turn.tool,
                "input": turn.input.get("input", ""),
                "status": "completed",
            }
        elif turn.tool:
            item = {
                "type": "function_call",
                "id": f"fc_{index}",
                "call_id": f"call_fake{index:04d}",
                "name": turn.tool,
                "arguments": json.dumps(turn.input),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{index}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model}
        events: list[tuple[str | None, Any]] = [
            (
                "response.created",
                {
                    "type": "response.created",
                    "response": {**base, "status": "in_progress", "output": []},
                },
            ),
        ]
        if item["type"] == "message":
            added = {**item, "status": "in_progress", "content": []}
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": 0, "item": added},
                )
            )
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": turn.text,
                    },
                )
            )
        else:
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": 0, "item": item},
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            )
        )
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        events.append(
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {**base, "status": "completed", "output": [item], "usage": usage},
                },
            )
        )
        handler.sse(events)

    # -- Gemini ---------------------------------------------------------------------------------

    def _gemini(self, handler: Any, path: str, body: dict[str, Any]) -> None:
        if ":countTokens" in path:
            handler._json(200, {"totalTokens": 10})
            return
        if ":generateContent" not in path and ":streamGenerateContent" not in path:
            handler._json(404, {"error": {"code": 404, "message": f"fake: no route {path}"}})
            return
        stream = ":streamGenerateContent" in path
        if not body.get("tools"):
            self.side_requests.append(body)
            self._gemini_reply(handler, Turn(text=self._gemini_side_text(body)), stream)
            return
        self.requests.append(body)
        index = sum(1 for c in body.get("contents", []) if c.get("role") == "model")
        self._gemini_reply(handler, self.turn(index), stream)

    def _gemini_side_text(self, body: dict[str, Any]) -> str:
        text = json.dumps(body)
        if "complexity" in text:
            return json.dumps({"complexity_reasoning": "a simple task", "complexity_score": 1})
        if "next_speaker" in text:
            return json.dumps({"reasoning": "the model is done", "next_speaker": "user"})
        return "ok"

    def _gemini_reply(self, handler: Any, turn: Turn, stream: bool) -> None:
        parts: list[dict[str, Any]] = []
        if turn.text:
            parts.append({"text": turn.text})
        if turn.tool:
            parts.append({"functionCall": {"name": turn.tool, "args": turn.input}})
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
            "modelVersion": "gemini-fake",
        }
        if stream:
            handler.sse([(None, chunk)])
        else:
            handler._json(200, chunk)
