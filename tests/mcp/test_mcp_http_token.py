"""``keel mcp --transport http`` takes only requests that carry its bearer token.

Any local process can reach 127.0.0.1, and keel's tools write files and run commands: a
request without ``Authorization: Bearer TOKEN`` (the token keel mcp printed, or
``KEEL_MCP_TOKEN``) gets 401 and reaches no tool. Checked by effect, as another local process
would try it: the MCP requests that would write a marker file, sent with no token, a wrong
one, the token twice; then the same with the token, which writes it.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from pathlib import Path

import pytest
from mcp_helpers import http_server, http_session, require_sdk, talk

from _support import keel, keel_env, make_workspace

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "intruder", "version": "1"}},
}  # fmt: skip
WRITE = {
    "jsonrpc": "2.0", "id": 2, "method": "tools/call",
    "params": {"name": "write_file", "arguments": {"path": "marker.txt", "content": "owned\n"}},
}  # fmt: skip


@pytest.fixture
def workspace(workdir: Path) -> Path:
    require_sdk()
    return make_workspace(workdir / "ws", files={"notes.txt": "hi\n"}, commit=True)


def post(url: str, body: dict[str, object], headers: list[tuple[str, str]]) -> tuple[int, str]:
    """POST ``body`` as JSON-RPC with ``headers`` sent as given (a header may repeat)."""
    parts = urllib.parse.urlsplit(url)
    data = json.dumps(body).encode()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.putrequest("POST", parts.path + (f"?{parts.query}" if parts.query else ""))
        for name, value in [("Content-Type", "application/json"),
                            ("Accept", "application/json, text/event-stream"),
                            ("Content-Length", str(len(data))), *headers]:  # fmt: skip
            connection.putheader(name, value)
        connection.endheaders(data)
        reply = connection.getresponse()
        return reply.status, reply.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [("Authorization", "Bearer not-the-token-but-long-enough")],
        [("Authorization", "Basic a2VlbDprZWVs")],
    ],
    ids=["no token", "a wrong token", "another scheme"],
)
def test_a_request_without_the_token_gets_401_and_reaches_no_tool(
    workspace: Path, headers: list[tuple[str, str]]
) -> None:
    with http_server(workspace, keel_env()) as (url, token):
        assert len(token) >= 32
        for body in (INITIALIZE, WRITE):
            status, text = post(url, body, headers)
            assert status == 401, (status, text)
            assert json.loads(text)["error"]["code"] == "mcp.token"
    assert not (workspace / "marker.txt").exists()


def test_the_token_in_a_query_or_a_prefix_of_it_does_not_open_the_door(workspace: Path) -> None:
    with http_server(workspace, keel_env()) as (url, token):
        assert post(f"{url}?token={token}", INITIALIZE, [])[0] == 401
        assert post(url, INITIALIZE, [("Authorization", f"Bearer {token[:-1]}")])[0] == 401
        assert post(url, INITIALIZE, [("Authorization", f"Bearer {token}x")])[0] == 401
        # the right token beside a wrong one: which one a proxy would forward is unclear
        twice = [("Authorization", f"Bearer {token}"), ("Authorization", "Bearer x" * 3)]
        assert post(url, INITIALIZE, twice)[0] == 401
        assert post(url, INITIALIZE, [("Authorization", f"Bearer {token}")])[0] == 200
    assert not (workspace / "marker.txt").exists()


def test_with_the_printed_token_the_client_writes_through_the_guard(workspace: Path) -> None:
    async def write(session: object) -> object:
        return await session.call_tool("write_file", WRITE["params"]["arguments"])  # type: ignore[attr-defined]

    result = talk(workspace, "http", write)
    assert not getattr(result, "is_error", True), result
    assert (workspace / "marker.txt").read_text() == "owned\n"


def test_keel_mcp_token_is_the_token_and_is_not_printed(workspace: Path) -> None:
    import anyio

    chosen = "a-token-the-client-config-names-too"
    env = keel_env({"KEEL_MCP_TOKEN": chosen})

    async def status(url: str) -> object:
        async with http_session(url, chosen) as session:
            return await session.call_tool("status", {})

    with http_server(workspace, env) as (url, token):
        assert token == chosen
        assert post(url, INITIALIZE, [("Authorization", "Bearer not-it-but-long-enough")])[0] == 401
        result = anyio.run(status, url)
    assert not getattr(result, "is_error", True), result


def test_a_short_keel_mcp_token_is_refused_with_its_code(workspace: Path) -> None:
    done = keel("mcp", "--transport", "http", "--port", "0", cwd=workspace,
                env={"KEEL_MCP_TOKEN": "short"})  # fmt: skip
    assert done.returncode != 0
    assert "mcp.token" in done.stderr and "16 characters" in done.stderr
    assert "http://" not in done.stdout
