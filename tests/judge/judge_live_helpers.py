"""Helpers of the live-judge tests (hooks, real clients): keel.toml, verdicts, waiting, landing.

A live judgement runs in a process of its own (``_launch.py judge ROOT ...``, on a thread of
``keel hookd`` or inline in a hook process) and journals one ``judgement`` event; ``landed``
says it is over: journaled, and its process gone (so a deliverable verdict is kept for the
session's next call). Used by tests/judge/test_judge_live_hooks.py and
tests/clients/test_clients_judge.py.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.core.events import DataPayload
from keel.journal import open_journal

LIMIT = 60.0
"""Seconds after which waiting for a judgement fails the test (a bound, not a measurement)."""


def judge_toml(spec: str, **judge: Any) -> str:
    """keel.toml: the developer preset, a repeat hint at 2, the judge ``spec`` on hints."""
    settings = {"min_confidence": 0.7, "timeout_seconds": 20, **judge}
    lines = ['[policy]\npreset = "developer"\n', "[monitor]\nrepeat_hint = 2\n", "[judge]"]
    lines.append(f'model = "{spec}"')
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    lines.append('\n[judge.when]\non_finding = "hint"\non_finish = false')
    return "\n".join(lines) + "\n"


def verdict_json(category: str = "gaming", confidence: float = 0.9, step: int = 2) -> str:
    """The judge model's answer: a problem of ``category``, resting on ``step``."""
    return json.dumps({
        "verdict": "problem", "category": category, "confidence": confidence,
        "evidence": [step], "suggestion": "Put the assertion back and fix calc.add instead.",
    })  # fmt: skip


def wait_for(what: str, check: Callable[[], Any], limit: float = LIMIT) -> Any:
    """``check()``'s first truthy value; AssertionError after ``limit`` seconds."""
    end = time.monotonic() + limit
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def judge_processes(root: Path | None = None) -> list[int]:
    """The judge processes running now (``_launch.py judge``); of workspace ``root`` if given."""
    where = os.path.realpath(root).encode() if root is not None else None
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) < 4 or not argv[2].endswith(b"_launch.py") or argv[3] != b"judge":
            continue
        if where is None or (len(argv) > 4 and os.path.realpath(argv[4]) == where):
            found.append(int(entry.name))
    return found


def landed(root: Path, session: str | None = "live") -> list[dict[str, Any]]:
    """The session's judgements (every session's: None), once journaled and their process gone."""
    judged = journal_of(root, "judgement", session)
    return judged if judged and not judge_processes(root) else []


def journal_of(root: Path, kind: str, session: str | None = "live") -> list[dict[str, Any]]:
    """The ``kind`` events of ``session`` (of every session: None), as dicts with ``agent``."""
    with open_journal(root) as journal:
        events = list(journal.events(session_id=session, kinds=(kind,)))
    return [
        {
            "agent": e.agent,
            **(e.payload.data if isinstance(e.payload, DataPayload) else {"payload": e.payload}),
        }
        for e in events
    ]
