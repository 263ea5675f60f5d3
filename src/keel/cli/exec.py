"""``keel exec [--workspace W] [--timeout S] [--backend B] -- CMD...``: run a command contained.

Dispatched by the console entry before typer and pydantic are imported (every contained shell
call of an agent starts here); the arguments are parsed by hand. Exit codes are the command's,
or those documented in ``keel.sandbox.exec._exec`` (123 quarantined, 124 timeout, 125 cannot
contain, 126 emergency stop, 127 not found, 2 usage).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

USAGE = (
    "usage: keel exec [--workspace DIR] [--timeout SECONDS] [--backend auto|bwrap|landlock] "
    "[--report ID] -- CMD..."
)
HELP = """
Run a command contained, in place in the workspace: it can write only the workspace, a
private /tmp and [sandbox] writable; keel's and the agents' control files stay read-only;
HOME is fresh, secrets are filtered from the environment, and the network goes only through
a proxy that lets through the policy's allowed hosts. The hooks rewrite every shell command
they allow into this.

  --workspace DIR    the workspace (default: found from the current directory)
  --timeout SECONDS  a wall-clock limit (exit 124 when it passes)
  --backend NAME     auto, bwrap or landlock (default auto: see `keel sandbox check`)
  --report ID        also write what the run left behind (quarantined, restored and prompt
                     files) to .keel/exec/reports/ID.json, for the hook that rewrote the call

Exit: the command's own code, or 123 control files quarantined, 124 timeout, 125 cannot
contain, 126 emergency stop (set before the run, or `keel stop` killed it), 127 not found,
2 usage. Every run is journaled (session keel-exec: argv, exit code, duration, quarantined
files), and so is every connection the proxy refused (host, port, command); a refusal names
the network_allow entry that would allow it (`keel allow-host HOST[:PORT]` adds it).

Examples:
  keel exec -- pytest -q
  keel exec --timeout 60 -- bash -c 'make && make test'
"""
_OPTIONS = {
    "--workspace": "workspace",
    "-w": "workspace",
    "--timeout": "timeout",
    "--backend": "backend",
    "--report": "report",
}


def parse(args: list[str]) -> tuple[dict[str, str], list[str]] | str:
    """``(options, command)`` or a usage error message."""
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return options, args[i + 1 :]
        if arg in ("-h", "--help"):
            return "help"
        name, eq, value = arg.partition("=")
        if name not in _OPTIONS:
            if arg.startswith("-"):
                return f"unknown option {arg!r}"
            return options, args[i:]
        if not eq:
            if i + 1 >= len(args):
                return f"{name} needs a value"
            i += 1
            value = args[i]
        options[_OPTIONS[name]] = value
        i += 1
    return options, []


def main(args: list[str]) -> int:
    """Run ``keel exec`` with ``args`` (after ``exec``); the exit code."""
    parsed = parse(args)
    if parsed == "help":
        sys.stdout.write(USAGE + "\n" + HELP)
        return 0
    if isinstance(parsed, str):
        return _usage(parsed)
    options, command = parsed
    timeout = None
    if "timeout" in options:
        try:
            timeout = float(options["timeout"])
        except ValueError:
            timeout = -1.0
        if not 0 < timeout < float("inf"):
            return _usage(
                f"--timeout must be a positive number of seconds, not {options['timeout']!r}"
            )
    backend = options.get("backend")
    if backend is not None and backend not in ("auto", "bwrap", "landlock"):
        return _usage(f"--backend must be auto, bwrap or landlock, not {backend!r}")
    if not command:
        return _usage("no command given")
    from keel.sandbox.exec._control import is_report_id

    report = options.get("report")
    if report is not None and not is_report_id(report):
        return _usage(f"--report must be 8 to 64 lower-case hex digits, not {report!r}")
    from keel.sandbox.exec._exec import execute, final_code

    try:
        outcome = execute(
            command,
            workspace=options.get("workspace"),
            timeout=timeout,
            backend=backend,
            report=report,
            decisions=False,  # shown nowhere here (the proxy log has them)
            detach_journal=True,  # the journal's imports would cost more than the run
        )
    except KeyboardInterrupt:  # before the handlers were in place: nothing was started
        return 130
    except Exception as exc:  # refused, or a bug: either way the command did not run
        from keel.sandbox.exec._context import report_refusal

        return report_refusal(exc, sys.stderr)
    _end(final_code(outcome))


def _end(code: int) -> NoReturn:
    """End the process with ``code``: the run is over and recorded, nothing is left to close.

    Interpreter shutdown (tearing down every module) would cost each contained call ~2 ms.
    """
    import os

    from keel.core.codecache import save
    from keel.sandbox.os import _quiet

    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not stream.closed:
            _quiet.call(stream.flush)  # a closed pipe: there is no one to tell
    save()  # after the output: once per installation, the next runs' imports from one file
    os._exit(code)


def _usage(message: str) -> int:
    sys.stderr.write(f"keel: error: {message} [usage.invalid]\n{USAGE}\n")
    return 2


def register(app: object) -> None:
    """List ``exec`` in ``keel --help`` (the console entry dispatches it before typer)."""
    import typer

    assert isinstance(app, typer.Typer)

    def exec_command(ctx: typer.Context) -> None:
        """Run a command contained: keel exec [--workspace W] [--timeout S] -- CMD..."""
        raise typer.Exit(main(list(ctx.args)))

    # typer reads annotations at run time; this module's are strings (no typer at import).
    exec_command.__annotations__ = {"ctx": typer.Context, "return": None}
    settings = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
    app.command("exec", context_settings=settings, add_help_option=False)(exec_command)
