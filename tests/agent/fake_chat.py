"""A fake OpenAI Chat Completions server on 127.0.0.1:0 that scripts tool calls (stdlib only).

Scripting is stateless: the turn of a request is the number of assistant messages already in
its history, so retries cannot desynchronise it. A turn is a list of ``(tool, arguments)``
calls, plain text, or a function of the request body returning either. Every request body is
kept in ``requests``, so a test can check what keel sent the model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Calls = list[tuple[str, dict[str, Any]]]
Turn = Calls | str | Callable[[dict[str, Any]], "Calls | str"]


@dataclass
class FakeChat:
    """Serves ``turns`` in order; past the end it answers with text and no tool call."""

    turns: Sequence[Turn]
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeChat:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                fake.requests.append(body)
                reply = json.dumps(fake.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Shut the server down (a replay must not need it)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def turn_index(self, body: dict[str, Any]) -> int:
        """Which turn answers ``body``: the assistant messages its history holds."""
        return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        index = self.turn_index(body)
        turn: Any = self.turns[index] if index < len(self.turns) else "done"
        if callable(turn):
            turn = turn(body)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(turn, str):
            message["content"] = turn
            finish = "stop"
        else:
            message["tool_calls"] = [
                {
                    "id": f"call_{index}_{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for n, (name, args) in enumerate(turn)
            ]
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }


def tool_texts(body: dict[str, Any]) -> list[str]:
    """The tool results a request carries, in order."""
    return [
        str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "tool"
    ]


def last_user(body: dict[str, Any]) -> str:
    """The last user message of a request (keel's state message)."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""
