"""Benchmark: hook latency with the model judge on, against the judge off (issue 25).

Two workspaces, the same but for ``[judge]``: one without a judge model, one with
``[judge] model = "openai:judge-bench"`` and ``[judge.when] every_n_steps = 1`` (every result
asks the judge: the worst case; a real configuration asks on findings and at the finish). The
judge's model is a fake Chat Completions server on 127.0.0.1 that answers an ``ok`` verdict
after ``--model-delay`` seconds (default 1.0, a fast hosted model), through the real openai SDK
in the judge's own process.

Each round, in both workspaces, interleaved (so both see the same machine): one Claude Code
``PreToolUse`` (a Read of a new file each round, so no rule fires) and its ``PostToolUse``, as
fresh hook processes through the command ``keel init`` registers, answered by the workspace's
``keel hookd`` (started by the warm-up). One session per workspace for the whole run, so the
judgements pile up as in a live session (one runs per session at a time; the newest waits).
``--gap`` seconds between rounds stand for the agent's model turn (default 0.2: a judgement is
usually still running when the next call comes). Reported: the median round trip of each hook
event, and the ratio judge on / judge off, per round (paired) and of the medians; and how many
judgements the judge-on workspace journaled.

Run: ``.venv/bin/python bench/bench_judge.py [--rounds N] [--gap S] [--model-delay S]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
OK = {"verdict": "ok", "category": "none", "confidence": 0.9, "evidence": [], "suggestion": ""}
JUDGE = """
[judge]
model = "openai:judge-bench"
max_calls = 100000
timeout_seconds = 30

[judge.when]
on_finding = "off"
every_n_steps = 1
on_finish = false
"""


def judge_server(delay: float) -> tuple[ThreadingHTTPServer, list[float]]:
    """A Chat Completions server answering an ``ok`` verdict after ``delay`` seconds."""
    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(time.monotonic())
            time.sleep(delay)
            message = {"role": "assistant", "content": json.dumps(OK)}
            body = json.dumps({
                "id": "c", "object": "chat.completion", "created": 0, "model": "judge-bench",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
            }).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def workspace(judge: bool) -> Path:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-judge-", dir="/tmp"))
    root.chmod(0o755)
    toml = '[policy]\npreset = "developer"\n' + (JUDGE if judge else "")
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


def judgements(root: Path) -> int:
    from keel.journal import read_journal

    with read_journal(root) as journal:
        return sum(1 for _ in journal.events(session_id="bench", kinds=("judgement",)))


def run(rounds: int, gap: float, delay: float) -> dict[str, Any]:
    server, seen = judge_server(delay)
    host, port = server.server_address[:2]
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "KEEL_HOOKD")
    }
    env.update(OPENAI_BASE_URL=f"http://{host}:{port}/v1", OPENAI_API_KEY="zq-bench",
               KEEL_HOOKD_IDLE="120")  # fmt: skip
    roots = {"off": workspace(False), "on": workspace(True)}
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
            time.sleep(gap)
        time.sleep(delay + 2.0)  # let the last judgement land before counting
        count = judgements(roots["on"])
    finally:
        server.shutdown()
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)  # each daemon sees its socket go and exits
    result: dict[str, Any] = {"rounds": rounds, "gap_s": gap, "model_delay_s": delay,
                              "judgements": count, "model_requests": len(seen)}  # fmt: skip
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
    parser.add_argument("--gap", type=float, default=0.2)
    parser.add_argument("--model-delay", type=float, default=1.0)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    print(json.dumps(run(args.rounds, args.gap, args.model_delay), indent=2))


if __name__ == "__main__":
    main()
