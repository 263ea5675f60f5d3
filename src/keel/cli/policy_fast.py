"""``keel policy check`` without typer, pydantic or (for simple lines) tree-sitter.

``check_main`` parses its small argv by hand and returns the exit code, or ``None`` for
anything it does not understand (``--help``, an unknown option), which the caller hands to
the typer application instead. The typer command calls ``run_check`` too, so both paths
print the same thing.

By default a command is judged as the hooks judge it here: contained when they contain what
they allow (``[sandbox] contain`` and a working sandbox: fewer questions about running project
code, installs, local git work and reads outside the workspace), else by the text policy
alone. ``--contained`` and ``--uncontained`` pick one of the two regardless.
"""

from __future__ import annotations

import os
import sys

from keel.core.frozen import Frozen

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any, TextIO

    from keel.core.calls import ToolCall
    from keel.core.decision import Decision
    from keel.guard import Guard


class CheckRequest(Frozen):
    """What to check and how to print it."""

    __slots__ = ("as_json", "config", "contained", "kind", "preset", "value", "workspace")
    kind: str
    """``command``, ``read``, ``write`` or ``url``."""
    value: str
    as_json: bool
    preset: str | None
    config: str | None
    """A keel.toml to use instead of the workspace's."""
    workspace: str | None
    contained: bool | None
    """Judge as if the command ran inside ``keel exec`` (True), as the text policy alone
    (False), or as the workspace's hooks do (None, the default)."""

    def __init__(
        self,
        kind: str,
        value: str,
        *,
        as_json: bool = False,
        preset: str | None = None,
        config: str | None = None,
        workspace: str | None = None,
        contained: bool | None = None,
    ) -> None:
        self._init(
            kind=kind,
            value=value,
            as_json=as_json,
            preset=preset,
            config=config,
            workspace=workspace,
            contained=contained,
        )


def parse_check_args(args: list[str], workspace: str | None = None) -> CheckRequest | str | None:
    """A request, a usage-error message, or ``None`` to let typer handle ``args``."""
    opts: dict[str, Any] = {
        "as_json": False,
        "preset": None,
        "config": None,
        "workspace": workspace,
        "contained": None,
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
        flag = {"--json": ("as_json", True), "--contained": ("contained", True),
                "--uncontained": ("contained", False)}.get(name)  # fmt: skip
        if flag is not None and not eq:
            opts[flag[0]] = flag[1]
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
        targets["command"] = words[0] if len(words) == 1 else _join(words)
    if len(targets) != 1:
        return "give exactly one of: a COMMAND, --read PATH, --write PATH, --url URL"
    ((kind, value),) = targets.items()
    return CheckRequest(kind, value, **opts)


def _join(words: list[str]) -> str:
    """``shlex.join(words)``, without importing shlex when every word is plain."""
    import re

    if all(re.fullmatch(r"[\w@%+=:,./-]+", w, re.ASCII) for w in words):
        return " ".join(words)
    import shlex

    return shlex.join(words)


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


def run_check(request: CheckRequest, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Judge the request through ``Guard.decide``, print it, return the exit code (0 or 2).

    The guard has no journal, monitor or checkpoints here: it is the stop check and the
    policy, the same first two steps every hook call takes.
    """
    stdout: TextIO = out if out is not None else sys.stdout
    try:
        guard = _guard(request)
    except Exception as exc:
        code = getattr(exc, "code", None)
        if code is None or not str(code).startswith(("usage.", "config.")):
            raise
        context = getattr(exc, "context", {})
        message = getattr(exc, "message", str(exc))
        return _usage_error(message, request.as_json, str(code), err, **context)
    decided = guard.decide(_call(request.kind, request.value))
    if request.as_json:
        stdout.write(render(decided, True))
        return 0
    from keel.core.color import color_enabled

    stdout.write(render(decided, False, color=color_enabled(stdout)))
    return 0


def _guard(request: CheckRequest) -> Guard:
    """A journal-free guard over the request's workspace (raises KeelError on bad input)."""
    from keel.core.configview import config_source, config_view
    from keel.core.presets import check_preset
    from keel.core.root import find_root
    from keel.guard import Guard
    from keel.policy import Policy

    check_preset(request.preset)
    root = find_root(override=request.workspace)
    if request.workspace and not os.path.isdir(root):  # never judge against a mistyped one
        from keel.core.errors import UsageError

        what = "does not exist" if not os.path.exists(root) else "is not a directory"
        raise UsageError(f"workspace {request.workspace!r} {what}", code="usage.workspace")
    config = config_view(root, request.preset, config_file=request.config)
    source = config_source(root, request.config)
    contained = request.contained
    if contained is None:  # as the hooks of this workspace would judge it
        from keel.guard import containment

        contained = containment(config)[0]
    policy = Policy.from_config(config, root, source=source, contained=contained)
    return Guard(root, config, policy, "policy-check", "keel")


def _call(kind: str, value: str) -> ToolCall:
    from keel.core.calls import ToolCall

    match kind:
        case "command":
            return ToolCall("Bash", "exec", command=value)
        case "read":
            return ToolCall("Read", "read", paths=(value,))
        case "write":
            return ToolCall("Write", "write", paths=(value,))
        case _:
            return ToolCall("WebFetch", "network", url=value)


def render(decided: Decision, as_json: bool, *, color: bool = False) -> str:
    """The JSON object (one line) or readable text of a decision; ``color``: the verdict too."""
    decision, rule, reason, suggestion = (
        decided.decision,
        decided.rule,
        decided.reason,
        decided.suggestion,
    )
    if as_json:
        return (
            _json_object(
                {"decision": decision, "rule": rule, "reason": reason, "suggestion": suggestion}
            )
            + "\n"
        )
    from keel.core.color import paint_decision

    lines = [
        f"{paint_decision(decision, decision, color)}  {rule}",
        f"  reason: {_printable(reason)}",
    ]
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
    from _json import encode_basestring_ascii as enc

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
