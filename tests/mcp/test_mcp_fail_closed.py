"""A ``keel mcp`` session fails closed: whatever breaks inside keel, the reply is an error.

In process, on ``McpSession`` (what each MCP connection gets): no SDK needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _support import make_workspace
from keel.journal import read_journal
from keel.mcp import McpSession


@pytest.fixture
def session(workdir: Path) -> Any:
    root = make_workspace(workdir / "ws", files={"notes.txt": "hi\n"}, commit=True)
    opened = McpSession(root)
    try:
        yield opened
    finally:
        opened.end()


def test_a_tool_that_raises_is_an_error_reply_and_a_failed_result_in_the_journal(
    session: McpSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk on fire")

    monkeypatch.setattr("keel.mcp._session.carry_out", broken)
    reply = session.call("read_file", {"path": "notes.txt"})
    assert reply.is_error and "disk on fire" in reply.text
    with read_journal(session.root) as journal:
        events = list(journal.events(session_id=session.session_id))
    results = [e for e in events if e.kind == "tool.result"]
    assert [(e.payload.tool, e.payload.ok) for e in results] == [("read_file", False)]


def test_a_journal_that_fails_after_the_tool_ran_is_an_error_that_says_it_ran(
    session: McpSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    session.call("status", {})  # the guard is open

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("journal gone")

    monkeypatch.setattr(session.guard(), "observe", broken)
    reply = session.call("write_file", {"path": "new.txt", "content": "x\n"})
    assert reply.is_error
    assert "write_file ran, but keel could not journal its result" in reply.text
    assert reply.data["ok"] is False


def test_a_guard_that_cannot_open_is_an_internal_error_deny(
    session: McpSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no guard today")

    monkeypatch.setattr("keel.mcp._session.Guard.open", broken)
    reply = session.call("read_file", {"path": "notes.txt"})
    assert reply.is_error
    assert reply.data["decision"]["rule"] == "internal_error"
    assert "no guard today" in reply.text


def test_an_unknown_tool_and_bad_arguments_are_denied_by_rule(session: McpSession) -> None:
    unknown = session.call("delete_everything", {})
    bad = session.call("write_file", {"path": "x.txt"})
    assert unknown.is_error and unknown.data["decision"]["rule"] == "mcp.bad_call"
    assert bad.is_error and "needs the argument 'content'" in bad.text
    assert not (session.root / "x.txt").exists()
