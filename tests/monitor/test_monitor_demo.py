"""The monitor's demo section: a loop caught, guided (hint, then correct), then stopped."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from keel.demo.monitor import run
from keel.journal import open_journal


def test_demo_shows_hint_correct_stop_and_journals_them(workdir: Path) -> None:
    out = io.StringIO()
    run(Console(file=out, width=200), workdir)
    text = out.getvalue()
    assert "allow + hint" in text
    assert "then correct" in text and "deny (correct)" in text
    assert "deny (replan)" in text and "deny (stop)" in text
    assert "after an edit, no test run: no" in text
    assert "after `pytest -q` passed: yes" in text
    with open_journal(workdir / "monitor-demo") as journal:
        levels = [e.payload.level for e in journal.events(kinds=["diagnostic"])]  # pyright: ignore[reportAttributeAccessIssue]
    assert levels[:4] == ["hint", "correct", "replan", "stop"]
