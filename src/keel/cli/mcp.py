"""``keel mcp``: keel's guarded tools as an MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import WorkspaceOpt, examples, existing_workspace, fail
from keel.core.errors import KeelError, UsageError

TRANSPORTS = ("stdio", "http")


def register(app: typer.Typer) -> None:
    app.command(
        "mcp",
        epilog=examples(
            "keel mcp                                   # stdio: what an MCP client starts",
            "keel mcp --transport http --port 0         # prints http://127.0.0.1:PORT/mcp",
            "                                           # and Authorization: Bearer TOKEN",
            "keel init --agent claude --mcp             # register it for Claude Code",
        ),
    )(mcp)


def mcp(
    ctx: typer.Context,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (the default) or http (streamable HTTP).")
    ] = "stdio",
    port: Annotated[
        int,
        typer.Option(
            "--port", min=0, max=65535, help="With --transport http: the port (0: a free one)."
        ),
    ] = 0,
    workspace: WorkspaceOpt = None,
) -> None:
    """Serve keel's guarded tools over MCP, for Claude Code, Cursor or any MCP client.

    Tools: read_file, search, list_files, run (contained), apply_patch, write_file, run_plan,
    diff, checkpoint, rollback, status. Each connection is one journaled session (agent mcp);
    every call goes through keel's guard (policy, monitor, judge, emergency stop), and a call
    keel does not allow is a tool error naming the rule, the reason and what to do instead.
    With --transport http keel listens on 127.0.0.1 only, prints the URL on stdout, and takes
    only requests with its bearer token (Authorization: Bearer TOKEN): KEEL_MCP_TOKEN when set
    (16 characters or more), else a random one printed on the line after the URL.
    Needs the mcp extra: keel install mcp.
    """
    from keel.mcp import serve

    try:
        if transport not in TRANSPORTS:
            raise UsageError(f"--transport {transport!r}: choose stdio or http")
        if port and transport != "http":
            raise UsageError("--port needs --transport http")
        root = existing_workspace(ctx, workspace, "keel mcp")
        serve(root, transport="http" if transport == "http" else "stdio", port=port,
              announce=_announce(root))  # fmt: skip
    except KeelError as err:
        fail(err)


def _announce(root: Path) -> Callable[[str, str | None], None]:
    def say(url: str, token: str | None) -> None:
        from keel.mcp import announcement

        sys.stdout.write(announcement(url, token))
        sys.stdout.flush()
        where = "the token above" if token else "the token in KEEL_MCP_TOKEN"
        typer.echo(f"keel mcp: serving {root} at {url} to requests with {where} (Ctrl-C "
                   "stops)", err=True)  # fmt: skip

    return say
