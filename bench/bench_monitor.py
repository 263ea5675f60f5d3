"""Monitor cost per event as one session grows to 10,000 events: flat, goal < 100 µs/event.

Method: a realistic synthetic session (exec, read, edit calls with varied and repeated
outputs, a plan, occasional failures and gate runs, a few loops so the ladder works) fed to
one in-process ``Monitor``: ``before_call`` for each call and ``after_call`` for each result.
Every event is timed; the median per 1,000-event block (robust to load from other processes)
is reported, best of 3 runs. The first block (history 0-1k) is the baseline for the last
(history 9k-10k), both in the same run, so the ratio shows whether cost grows with history.
Also: the same session through ``observe`` (journal events, as ``scan`` does), and a
hook-style round trip per call (``MonitorState.from_json`` + call + ``to_json``), with the
persisted state size.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from keel.config import KeelConfig, validate
from keel.core.calls import ToolCall, ToolResult
from keel.core.events import DataPayload, Event, ToolCallPayload, ToolResultPayload
from keel.monitor import Monitor, MonitorState

EVENTS = 10_000
BLOCK = 1_000


def session(n_calls: int) -> list[tuple[ToolCall, ToolResult]]:
    """``n_calls`` (call, result) pairs of a plausible long session."""
    pairs: list[tuple[ToolCall, ToolResult]] = []
    for i in range(n_calls):
        tid = f"t{i}"
        phase = i % 50
        if phase < 5:  # a short loop every 50 calls
            call = ToolCall("Bash", "exec", command="grep -rn TODO src", tool_use_id=tid)
            result = ToolResult("Bash", "exec", True, "src/a.py:3: # TODO", None, 0, tid)
        elif phase % 7 == 0:
            path = f"src/mod{i % 13}.py"
            args = {"file_path": path, "old_string": "a", "new_string": f"b{i}"}
            call = ToolCall("Edit", "edit", paths=(path,), tool_use_id=tid, args=args)
            result = ToolResult("Edit", "edit", True, "The file has been updated.", tool_use_id=tid)
        elif phase % 5 == 0:
            call = ToolCall("Bash", "exec", command="pytest -q", tool_use_id=tid)
            ok = i % 3 != 0
            out = f"{'12 passed' if ok else '1 failed, 11 passed'} in 0.{i % 9}s\n" + "." * 200
            result = ToolResult("Bash", "exec", ok, out, None, 0 if ok else 1, tid)
        elif phase % 3 == 0:
            call = ToolCall("Read", "read", paths=(f"src/mod{i % 17}.py",), tool_use_id=tid)
            result = ToolResult(
                "Read",
                "read",
                True,
                f"def f{i % 17}():\n    return {i % 17}\n" * 40,
                tool_use_id=tid,
            )
        else:
            command = f"rg -n 'name_{i % 23}' src | head -20"
            call = ToolCall("Bash", "exec", command=command, tool_use_id=tid)
            result = ToolResult(
                "Bash", "exec", True, f"src/x.py:{i}: name_{i % 23}\n" * 5, None, 0, tid
            )
        pairs.append((call, result))
    return pairs


def config() -> KeelConfig:
    # budgets high enough that the session is never stopped: measure the detectors, not deny
    return validate(
        KeelConfig,
        {
            "limits": {"max_steps": 1_000_000, "max_wall_seconds": 1e9},
            "gates": {"required": ["pytest -q"]},
        },
    )


def blocks_live(pairs: list[tuple[ToolCall, ToolResult]]) -> list[float]:
    """Median µs per event (half a before_call + after_call pair) in each 1,000-event block."""
    monitor = Monitor(config())
    monitor.observe(
        Event("plan", "b", DataPayload({"steps": ["fix src/mod1.py", "run pytest -q"]}))
    )
    costs: list[float] = []
    clock = time.perf_counter
    for call, result in pairs:
        t0 = clock()
        monitor.before_call(call)
        monitor.after_call(result)
        costs.append((clock() - t0) * 1e6 / 2)
        monitor.drain()
    per_block = BLOCK // 2
    return [statistics.median(costs[i : i + per_block]) for i in range(0, len(costs), per_block)]


def blocks_observe(pairs: list[tuple[ToolCall, ToolResult]]) -> list[float]:
    """Median µs per ``observe(event)`` in each 1,000-event block."""
    events: list[Event] = []
    for call, result in pairs:
        payload = ToolCallPayload(
            call.tool, call.kind, call.command, list(call.paths), None, call.args, call.tool_use_id
        )
        events.append(Event("tool.call", "b", payload))
        events.append(
            Event(
                "tool.result",
                "b",
                ToolResultPayload(
                    result.tool,
                    result.ok,
                    result.output,
                    None,
                    result.exit_code,
                    result.tool_use_id,
                ),
            )
        )
    monitor = Monitor(config())
    costs: list[float] = []
    clock = time.perf_counter
    for event in events:
        t0 = clock()
        monitor.observe(event)
        costs.append((clock() - t0) * 1e6)
    return [statistics.median(costs[i : i + BLOCK]) for i in range(0, len(costs), BLOCK)]


def hook_round_trips(pairs: list[tuple[ToolCall, ToolResult]]) -> tuple[list[float], int]:
    """Median µs of load-state + before + after + save-state per call, in 3 windows of 500
    calls (the start, once the state's caps are full, the end); and the final state bytes."""
    cfg = config()
    text = MonitorState().to_json()
    windows = {0: [], 1000: [], len(pairs) - 500: []}
    costs: list[float] = []
    for call, result in pairs:
        t0 = time.perf_counter()
        monitor = Monitor(cfg, MonitorState.from_json(text))
        monitor.before_call(call)
        monitor.after_call(result)
        text = monitor.state.to_json()
        costs.append((time.perf_counter() - t0) * 1e6)
    medians = [statistics.median(costs[start : start + 500]) for start in windows]
    return medians, len(text)


def best_of(runs: int, fn: Callable[[], list[float]]) -> list[float]:
    results = [fn() for _ in range(runs)]
    return [min(block) for block in zip(*results, strict=True)]


def main() -> None:
    pairs = session(EVENTS // 2)
    live = best_of(3, lambda: blocks_live(pairs))
    observed = best_of(3, lambda: blocks_observe(pairs))
    print(
        f"events per session: {EVENTS} ({EVENTS // 2} calls + results); "
        "µs/event per 1,000-event block"
    )
    print("block:          " + " ".join(f"{i + 1:>5}" for i in range(len(live))))
    print("before/after:   " + " ".join(f"{c:5.1f}" for c in live))
    print("observe(event): " + " ".join(f"{c:5.1f}" for c in observed))
    print(
        f"last/first block: before/after {live[-1] / live[0]:.2f}x, "
        f"observe {observed[-1] / observed[0]:.2f}x; "
        f"mean of block medians {statistics.mean(live):.1f} / {statistics.mean(observed):.1f} µs"
    )
    (first, full, last), size = hook_round_trips(pairs)
    print(
        "hook round trip per call (state from_json + before + after + to_json), median µs: "
        f"calls 1-500 {first:.0f}, calls 1001-1500 {full:.0f}, last 500 {last:.0f}; "
        f"state {size} bytes"
    )


if __name__ == "__main__":
    main()
