"""``keel mcp`` through the MCP SDK's own client, over stdio and streamable HTTP.

Each test starts the real server (``keel mcp``) in a fresh workspace and checks by effect:
what the client gets back, what is on disk, and what the journal holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import (
    TRANSPORTS,
    decision_of,
    dumps,
    journal_events,
    require_sandbox,
    talk,
    text_of,
)

from _support import keel, make_workspace

FILES = {
    "src/app.py": "def f():\n    return 1\n",
    "docs/guide.md": "# guide\n",
    "notes.txt": "hi\n",
}


@pytest.fixture
def workspace(workdir: Path) -> Path:
    return make_workspace(workdir / "ws", files=FILES, commit=True)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_client_lists_keel_runs_tools_and_keels_own(workspace: Path, transport: str) -> None:
    async def scenario(session: Any) -> Any:
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in talk(workspace, transport, scenario)}
    assert set(tools) == {
        "read_file", "search", "list_files", "run", "apply_patch", "write_file", "run_plan",
        "diff", "checkpoint", "rollback", "status",
    }  # fmt: skip
    from keel.agent import SCHEMAS

    for name in ("read_file", "run", "apply_patch", "write_file", "run_plan"):
        assert tools[name].input_schema == dict(SCHEMAS[name]), name
    assert tools["read_file"].annotations.read_only_hint is True
    assert tools["rollback"].annotations.destructive_hint is True


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_read_returns_the_files_numbered_lines(workspace: Path, transport: str) -> None:
    async def scenario(session: Any) -> Any:
        return await session.call_tool("read_file", {"path": "src/app.py"})

    result = talk(workspace, transport, scenario)
    assert not result.is_error, text_of(result)
    assert "def f():" in text_of(result) and "return 1" in text_of(result)
    assert decision_of(result)["decision"] == "allow"
    assert result.structured_content["output"] == text_of(result)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_dangerous_command_is_an_error_naming_rule_reason_and_suggestion_and_deletes_nothing(
    workspace: Path, tmp_path: Path, transport: str
) -> None:
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (home / "marker").write_text("keep\n")
    (outside / "marker").write_text("keep\n")

    async def scenario(session: Any) -> Any:
        return await session.call_tool("run", {"command": f"rm -rf ~ {outside}"})

    result = talk(workspace, transport, scenario, env={"HOME": str(home)})
    assert result.is_error, text_of(result)
    decision = decision_of(result)
    assert decision["decision"] == "deny"
    assert decision["rule"] and decision["reason"] and decision["suggestion"]
    text = text_of(result)
    for part in ("rule", "reason", "suggestion"):
        assert decision[part] in text, part
    assert (home / "marker").read_text() == "keep\n"
    assert (outside / "marker").read_text() == "keep\n"


def test_an_everyday_command_returns_its_output_and_runs_contained(
    workspace: Path, tmp_path: Path
) -> None:
    require_sandbox()
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)
    marker = outside / "escaped"
    escape = f"open({str(marker)!r}, 'w').write('x')"
    command = f'echo hello-from-keel; python3 -c "{escape}"; ls src'

    async def scenario(session: Any) -> Any:
        return await session.call_tool("run", {"command": command})

    result = talk(workspace, "stdio", scenario)
    text = text_of(result)
    assert decision_of(result)["decision"] == "allow", text
    assert "hello-from-keel" in text and "app.py" in text
    assert "(exit code 0)" in text
    assert not marker.exists(), "a contained command wrote outside the workspace"


def test_write_file_outside_the_scope_is_denied_and_the_file_is_untouched(workdir: Path) -> None:
    root = make_workspace(
        workdir / "ws", keel_toml='[scope]\ninclude = ["src/**"]\n', files=FILES, commit=True
    )
    before = (root / "docs" / "guide.md").read_bytes()

    async def scenario(session: Any) -> Any:
        return await session.call_tool("write_file", {"path": "docs/guide.md", "content": "x\n"})

    result = talk(root, "stdio", scenario)
    assert result.is_error
    assert decision_of(result)["decision"] == "deny"
    assert "scope" in decision_of(result)["rule"] + decision_of(result)["reason"]
    assert (root / "docs" / "guide.md").read_bytes() == before


def test_a_patch_that_does_not_apply_leaves_every_file_byte_identical(workspace: Path) -> None:
    before = {rel: (workspace / rel).read_bytes() for rel in FILES}
    patch = (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n"
        "+    return 2\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-not what is there\n"
        "+changed\n"
    )

    async def scenario(session: Any) -> Any:
        return await session.call_tool("apply_patch", {"patch": patch})

    result = talk(workspace, "stdio", scenario)
    assert result.is_error, text_of(result)
    assert "nothing was changed" in text_of(result)
    assert {rel: (workspace / rel).read_bytes() for rel in FILES} == before


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_after_keel_stop_every_call_is_denied(workspace: Path, transport: str) -> None:
    async def scenario(session: Any) -> Any:
        first = await session.call_tool("read_file", {"path": "notes.txt"})
        stopped = keel("stop", "--reason", "review first", workspace=workspace)
        assert stopped.returncode == 0, stopped.stderr
        return first, [
            await session.call_tool("read_file", {"path": "notes.txt"}),
            await session.call_tool("status", {}),
            await session.call_tool("write_file", {"path": "src/new.py", "content": "x = 1\n"}),
        ]

    first, after = talk(workspace, transport, scenario)
    assert not first.is_error
    for result in after:
        assert result.is_error, text_of(result)
        assert decision_of(result)["rule"] == "stop.active"
        assert "review first" in text_of(result)
    assert not (workspace / "src" / "new.py").exists()


def test_the_journal_holds_the_sessions_calls_and_decisions_under_agent_mcp(
    workspace: Path,
) -> None:
    async def scenario(session: Any) -> Any:
        return [
            await session.call_tool("read_file", {"path": "notes.txt"}),
            await session.call_tool("run", {"command": "rm -rf /"}),
            await session.call_tool("write_file", {"path": "src/new.py", "content": "x = 1\n"}),
        ]

    results = talk(workspace, "stdio", scenario)
    sessions = {r.structured_content["session"] for r in results}
    assert len(sessions) == 1, sessions
    (session_id,) = sessions
    assert session_id.startswith("mcp-")
    events = journal_events(workspace, session_id)
    assert {e.agent for e in events} == {"mcp"}
    calls = [e.payload.tool for e in events if e.kind == "tool.call"]
    decisions = [e.payload.decision for e in events if e.kind == "decision"]
    assert calls == ["read_file", "run", "write_file"], dumps(calls)
    assert decisions == ["allow", "deny", "allow"], dumps(decisions)
    assert [e.payload.tool for e in events if e.kind == "tool.result"] == [
        "read_file",
        "write_file",
    ]
    starts = [e for e in events if e.kind == "session.start"]
    assert starts and starts[0].payload.data["event"] == "mcp.start"
    assert (workspace / "src" / "new.py").read_text() == "x = 1\n"


def test_two_http_connections_are_two_sessions(workspace: Path) -> None:
    from mcp_helpers import http_server, http_session, require_sdk

    require_sdk()
    import anyio

    from _support import keel_env

    async def one(url: str, token: str) -> str:
        async with http_session(url, token) as session:
            first = await session.call_tool("status", {})
            second = await session.call_tool("status", {})
            assert first.structured_content["session"] == second.structured_content["session"]
            return first.structured_content["session"]

    async def both(url: str, token: str) -> list[str]:
        return [await one(url, token), await one(url, token)]

    with http_server(workspace, keel_env()) as (url, token):
        ids = anyio.run(both, url, token)
    assert len(set(ids)) == 2, ids
    for session_id in ids:  # the server was stopped (SIGTERM): each session journaled as ended
        ends = [e for e in journal_events(workspace, session_id) if e.kind == "session.end"]
        assert [e.payload.data["event"] for e in ends] == ["mcp.end"], session_id
