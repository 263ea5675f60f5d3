"""``keel mcp`` as a client meets it: started as a process, spoken to by the MCP SDK's own client.

``talk(root, transport, scenario)`` starts ``keel mcp`` in ``root`` (stdio: the SDK's
``stdio_client`` spawns it; http: ``keel mcp --transport http --port 0``, whose printed URL the
SDK's ``streamable_http_client`` connects to with the printed bearer token), opens a
``ClientSession``, initializes it and awaits ``scenario(session)``. Network: 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

from _support import KEEL, TIMEOUT, keel_env, skip_or_fail

T = TypeVar("T")
TRANSPORTS = ("stdio", "http")
Scenario = Callable[[Any], Awaitable[T]]


def require_sdk() -> None:
    """Skip (fail in CI) when the MCP SDK (keel-guard[mcp]) is not installed.

    ``tests/mcp`` (on ``sys.path`` as ``tests``) would import as a namespace package ``mcp``
    without the SDK: a module only the SDK has is looked for.
    """
    try:
        found = find_spec("mcp.client.stdio") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        skip_or_fail("the MCP SDK is not installed: keel install mcp (keel-guard[mcp])")


def require_sandbox() -> None:
    """Skip (fail in CI) when no sandbox works here: ``run`` would not be contained."""
    from keel.sandbox.exec.contain import exec_backend

    backend, reason = exec_backend("auto")
    if backend is None:
        skip_or_fail(f"no sandbox for keel exec here: {reason}")


def talk(
    root: Path,
    transport: str,
    scenario: Scenario[T],
    *,
    env: Mapping[str, str] | None = None,
    command: Sequence[str] | None = None,
) -> T:
    """Run ``scenario`` against ``keel mcp`` serving ``root`` over ``transport``.

    ``command`` starts the server instead of ``keel mcp`` (stdio only): the registered form.
    """
    require_sdk()
    import anyio

    return anyio.run(_talk, root, transport, scenario, keel_env(env), command)


async def _talk(
    root: Path,
    transport: str,
    scenario: Scenario[T],
    env: dict[str, str],
    command: Sequence[str] | None,
) -> T:
    from mcp import ClientSession

    if transport == "stdio":
        from mcp import StdioServerParameters, stdio_client

        argv = list(command or [KEEL, "mcp"])
        params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=root, env=env)
        with tempfile.TemporaryFile("w+") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await scenario(session)
    with http_server(root, env) as (url, token):
        async with http_session(url, token) as session:
            return await scenario(session)


@contextlib.asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[Any]:
    """An initialized ``ClientSession`` over streamable HTTP, sending ``token`` as a bearer."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextlib.contextmanager
def http_server(root: Path, env: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """``keel mcp --transport http --port 0`` in ``root``: its URL and token while it runs.

    The token is the one it printed after the URL, or ``KEEL_MCP_TOKEN`` when ``env`` sets it
    (then it prints none).
    """
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(
            [KEEL, "mcp", "--transport", "http", "--port", "0"],
            cwd=root,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            if not url.startswith("http://127.0.0.1:"):
                proc.wait(timeout=TIMEOUT)
                errors.seek(0)
                raise AssertionError(f"keel mcp printed no URL ({url!r}): {errors.read()}")
            token = env.get("KEEL_MCP_TOKEN")
            if token is None:
                line = proc.stdout.readline().strip()
                assert line.startswith("Authorization: Bearer "), line
                token = line.removeprefix("Authorization: Bearer ")
            yield url, token
        finally:
            proc.terminate()
            proc.wait(timeout=TIMEOUT)
            if proc.stdout is not None:
                proc.stdout.close()


def text_of(result: Any) -> str:
    """The text blocks of a ``CallToolResult``, joined."""
    return "".join(getattr(block, "text", "") for block in result.content)


def decision_of(result: Any) -> dict[str, Any]:
    """The guard's decision a result carries (``structuredContent.decision``)."""
    data = result.structured_content
    assert isinstance(data, dict), result
    return data["decision"]


def journal_events(root: Path, session_id: str) -> list[Any]:
    """Every journal event of ``session_id`` in ``root``."""
    from keel.journal import read_journal

    with read_journal(root) as journal:
        return list(journal.events(session_id=session_id))


def dumps(value: Any) -> str:
    """``value`` as JSON text, for assertion messages."""
    return json.dumps(value, default=str)[:2000]
