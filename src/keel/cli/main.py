"""The typer application: one module per noun, each with ``register(app)``; no logic here."""

from __future__ import annotations

import inspect
import re
from importlib import import_module
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from keel import __version__
from keel.cli._common import HELP_OPTIONS, escape_markup, examples

app = typer.Typer(
    name="keel",
    help="A control layer that makes LLM coding agents predictable, auditable and safe.",
    epilog=examples(
        "keel init --agent claude --scope 'src/**,tests/**'",
        "keel log --since 1h --decision deny",
        "keel COMMAND -h                  # every command's own help, with examples",
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=HELP_OPTIONS,
)

# Each module under keel.cli registers its own commands; keep this list in help order.
COMMAND_MODULES = (
    "init",
    "doctor",
    "install",
    "policy",
    "allow_host",
    "stop",
    "journal",
    "ui",
    "workspace",
    "plan",
    "sandbox",
    "monitor",
    "judge",
    "run",
    "replay",
    "eval",
    "mcp",
    "exec",
    "hook",
    "hookd",
    "wrap",
    "demo",
    "completion",
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"keel {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", "-w", help="Workspace root directory.")
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    ctx.obj = {"workspace": workspace}


_LIST_ITEM = re.compile(r"\s|[-*•]\s|\d+[.)]\s")


def help_text(doc: str) -> str:
    """A command docstring as typer's rich help page should get it.

    Hard-wrapped prose lines are joined (rich keeps every line break of a docstring, so a
    100-column docstring breaks mid-sentence on an 80-column terminal); paragraphs holding a
    list or indented lines stay as written. ``[scope]`` and the like are escaped, or rich
    would take them for style tags and drop them.
    """
    paragraphs = []
    for paragraph in inspect.cleandoc(doc).split("\n\n"):
        lines = paragraph.split("\n")
        if not any(_LIST_ITEM.match(line) for line in lines):
            paragraph = " ".join(line.strip() for line in lines)
        paragraphs.append(escape_markup(paragraph))
    return "\n\n".join(paragraphs)


def _flags_bare(params: list[Any]) -> list[Any]:
    """``params`` with each flag (``--json``, ``--help``) given an empty metavar.

    typer's rich help prints ``<bool>`` after a flag otherwise. (typer ships its own click
    classes: no isinstance against click's.)
    """
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    """A command whose flags show no ``<bool>`` placeholder in the help page."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The parameters, flags without a placeholder."""
        return _flags_bare(super().get_params(ctx))


class _Group(TyperGroup):
    """A group (``keel``, ``keel policy``...) whose flags show no ``<bool>`` placeholder."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The parameters, flags without a placeholder."""
        return _flags_bare(super().get_params(ctx))


def _polish(typer_app: typer.Typer) -> None:
    """Set every command's help from its docstring through ``help_text``, in every group.

    A help given explicitly (``app.command(help=...)``) is left as written. Every command gets
    the help page of ``_Command`` (no ``<bool>`` after a flag) unless it names its own class.
    """
    for info in typer_app.registered_commands:
        doc = inspect.getdoc(info.callback) if info.help is None else None
        if doc:
            info.help = help_text(doc)
        if info.cls in (None, TyperCommand):  # typer's default, set by app.command()
            info.cls = _Command
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            group.typer_instance.info.cls = _Group  # typer's default is a placeholder
            _polish(group.typer_instance)


app.info.cls = _Group
for _name in COMMAND_MODULES:
    import_module(f"keel.cli.{_name}").register(app)
_polish(app)
