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
import shutil
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import (
    base_url,
    chat_completion,
    hook_env,
    hook_workspace,
    off_and_on,
    on_over_off,
    serve_posts,
)

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


def judge_server(delay: float) -> tuple[ThreadingHTTPServer, list[bytes]]:
    """A Chat Completions server answering an ``ok`` verdict after ``delay`` seconds."""
    verdict = chat_completion("judge-bench", content=json.dumps(OK), tokens=(50, 20))
    return serve_posts(lambda _body: verdict, delay)


def judgements(root: Path) -> int:
    from keel.journal import read_journal

    with read_journal(root) as journal:
        return sum(1 for _ in journal.events(session_id="bench", kinds=("judgement",)))


def run(rounds: int, gap: float, delay: float) -> dict[str, Any]:
    server, seen = judge_server(delay)
    env = hook_env()
    env.update(OPENAI_BASE_URL=base_url(server), OPENAI_API_KEY="zq-bench")
    roots = {"off": hook_workspace("keel-bench-judge-"),
             "on": hook_workspace("keel-bench-judge-", JUDGE)}  # fmt: skip
    try:
        times = off_and_on(roots, rounds, env, gap)
        time.sleep(delay + 2.0)  # let the last judgement land before counting
        count = judgements(roots["on"])
    finally:
        server.shutdown()
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)  # each daemon sees its socket go and exits
    result: dict[str, Any] = {"rounds": rounds, "gap_s": gap, "model_delay_s": delay,
                              "judgements": count, "model_requests": len(seen)}  # fmt: skip
    return {**result, **on_over_off(times)}


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
