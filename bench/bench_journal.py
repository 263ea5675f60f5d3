"""Journal append cost in process: median µs per transaction and per second, against bare SQLite.

Method: a fresh workspace; one ``SQLiteJournal`` (WAL) appending a realistic ``tool.call`` event,
one transaction per append (BEGIN IMMEDIATE, read the chain head, INSERT, move the head,
COMMIT, with canonical JSON and an HMAC-SHA256 link, then the head recorded outside the
database). Then the hook's transaction: ``append_many`` of two events (call + decision) with a
request id, its outcome and the session state. Baseline, interleaved call by call in the same
run on a second connection to the same WAL database: a bare ``INSERT`` of the same events'
canonical JSON into a one-column table, then ``COMMIT``. All at the default
``synchronous=NORMAL``, then the single append again at ``synchronous=FULL`` (an fsync per
commit). Also the median cost of opening an existing journal (what each hook process pays
once), and the aggregate rate of 4 processes appending 2,000 events each at once (timed from
a shared barrier).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.core.events import DecisionPayload, Event, ToolCallPayload
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


def _decision() -> Event:
    payload = DecisionPayload(
        "allow",
        "preset.developer.allow",
        "tests are fine",
        tool_use_id="toolu_01A09q90qw90lq917835lq9",
        subject="pytest -q tests/test_parser.py -k 'not slow'",
    )
    return Event("decision", "bench-session", payload, agent="claude")


def _single(journal: SQLiteJournal) -> Callable[[], object]:
    event = _event()
    return lambda: journal.append(event)


def _hook_transaction(journal: SQLiteJournal) -> Callable[[], object]:
    events = [_event(), _decision()]
    ids = itertools.count()
    prefix = os.urandom(4).hex()
    state = {"turn": 3, "calls": 17, "last": "pytest -q"}

    def run() -> object:
        n = next(ids)
        return journal.append_many(
            events,
            request_id=f"{prefix}-{n}",
            outcome={"decision": "allow", "rule": "preset.developer.allow"},
            session_state=("bench-session", {**state, "n": n}),
            deadline=time.monotonic() + 5,
        )

    return run


def _pair(
    root: Path,
    synchronous: str,
    rounds: int,
    op: Callable[[SQLiteJournal], Callable[[], object]] = _single,
    per_call: int = 1,
) -> tuple[list[float], list[float]]:
    journal = SQLiteJournal(journal_path(root), synchronous=synchronous)  # type: ignore[arg-type]
    bare = sqlite3.connect(journal_path(root), isolation_level=None)
    bare.execute(f"PRAGMA synchronous={synchronous}")
    bare.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    ours_op = op(journal)
    bodies = [(_event().to_json(),)] * per_call

    def base_op() -> None:
        bare.execute("BEGIN")
        bare.executemany("INSERT INTO bare (body) VALUES (?)", bodies)
        bare.execute("COMMIT")

    for _ in range(200):  # warm up both paths
        ours_op()
        base_op()
    ours: list[float] = []
    base: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ours_op()
        t1 = time.perf_counter()
        base_op()
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
    p99 = statistics.quantiles(ours, n=100)[98]
    rate, brate = len(ours) / (sum(ours) / 1e6), len(base) / (sum(base) / 1e6)
    print(
        f"{label:<26} median {med:7.1f} µs, p99 {p99:7.1f} µs ({rate:7.0f}/s) | "
        f"bare INSERT+COMMIT median {bmed:6.1f} µs ({brate:7.0f}/s) | ratio {med / bmed:.2f}x"
    )


def main(rounds: int = 5000, full_rounds: int = 500) -> None:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-journal-"))
    try:
        open_journal(root).close()
        ours, base = _pair(root, "NORMAL", rounds)
        _report("append, sync=NORMAL", ours, base)
        ours, base = _pair(root, "NORMAL", rounds, _hook_transaction, per_call=2)
        _report("append_many(2)+req+state", ours, base)
        ours, base = _pair(root, "FULL", full_rounds)
        _report("append, sync=FULL", ours, base)
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
        print(
            f"n={rounds} (NORMAL), n={full_rounds} (FULL), interleaved call by call; "
            "every journal figure includes writing the head record"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
