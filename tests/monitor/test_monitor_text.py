"""The monitor's string helpers: keys, output hashes, commands, gates, patches, test paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from keel.calls import ToolCall
from keel.monitor._text import (
    call_key,
    command_facts,
    gate_matches,
    is_poll,
    normalize_output,
    output_hash,
    patch_changes,
    unwrap,
)
from keel.monitor._weakening import is_test_path


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


@pytest.mark.parametrize(
    ("command", "written", "mutates", "read_only", "test_run"),
    [
        ("ls -la src", (), False, True, False),
        ("git diff --stat && git status", (), False, True, False),
        ("cat a.txt > b.txt", ("b.txt",), True, False, False),
        ("echo hi >> notes.md 2>&1", ("notes.md",), True, False, False),
        ("grep x y 2>/dev/null", (), False, True, False),
        ("sed -i 's/a/b/' src/x.py src/y.py", ("src/x.py", "src/y.py"), True, False, False),
        ("rm -rf build", ("build",), True, False, False),
        ("cp a.py b.py", ("b.py",), True, False, False),
        ("git checkout -- src/x.py", (), True, False, False),
        ("find . -name '*.pyc' -delete", (), False, False, False),
        ("cat <<'EOF' > gen.py\nx = a > b\nEOF", ("gen.py",), True, False, False),
        ("bash -lc 'pytest -q'", (), False, False, True),
        ("cd web && npm test", (), False, False, True),
        ("python -m pytest tests/test_x.py -k foo", (), False, False, True),
        ("python script.py", (), False, False, False),
    ],
)
def test_command_facts(
    command: str, written: tuple[str, ...], mutates: bool, read_only: bool, test_run: bool
) -> None:
    facts = command_facts(command)
    assert facts.written == written
    assert (facts.mutates, facts.read_only, facts.test_run) == (mutates, read_only, test_run)


def test_unwrap() -> None:
    assert unwrap("bash -lc 'pytest -q'") == "pytest -q"
    assert unwrap("sh -c 'a && b'") == "a && b"
    assert unwrap("bash script.sh") == "bash script.sh"
    assert unwrap("bash -lc 'unbalanced") == "bash -lc 'unbalanced"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q", True),
        ("  pytest   -q ", True),
        ("cd /w && pytest -q", True),
        ("pytest -q 2>&1", True),
        ("pytest -q > log.txt", True),
        ("bash -lc 'pytest -q'", True),
        ("pytest -q || true", False),
        ("pytest -q | tail -3", False),
        ("pytest -q; echo done", False),
        ("pytest -q tests/test_one.py", False),
        ("pytest", False),
    ],
)
def test_gate_matches(command: str, expected: bool) -> None:
    assert gate_matches(command, "pytest -q") is expected


def test_is_poll() -> None:
    assert is_poll(ToolCall("Bash", "exec", command="sleep 10 && gh run view 1"))
    assert is_poll(ToolCall("Bash", "exec", command="git status"))
    assert is_poll(ToolCall("BashOutput", "exec"))
    assert not is_poll(ToolCall("Bash", "exec", command="pytest -q"))


def test_patch_changes_both_dialects() -> None:
    codex = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n"
        "*** Add File: src/b.py\n+print(1)\n*** Delete File: src/c.py\n*** End Patch\n"
    )
    got = patch_changes(codex)
    assert got == {
        "src/a.py": (["x = 2"], ["x = 1"], "update"),
        "src/b.py": (["print(1)"], [], "add"),
        "src/c.py": ([], [], "delete"),
    }
    unified = (
        "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n"
        "--- a comment\n select 1;\n--- a/old.py\n+++ /dev/null\n"
    )
    got = patch_changes(unified)
    assert got["q.sql"] == ([], ["-- a comment"], "update")
    assert got["old.py"][2] == "delete"


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
