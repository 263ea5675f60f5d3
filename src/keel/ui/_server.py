"""Start ``keel ui``: bind 127.0.0.1, make the tokens, print the URL, open it, serve.

The socket is bound here, before uvicorn starts, so a port of 0 (any free one) is known in
time for the URL; nothing but 127.0.0.1 is ever bound. The browser is opened from a thread:
a terminal browser (``lynx``, ``w3m``) that ``webbrowser`` may pick must not hold up the
server. uvicorn handles Ctrl-C and SIGTERM; open live streams get a second to close.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path

from keel.core.errors import RunError
from keel.core.installed import hint

HOST = "127.0.0.1"
EXTRA = "ui"
MODULES = ("starlette", "uvicorn")
"""What ``keel-guard[ui]`` brings and ``keel ui`` imports."""


def require_extra() -> None:
    """Check that the ``ui`` extra is installed.

    Raises:
        RunError: ``ui.not_installed``, with the command that installs it.
    """
    from importlib import import_module

    for name in MODULES:
        try:
            import_module(name)
        except ImportError as exc:
            raise RunError(
                f"keel ui needs keel-guard[{EXTRA}] ({name} is not installed): {hint(EXTRA)}",
                code="ui.not_installed",
            ) from exc


def bind(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: a free port).

    Raises:
        RunError: the port cannot be bound (``ui.bind``).
    """
    try:
        return socket.create_server((HOST, port))
    except OSError as exc:
        raise RunError(
            f"cannot listen on {HOST}:{port}: {exc.strerror or exc}", code="ui.bind", port=port
        ) from exc


def serve(
    root: Path,
    *,
    port: int = 0,
    open_browser: bool = True,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve ``root``'s journal on 127.0.0.1 until interrupted.

    Args:
        root: the workspace.
        port: the port; 0 picks a free one.
        open_browser: open the URL in the user's browser.
        announce: called with the URL (token included) once the socket listens.

    Raises:
        RunError: the extra is missing (``ui.not_installed``) or the port cannot be bound
            (``ui.bind``).
    """
    require_extra()
    import uvicorn

    from keel.ui._app import build_app
    from keel.ui._security import Secrets

    sock = bind(port)
    guard = Secrets.new(sock.getsockname()[1])
    config = uvicorn.Config(
        build_app(root, guard),
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=1,
    )
    announce(guard.url)
    if open_browser:
        _open(guard.url)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def _open(url: str) -> None:
    import webbrowser

    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
