"""The real Claude Code calling keel's tools through ``keel mcp`` (``--mcp-config``), offline.

A fake model on 127.0.0.1 scripts Claude Code to call ``mcp__keel__run`` with a dangerous
command, then with an everyday one. keel's server refuses the first (its marker outside the
workspace survives, and the model is told the rule and why) and runs the second (its output
reaches the model). Skipped when Claude Code is not installed (scripts/install-clients.sh),
failing instead when KEEL_REQUIRE_ALL=1; so is a missing MCP SDK.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from client_harness import Turn, make_base, new_project, run_client

from _support import KEEL, keel, skip_or_fail
from keel.journal import read_journal

pytestmark = [pytest.mark.clients, pytest.mark.slow]

KEEL_TOML = '[policy]\npreset = "developer"\n'


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _require_sdk() -> None:
    from importlib.util import find_spec

    try:
        found = find_spec("mcp.server.lowlevel") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        skip_or_fail("the MCP SDK is not installed: keel install mcp (keel-guard[mcp])")


def _mcp_config(server: dict[str, Any]) -> list[str]:
    config = {"mcpServers": {"keel": server}}
    return ["--mcp-config", json.dumps(config), "--strict-mcp-config"]


def test_claude_code_gets_keels_refusal_and_the_everyday_output_through_keel_mcp(
    base: Path,
) -> None:
    _require_sdk()
    project = new_project(base, KEEL_TOML, {"notes.txt": "hi\n"})
    outside = base / "outside"
    outside.mkdir()
    (outside / "marker").write_text("keep\n")
    turns = [
        Turn(tool="mcp__keel__run", input={"command": f"rm -rf ~ {outside}"}),
        Turn(tool="mcp__keel__run", input={"command": "echo everyday-output-$((6*7))"}),
    ]
    server = {"type": "stdio", "command": KEEL, "args": ["mcp"], "env": {"KEEL_HOOKD": "0"}}
    run = run_client(
        "claude",
        project,
        turns,
        install=False,
        claude_allowed_tools="mcp__keel__run",
        extra_args=_mcp_config(server),
    )
    told = run.told_model
    assert (outside / "marker").read_text() == "keep\n", run.diagnose()
    assert "keel denied this call [risk.rm_recursive]" in told, run.diagnose()
    assert "everyday-output-42" in told, run.diagnose()
    assert len(run.model.requests) >= 3, run.diagnose()


def test_the_server_keel_init_registers_serves_claude_code_beside_keels_hooks(
    base: Path,
) -> None:
    _require_sdk()
    toml = KEEL_TOML + 'allow = ["mcp__keel__*"]\n'
    project = new_project(base, toml, {"notes.txt": "hi\n"})
    init = keel("init", "--agent", "claude", "--mcp", workspace=project)
    assert init.returncode == 0, init.stderr
    turns = [Turn(tool="mcp__keel__read_file", input={"path": "notes.txt"})]
    run = run_client(
        "claude",
        project,
        turns,
        install=False,
        claude_allowed_tools="mcp__keel__read_file",
        extra_args=["--mcp-config", str(project / ".mcp.json"), "--strict-mcp-config"],
    )
    assert "1  hi" in run.told_model, run.diagnose()

    with read_journal(project) as journal:
        agents = {s.agent for s in journal.sessions()}
    assert {"claude", "mcp"} <= agents, run.diagnose()
