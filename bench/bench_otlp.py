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
import shutil
import socket
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import hook_env, hook_workspace, off_and_on, on_over_off, serve_posts

REPO = Path(__file__).resolve().parents[1]


def receiver(delay: float) -> tuple[ThreadingHTTPServer, list[bytes]]:
    """An OTLP/HTTP traces endpoint that takes each batch after ``delay`` seconds."""
    return serve_posts(lambda _body: ("application/x-protobuf", b""), delay)


def dead_endpoint() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/traces"


def workspace(endpoint: str | None) -> Path:
    export = f'\n[export]\notlp_endpoint = "{endpoint}"\ntimeout_seconds = 2\n'
    return hook_workspace("keel-bench-otlp-", export if endpoint else "")


def failures(root: Path) -> int:
    from keel.journal import read_journal

    with read_journal(root) as journal:
        return sum(
            1
            for e in journal.events(session_id="bench", kinds=("error",))
            if getattr(e.payload, "data", {}).get("event") == "export.failed"
        )


def run(rounds: int, delay: float, dead: bool) -> dict[str, Any]:
    server, batches = receiver(delay)
    endpoint = dead_endpoint() if dead else f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    roots = {"off": workspace(None), "on": workspace(endpoint)}
    try:
        times = off_and_on(roots, rounds, hook_env())
        time.sleep(delay + 3.0)  # let the last batch land before counting
        failed = failures(roots["on"])
    finally:
        server.shutdown()
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)  # each daemon sees its socket go and exits
    result: dict[str, Any] = {
        "rounds": rounds, "receiver": "dead" if dead else f"{delay}s per batch",
        "batches_received": len(batches), "bytes_received": sum(len(b) for b in batches),
        "failures_journaled": failed,
    }  # fmt: skip
    return {**result, **on_over_off(times)}


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
