"""``keel allow-host HOST[:PORT]``: add a host to ``[policy] network_allow`` in keel.toml.

What a refused connection of a contained command names (``add "HOST" to [policy]
network_allow in keel.toml, or run `keel allow-host HOST```), done for the user: the entry is
read as the policy reads it (a host name, an IPv4 or IPv6 address, ``*.`` in front for every
subdomain; without a port: 80 and 443), written the way refusals spell it, and appended to the
array in place. The rest of keel.toml (its other keys, comments, layout) is kept byte for byte;
the new text must parse to the same config plus that one entry (``keel.config.parse_config``
validates it whole) before it replaces the file in one rename. A workspace without a
keel.toml gets one: the developer preset (what applied without it) and the entry. keel's
proxy and hooks read the change on their next decision.
"""

from __future__ import annotations

import json
import re
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, examples, existing_workspace, fail, print_json
from keel.core.errors import ConfigError, KeelError, UsageError
from keel.core.root import CONFIG_NAME

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")
_HEADER = re.compile(r"[ \t]*\[\[?[ \t]*([^\]\n]*?)[ \t]*\]")
_POLICY = re.compile(r"""[ \t]*\[[ \t]*(?:policy|"policy"|'policy')[ \t]*\][ \t]*(?:#.*)?""")
_KEY = re.compile(r"""[ \t]*(?:network_allow|"network_allow"|'network_allow')[ \t]*=[ \t]*""")
WILDCARD = "*."
NEW_CONFIG = '[policy]\npreset = "developer"  # what applies without a keel.toml\n'
"""The start of a keel.toml ``keel allow-host`` creates: the defaults it had, made explicit."""


def register(app: typer.Typer) -> None:
    app.command(
        "allow-host",
        epilog=examples(
            "keel allow-host registry.example.com      # ports 80 and 443",
            "keel allow-host 127.0.0.1:8080",
            "keel allow-host '*.internal.example.com'",
        ),
    )(allow_host)


