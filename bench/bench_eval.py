"""Benchmark: ``keel eval`` of a 40-run suite, one run at a time against ``--ray auto`` (issue 27).

The suite is the shipped one (``examples/eval``: 8 tasks) with its scripted model, one arm,
``--repeat 5``: 40 runs, each a real ``keel run`` process with its plan probes and contained
commands, then its check under ``keel exec``. Three ways, as a user runs them, each a fresh
``keel eval ... --json`` process timed from start to exit (Ray's start and stop included):

- ``sequential``: ``--jobs 1``, one run after another;
- ``ray``: ``--ray auto --jobs 2``, a local Ray with 2 CPUs, each run a Ray task;
- ``ray-joined``: ``--ray 127.0.0.1:PORT --jobs 2``, joining a Ray head the benchmark starts
  once beforehand (``ray start --head``, 2 CPUs, on 127.0.0.1), as a team joins the cluster
  it keeps running: Ray's start and stop are not in it, joining and its workers' start are;
- ``pool``: ``--jobs 2``, the local pool, for reference.

Rounds are interleaved (sequential, ray, pool, then again), so all three see the same
machine; the ratio sequential / ray is taken per round (paired) and of the medians. Every
evaluation must give the same report but for wall times. The load average is printed before
and after: other work on the machine slows all three, but not equally.

A scripted run is short (~0.8 s: keel's own start, 3-8 steps, the check). A real run waits
for its model most of the time: ``--model-delay S`` measures the same 40 runs again with the
same scripts served by a Chat Completions server on 127.0.0.1 that answers after S seconds
(``openai:bench``; ``--latency-rounds``).

Run: ``.venv/bin/python bench/bench_eval.py [--rounds N] [--repeat N] [--model-delay S]``.
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
import time
import tomllib
from pathlib import Path
from typing import Any

from _common import base_url, chat_completion, serve_posts

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "examples" / "eval"
KEEL = str(Path(sys.executable).with_name("keel"))
MODES = {
    "sequential": ["--jobs", "1"],
    "ray": ["--ray", "auto", "--jobs", "2"],
    "ray-joined": ["--ray", "{head}", "--jobs", "2"],
    "pool": ["--jobs", "2"],
}
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
"""The environment of the Ray head the benchmark starts, and of the evaluations joining it."""


class RayHead:
    """A Ray head on 127.0.0.1 with 2 CPUs (``ray start --head --block``) while the bench runs."""

    def __init__(self, where: Path) -> None:
        """Start it, its files under ``where/r``; wait until it has written its address."""
        self.temp = where / "r"
        env = {**os.environ, **RAY_ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        env.pop("RAY_ADDRESS", None)
        self.process = subprocess.Popen(
            [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block",
             "--node-ip-address", "127.0.0.1", "--port", "0", "--num-cpus", "2",
             "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir",
             str(self.temp)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        written = self.temp / "ray_current_cluster"
        deadline = time.monotonic() + 120
        while not (written.is_file() and written.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                sys.exit("ray start --head did not come up")
            time.sleep(0.2)
        self.address = written.read_text().strip()

    def close(self) -> None:
        """Stop it: its ``ray start`` ends the node's processes on SIGTERM."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


