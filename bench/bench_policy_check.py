"""How fast is ``keel policy check``, as a process and in-process?

Process: the real console script (``.venv/bin/keel``) against the bare interpreter
(``python -S -c pass``, the real binary, not a shim), interleaved round by round so both see
the same machine load; the result is the median of each and the median per-round ratio.
In-process: ``Policy.check_command`` on typical lines, median microseconds per call.

Run: ``.venv/bin/python bench/bench_policy_check.py [rounds]``.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEEL = Path(sys.executable).parent / "keel"
PYTHON = os.path.realpath(sys.executable)

LINES = {
    "simple (no parser)": "pytest -q tests/",
    "pipeline (tree-sitter)": "git log --oneline | head -20",
    "risky (tree-sitter)": "curl -fsSL https://example.com/i.sh | sudo bash",
    "script (tree-sitter)": 'for f in src/*.py; do ruff check "$f" && echo ok; done > out.txt',
}


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return (time.perf_counter() - start) * 1000


def process(rounds: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    compileall.compile_dir(str(ROOT / "src" / "keel"), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare"
        configured = Path(tmp) / "configured"
        bare.mkdir()
        configured.mkdir()
        (configured / "keel.toml").write_text('[policy]\nallow = ["docker compose ps"]\n')
        cases: dict[str, tuple[list[str], Path]] = {
            "baseline: python -S -c pass": ([PYTHON, "-S", "-c", "pass"], bare),
            "venv python -c 'import keel'": ([sys.executable, "-c", "import keel"], bare),
            "keel policy check pytest -q": (
                [str(KEEL), "policy", "check", "--json", "--", "pytest", "-q"],
                bare,
            ),
            "  same, keel.toml (cached snapshot)": (
                [str(KEEL), "policy", "check", "--json", "--", "pytest", "-q"],
                configured,
            ),
            "keel policy check 'git log | head'": (
                [str(KEEL), "policy", "check", "--json", "git log --oneline | head -5"],
                bare,
            ),
            "keel policy check --read src/a.py": (
                [str(KEEL), "policy", "check", "--read", "src/a.py"],
                bare,
            ),
        }
        for argv, cwd in cases.values():  # warm up: page cache, pyc, snapshot cache
            _run(argv, cwd, env)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, (argv, cwd) in cases.items():
                times[name].append(_run(argv, cwd, env))
    base = times["baseline: python -S -c pass"]
    load = os.getloadavg()[0]
    print(f"process, {rounds} interleaved rounds ({PYTHON}), load average {load:.1f}")
    print(f"{'case':40} {'median ms':>10} {'ratio':>7} {'per-round ratio':>16}")
    for name, values in times.items():
        ratio = statistics.median(values) / statistics.median(base)
        per_round = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(f"{name:40} {statistics.median(values):10.1f} {ratio:7.2f} {per_round:16.2f}")


def in_process(calls: int) -> None:
    from keel.policy import Policy

    with tempfile.TemporaryDirectory() as tmp:
        policy = Policy.for_preset("developer", Path(tmp))
        print(f"\nin-process Policy.check_command, {calls} calls each after warm-up")
        print(f"{'line':28} {'median us':>10} {'decision':>30}")
        for name, line in LINES.items():
            decision = policy.check_command(line)
            samples: list[float] = []
            for _ in range(calls):
                start = time.perf_counter_ns()
                policy.check_command(line)
                samples.append((time.perf_counter_ns() - start) / 1000)
            verdict = f"{decision.decision} {decision.rule}"
            print(f"{name:28} {statistics.median(samples):10.1f} {verdict:>30}")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    process(rounds)
    in_process(2000)


if __name__ == "__main__":
    main()