def allow_host(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Argument(help="HOST or HOST:PORT; no port allows 80 and 443.", metavar="HOST")
    ],
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Let contained commands reach HOST: add it to [policy] network_allow in keel.toml.

    The entry is the one a refused connection names. Everything else in keel.toml is kept as
    written, and the result is validated before it replaces the file. A workspace without a
    keel.toml gets one with the developer preset (what applied without it) and the entry.

    --json prints {"file", "entry", "added", "created"} ("added" is false when the entry was
    there already).
    """
    try:
        entry = network_entry(host)
        path = existing_workspace(ctx, workspace, "keel allow-host") / CONFIG_NAME
        done = add_network_allow(path, entry)
    except KeelError as err:
        fail(err, as_json=as_json)
    if as_json:
        added, created = done != "present", done == "created"
        print_json({"file": str(path), "entry": entry, "added": added, "created": created})
    elif done == "present":
        typer.echo(f'"{entry}" is already in [policy] network_allow in {path}')
    else:
        made = " (created, with the developer preset)" if done == "created" else ""
        typer.echo(f'allowed "{entry}": added to [policy] network_allow in {path}{made}')


def network_entry(text: str) -> str:
    """``HOST[:PORT]`` as a ``network_allow`` entry, spelled as the proxy's refusals spell it.

    Raises:
        UsageError: ``usage.bad_host``: not a host name, IP address or ``*.`` domain, or a
            port outside 1-65535.
    """
    from keel.policy import allow_entry, canonical_host, host_pattern

    raw = text.strip()
    if raw.count("[") != raw.count("]"):
        raw = ""  # an unclosed IPv6 bracket: nothing to read
    host, port = host_pattern(raw)
    wildcard = host.startswith(WILDCARD)
    base = host.removeprefix(WILDCARD) if wildcard else host
    canonical = canonical_host(base) if base and "*" not in base else ""
    if not _is_host(canonical) or (port is not None and not 0 < port < 65536):
        raise UsageError(
            f"{text!r} is not HOST or HOST:PORT (a host name, an IPv4 address, an IPv6 "
            "address in brackets when a port follows, or *.DOMAIN; a port from 1 to 65535)",
            code="usage.bad_host",
            host=text,
        )
    if wildcard and ":" in canonical:
        raise UsageError(f"{text!r}: *. goes before a domain name", code="usage.bad_host")
    return allow_entry(f"{WILDCARD}{canonical}" if wildcard else canonical, port)


def _is_host(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return _HOSTNAME.fullmatch(text) is not None
    return True


def add_network_allow(path: Path, entry: str) -> str:
    """Append ``entry`` to ``[policy] network_allow`` in the keel.toml at ``path``.

    ``"added"``; ``"present"`` when it is there already (the file is not touched);
    ``"created"`` when there was no keel.toml (``NEW_CONFIG`` and the entry).

    Raises:
        ConfigError: the file cannot be read, is invalid, or could not be edited in place.
    """
    from keel.config import config_present, parse_config
    from keel.core.files import write_atomic

    target, text, mode, done = path, NEW_CONFIG, 0o644, "created"
    if config_present(path):
        target, done = path.resolve(), "added"  # a linked keel.toml stays linked
        try:
            text = target.read_text(encoding="utf-8")
            mode = stat.S_IMODE(target.stat().st_mode)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read: {exc}", file=str(path), code="config.read") from exc
    before = list(parse_config(text, file=str(path)).policy.network_allow)
    if entry in before:
        return "present"
    new = with_entry(text, entry)
    if _network_allow(new) != [*before, entry]:
        raise ConfigError(
            f'cannot add "{entry}" to [policy] network_allow without rewriting the file (is '
            "it set with a dotted key or an inline table?): add it by hand",
            file=str(path),
            code="config.edit",
        )
    parse_config(new, file=str(path))
    try:
        write_atomic(target, new, mode=mode)
    except OSError as exc:
        raise ConfigError(f"cannot write: {exc}", file=str(path), code="config.write") from exc
    return done


def _network_allow(text: str) -> list[Any] | None:
    try:
        policy = tomllib.loads(text).get("policy")
    except tomllib.TOMLDecodeError:
        return None
    value = policy.get("network_allow", []) if isinstance(policy, dict) else None
    return value if isinstance(value, list) else None


def with_entry(text: str, entry: str) -> str:
    """``text`` with ``entry`` appended to ``[policy] network_allow``, all else as written.

    The key is added under ``[policy]`` when it is missing, and the table at the end when
    that is missing too. The caller checks the result (a key set some other way, such as a
    dotted key, is not found here).
    """
    value = json.dumps(entry)  # a TOML basic string: entries are ASCII without escapes
    lines = text.splitlines(keepends=True)
    tables = (i for i, line in enumerate(lines) if _POLICY.fullmatch(line.rstrip("\r\n")))
    table = next(tables, None)
    if table is None:
        gap = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
        return f"{text}{gap}[policy]\nnetwork_allow = [{value}]\n"
    offset = sum(len(line) for line in lines[: table + 1])
    end = len(lines)
    for i in range(table + 1, len(lines)):
        line = lines[i]
        if _HEADER.match(line):
            end = i
            break
        key = _KEY.match(line)
        if key is not None and line[key.end() :].startswith("["):
            return _append(text, offset + key.end(), value)
        offset += len(line)
    # after the table's last key: blank lines and comments above the next table stay there
    last = end - 1
    while last > table and (not lines[last].strip() or lines[last].lstrip().startswith("#")):
        last -= 1
    at = sum(len(line) for line in lines[: last + 1])
    newline = "" if lines[last].endswith("\n") else "\n"
    return f"{text[:at]}{newline}network_allow = [{value}]\n{text[at:]}"


def _append(text: str, start: int, value: str) -> str:
    """``text`` with ``value`` added as the last element of the array opening at ``start``."""
    close, last = _array_end(text, start)
    if last is None:  # empty: the value right after the bracket
        return f"{text[: start + 1]}{value}{text[start + 1 :]}"
    comma = text[last] == ","
    line_end = text.find("\n", last)
    if "\n" not in text[start:close] or line_end == -1 or line_end > close:
        joined = f" {value}" if comma else f", {value}"
        return f"{text[: last + 1]}{joined}{text[last + 1 :]}"
    # one element a line: a new line after the last one's (and after its comment)
    line = text[text.rfind("\n", 0, last) + 1 : last]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    added = f"\n{indent}{value}{',' if comma else ''}"
    head = text[: last + 1] + ("" if comma else ",")
    return f"{head}{text[last + 1 : line_end]}{added}{text[line_end:]}"


def _array_end(text: str, start: int) -> tuple[int, int | None]:
    """``(closing bracket, last significant character)`` of the array opening at ``start``.

    Strings (basic and literal) and comments are skipped; ``last`` is ``None`` for an empty
    array.
    """
    depth, last, i = 0, None, start
    while i < len(text):
        char = text[i]
        if char == "#":
            end = text.find("\n", i)
            i = len(text) if end == -1 else end
            continue
        if char in "\"'":
            end = _string_end(text, i)
            last, i = end - 1, end
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return i, last
        if not char.isspace() and i != start:
            last = i
        i += 1
    raise ConfigError("an array in keel.toml is not closed", code="config.toml")


def _string_end(text: str, i: int) -> int:
    """The index after the string that starts at ``i``."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        return len(text) if end == -1 else end + 3
    j = i + 1
    while j < len(text) and text[j] not in (quote, "\n"):
        j += 2 if quote == '"' and text[j] == "\\" else 1
    return j + 1