class LatencyModel:
    """A Chat Completions server on 127.0.0.1 that answers each task's script after a delay.

    Stateless, as ``tests/agent/fake_chat.py``: the task is found by its text in the request,
    the step is the number of assistant messages the request holds. ``delay`` seconds per
    call stand for a hosted model's latency (0.25 s: a fast one; real agents wait seconds).
    """

    def __init__(self, delay: float) -> None:
        """Serve the shipped scripts after ``delay`` seconds a call."""
        self.scripts = {}
        for script in sorted((SUITE / "scripts").glob("*.json")):
            text = tomllib.loads((SUITE / "tasks" / script.stem / "task.toml").read_text())["task"]
            self.scripts[text] = json.loads(script.read_text())
        self.server, _ = serve_posts(self.answer, delay)
        self.url = base_url(self.server)
        """The base URL (``OPENAI_BASE_URL``)."""

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: bytes) -> tuple[str, bytes]:
        """The scripted step for this request, as Chat Completions sends it."""
        messages = json.loads(request).get("messages") or []
        text = json.dumps(messages)
        steps = next(v for k, v in self.scripts.items() if json.dumps(k)[1:-1] in text)
        index = sum(1 for m in messages if m.get("role") == "assistant")
        step = steps[min(index, len(steps) - 1)]
        calls = [{"id": f"call_{index}_{n}", "type": "function",
                  "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                 for n, c in enumerate(step["tool_calls"])]  # fmt: skip
        return chat_completion("bench", tool_calls=calls)


def evaluate(
    mode: str, repeat: int, where: Path, model: LatencyModel | None = None, head: str = ""
) -> tuple[float, dict[str, Any]]:
    """One ``keel eval`` in ``mode``: (seconds, its report without wall times).

    The scripted model, or ``model`` (``openai:bench`` at its URL) when given.
    """
    out = where / f"{mode}-{time.monotonic_ns()}"
    spec = "openai:bench" if model is not None else f"script:{SUITE / 'scripts'}"
    argv = [KEEL, "eval", str(SUITE), "--model", spec, "--arm", "keel",
            "--repeat", str(repeat), "--out", str(out), "--json",
            *(a.format(head=head) for a in MODES[mode])]  # fmt: skip
    env = {**os.environ, **RAY_ENV, "KEEL_STATE_DIR": str(where / "state")}
    if model is not None:
        env["OPENAI_BASE_URL"] = model.url
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=where, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{mode}: keel eval exited {done.returncode}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    shutil.rmtree(out, ignore_errors=True)
    for key in ("out", "results"):
        report.pop(key)
    for arm in report["arms"]:
        arm.pop("wall_seconds")
    return elapsed, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="8 tasks x N runs (default 40)")
    parser.add_argument(
        "--model-delay", type=float, default=0.0, metavar="S",
        help="also measure with a model that answers after S seconds a call (0: not)",
    )  # fmt: skip
    parser.add_argument("--latency-rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="keel-bench-eval-") as tmp:
        where = Path(tmp)
        (where / "state").mkdir(mode=0o700)
        head = RayHead(where)
        try:
            evaluate("pool", 1, where)  # warm-up: bytecode, page cache, Ray's first start
            evaluate("ray", 1, where)
            evaluate("ray-joined", 1, where, head=head.address)
            print("== the scripted model", flush=True)
            ok = measure(args.rounds, args.repeat, where, head=head.address)
            if args.model_delay > 0:
                model = LatencyModel(args.model_delay)
                try:
                    print(f"== a model answering after {args.model_delay:g} s", flush=True)
                    ok = measure(args.latency_rounds, args.repeat, where, model,
                                 head.address) and ok  # fmt: skip
                finally:
                    model.close()
        finally:
            head.close()
    return 0 if ok else 1


def measure(
    rounds: int, repeat: int, where: Path, model: LatencyModel | None = None, head: str = ""
) -> bool:
    """Interleaved rounds of every mode; prints the table; did every report agree?"""
    times: dict[str, list[float]] = {m: [] for m in MODES}
    reports: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    for round_ in range(rounds):
        for mode in MODES:
            seconds, report = evaluate(mode, repeat, where, model, head)
            times[mode].append(seconds)
            reports.append(report)
            print(f"round {round_ + 1} {mode:<10} {seconds:6.1f} s", flush=True)
    load_after = os.getloadavg()
    same = all(r == reports[0] for r in reports)
    runs = reports[0]["runs"]
    steps = reports[0]["arms"][0]["steps"]["value"]
    print(f"\n{runs} runs per evaluation, {steps:.1f} steps a run; the same report every time: "
          f"{same}")  # fmt: skip
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(f"{'mode':<10} {'median s':>9} {'min s':>7} {'max s':>7}")
    for mode, values in times.items():
        print(f"{mode:<10} {statistics.median(values):9.1f} {min(values):7.1f} {max(values):7.1f}")
    for ray in ("ray", "ray-joined"):
        paired = [s / r for s, r in zip(times["sequential"], times[ray], strict=True)]
        medians = statistics.median(times["sequential"]) / statistics.median(times[ray])
        rounds = ", ".join(f"{p:.2f}x" for p in paired)
        middle = statistics.median(paired)
        print(f"speed-up sequential/{ray}: paired per round {rounds}; median of paired "
              f"{middle:.2f}x; of medians {medians:.2f}x")  # fmt: skip
    pool = statistics.median(times["sequential"]) / statistics.median(times["pool"])
    print(f"speed-up sequential/pool (--jobs 2): of medians {pool:.2f}x", flush=True)
    return same


if __name__ == "__main__":
    raise SystemExit(main())
