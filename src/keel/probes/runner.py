"""``python -m keel.probes.runner``: one probe request on stdin, one JSON result on stdout.

This is what runs inside the sandbox (the workspace read-only at ``/workspace``). It reads at
most 8 MiB, always prints exactly one JSON line (ASCII, so lone surrogates survive) and exits 0;
any failure is a structured error in that line. ``{"batch": [request, ...]}`` runs independent
probes concurrently in threads (one sandbox start for all), each bounded by its own timeout,
and prints a JSON list of results; a probe still running at its deadline becomes
``probe.timeout`` and the process exits without waiting for it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from keel.probes._exec import execute
from keel.probes._result import ProbeResult

MAX_REQUEST = 8 << 20


def main() -> int:
    """Read a request, run it, print the result."""
    raw = sys.stdin.buffer.read(MAX_REQUEST + 1)
    if len(raw) > MAX_REQUEST:
        result = ProbeResult.failure("probe.bad_request", "the request is too large")
    else:
        try:
            request = json.loads(raw)
        except (ValueError, RecursionError):
            result = ProbeResult.failure("probe.bad_request", "the request is not valid JSON")
        else:
            backend = request.pop("backend", None) if isinstance(request, dict) else None
            name = backend if isinstance(backend, str) else "runner"
            if isinstance(request, dict) and isinstance(request.get("batch"), list):
                results = run_batch(request["batch"], backend=name)
                _print([_line(r) for r in results], batch=True)
                if threading.active_count() > 1:
                    os._exit(0)  # a probe past its deadline must not keep the sandbox alive
                return 0
            result = execute(request, backend=name)
    _print([_line(result)], batch=False)
    return 0


def run_batch(requests: list[Any], *, backend: str) -> list[ProbeResult]:
    """Run requests concurrently in threads; a probe past its timeout is ``probe.timeout``."""
    results: list[ProbeResult | None] = [None] * len(requests)

    def one(index: int, request: Any) -> None:
        results[index] = execute(request, backend=backend)

    threads = [
        threading.Thread(target=one, args=(i, r), daemon=True) for i, r in enumerate(requests)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread, request in zip(threads, requests, strict=True):
        limit = request.get("timeout", 10.0) if isinstance(request, dict) else 10.0
        limit = float(limit) if isinstance(limit, int | float) else 10.0
        thread.join(max(0.0, started + limit - time.monotonic()))
    return [
        r
        if r is not None
        else ProbeResult.failure("probe.timeout", "the probe did not finish in time")
        for r in results
    ]


def _line(result: ProbeResult) -> str:
    try:
        return json.dumps(result.to_dict(), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(ProbeResult.failure("probe.unserialisable", "bad result").to_dict())


def _print(lines: list[str], *, batch: bool) -> None:
    sys.stdout.write(("[" + ",".join(lines) + "]" if batch else lines[0]) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
