"""``keel completion bash|zsh|fish``: print a shell completion script.

The script calls ``keel`` back with ``_KEEL_COMPLETE=complete_SHELL`` set whenever the user
presses Tab; typer answers those calls from the same command tree as ``--help``, so the
completions follow the commands and options as they are. typer registers its completion
classes only when an app adds its own ``--install-completion`` options, which keel's does not,
so ``register`` registers them when a completion call comes in.
"""

from __future__ import annotations

import os
from typing import Annotated, Literal

import typer

from keel.cli._common import examples

COMPLETE_VAR = "_KEEL_COMPLETE"
"""The variable a completion script sets when it calls ``keel`` back."""
Shell = Literal["bash", "zsh", "fish"]


def completion_script(shell: Shell) -> str:
    """The completion script for ``shell``, ending with a newline."""
    from typer._completion_shared import get_completion_script

    script = get_completion_script(prog_name="keel", complete_var=COMPLETE_VAR, shell=shell)
    return script + "\n"


def completion(
    shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")],
) -> None:
    """Print a completion script for SHELL; load it in your shell's startup file."""
    typer.echo(completion_script(shell), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``keel completion``; answer the completion calls its scripts make."""
    if os.environ.get(COMPLETE_VAR):
        from typer._completion_classes import completion_init

        completion_init()
    app.command(
        "completion",
        epilog=examples(
            'eval "$(keel completion bash)"        # in ~/.bashrc',
            'eval "$(keel completion zsh)"         # in ~/.zshrc, after compinit',
            "keel completion fish > ~/.config/fish/completions/keel.fish",
        ),
    )(completion)
