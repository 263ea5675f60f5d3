"""``keel ui``: the journal as a local web page (``keel-guard[ui]``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from keel.cli._common import WorkspaceOpt, examples, fail, workspace_root
from keel.core.errors import KeelError


def register(app: typer.Typer) -> None:
    app.command(
        "ui",
        epilog=examples(
            "keel ui                         # serve and open the browser",
            "keel ui --no-browser            # print the URL only (a remote shell, a script)",
            "keel ui --port 8765 -w ~/src/app",
        ),
    )(ui)


def ui(
    ctx: typer.Context,
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="The port on 127.0.0.1 (0: a free one)."),
    ] = 0,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL; do not open a browser.")
    ] = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Open the journal in a local web page: sessions, timelines, diffs, evidence, integrity.

    It serves on 127.0.0.1 only, until Ctrl-C, and prints its URL, which carries a random
    token that every request needs (as Jupyter's does): share it with no one. The page
    follows a running session live, and its Emergency stop and Resume buttons do what
    `keel stop` and `keel resume` do, journaled alike. Needs the ui extra: `keel install ui`.
    """
    from keel.ui import serve

    try:
        root = workspace_root(ctx, workspace)
        serve(root, port=port, open_browser=not no_browser, announce=_announce(str(root)))
    except KeelError as err:
        fail(err)


def _announce(root: str) -> Callable[[str], None]:
    def announce(url: str) -> None:
        typer.echo(f"keel ui for {root}:\n  {url}")
        typer.echo("Ctrl-C stops it. The token in the URL is the key: share it with no one.")

    return announce
