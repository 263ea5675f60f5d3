"""Benchmark: ``keel ui`` opening a session of a 10,000-event journal (issue 26: under 1 s).

A fresh workspace (``KEEL_STATE_DIR`` in a temporary directory, so the journal key is the
bench's own) gets a journal of ``--events`` events (default 10,000) written through the real
``SQLiteJournal``: one big session holding 90% of them (tool calls with their decisions and
results, a checkpoint every 10 calls, guidance every 25, model calls every 5) and 100 small
sessions of a few events each. Then ``keel ui --no-browser`` runs as a subprocess on a free
port, as a user starts it.

Measured, each round interleaved (both sides see the same machine):

- **open (HTTP)**: ``GET /api/timeline?session=BIG``, the whole JSON the timeline page renders
  (every event read from SQLite, parsed, described, folded, encoded), to the last byte;
- baseline **static**: ``GET /static/app.js`` from the same server (the server's own cost);
- baseline **keel show**: ``keel show BIG --json``, the same session as the command prints it
  (interpreter start included);
- **sessions (HTTP)**: ``GET /api/sessions``, the first page;
- **open (Chromium)**, when Playwright and the system's Chromium are there: a fresh page's
  load of ``/#/s/BIG`` until every row of the timeline is in the DOM (fewer rounds).

Reported: the median of each, and the ratio open / keel show per round (paired). HTTP is
measured with a fresh connection per request (as a browser's first load), from this process.

Run: ``.venv/bin/python bench/bench_ui.py [--events N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KEEL = str(Path(sys.executable).with_name("keel"))
BIG = "bench-big-session"
SMALL = 100
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)")


def _big_session(n: int) -> list[Any]:
    from keel.core.events import (
        CheckpointPayload,
        DataPayload,
        DecisionPayload,
        Event,
        GuidancePayload,
        ToolCallPayload,
        ToolResultPayload,
    )

    events: list[Any] = []
    call_no = 0
    while len(events) < n:
        call_no += 1
        command = f"pytest -q tests/test_module_{call_no % 40}.py -k 'case_{call_no}'"
        use = f"toolu_{call_no}"
        called = ToolCallPayload("Bash", "exec", command=command, args={"command": command},
                                 tool_use_id=use)  # fmt: skip
        call = Event("tool.call", BIG, called, agent="claude")
        verdict = "deny" if call_no % 17 == 0 else "allow"
        decision = DecisionPayload(verdict, "preset.developer.allow", "tests are fine",
                                   tool_use_id=use, subject=command)  # fmt: skip
        result = ToolResultPayload("Bash", True, output="." * 200, exit_code=0, tool_use_id=use)
        answer = {"agent": "claude", "parent_span_id": call.span_id}
        events += [call, Event("decision", BIG, decision, **answer),
                   Event("tool.result", BIG, result, **answer)]  # fmt: skip
        if call_no % 10 == 0:
            cp = CheckpointPayload(f"{call_no:012x}", "Write", f"toolu_{call_no}", ["src/app.py"],
                                   {"kind": "before"})  # fmt: skip
            events.append(Event("checkpoint", BIG, cp, agent="claude"))
        if call_no % 25 == 0:
            guidance = GuidancePayload("hint", "you ran the same tests 3 times", "repeat")
            events.append(Event("guidance", BIG, guidance, agent="claude"))
        if call_no % 5 == 0:
            usage = {"input_tokens": 1200, "output_tokens": 80}
            data = {"model": "bench", "usage": usage, "cost_usd": 0.0004, "latency_ms": 900.0,
                    "finish_reason": "tool_calls", "tool_calls": []}  # fmt: skip
            events.append(Event("model.response", BIG, DataPayload(data), agent="keel"))
    return events[:n]


def _small_session(i: int, n: int) -> list[Any]:
    from keel.core.events import DecisionPayload, Event, ToolCallPayload

    sid = f"bench-small-{i:03d}"
    events: list[Any] = []
    for k in range(n // 2):
        call = Event("tool.call", sid, ToolCallPayload("Read", "read", paths=[f"src/m{k}.py"]))
        decision = DecisionPayload("allow", "path.in_scope", "in scope")
        events += [call, Event("decision", sid, decision, parent_span_id=call.span_id)]
    return events


def build_journal(root: Path, total: int) -> int:
    """A journal of ``total`` events at ``root``; the big session's event count."""
    from keel.journal import open_journal

    big = total * 9 // 10
    per_small = max(2, (total - big) // SMALL)
    events = _big_session(big)
    for i in range(SMALL):
        events += _small_session(i, per_small)
    events = events[:total]
    with open_journal(root) as journal:
        for start in range(0, len(events), 500):
            journal.append_many(events[start : start + 500])
    return big


def start_server(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [KEEL, "ui", "--no-browser", "-w", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
        env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        found = URL.search(line)
        if found:
            return proc, found.group(0), found.group(2)
    raise SystemExit("keel ui printed no URL")


def fetch(url: str, token: str) -> float:
    """Seconds to the last byte of one GET (a fresh connection, no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, headers={"X-Keel-Token": token})
    started = time.perf_counter()
    with opener.open(req, timeout=60) as res:
        res.read()
    return time.perf_counter() - started


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


MARKS = ("keel:data", "keel:painted", "keel:complete")
"""What the page marks after ``keel:open`` (static/app.js): data in, first rows painted, all
rows in the DOM."""


def chromium_opens(url: str, base: str, rows: int, rounds: int) -> dict[str, list[float]] | str:
    """Per round, seconds from opening the view to each of ``MARKS``, and to the last row as
    Playwright sees it (its own overhead included); or why it could not be measured."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "Playwright is not installed"
    if not os.path.isfile(CHROMIUM):
        return f"no Chromium at {CHROMIUM}"
    times: dict[str, list[float]] = {name: [] for name in (*MARKS, "playwright")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        for n in range(rounds + 1):  # the first round warms the browser up
            context = browser.new_context()
            page = context.new_page()
            page.goto(url)
            page.wait_for_selector("#sessions")
            started = time.perf_counter()
            page.goto(f"{base}/#/s/{BIG}")
            last = page.locator("#timeline .item").nth(rows - 1)
            last.wait_for(state="attached", timeout=60_000)  # the CSP forbids eval'd waits
            waited = time.perf_counter() - started
            page.locator("#live:not([hidden])").wait_for()  # the stream starts after the rows
            marks = page.evaluate(
                "() => Object.fromEntries(performance.getEntriesByType('mark')"
                ".map(m => [m.name, m.startTime]))"
            )  # evaluated over CDP, which the page's CSP does not govern
            context.close()
            if n == 0:
                continue
            times["playwright"].append(waited)
            for name in MARKS:
                times[name].append((marks[name] - marks["keel:open"]) / 1000)
        browser.close()
    return times


def ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--browser-rounds", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="keel-bench-ui-"))
    env = {**os.environ, "KEEL_STATE_DIR": str(tmp / "state"), "KEEL_HOOKD": "0"}
    os.environ["KEEL_STATE_DIR"] = env["KEEL_STATE_DIR"]
    root = tmp / "ws"
    root.mkdir()
    (root / "keel.toml").write_text('[policy]\npreset = "developer"\n', encoding="utf-8")
    big = build_journal(root, args.events)
    proc, url, token = start_server(root, env)
    base = url.split("/?", 1)[0]
    try:
        data = json.loads(urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            urllib.request.Request(f"{base}/api/timeline?session={BIG}",
                                   headers={"X-Keel-Token": token})).read())  # fmt: skip
        rows = len(data["items"])
        show = [KEEL, "show", BIG, "--json", "-w", str(root)]
        times: dict[str, list[float]] = {"open": [], "static": [], "show": [], "sessions": []}
        fetch(f"{base}/api/timeline?session={BIG}", token)  # warm-up
        for _ in range(args.rounds):
            times["open"].append(fetch(f"{base}/api/timeline?session={BIG}", token))
            times["static"].append(fetch(f"{base}/static/app.js", token))
            times["show"].append(timed(lambda: subprocess.run(show, env=env, check=True,
                                                              capture_output=True)))  # fmt: skip
            times["sessions"].append(fetch(f"{base}/api/sessions", token))
        browser = chromium_opens(url, base, rows, args.browser_rounds)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    paired = [o / s for o, s in zip(times["open"], times["show"], strict=True)]
    print(f"journal: {args.events} events; the session opened: {big} events, {rows} rows")
    print(f"open (HTTP, /api/timeline)   {ms(times['open']):8.1f} ms")
    print(f"  baseline: static file      {ms(times['static']):8.1f} ms")
    print(f"  baseline: keel show --json {ms(times['show']):8.1f} ms")
    print(f"  open / keel show           {statistics.median(paired):8.2f}x (paired median)")
    print(f"sessions (HTTP, /api/sessions) {ms(times['sessions']):6.1f} ms")
    if isinstance(browser, str):
        print(f"open (Chromium): not measured: {browser}")
        return
    print(f"open (Chromium, {args.browser_rounds} rounds, from the view's start):")
    for name in (*MARKS, "playwright"):
        values = browser[name]
        print(f"  {name:<14} {ms(values):8.1f} ms (min {min(values) * 1000:.1f}, "
              f"max {max(values) * 1000:.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
