"""Fake model APIs on 127.0.0.1 (port 0): OpenAI Chat Completions and Anthropic Messages.

One server answers both ``POST /v1/chat/completions`` and ``POST /v1/messages`` from a queue
of scripted replies, and records every request it got (path, headers, JSON body), so a test
can check what the real SDKs sent, and that a refused call sent nothing. A reply is a status,
a JSON body and headers, or ``HANG``: the handler holds the connection until the server stops
(a client timeout, without timing anything). An empty queue answers 418, which no retry hides.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


HANG = Reply(hang=True)


@dataclass(frozen=True)
class Seen:
    """One request the server got."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeModelServer:
    """A scripted OpenAI/Anthropic-compatible server; use as a context manager."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def queue(self, *replies: Reply | dict[str, Any]) -> None:
        """Answer the next requests with ``replies`` (a dict is a 200 with that body)."""
        for reply in replies:
            self.replies.append(reply if isinstance(reply, Reply) else Reply(200, reply))

    def __enter__(self) -> FakeModelServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else {}
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append(Seen("POST", self.path, headers, body))
                reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    reply = Reply(418, {"error": {"message": "no scripted reply left"}})
                if reply.hang:
                    server._release.wait(timeout=60)
                    return
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


# OpenAI Chat Completions bodies


def chat_reply(
    content: str | None = None,
    *,
    tool_calls: list[tuple[str, str, Any]] | None = None,
    finish: str | None = None,
    usage: tuple[int, int] = (12, 7),
    model: str = "fake-gpt",
) -> dict[str, Any]:
    """A ``chat.completion`` body; ``tool_calls`` are ``(id, name, arguments)``."""
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for call_id, name, args in tool_calls or []
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def openai_error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An OpenAI-style error reply."""
    body = {"error": {"message": message, "type": "error", "code": None}}
    return Reply(status, body, headers or {})


# Anthropic Messages bodies


def messages_reply(
    text: str | None = None,
    *,
    tool_uses: list[tuple[str, str, Any]] | None = None,
    stop: str | None = None,
    usage: tuple[int, int] = (15, 9),
    model: str = "fake-claude",
) -> dict[str, Any]:
    """A Messages API ``message`` body; ``tool_uses`` are ``(id, name, input)``."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for use_id, name, data in tool_uses or []:
        content.append({"type": "tool_use", "id": use_id, "name": name, "input": data})
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def anthropic_error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An Anthropic-style error reply."""
    kind = {429: "rate_limit_error", 401: "authentication_error"}.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, body, headers or {})
