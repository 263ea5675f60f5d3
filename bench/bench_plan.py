"""Plan engine: 8 independent probes vs 1 probe, wall time through the real sandbox.

Method: one sample workspace with eight CSV files; plan A has one ``parse.csv_headers`` probe
and an ``output.result``; plan B has eight independent ``parse.csv_headers`` probes and the same
final action. Both run through ``run_plan`` with the best sandbox here (bwrap on the reference
machine), interleaved A, B, C, A, B, C ... after warm-up; the medians are compared. Goal:
B/A < 2.5. C is plan B with batching off (one sandbox start per probe, still concurrent
threads), to show what the batch buys.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from keel.config import KeelConfig, LimitsConfig
from keel.plan import SandboxedRunner, run_plan
from keel.sandbox import get_sandbox

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "20"))


def plan(n: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {
            "id": f"s{i}",
            "type": "evidence_collection",
            "output_to": f"h{i}",
            "action": {"function": "parse.csv_headers", "args": [f"data/f{i}.csv"]},
        }
        for i in range(n)
    ]
    steps.append(
        {
            "id": "out",
            "type": "final_action",
            "action": {"function": "output.result", "args": ["ok"]},
        }
    )
    return {"goal": f"{n} probes", "steps": steps}


class OnePerProbe:
    """The same runner without ``run_many``: every probe starts its own sandbox."""

    def __init__(self, inner: SandboxedRunner) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> Any:
        return self.inner.run(request, workspace=workspace, timeout=timeout)


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="keel-bench-", dir="/tmp"))
    base.chmod(0o755)
    (base / "data").mkdir(mode=0o755)
    for i in range(8):
        (base / "data" / f"f{i}.csv").write_text("a,b,c\n" + "1,2,3\n" * 200)
    config = KeelConfig(limits=LimitsConfig(plan_max_steps=12))
    sandbox = get_sandbox(config.sandbox)
    runner = SandboxedRunner(sandbox)
    single = OnePerProbe(runner)
    one, eight = plan(1), plan(8)

    def timed(p: dict[str, Any], use: Any = runner) -> float:
        start = time.perf_counter()
        report = run_plan(p, workspace=base, config=config, runner=use)
        elapsed = time.perf_counter() - start
        assert report.state == "completed", report.state
        return elapsed * 1000

    try:
        for _ in range(3):
            timed(one), timed(eight), timed(eight, single)
        ones: list[float] = []
        eights: list[float] = []
        unbatched: list[float] = []
        for _ in range(ROUNDS):
            ones.append(timed(one))
            eights.append(timed(eight))
            unbatched.append(timed(eight, single))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    m1, m8 = statistics.median(ones), statistics.median(eights)
    mu = statistics.median(unbatched)
    result = {
        "sandbox": sandbox.name,
        "cpus": os.cpu_count(),
        "rounds": ROUNDS,
        "one_probe_ms_median": round(m1, 1),
        "eight_probes_ms_median": round(m8, 1),
        "ratio": round(m8 / m1, 2),
        "eight_probes_one_sandbox_each_ms_median": round(mu, 1),
        "ratio_unbatched": round(mu / m1, 2),
        "goal": "< 2.5",
        "python": sys.version.split()[0],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
