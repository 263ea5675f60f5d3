"""Benchmark: hook latency with the OpenTelemetry push on, against the push off (issue 26).

Two workspaces, the same but for ``[export] otlp_endpoint``: the push-on one sends to an OTLP/HTTP
receiver on 127.0.0.1 that accepts each batch after ``--receiver-delay`` seconds (default 0.2: a
backend across a network), or, with ``--dead``, to a port nothing listens on (every batch is
retried until ``timeout_seconds`` and its failure journaled).

Each round, in both workspaces, interleaved (so both see the same machine): one Claude Code
``PreToolUse`` (a Read of a new file each round, so no rule fires) and its ``PostToolUse``, as
fresh hook processes through the command ``keel init`` registers, answered by the workspace's
``keel hookd`` (started by the warm-up). Reported: the median round trip of each hook event,
and the ratio push on / push off, per round (paired) and of the medians; and how many batches
and bytes the receiver took.

Run: ``.venv/bin/python bench/bench_otlp.py [--rounds N] [--receiver-delay S] [--dead]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def receiver(delay: float) -> tuple[ThreadingHTTPServer, list[int]]:
    """An OTLP/HTTP traces endpoint that takes each batch after ``delay`` seconds."""
    sizes: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            sizes.append(len(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            time.sleep(delay)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, sizes


def dead_endpoint() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/traces"


def workspace(endpoint: str | None) -> Path:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-otlp-", dir="/tmp"))
    root.chmod(0o755)
    toml = '[policy]\npreset = "developer"\n'
    if endpoint:
        toml += f'\n[export]\notlp_endpoint = "{endpoint}"\ntimeout_seconds = 2\n'
    (root / "keel.toml").write_text(toml)
    past = time.time() - 60
    os.utime(root / "keel.toml", (past, past))
    (root / ".keel").mkdir()
    return root


def hook_argv(event: str) -> list[str]:
    from keel.hook.install import default_keel_command

    return [*default_keel_command(), "hook", event, "--agent", "claude"]


def payload(root: Path, event: str, n: int) -> bytes:
    body: dict[str, Any] = {
        "session_id": "bench", "cwd": str(root), "hook_event_name": event,
        "tool_name": "Read", "tool_input": {"file_path": str(root / f"f{n}.txt")},
        "tool_use_id": f"toolu_{n}",
    }  # fmt: skip
    if event == "PostToolUse":
        body["tool_response"] = {"content": f"line {n}"}
    return json.dumps(body).encode()


def timed(argv: list[str], data: bytes, root: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=data, cwd=root, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"hook failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return (time.perf_counter() - start) * 1000


def failures(root: Path) -> int:
    from keel.journal import read_journal

    with read_journal(root) as journal:
        return sum(
            1
            for e in journal.events(session_id="bench", kinds=("error",))
            if getattr(e.payload, "data", {}).get("event") == "export.failed"
        )


def run(rounds: int, delay: float, dead: bool) -> dict[str, Any]:
    server, sizes = receiver(delay)
    host, port = server.server_address[:2]
    endpoint = dead_endpoint() if dead else f"http://{host}:{port}/v1/traces"
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "KEEL_HOOKD")
    }
    env["KEEL_HOOKD_IDLE"] = "120"
    roots = {"off": workspace(None), "on": workspace(endpoint)}
    times: dict[str, dict[str, list[float]]] = {
        w: {"PreToolUse": [], "PostToolUse": []} for w in roots
    }
    try:
        for n in range(-3, rounds):  # three warm-up rounds: bytecode, caches, the daemons
            for which, root in roots.items():
                for event in ("PreToolUse", "PostToolUse"):
                    ms = timed(hook_argv(event), payload(root, event, n + 3), root, env)
                    if n >= 0:
                        times[which][event].append(ms)
        time.sleep(delay + 3.0)  # let the last batch land before counting
        failed = failures(roots["on"])
    finally:
        server.shutdown()
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)  # each daemon sees its socket go and exits
    result: dict[str, Any] = {
        "rounds": rounds, "receiver": "dead" if dead else f"{delay}s per batch",
        "batches_received": len(sizes), "bytes_received": sum(sizes),
        "failures_journaled": failed,
    }  # fmt: skip
    for event in ("PreToolUse", "PostToolUse"):
        off, on = times["off"][event], times["on"][event]
        paired = [b / a for a, b in zip(off, on, strict=True)]
        result[event] = {
            "off_median_ms": round(statistics.median(off), 1),
            "on_median_ms": round(statistics.median(on), 1),
            "ratio_of_medians": round(statistics.median(on) / statistics.median(off), 2),
            "median_paired_ratio": round(statistics.median(paired), 2),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--receiver-delay", type=float, default=0.2)
    parser.add_argument("--dead", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    print(json.dumps(run(args.rounds, args.receiver_delay, args.dead), indent=2))


if __name__ == "__main__":
    main()
