"""``keel wrap [--workspace W] [--allow-host HOST[:PORT]]... -- CLIENT [ARGS...]``.

Runs a whole agent client (Claude Code, Codex, Gemini CLI) inside ``keel exec``'s sandbox; see
``keel.sandbox.wrap``. Dispatched by the console entry before typer is imported, like
``keel exec``; the arguments are parsed by hand. Exit codes are the client's, or ``keel exec``'s
own (123 settings or control files planted, 124 time limit, 125 cannot contain, 126 emergency
stop, 127 not found, 2 usage).
"""

from __future__ import annotations

import sys

USAGE = (
    "usage: keel wrap [--workspace DIR] [--allow-host HOST[:PORT]]... "
    "[--client claude|codex|gemini|other] [--pass-env NAME]... [--timeout SECONDS] "
    "-- CLIENT [ARGS...]"
)
HELP = """
Run a whole agent client inside keel's sandbox (bubblewrap): everything keel exec promises,
plus the client's own state (~/.claude, ~/.claude.json, $CODEX_HOME, ~/.gemini) writable, its
API key variables, and its model host (from ANTHROPIC_BASE_URL, OPENAI_BASE_URL, Codex's
model_providers, GOOGLE_GEMINI_BASE_URL; else the vendor's) allowed through the proxy.
keel's hooks are decided outside the sandbox.

  --allow-host HOST[:PORT]  also allow this host (repeatable; without a port, ports 80 and
                            443); 127.0.0.1:PORT is also reachable inside directly
  --client NAME             the client, when the executable's name does not tell
  --pass-env NAME           also give the client this variable unfiltered (repeatable)
  --timeout SECONDS         a wall-clock limit (none by default)

Examples:
  keel wrap -- claude
  keel wrap --allow-host 127.0.0.1:8080 -- codex exec 'fix the failing test'
"""
_SINGLE = {
    "--workspace": "workspace",
    "-w": "workspace",
    "--client": "client",
    "--timeout": "timeout",
}
_REPEATED = {"--allow-host": "allow_host", "--pass-env": "pass_env"}


def parse(args: list[str]) -> tuple[dict[str, list[str]], list[str]] | str:
    """``(options, command)`` (each option's values in order) or a usage error message."""
    options: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return options, args[i + 1 :]
        if arg in ("-h", "--help"):
            return "help"
        name, eq, value = arg.partition("=")
        key = _SINGLE.get(name) or _REPEATED.get(name)
        if key is None:
            if arg.startswith("-"):
                return f"unknown option {arg!r}"
            return options, args[i:]
        if not eq:
            if i + 1 >= len(args):
                return f"{name} needs a value"
            i += 1
            value = args[i]
        if name in _SINGLE:
            options[key] = [value]
        else:
            options.setdefault(key, []).append(value)
        i += 1
    return options, []


def main(args: list[str], workspace: str | None = None) -> int:
    """Run ``keel wrap`` with ``args`` (after ``wrap``); the exit code."""
    parsed = parse(args)
    if parsed == "help":
        sys.stdout.write(USAGE + "\n" + HELP)
        return 0
    if isinstance(parsed, str):
        return _usage(parsed)
    options, command = parsed
    if not command:
        return _usage("no client given")
    timeout = _timeout(options.get("timeout", [None])[0])
    if isinstance(timeout, str):
        return _usage(timeout)
    return _run(options, command, options.get("workspace", [workspace])[0], timeout)


def _timeout(text: str | None) -> float | str | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        return f"--timeout must be a positive number of seconds, not {text!r}"
    return value


def _run(
    options: dict[str, list[str]], command: list[str], workspace: str | None, timeout: float | None
) -> int:
    from keel.sandbox.wrap import run_wrapped

    try:
        result = run_wrapped(
            command,
            workspace=workspace or _default_root(),
            allow_hosts=options.get("allow_host", []),
            client=options.get("client", [None])[0],
            pass_env=options.get("pass_env", []),
            timeout=timeout,
        )
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # refused, or a bug: either way the client did not run
        from keel.sandbox.exec.contain import report_refusal

        return report_refusal(exc, sys.stderr)
    return result.exit_code


def _default_root() -> str:
    from keel.core.root import find_root

    return find_root()


def _usage(message: str) -> int:
    sys.stderr.write(f"keel: error: {message} [usage.invalid]\n{USAGE}\n")
    return 2


def register(app: object) -> None:
    """List ``wrap`` in ``keel --help`` (the console entry dispatches it before typer)."""
    import typer

    assert isinstance(app, typer.Typer)

    def wrap_command(ctx: typer.Context) -> None:
        """Run a whole agent client contained: keel wrap [--allow-host H:P] -- CLIENT [ARGS]."""
        root = (ctx.obj or {}).get("workspace")
        raise typer.Exit(main(list(ctx.args), str(root) if root is not None else None))

    # typer reads annotations at run time; this module's are strings (no typer at import).
    wrap_command.__annotations__ = {"ctx": typer.Context, "return": None}
    settings = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
    app.command("wrap", context_settings=settings, add_help_option=False)(wrap_command)
