"""In-process guarded decision plus journal append: median µs per call and calls/s.

Method: one Guard over a fresh workspace (developer preset, real SQLite journal in WAL mode,
no monitor, no checkpoints), deciding a rotating set of everyday and dangerous commands; each
decide() journals the call and the decision (two appends, each its own transaction). Baseline,
interleaved in the same run: the policy decision alone, without the journal.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from keel.core.calls import ToolCall
from keel.guard import Guard

COMMANDS = [
    "pytest -q",
    "git status",
    "ls -la src",
    "grep -rn TODO src | head",
    "rm -rf /",
    "git push --force origin main",
    "cat .env",
    "python -m pytest tests/test_x.py -k foo",
]


def main(rounds: int = 400) -> None:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-"))
    try:
        guard = Guard.open(
            root, session_id="bench", agent="bench", monitor=False, checkpoints=False
        )
        calls = [
            ToolCall("Bash", "exec", command=c, tool_use_id=f"t{i}") for i, c in enumerate(COMMANDS)
        ]
        for call in calls:  # warm caches
            guard.decide(call)
        with_journal: list[float] = []
        policy_only: list[float] = []
        for i in range(rounds):
            call = calls[i % len(calls)]
            t0 = time.perf_counter()
            guard.decide(call)
            t1 = time.perf_counter()
            guard.policy.check_call(call)
            t2 = time.perf_counter()
            with_journal.append((t1 - t0) * 1e6)
            policy_only.append((t2 - t1) * 1e6)
        guard.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = statistics.median(with_journal)
    base = statistics.median(policy_only)
    print(f"decide+journal: median {med:.0f} µs/call ({1e6 / med:.0f} calls/s), n={rounds}")
    print(f"policy only:    median {base:.0f} µs/call; journal share {med - base:.0f} µs")


if __name__ == "__main__":
    main()
