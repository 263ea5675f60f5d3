"""Shared pieces of the agent tests: a workspace with a false assumption, and running keel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _support import keel
from keel.core.events import DataPayload, Event
from keel.journal import read_journal

REPORT = """import csv


def total(path):
    with open(path) as handle:
        return sum(float(row["sales"]) for row in csv.DictReader(handle))


if __name__ == "__main__":
    print(total("data/sales.csv"))
"""
CHECK = """import subprocess
import sys

done = subprocess.run([sys.executable, "report.py"], capture_output=True, text=True)
printed = done.stdout.strip()
last = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
print("report.py printed", repr(printed), *last)
sys.exit(0 if printed == "15.0" else 1)
"""
KEEL_TOML = """[gates]
required = ["python3 check.py"]

[[constraints]]
text = "Never change the data files."
protect = ["data/**"]
"""


def sales_workspace(root: Path, *, gates: bool = True) -> Path:
    """A repository whose task says ``sales`` while the CSV's column is ``revenue``."""
    (root / "data").mkdir()
    (root / "data" / "sales.csv").write_text("region,revenue\nnorth,10\nsouth,5\n")
    (root / "report.py").write_text(REPORT)
    (root / "check.py").write_text(CHECK)
    if gates:
        (root / "keel.toml").write_text(KEEL_TOML)
    return root


def run_json(root: Path, url: str, task: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    """``keel run TASK --json`` against a fake server: exit code, the object, stderr."""
    done = keel(
        "run",
        task,
        "--model",
        "openai:fake",
        "--base-url",
        url,
        "--non-interactive",
        "--json",
        *extra,
        workspace=root,
    )
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def session_events(root: Path, session: str, *kinds: str) -> list[Event]:
    """The journaled events of a session."""
    with read_journal(root) as journal:
        return list(journal.events(session_id=session, kinds=kinds or None))


def data_of(event: Event) -> dict[str, Any]:
    """An event's free-form data ({} for typed payloads)."""
    return event.payload.data if isinstance(event.payload, DataPayload) else {}


def headers_plan(column: str) -> dict[str, Any]:
    """An evidence plan: the CSV's headers, and whether ``column`` is among them."""
    return {
        "goal": f"check that data/sales.csv has a {column} column",
        "steps": [
            {
                "id": "s1",
                "type": "evidence_collection",
                "description": "read the headers",
                "action": {"function": "parsing.inspect_csv_headers", "args": ["data/sales.csv"]},
                "output_to": "headers",
            },
            {
                "id": "s2",
                "type": "conditional",
                "description": f"is {column} a column",
                "condition": {"op": "in", "vars": [column, "{{headers}}"]},
                "true_branch": [],
                "false_branch": [],
            },
        ],
    }


def replace_patch(path: str, old: str, new: str, text: str) -> str:
    """A unified diff that replaces the one line containing ``old`` in ``text``."""
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if old in line)
    return (
        f"--- a/{path}\n+++ b/{path}\n@@ -{index + 1},1 +{index + 1},1 @@\n"
        f"-{lines[index]}\n+{lines[index].replace(old, new)}\n"
    )
