"""keel's own MCP tools (diff, checkpoint, rollback, status, run_plan), guidance, failing closed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import decision_of, talk, text_of

from _support import make_workspace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from agent_helpers import headers_plan as plan  # the evidence plan keel run's tests use

FILES = {"data/sales.csv": "region,revenue\nnorth,10\n", "src/app.py": "x = 1\n"}


@pytest.fixture
def workspace(workdir: Path) -> Path:
    return make_workspace(workdir / "ws", files=FILES, commit=True)


def test_diff_shows_the_sessions_change_and_rollback_undoes_it(workspace: Path) -> None:
    async def scenario(session: Any) -> Any:
        empty = await session.call_tool("diff", {})
        wrote = await session.call_tool("write_file", {"path": "src/app.py", "content": "x = 2\n"})
        diff = await session.call_tool("diff", {})
        undone = await session.call_tool("rollback", {})
        return empty, wrote, diff, undone

    empty, wrote, diff, undone = talk(workspace, "stdio", scenario)
    assert "changed nothing" in text_of(empty)
    assert not wrote.is_error, text_of(wrote)
    assert "src/app.py" in text_of(diff) and "+x = 2" in text_of(diff)
    assert diff.structured_content["result"]["changes"][0]["path"] == "src/app.py"
    assert not undone.is_error, text_of(undone)
    assert "restored src/app.py" in text_of(undone)
    assert (workspace / "src" / "app.py").read_text() == "x = 1\n"


def test_rollback_refuses_a_checkpoint_of_another_session(workspace: Path) -> None:
    async def first(session: Any) -> Any:
        return await session.call_tool("checkpoint", {"label": "mine"})

    taken = talk(workspace, "stdio", first)
    assert not taken.is_error, text_of(taken)
    other = taken.structured_content["result"]["short"]
    (workspace / "src" / "app.py").write_text("x = 3\n")

    async def second(session: Any) -> Any:
        return await session.call_tool("rollback", {"target": other})

    refused = talk(workspace, "stdio", second)
    assert refused.is_error
    assert "not one of this session's" in text_of(refused)
    assert (workspace / "src" / "app.py").read_text() == "x = 3\n"


def test_run_plan_reports_the_evidence_and_whether_it_held(workspace: Path) -> None:
    async def scenario(session: Any) -> Any:
        return [
            await session.call_tool("run_plan", {"plan": plan("revenue")}),
            await session.call_tool("run_plan", {"plan": plan("sales")}),
        ]

    held, contradicted = talk(workspace, "stdio", scenario)
    assert held.structured_content["result"] == {"held": True}, text_of(held)
    assert contradicted.structured_content["result"] == {"held": False}
    assert "revenue" in text_of(held)


def test_status_names_the_session_and_its_containment(workspace: Path) -> None:
    async def scenario(session: Any) -> Any:
        await session.call_tool("run", {"command": "rm -rf /"})
        return await session.call_tool("status", {})

    status = talk(workspace, "stdio", scenario)
    data = status.structured_content["result"]
    assert data["session"]["id"] == status.structured_content["session"]
    assert data["session"]["calls"] == 2 and data["session"]["denied"] == 1
    assert data["stop"]["active"] is False
    assert "contained" in text_of(status)


def test_the_monitors_guidance_rides_on_the_result(workspace: Path) -> None:
    async def scenario(session: Any) -> Any:
        return [await session.call_tool("run", {"command": "ls no-such-file"}) for _ in range(3)]

    results = talk(workspace, "stdio", scenario)
    guided = [r for r in results if r.structured_content["guidance"]]
    assert guided, [text_of(r) for r in results]
    guidance = guided[0].structured_content["guidance"]
    assert f"keel guidance ({guidance['level']}): {guidance['message']}" in text_of(guided[0])


def test_an_invalid_keel_toml_mid_session_is_an_error_never_a_success(workspace: Path) -> None:
    async def scenario(session: Any) -> Any:
        first = await session.call_tool("read_file", {"path": "src/app.py"})
        (workspace / "keel.toml").write_text("[policy\nbroken")
        return first, await session.call_tool(
            "write_file", {"path": "src/app.py", "content": "x = 9\n"}
        )

    first, broken = talk(workspace, "stdio", scenario)
    assert not first.is_error
    assert broken.is_error
    assert decision_of(broken)["rule"] == "internal_error"
    assert "keel.toml" in text_of(broken)
    assert (workspace / "src" / "app.py").read_text() == "x = 1\n"


def test_without_the_sdk_keel_mcp_says_how_to_install_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from keel.cli.main import app

    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError
    done = CliRunner().invoke(app, ["mcp", "--workspace", str(workspace)])
    assert done.exit_code == 1
    assert "keel install mcp" in done.output and "[mcp.not_installed]" in done.output
