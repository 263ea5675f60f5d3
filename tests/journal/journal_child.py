"""Child processes for the journal tests: ``python journal_child.py ACTION ARGS...``.

- ``crash ROOT N``: append N events, one transaction each, then SIGKILL itself (no close, so
  the WAL is left as a crash leaves it).
- ``pause ROOT``: commit 3 events, then start a 50-event ``append_many`` that prints
  ``inside`` and sleeps half way through its transaction (the parent kills it there).
- ``request ROOT REQUEST_ID GATE``: wait for GATE, then ``append_many`` two events under
  REQUEST_ID; print ``stored`` or ``answered <outcome JSON>``.
- ``key GATE``: wait for GATE, then print the journal key in hex.
- ``lock DB``: take SQLite's write lock on DB, print ``locked``, hold it until stdin closes.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

from keel.core.errors import AlreadyAnswered
from keel.core.events import DataPayload, Event
from keel.journal import journal_key, open_journal


def _wait(gate: Path) -> None:
    while not gate.exists():
        time.sleep(0.001)


def _event(session: str, i: int) -> Event:
    return Event("prompt", session, DataPayload({"i": i}), agent="child")


def crash(root: Path, count: int) -> None:
    journal = open_journal(root)
    for i in range(count):
        journal.append(_event("crash", i))
    print("done", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def pause(root: Path) -> None:
    journal = open_journal(root)
    journal.append_many([_event("before", i) for i in range(3)])

    def stop_here() -> None:
        print("inside", flush=True)
        time.sleep(120)

    db = journal._db  # pyright: ignore[reportPrivateUsage]
    assert db is not None
    db.create_function("keel_test_pause", 0, stop_here)
    db.execute(
        "CREATE TEMP TRIGGER pause_mid AFTER INSERT ON main.events WHEN NEW.seq = 28 "
        "BEGIN SELECT keel_test_pause(); END"
    )
    journal.append_many(
        [_event("batch", i) for i in range(50)],
        request_id="batch-1",
        outcome={"decision": "allow"},
        session_state=("batch", {"step": 1}),
    )
    print("committed", flush=True)


def request(root: Path, request_id: str, gate: Path) -> None:
    with open_journal(root) as journal:
        print("ready", flush=True)
        _wait(gate)
        try:
            journal.append_many(
                [_event(request_id, 0), _event(request_id, 1)],
                request_id=request_id,
                outcome={"by": os.getpid()},
            )
        except AlreadyAnswered as answer:
            print("answered", json.dumps(answer.outcome), flush=True)
        else:
            print("stored", os.getpid(), flush=True)


def key(gate: Path) -> None:
    print("ready", flush=True)
    _wait(gate)
    print(journal_key().hex(), flush=True)


def lock(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.read()
    db.execute("ROLLBACK")
    db.close()


def main() -> None:
    action, args = sys.argv[1], sys.argv[2:]
    if action == "crash":
        crash(Path(args[0]), int(args[1]))
    elif action == "pause":
        pause(Path(args[0]))
    elif action == "request":
        request(Path(args[0]), args[1], Path(args[2]))
    elif action == "key":
        key(Path(args[0]))
    elif action == "lock":
        lock(Path(args[0]))
    else:
        raise SystemExit(f"unknown action {action!r}")


if __name__ == "__main__":
    main()
