"""The monitor's string helpers: keys, output hashes, polls, patches, test paths.

Command lines are read by the policy (``tests/policy/test_policy_facts.py``); here, only how
the monitor uses what the policy says.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from keel.config import KeelConfig
from keel.core.calls import ToolCall
from keel.monitor._calls import is_poll
from keel.monitor._text import call_key, normalize_output, output_hash
from keel.monitor.detectors.weakening import is_test_path
from keel.policy import Policy

POLICY = Policy.from_config(KeelConfig(), Path("/"))


def test_call_key_ignores_descriptions_but_not_arguments() -> None:
    a = ToolCall("Bash", "exec", args={"command": "ls", "description": "list"})
    b = ToolCall("Bash", "exec", args={"command": "ls", "description": "again"})
    c = ToolCall("Bash", "exec", args={"command": "ls -la"})
    d = ToolCall("Shell", "exec", args={"command": "ls"})
    assert call_key(a) == call_key(b) != call_key(c)
    assert call_key(a) != call_key(d)


def test_output_hash_masks_timings_pids_and_addresses() -> None:
    one = "3 passed in 0.12s\npid 4242 at 0x7f3a9c0d1e20 on 2026-11-30T13:20:01Z took 15ms"
    two = "3 passed in 0.98s\npid 99 at 0x7f3a9c0d2f00 on 2026-12-01T08:00:00Z took 3ms"
    assert output_hash(one) == output_hash(two)
    assert output_hash("3 of 12 jobs done") != output_hash("4 of 12 jobs done")
    codex = "Chunk ID: {}\nWall time: 0.0{} seconds\nProcess exited with code 0\nOutput:\nok"
    assert output_hash(codex.format("4f2a9c", 5)) == output_hash(codex.format("b71e02", 7))
    assert normalize_output("x" * 200_000).startswith("x")


def _poll(command: str) -> bool:
    words = POLICY.command_facts(command).words
    return is_poll(ToolCall("Bash", "exec", command=command), words)


def test_is_poll() -> None:
    assert _poll("sleep 10 && gh run view 1")
    assert _poll("git status")
    assert _poll("kubectl get pods --watch")
    assert _poll("bash -lc 'sleep 5'")
    assert is_poll(ToolCall("BashOutput", "exec"), ())
    assert not _poll("pytest -q")
    assert not _poll("cat status.txt")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_api.py", True),
        ("/w/pkg/tests/helpers.py", True),
        ("src/test_utils.py", True),
        ("pkg/x_test.go", True),
        ("web/button.test.tsx", True),
        ("web/__tests__/a.js", True),
        ("conftest.py", True),
        ("src/testing.py", False),
        ("src/contest.py", False),
        ("docs/latest.md", False),
    ],
)
def test_is_test_path(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected


def test_monitor_import_stays_off_pydantic_typer_rich_yaml() -> None:
    code = (
        "import sys, keel.monitor\n"
        "bad = [m for m in ('pydantic', 'typer', 'rich', 'yaml') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(src)},
    )
    assert out.stdout.strip() == ""
