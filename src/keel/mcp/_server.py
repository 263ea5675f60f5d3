"""keel's guarded tools over MCP, with the official SDK (``mcp`` 2.x): stdio and streamable HTTP.

The SDK's low-level ``Server`` is used, not ``MCPServer``: the tools' input schemas are keel
run's own (``keel.mcp._tools``), not derived from Python signatures, and every call goes to
one handler that hands it to its connection's ``McpSession`` on a worker thread (the guard,
the journal and the tools block). A connection is a stdio process, or a streamable HTTP
session (its ``Mcp-Session-Id``). HTTP binds 127.0.0.1 only, with the SDK's protection
against DNS rebinding (the ``Host`` and ``Origin`` of every request must be local), and takes
only requests that carry its bearer token (``Authorization: Bearer TOKEN``): ``KEEL_MCP_TOKEN``
when set (a client's config can name the same variable), else a random one printed with the
URL. Any local process can connect to 127.0.0.1, and these tools write files and run commands.

The SDK is an extra (``keel-guard[mcp]``), imported only when a server starts.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from keel import __version__
from keel.core.errors import RunError
from keel.core.installed import hint
from keel.mcp._session import Reply, Sessions, internal_error
from keel.mcp._tools import MCP_TOOLS

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

Transport = Literal["stdio", "http"]
HOST = "127.0.0.1"
PATH = "/mcp"
TOKEN_ENV = "KEEL_MCP_TOKEN"
"""The HTTP transport's bearer token, when the caller chooses it (else a random one)."""
MIN_TOKEN_LENGTH = 16
INSTRUCTIONS = (
    "keel guards every call of these tools: its policy, monitor and emergency stop decide "
    "first, and every call is journaled. A call keel does not allow is an error result that "
    "names the rule, the reason and what to do instead: do that, do not retry the same call. "
    "Guidance from keel's monitor may follow a tool's output; follow it. Shell commands run "
    "contained by keel's sandbox. `diff` shows what this session changed, `rollback` undoes it."
)


def require_sdk() -> None:
    """Import the MCP SDK, or say how to install it.

    Raises:
        RunError: ``mcp.not_installed``, with ``keel install mcp`` and the command it runs.
    """
    try:
        import mcp.server.lowlevel  # noqa: F401  (the check itself)
    except ImportError as exc:
        raise RunError(
            f"keel mcp needs the MCP SDK (mcp 2.x): {hint('mcp')}", code="mcp.not_installed"
        ) from exc


def build_server(sessions: Sessions) -> Server[Any]:
    """The SDK's server: ``tools/list`` gives ``MCP_TOOLS``, ``tools/call`` a session's reply."""
    import anyio.to_thread
    from mcp import types
    from mcp.server.lowlevel import Server

    listed = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=dict(tool.schema),
            annotations=types.ToolAnnotations(
                read_only_hint=tool.read_only,
                destructive_hint=tool.destructive,
                open_world_hint=False,
            ),
        )
        for tool in MCP_TOOLS
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            session = sessions.session(connection_key(ctx), client_name(ctx))
            reply = await anyio.to_thread.run_sync(session.call, params.name, params.arguments)
        except Exception as exc:  # fail closed: an error result, never a success
            reply = internal_error(None, params.name, exc)
        return result_of(reply)

    return Server(
        "keel",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def result_of(reply: Reply) -> Any:
    """``reply`` as the SDK's ``CallToolResult``: the text, the data, ``isError``."""
    from mcp import types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=reply.text)],
        structured_content=reply.data,
        is_error=reply.is_error,
    )


def connection_key(ctx: ServerRequestContext[Any]) -> str:
    """The connection a request came on: its ``Mcp-Session-Id``, or ``""`` (stdio, stateless)."""
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return value if isinstance(value, str) else ""


def client_name(ctx: ServerRequestContext[Any]) -> str | None:
    """``name version`` of the client, as it said in ``initialize``."""
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return f"{info.name} {info.version}".strip()


