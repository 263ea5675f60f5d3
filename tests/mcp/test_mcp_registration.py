"""``keel init --agent claude --mcp``: keel mcp registered for Claude Code, and taken out again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_helpers import journal_events, talk, text_of

from _support import keel, make_workspace

PLANTED = "import pathlib; pathlib.Path({marker!r}).write_text('ran')\n"


def registered(root: Path) -> dict[str, Any]:
    return json.loads((root / ".mcp.json").read_text())["mcpServers"]["keel"]


def test_the_registered_server_serves_the_project_and_imports_nothing_from_it(
    workdir: Path,
) -> None:
    root = make_workspace(workdir / "proj", files={"notes.txt": "hi\n"}, commit=True)
    done = keel("init", "--agent", "claude", "--mcp", workspace=root)
    assert done.returncode == 0, done.stderr
    entry = registered(root)
    assert entry["type"] == "stdio" and "-I" in entry["args"] and entry["args"][-1] == "mcp"
    assert "/.mcp.json" in (root / ".git" / "info" / "exclude").read_text()
    marker = workdir / "planted-code-ran"
    for package in ("keel", "mcp", "anyio", "pydantic"):  # what the server imports first
        (root / package).mkdir()
        (root / package / "__init__.py").write_text(PLANTED.format(marker=str(marker)))

    async def scenario(session: Any) -> Any:
        return await session.call_tool("read_file", {"path": "notes.txt"})

    result = talk(root, "stdio", scenario, command=[entry["command"], *entry["args"]])
    assert not result.is_error, text_of(result)
    assert "hi" in text_of(result)
    assert not marker.exists(), "keel mcp imported code from the project"
    events = journal_events(root, result.structured_content["session"])
    assert [e.payload.tool for e in events if e.kind == "tool.call"] == ["read_file"]


def test_remove_takes_out_keels_server_and_leaves_the_users(workdir: Path) -> None:
    root = make_workspace(workdir / "proj", commit=True)
    mine = {"mcpServers": {"github": {"command": "gh-mcp", "args": []}}}
    (root / ".mcp.json").write_text(json.dumps(mine))
    assert keel("init", "--agent", "claude", "--mcp", workspace=root).returncode == 0
    assert set(json.loads((root / ".mcp.json").read_text())["mcpServers"]) == {"github", "keel"}
    done = keel("init", "--agent", "claude", "--remove", workspace=root)
    assert done.returncode == 0, done.stderr
    assert json.loads((root / ".mcp.json").read_text()) == mine


def test_remove_deletes_the_file_keel_created(workdir: Path) -> None:
    root = make_workspace(workdir / "proj", commit=True)
    assert keel("init", "--agent", "claude", "--mcp", workspace=root).returncode == 0
    assert keel("init", "--agent", "claude", "--remove", workspace=root).returncode == 0
    assert not (root / ".mcp.json").exists()
    assert ".mcp.json" not in (root / ".git" / "info" / "exclude").read_text()


def test_mcp_needs_agent_claude(workdir: Path) -> None:
    root = make_workspace(workdir / "proj", commit=True)
    done = keel("init", "--agent", "codex", "--mcp", workspace=root)
    assert done.returncode == 2
    assert "--mcp needs --agent claude" in done.stderr
    assert not (root / ".mcp.json").exists()
