"""What several benchmarks share: fake servers on 127.0.0.1 and timed hook calls.

Imported by the ``bench_*.py`` scripts (bench/ is first on ``sys.path`` whether a script runs
alone or through ``run_all.py``); not a benchmark itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Answer = Callable[[bytes], tuple[str, bytes]]
"""A request body -> (content type, response body)."""


def serve_posts(answer: Answer, delay: float = 0.0) -> tuple[ThreadingHTTPServer, list[bytes]]:
    """A server on 127.0.0.1:0 answering each POST with ``answer`` after ``delay`` seconds.

    Returns the running server (``shutdown()`` it) and the request bodies it received.
    """
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            bodies.append(body)
            time.sleep(delay)
            content_type, reply = answer(body)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, bodies


def base_url(server: ThreadingHTTPServer) -> str:
    """``http://127.0.0.1:PORT/v1``: the server as an OpenAI base URL."""
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def chat_completion(
    model: str,
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    tokens: tuple[int, int] = (1000, 100),
) -> tuple[str, bytes]:
    """A Chat Completions response (for :func:`serve_posts`) with ``content`` or tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt, completion = tokens
    reply = {
        "id": "c", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }  # fmt: skip
    return "application/json", json.dumps(reply).encode()


def hook_workspace(prefix: str, extra_toml: str = "") -> Path:
    """A 0755 workspace under /tmp with the developer preset and ``extra_toml``.

    keel.toml is dated a minute back, so its config cache is written on the first call.
    """
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    root.chmod(0o755)
    (root / "keel.toml").write_text('[policy]\npreset = "developer"\n' + extra_toml)
    past = time.time() - 60
    os.utime(root / "keel.toml", (past, past))
    (root / ".keel").mkdir()
    return root


def hook_argv(event: str) -> list[str]:
    """The command ``keel init`` registers for Claude Code's ``event``."""
    from keel.hook.install import default_keel_command

    return [*default_keel_command(), "hook", event, "--agent", "claude"]


def read_payload(root: Path, event: str, n: int) -> bytes:
    """Claude Code's ``event`` payload for a Read of ``root/f{n}.txt`` (a new file each ``n``)."""
    body: dict[str, Any] = {
        "session_id": "bench", "cwd": str(root), "hook_event_name": event,
        "tool_name": "Read", "tool_input": {"file_path": str(root / f"f{n}.txt")},
        "tool_use_id": f"toolu_{n}",
    }  # fmt: skip
    if event == "PostToolUse":
        body["tool_response"] = {"content": f"line {n}"}
    return json.dumps(body).encode()


def timed_hook(argv: list[str], data: bytes, root: Path, env: dict[str, str]) -> float:
    """Milliseconds one hook process takes on ``data``; exits the benchmark if it fails."""
    start = time.perf_counter()
    done = subprocess.run(argv, input=data, cwd=root, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"hook failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return (time.perf_counter() - start) * 1000


EVENTS = ("PreToolUse", "PostToolUse")


def off_and_on(
    roots: dict[str, Path], rounds: int, env: dict[str, str], gap: float = 0.0
) -> dict[str, dict[str, list[float]]]:
    """Hook round trips in the workspaces ``roots`` (``off``, ``on``), interleaved.

    Each round calls each workspace's PreToolUse and PostToolUse once (a Read of a new file),
    then waits ``gap`` seconds; three untimed warm-up rounds come first (bytecode, caches,
    the daemons). Returns workspace -> event -> milliseconds per round.
    """
    times = {w: {e: [] for e in EVENTS} for w in roots}
    for n in range(-3, rounds):
        for which, root in roots.items():
            for event in EVENTS:
                ms = timed_hook(hook_argv(event), read_payload(root, event, n + 3), root, env)
                if n >= 0:
                    times[which][event].append(ms)
        time.sleep(gap)
    return times


def on_over_off(times: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per event: both medians, their ratio (on / off), and the median of each round's ratio."""
    import statistics

    result = {}
    for event in EVENTS:
        off, on = times["off"][event], times["on"][event]
        paired = [b / a for a, b in zip(off, on, strict=True)]
        result[event] = {
            "off_median_ms": round(statistics.median(off), 1),
            "on_median_ms": round(statistics.median(on), 1),
            "ratio_of_medians": round(statistics.median(on) / statistics.median(off), 2),
            "median_paired_ratio": round(statistics.median(paired), 2),
        }
    return result


def hook_env() -> dict[str, str]:
    """This environment for hook processes: bytecode written, the daemon allowed, kept 120 s."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "KEEL_HOOKD")
    }
    env["KEEL_HOOKD_IDLE"] = "120"
    return env


def wait_for_hookd(root: Path, seconds: float = 20.0) -> None:
    """Return once ``root``'s ``keel hookd`` accepts connections; exit the benchmark if not."""
    import socket

    from keel.hook.wire import SOCKET_NAME

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect(str(root / ".keel" / SOCKET_NAME))
                return
            except OSError:
                time.sleep(0.05)
    raise SystemExit(f"no keel hookd for {root} after {seconds:g} s")
