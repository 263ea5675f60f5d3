"""External attack material through ``keel policy check``, uncontained (the text policy alone).

From ../shared/data (never copied here): PayloadsAllTheThings' unix command-injection list,
each payload run as a line of its own and after ``ls``; RedCode-Exec's bash cases, each script
run as the agent would paste it; and the directory-traversal payloads as ``--write`` and
``--read`` paths. None may be allowed, with the developer or the strict preset, unless it is
clearly harmless; the test prints what was allowed and checks each against its justification.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_policy_attacks import attack_workspace_at, decide  # pyright: ignore[reportMissingImports]
from test_policy_data import _escapes  # pyright: ignore[reportMissingImports]

PRESETS = ("developer", "strict")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return attack_workspace_at(tmp_path_factory.mktemp("shared") / "ws")


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    return [line for line in text.splitlines() if line.strip()]


def _allowed(ws: Path, kind: str, values: list[str]) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for preset in PRESETS:
        for value in values:
            got = decide(ws, kind, value, preset, False)
            if got["decision"] == "allow":
                out.append((preset, value, got["rule"]))
    return out


def _report(what: str, allowed: list[tuple[str, str, str]], capsys: pytest.CaptureFixture[str]):
    with capsys.disabled():
        print(f"\n{what}: {len(allowed)} allowed")
        for preset, value, rule in allowed[:20]:
            print(f"  {preset} {rule}: {value[:100]!r}")


def test_command_injection_payloads(
    shared_data: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payloads = _lines(shared_data / "command-injection" / "command-execution-unix.txt")
    assert len(payloads) > 50
    lines = [*payloads, *(f"ls {p}" for p in payloads)]
    allowed = _allowed(ws, "command", lines)
    _report("command-injection", allowed, capsys)
    assert allowed == []


def test_redcode_bash_cases(shared_data: Path, ws: Path, capsys: pytest.CaptureFixture[str]):
    scripts: list[str] = []
    for file in sorted((shared_data / "redcode-bash-dev").glob("index*_*.json")):
        scripts.extend(case["Code"] for case in json.loads(file.read_text()))
    assert len(scripts) >= 270
    allowed = _allowed(ws, "command", scripts)
    _report("redcode-bash", allowed, capsys)
    assert allowed == []


def test_traversal_payloads_as_paths(
    shared_data: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payloads: list[str] = []
    for file in sorted((shared_data / "traversal").glob("*.txt")):
        payloads.extend(p.replace("{FILE}", "etc/passwd") for p in _lines(file))
    allowed = _allowed(ws, "write", payloads) + _allowed(ws, "read", payloads)
    _report("traversal", allowed, capsys)
    # Justified: each allowed payload stays inside the workspace on POSIX once decoded
    # (``...`` is a plain file name; ``AAAA/../etc/passwd`` is ``./etc/passwd``).
    assert all(not _escapes(value) for _, value, _ in allowed), allowed
