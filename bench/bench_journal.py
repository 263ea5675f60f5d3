"""Journal append cost in process: median µs per append and appends/s, against bare SQLite.

Method: a fresh workspace; one ``SQLiteJournal`` (WAL) appending a realistic ``tool.call`` event,
one transaction per append (BEGIN IMMEDIATE, read the chain head, INSERT, move the head,
COMMIT, with canonical JSON and a SHA-256 link). Baseline, interleaved call by call in the same
run on a second connection to the same WAL database: a bare ``INSERT`` of the same event's
canonical JSON into a one-column table, then ``COMMIT``. Both at the default
``synchronous=NORMAL``, then both again at ``synchronous=FULL`` (an fsync per commit). Also the
median cost of opening an existing journal (what each hook process pays once), and the
aggregate rate of 4 processes appending 2,000 events each at once (timed from a shared barrier).
"""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from keel.events import Event, ToolCallPayload
from keel.journal import SQLiteJournal, journal_path, open_journal


def _event() -> Event:
    payload = ToolCallPayload(
        tool="Bash",
        kind="exec",
        command="pytest -q tests/test_parser.py -k 'not slow'",
        args={"command": "pytest -q tests/test_parser.py -k 'not slow'", "timeout": 120000},
        tool_use_id="toolu_01A09q90qw90lq917835lq9",
    )
    return Event("tool.call", "bench-session", payload, agent="claude")


def _pair(root: Path, synchronous: str, rounds: int) -> tuple[list[float], list[float]]:
    journal = SQLiteJournal(journal_path(root), synchronous=synchronous)  # type: ignore[arg-type]
    bare = sqlite3.connect(journal_path(root), isolation_level=None)
    bare.execute(f"PRAGMA synchronous={synchronous}")
    bare.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    event = _event()
    body = event.to_json()
    for _ in range(200):  # warm up both paths
        journal.append(event)
        bare.execute("BEGIN")
        bare.execute("INSERT INTO bare (body) VALUES (?)", (body,))
        bare.execute("COMMIT")
    ours: list[float] = []
    base: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        journal.append(event)
        t1 = time.perf_counter()
        bare.execute("BEGIN")
        bare.execute("INSERT INTO bare (body) VALUES (?)", (body,))
        bare.execute("COMMIT")
        t2 = time.perf_counter()
        ours.append((t1 - t0) * 1e6)
        base.append((t2 - t1) * 1e6)
    if journal.verify():
        raise SystemExit("benchmark journal does not verify")
    journal.close()
    bare.close()
    return ours, base


def _open_cost(root: Path, rounds: int) -> float:
    times: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        open_journal(root).close()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def _writer(root: Path, barrier: Any, count: int) -> None:
    with open_journal(root) as journal:
        event = _event()
        barrier.wait()
        for _ in range(count):
            journal.append(event)


def _contended(root: Path, procs: int, count: int) -> float:
    """Seconds for ``procs`` processes to append ``count`` events each, all at once."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(procs + 1)
    workers = [ctx.Process(target=_writer, args=(root, barrier, count)) for _ in range(procs)]
    for worker in workers:
        worker.start()
    barrier.wait()
    t0 = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - t0
    if any(w.exitcode != 0 for w in workers):
        raise SystemExit("a benchmark writer failed")
    return elapsed


def _report(label: str, ours: list[float], base: list[float]) -> None:
    med, bmed = statistics.median(ours), statistics.median(base)
    rate, brate = len(ours) / (sum(ours) / 1e6), len(base) / (sum(base) / 1e6)
    print(
        f"{label:<14} journal.append median {med:7.1f} µs ({rate:8.0f} appends/s) | "
        f"bare INSERT+COMMIT median {bmed:7.1f} µs ({brate:8.0f}/s) | ratio {med / bmed:.2f}x"
    )


def main(rounds: int = 5000, full_rounds: int = 500) -> None:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-journal-"))
    try:
        open_journal(root).close()
        ours, base = _pair(root, "NORMAL", rounds)
        _report("sync=NORMAL", ours, base)
        ours, base = _pair(root, "FULL", full_rounds)
        _report("sync=FULL", ours, base)
        print(
            f"open existing journal (connect, WAL, migration check): {_open_cost(root, 200):.0f} µs"
        )
        procs, count = 4, 2000
        elapsed = _contended(root, procs, count)
        with open_journal(root) as journal:
            if journal.verify():
                raise SystemExit("benchmark journal does not verify after the contended run")
        total = procs * count
        print(
            f"{procs} processes x {count} appends at once: {elapsed:.2f} s wall, "
            f"{total / elapsed:.0f} appends/s aggregate"
        )
        print(f"n={rounds} (NORMAL), n={full_rounds} (FULL), interleaved call by call")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
