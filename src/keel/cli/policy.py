"""``keel policy check`` and ``keel policy explain``: thin wrappers over keel.policy.

``keel policy check`` normally never reaches this module: the console script answers it
before typer is imported (see ``keel.cli._entry``). This is the same command for ``--help``,
for odd argument orders, and for callers that drive the typer app directly.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import (
    HELP_OPTIONS,
    JsonOpt,
    WorkspaceOpt,
    examples,
    fail,
    print_json,
    workspace_root,
)
from keel.core.errors import KeelError, UsageError

PresetOpt = Annotated[
    str | None, typer.Option("--preset", help="Use this preset (developer, strict, readonly).")
]


def register(app: typer.Typer) -> None:
    """Add the ``policy`` command group to ``app``."""
    sub = typer.Typer(
        name="policy",
        help="Check commands, paths and URLs against the policy.",
        no_args_is_help=True,
        context_settings=HELP_OPTIONS,
    )
    sub.command(
        "check",
        context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
        epilog=examples(
            "keel policy check -- git push --force origin main",
            "keel policy check --json 'curl https://example.com | sh'",
            "keel policy check --write .env",
            "keel policy check --contained --preset strict -- pip install requests",
        ),
    )(check)
    sub.command(
        "explain",
        epilog=examples("keel policy explain", "keel policy explain --preset strict --json"),
    )(explain)
    app.add_typer(sub, name="policy")


def check(
    ctx: typer.Context,
    command: Annotated[
        list[str] | None, typer.Argument(help="The command line (one argument) or its words.")
    ] = None,
    as_json: JsonOpt = False,
    preset: PresetOpt = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Read this keel.toml instead of the workspace's."),
    ] = None,
    read: Annotated[str | None, typer.Option("--read", help="Judge reading this path.")] = None,
    write: Annotated[str | None, typer.Option("--write", help="Judge writing this path.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Judge fetching this URL.")] = None,
    workspace: WorkspaceOpt = None,
    contained: Annotated[
        bool | None,
        typer.Option(
            "--contained/--uncontained",
            help="Judge as when allowed shell commands run inside `keel exec` (--contained), "
            "or as the text policy alone, with no sandbox behind it (--uncontained); default: "
            "as this workspace's hooks judge.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the decision (allow, ask or deny) with its rule, reason and suggestion.

    By default the call is judged as this workspace's hooks judge it: contained when they
    contain what they allow (a working sandbox, [sandbox] contain), else by the text policy
    alone. Exit 0 whatever the decision; 2 for bad usage or an
    invalid config.

    --json prints {"decision", "rule", "reason", "suggestion"}.
    """
    from keel.cli.policy_fast import CheckRequest, run_check

    words = list(command or [])
    if words and words[0] == "--":
        words = words[1:]
    elif words and words[0].startswith("-") and words[0] not in ("-",):
        fail(UsageError(f"unknown option {words[0]!r}"), as_json=as_json)
    targets = {k: v for k, v in (("read", read), ("write", write), ("url", url)) if v is not None}
    if words:
        import shlex

        targets["command"] = words[0] if len(words) == 1 else shlex.join(words)
    if len(targets) != 1:
        fail(
            UsageError("give exactly one of: a COMMAND, --read PATH, --write PATH, --url URL"),
            as_json=as_json,
        )
    ((kind, value),) = targets.items()
    root = _root(ctx, workspace, as_json)
    request = CheckRequest(
        kind,
        value,
        as_json=as_json,
        preset=preset,
        config=str(config) if config else None,
        workspace=str(root),
        contained=contained,
    )
    code = run_check(request, sys.stdout, sys.stderr)
    raise typer.Exit(code)


def explain(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    preset: PresetOpt = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Print the effective policy: preset, command patterns, paths, network, constraints."""
    from keel.policy import Policy

    root = _root(ctx, workspace, as_json)
    try:
        policy = Policy.for_root(root, preset=preset)
    except KeelError as exc:
        fail(exc, as_json=as_json, exit_code=2)
    info = policy.explain()
    if as_json:
        print_json(info)
        return
    sys.stdout.write(render_explain(info))


def _root(ctx: typer.Context, workspace: Path | None, as_json: bool) -> Path:
    try:
        return workspace_root(ctx, workspace)
    except KeelError as exc:
        fail(exc, as_json=as_json, exit_code=2)
    except OSError as exc:
        fail(UsageError(f"bad workspace: {exc}"), as_json=as_json)


def render_explain(info: dict[str, object]) -> str:
    """The effective policy as readable text."""
    lines = [
        f"preset: {info['preset']}",
        f"root: {info['root']}",
        f"config: {info['source'] or '(none)'}",
    ]
    for key, value in info.items():
        if key in ("preset", "root", "source"):
            continue
        lines.append(f"{key}:")
        lines.extend(_render_value(value, "  "))
    return "\n".join(lines) + "\n"


def _render_value(value: object, indent: str) -> list[str]:
    if isinstance(value, dict):
        out: list[str] = []
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                out.append(f"{indent}{k}:")
                out.extend(_render_value(v, indent + "  "))
            else:
                out.append(f"{indent}{k}: {v}")
        return out
    if isinstance(value, list):
        items = [str(v) for v in value]
        return [f"{indent}- {item}" for item in items] or [f"{indent}(none)"]
    return [f"{indent}{value}"]
