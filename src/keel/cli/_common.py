"""Shared pieces of the CLI: the workspace option, console, error exit."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from keel.errors import KeelError, UsageError
from keel.root import find_root

WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace", "-w", help="Workspace root (default: found from the current directory)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def workspace_root(ctx: typer.Context, workspace: Path | None = None) -> Path:
    """The root from a command's own --workspace, else the global one, else discovery.

    Raises:
        UsageError: a given --workspace is not an existing directory (``usage.workspace``):
            nothing is created in a mistyped place.
    """
    chosen = workspace or (ctx.obj or {}).get("workspace") if ctx is not None else workspace
    root = find_root(override=str(chosen) if chosen else None)
    if chosen and not root.is_dir():
        what = "is not a directory" if os.path.lexists(root) else "does not exist"
        raise UsageError(f"workspace {str(chosen)!r} {what}", code="usage.workspace")
    return root


def fail(
    error: KeelError | str, *, as_json: bool = False, exit_code: int | None = None
) -> NoReturn:
    """Print an error (text or JSON on stderr) and exit: 2 for usage errors, else 1."""
    err = error if isinstance(error, KeelError) else KeelError(error)
    if as_json:
        sys.stderr.write(json.dumps({"error": err.to_dict()}, default=str) + "\n")
    else:
        sys.stderr.write(f"keel: error: {one_line(err.message)} [{err.code}]\n")
    code = exit_code if exit_code is not None else (2 if isinstance(err, UsageError) else 1)
    raise typer.Exit(code)


def utf8_text(text: str) -> str:
    """``text`` from the command line with undecodable bytes spelled out (``\\xff``)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def one_line(text: str, limit: int = 2000) -> str:
    """``text`` on one line, clipped, control characters escaped (so input cannot drive a tty)."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_json(value: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(value, indent=2, default=str, ensure_ascii=False) + "\n")
