"""``keel policy check`` without typer, pydantic or (for simple lines) tree-sitter.

``check_main`` parses its small argv by hand and returns the exit code, or ``None`` for
anything it does not understand (``--help``, an unknown option), which the caller hands to
the typer application instead. The typer command calls ``run_check`` too, so both paths
print the same thing.
"""

from __future__ import annotations

import os
import sys

from keel.policy._presets import PRESETS

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any, TextIO

    from keel.policy._core import Verdict

KINDS = ("command", "read", "write", "url")


class CheckRequest:
    """What to check and how to print it."""

    __slots__ = ("as_json", "config", "kind", "preset", "value", "workspace")

    def __init__(
        self,
        kind: str,
        value: str,
        *,
        as_json: bool = False,
        preset: str | None = None,
        config: str | None = None,
        workspace: str | None = None,
    ) -> None:
        self.kind = kind
        self.value = value
        self.as_json = as_json
        self.preset = preset
        self.config = config
        self.workspace = workspace


class _Usage(Exception):
    pass


def parse_check_args(args: list[str], workspace: str | None = None) -> CheckRequest | str | None:
    """A request, a usage-error message, or ``None`` to let typer handle ``args``."""
    opts: dict[str, Any] = {
        "as_json": False,
        "preset": None,
        "config": None,
        "workspace": workspace,
    }
    targets: dict[str, str] = {}
    words: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            words = args[i + 1 :]
            break
        if not a.startswith("-") or a == "-":
            words = args[i:]
            break
        name, eq, inline = a.partition("=")
        if name == "--json" and not eq:
            opts["as_json"] = True
            i += 1
            continue
        key = {
            "--preset": "preset",
            "--config": "config",
            "--workspace": "workspace",
            "-w": "workspace",
            "--read": "read",
            "--write": "write",
            "--url": "url",
        }.get(name)
        if key is None:
            return None if name in ("--help", "-h") else f"unknown option {name!r}"
        if eq:
            value = inline
            i += 1
        elif i + 1 < len(args):
            value = args[i + 1]
            i += 2
        else:
            return f"option {name} needs a value"
        if key in ("read", "write", "url"):
            targets[key] = value
        else:
            opts[key] = value
    if words:
        import shlex

        targets["command"] = words[0] if len(words) == 1 else shlex.join(words)
    if len(targets) != 1:
        return "give exactly one of: a COMMAND, --read PATH, --write PATH, --url URL"
    ((kind, value),) = targets.items()
    return CheckRequest(kind, value, **opts)


def check_main(args: list[str], workspace: str | None = None) -> int | None:
    """Run ``keel policy check ARGS``; ``None`` means: let typer handle these arguments."""
    request = parse_check_args(args, workspace)
    if request is None:
        return None
    if isinstance(request, str):
        return _usage_error(request, "--json" in args)
    return run_check(request)


def _usage_error(
    message: str,
    as_json: bool,
    code: str = "usage.invalid",
    err: TextIO | None = None,
    **context: Any,
) -> int:
    stream: TextIO = err if err is not None else sys.stderr
    if as_json:
        payload = {"code": code, "message": message, **context}
        stream.write('{"error": ' + _json_object(payload) + "}\n")
    else:
        stream.write(f"keel: error: {message} [{code}]\n")
    return 2


def find_root(override: str | None) -> str:
    """The same answer as :func:`keel.root.find_root`, without pathlib."""
    if override:
        return os.path.realpath(os.path.expanduser(override))
    here = os.path.realpath(os.getcwd())
    chain = [here]
    while os.path.dirname(chain[-1]) != chain[-1]:
        chain.append(os.path.dirname(chain[-1]))
    for marker, test in (("keel.toml", os.path.isfile), (".git", os.path.exists)):
        for candidate in chain:
            if test(os.path.join(candidate, marker)):
                return candidate
    return here


def load_engine(preset: str | None, config: str | None, workspace: str | None) -> Any:
    """The compiled engine for a workspace (raises KeelError subclasses on bad input)."""
    from keel.policy._core import Engine
    from keel.policy._snapshot import load_snapshot

    if preset is not None and preset not in PRESETS:
        from keel.errors import UsageError

        raise UsageError(
            f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})", code="usage.preset"
        )
    root = find_root(workspace)
    if workspace and not os.path.isdir(root):  # never judge against a mistyped workspace
        from keel.errors import UsageError

        what = "does not exist" if not os.path.exists(root) else "is not a directory"
        raise UsageError(f"workspace {workspace!r} {what}", code="usage.workspace")
    return Engine(load_snapshot(root, config_file=config), root, preset)


def run_check(request: CheckRequest, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Judge the request, print the decision, return the exit code (0, or 2 for bad usage)."""
    stdout: TextIO = out if out is not None else sys.stdout
    try:
        engine = load_engine(request.preset, request.config, request.workspace)
    except Exception as exc:
        code = getattr(exc, "code", None)
        if code is None or not str(code).startswith(("usage.", "config.")):
            raise
        context = getattr(exc, "context", {})
        message = getattr(exc, "message", str(exc))
        return _usage_error(message, request.as_json, str(code), err, **context)
    stopped = _stop_reason(find_root(request.workspace))
    if stopped is not None:
        verdict: Verdict = (
            "deny",
            "stop.active",
            f"emergency stop is set: {stopped}",
            "wait for the user to run `keel resume`",
        )
    else:
        verdict = judge(engine, request.kind, request.value)
    stdout.write(render(verdict, request.as_json))
    return 0


def _stop_reason(root: str) -> str | None:
    """The emergency-stop reason, if set; only an ``lstat`` when it is not."""
    if not os.path.lexists(os.path.join(root, ".keel", "STOP")):
        return None
    from pathlib import Path

    from keel.stop import stop_reason

    return stop_reason(Path(root)) or "emergency stop"


def judge(engine: Any, kind: str, value: str) -> Verdict:
    """One verdict; an exception inside the check is ``deny internal_error``."""
    from keel.policy._core import with_suggestion

    try:
        match kind:
            case "command":
                return with_suggestion(engine.check_line(value))
            case "read" | "write":
                return with_suggestion(engine.check_path(value, kind))
            case _:
                return with_suggestion(engine.check_url(value))
    except Exception as exc:  # fail closed
        return (
            "deny",
            "internal_error",
            f"the policy check failed: {type(exc).__name__}: {exc}",
            "report this as a keel bug; the action was blocked to be safe",
        )


def render(verdict: Verdict, as_json: bool) -> str:
    """The JSON object (one line) or readable text of a verdict."""
    decision, rule, reason, suggestion = verdict
    if as_json:
        return (
            _json_object(
                {"decision": decision, "rule": rule, "reason": reason, "suggestion": suggestion}
            )
            + "\n"
        )
    lines = [f"{decision}  {rule}", f"  reason: {_printable(reason)}"]
    if suggestion:
        lines.append(f"  suggestion: {_printable(suggestion)}")
    return "\n".join(lines) + "\n"


def _printable(text: str) -> str:
    """``text`` with control characters escaped, so input cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _json_object(values: dict[str, Any]) -> str:
    """A flat JSON object of strings, numbers and nulls, with the C encoder of ``_json``."""
    from _json import encode_basestring_ascii as enc  # pyright: ignore[reportMissingModuleSource]

    parts: list[str] = []
    for key, value in values.items():
        if value is None:
            text = "null"
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        else:
            text = enc(str(value).encode("utf-8", "backslashreplace").decode("utf-8"))
        parts.append(f"{enc(key)}: {text}")
    return "{" + ", ".join(parts) + "}"