def serve(
    root: Path,
    *,
    transport: Transport = "stdio",
    port: int = 0,
    announce: Callable[[str, str | None], None] | None = None,
) -> None:
    """Serve keel's tools for the workspace ``root`` until the client or a signal ends it.

    ``http`` listens on 127.0.0.1:``port`` (0: a free port) and calls ``announce`` with the
    URL and the bearer token it generated (None: ``KEEL_MCP_TOKEN`` is the token) once it
    listens (default: both printed on stdout). Every session is journaled as ended.

    Raises:
        RunError: the SDK is not installed (``mcp.not_installed``), the port cannot be bound
            (``mcp.port``), or ``KEEL_MCP_TOKEN`` is too short (``mcp.token``).
    """
    require_sdk()
    import anyio

    chosen = http_token(os.environ) if transport == "http" else None
    sessions = Sessions(root, transport=transport)
    server = build_server(sessions)
    _end_on_sigterm()
    try:
        if transport == "stdio":
            anyio.run(_stdio, server)
        else:
            token = chosen or secrets.token_urlsafe(32)
            listener = _listen(port)
            url = f"http://{HOST}:{listener.getsockname()[1]}{PATH}"
            (announce or _print)(url, None if chosen else token)
            anyio.run(_http, server, listener, token)
    finally:
        sessions.close()


def _end_on_sigterm() -> None:
    """SIGTERM ends the server as Ctrl-C does, so that its sessions are journaled as ended.

    (uvicorn takes the signal while it serves and raises it again once it has stopped: the
    default action would end the process before ``serve`` closes the sessions.)
    """
    import signal
    import threading

    def end(signum: int, frame: object) -> None:
        raise SystemExit(0)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, end)


async def _stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _listen(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, port))
        listener.listen(64)
    except OSError as exc:
        listener.close()
        raise RunError(
            f"keel mcp cannot listen on {HOST}:{port}: {exc.strerror}", code="mcp.port"
        ) from exc
    return listener


def http_token(environ: Mapping[str, str]) -> str | None:
    """The caller's token (``KEEL_MCP_TOKEN``), or None: the server makes one.

    Raises:
        RunError: the variable is set but shorter than 16 characters (``mcp.token``).
    """
    chosen = environ.get(TOKEN_ENV)
    if chosen is None:
        return None
    if len(chosen.strip()) < MIN_TOKEN_LENGTH or chosen != chosen.strip():
        raise RunError(
            f"{TOKEN_ENV} must be at least {MIN_TOKEN_LENGTH} characters, without spaces around "
            "it (a random one: python -c 'import secrets; print(secrets.token_urlsafe(32))')",
            code="mcp.token",
        )
    return chosen


Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


def bearer_gate(app: App, token: str) -> App:
    """``app`` behind ``token``: other requests get 401 and never reach it.

    An HTTP request must carry exactly one ``Authorization: Bearer TOKEN`` (compared in
    constant time); lifespan events pass.
    """
    expected = f"Bearer {token}".encode()
    refusal = json.dumps({"error": {"code": "mcp.token", "message": (
        "keel mcp takes only requests with its bearer token: Authorization: Bearer TOKEN "
        f"(the token keel mcp printed, or {TOKEN_ENV})")}}).encode()  # fmt: skip

    async def gate(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # the server speaks no WebSocket: refused unread
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http":
            offered = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
            if len(offered) != 1 or not hmac.compare_digest(offered[0], expected):
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="keel mcp"'),
                    (b"content-length", str(len(refusal)).encode())]})  # fmt: skip
                await send({"type": "http.response.body", "body": refusal})
                return
        await app(scope, receive, send)

    return gate


async def _http(server: Server[Any], listener: socket.socket, token: str) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=PATH, host=HOST)
    config = uvicorn.Config(bearer_gate(app, token), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])


def announcement(url: str, token: str | None) -> str:
    """What ``keel mcp`` prints on stdout: the URL, then the header with a generated token."""
    return url + "\n" + (f"Authorization: Bearer {token}\n" if token else "")


def _print(url: str, token: str | None) -> None:
    sys.stdout.write(announcement(url, token))
    sys.stdout.flush()
