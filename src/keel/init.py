"""``keel init``: write a commented keel.toml and ``.keel/``, and git-ignore ``.keel/``."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.config import PRESETS, PresetName, config_present, parse_config
from keel.core.errors import ConfigError, UsageError, WorkspaceError
from keel.core.files import write_atomic
from keel.core.root import CONFIG_NAME, STATE_DIR, ensure_state_dir
from keel.hook.permissions import PermissionImport

_PRESET_NOTES: dict[str, str] = {
    "developer": "everyday read, build, test and git-inspection work runs without asking;\n"
    "# anything else asks you first; destructive and escape patterns are denied.",
    "strict": "only read-only inspection runs; everything else is denied,\n"
    "# including commands keel cannot parse.",
    "readonly": "nothing may be written or fetched; reads inside the workspace only.",
}

_SCOPE_HEADER = re.compile(r"^\s*\[\s*scope\s*\]\s*(?:#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")
_INCLUDE = re.compile(r"^\s*include\s*=")

TEMPLATE = """\
# keel.toml: what an agent may do in this repository. Review it like code.
# Docs: `keel policy explain` prints the effective policy.

[policy]
# Preset "{preset}": {note}
preset = "{preset}"
# Extra command patterns (argv prefix; globs per word), e.g. "docker compose ps".
# Claude Code's shell rules work too: "Bash(npm test:*)" means "npm test".
{commands}
# Hosts commands may reach, on top of the preset's (globs like "*.example.com").
network_allow = []
# Paths no agent may write. Leave commented to keep the preset's list
# (.git/**, .env*, **/migrations/**, .keel/**, keel.toml, ...).
# protected = [".git/**", ".env*", "**/migrations/**"]

[scope]
# The paths this task may change (workspace-relative globs).
include = {include}
exclude = []

# Rules in words, re-injected into the agent's context; `protect` and `forbid` enforce them.
# [[constraints]]
# id = "no-migrations"
# text = "Never edit database migrations."
# protect = ["**/migrations/**"]
# forbid = ["alembic downgrade"]

[limits]
max_steps = 500
max_wall_seconds = 7200
max_tokens = 5000000
plan_max_steps = 10
plan_max_depth = 3

[gates]
# Commands that must pass after the last edit before the agent may finish, e.g. ["pytest -q"].
required = []
max_blocks = 3
"""


@dataclass(frozen=True, slots=True)
class InitResult:
    """What ``init_workspace`` did."""

    root: Path
    config_path: Path
    wrote_config: bool
    updated_gitignore: bool
    scope_was: tuple[str, ...] | None = None
    """The ``[scope] include`` an existing keel.toml had before ``scope`` replaced it (None:
    the file was written whole, or no scope was given, or it was already that scope)."""


def render_config(
    preset: PresetName, scope: list[str] | None = None, rules: PermissionImport | None = None
) -> str:
    """The commented keel.toml text for ``preset``; it always validates.

    Args:
        preset: the preset.
        scope: the ``[scope] include`` globs (default: everything).
        rules: a client's permission rules to carry into ``[policy] allow/ask/deny``, each
            with a comment naming the rule and where it came from.

    Raises:
        ConfigError: the text would not validate (an imported pattern keel rejects).
    """
    include = _toml_array(scope or ["**"])
    commands = "\n".join(command_array(tier, rules) for tier in ("allow", "ask", "deny"))
    text = TEMPLATE.format(
        preset=preset, note=_PRESET_NOTES[preset], include=include, commands=commands
    )
    parse_config(text)
    return text


def command_array(tier: str, rules: PermissionImport | None) -> str:
    """``tier = [...]`` in TOML, one imported rule a line with its origin as a comment."""
    mine = [r for r in rules.imported if r.tier == tier] if rules else []
    if not mine:
        return f"{tier} = []"
    lines = [f"{tier} = ["]
    for rule in mine:
        origin = " ".join(f"{rule.rule} in {rule.source}".split())
        lines.append(f"    {json.dumps(rule.pattern, ensure_ascii=False)},  # {origin}")
    lines.append("]")
    return "\n".join(lines)


def init_workspace(
    root: Path,
    preset: str = "developer",
    *,
    force: bool = False,
    scope: list[str] | None = None,
    rules: PermissionImport | None = None,
) -> InitResult:
    """Write keel.toml (unless present and not ``force``), create .keel/, git-ignore it.

    ``rules`` (a client's permission rules) go into the keel.toml written; an existing
    keel.toml that is kept is not changed, except for ``scope``: given, it replaces the
    kept file's ``[scope] include`` (``set_scope``), never silently ignored.

    Raises:
        UsageError: ``preset`` is not a preset.
        ConfigError: something that is not a regular file is named keel.toml, or ``scope`` cannot
            be set in the existing one (it is invalid, or holds the key in a form keel will not
            edit; the message gives the line to write).
        WorkspaceError: the workspace cannot be written (checked before the first write).
    """
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    config_path = root / CONFIG_NAME
    text = render_config(preset, scope, rules)
    if os.path.lexists(root) and not root.is_dir():
        raise WorkspaceError(f"cannot initialise {root}: not a directory", code="workspace.init")
    try:  # everything that can fail on a broken workspace before the first write
        write = force or not config_present(config_path)
        root.mkdir(parents=True, exist_ok=True)
        ensure_state_dir(root)
        gitignore = _gitignore_addition(root)
        scope_was = None
        if write:
            _write_atomic(config_path, text)
        elif scope is not None:
            scope_was = set_scope(config_path, scope)
        if gitignore:
            with open(root / ".gitignore", "ab") as fh:  # the bytes already there stay as they are
                fh.write(gitignore)
    except OSError as exc:
        where = exc.filename or root
        raise WorkspaceError(
            f"cannot initialise {root}: {where}: {exc.strerror or exc}", code="workspace.init"
        ) from exc
    return InitResult(root, config_path, write, bool(gitignore), scope_was)


def set_scope(config_path: Path, scope: list[str]) -> tuple[str, ...] | None:
    """Set ``[scope] include`` of the keel.toml at ``config_path``, changing nothing else.

    The ``include`` line (or lines: an array over several) is replaced, or added under
    ``[scope]``, or a ``[scope]`` table is appended; the result is parsed again and must equal
    the old file with only that value changed, or nothing is written.

    Returns:
        The include the file had before; None when it was ``scope`` already.

    Raises:
        ConfigError: the file is invalid, or the value cannot be set by such an edit.
        OSError: the file cannot be read or written.
    """
    import copy
    import tomllib

    text = config_path.read_text(encoding="utf-8")
    before = parse_config(text, str(config_path)).scope.include
    if list(before) == scope:
        return None
    expected = copy.deepcopy(tomllib.loads(text))
    expected.setdefault("scope", {})["include"] = scope
    line = f"include = {_toml_array(scope)}\n"
    new = _with_include(text, line, expected)
    if new is None:
        raise ConfigError(
            "keel could not set [scope] include without changing anything else in the file; "
            f"write it yourself under [scope]: {line.strip()}",
            file=str(config_path),
            key="scope.include",
            code="config.scope_edit",
        )
    parse_config(new, str(config_path))
    _write_atomic(config_path, new)
    return tuple(before)


def _with_include(text: str, line: str, expected: dict[str, Any]) -> str | None:
    """``text`` with ``line`` as ``[scope]``'s include; None when no edit gives ``expected``."""
    import tomllib

    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    candidates: list[str] = []
    for i, header in enumerate(lines):
        if not _SCOPE_HEADER.match(header):
            continue
        end = next((j for j in range(i + 1, len(lines)) if _ANY_HEADER.match(lines[j])), None)
        end = len(lines) if end is None else end
        for j in range(i + 1, end):
            if _INCLUDE.match(lines[j]):  # the value may span lines: try each possible end
                candidates += ["".join([*lines[:j], line, *lines[k + 1 :]]) for k in range(j, end)]
        candidates.append("".join([*lines[: i + 1], line, *lines[i + 1 :]]))
    candidates.append("".join(lines) + ("\n" if lines else "") + "[scope]\n" + line)
    for candidate in candidates:
        try:
            if tomllib.loads(candidate) == expected:
                return candidate
        except tomllib.TOMLDecodeError:
            continue
    return None


def _toml_array(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def _write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (raises ``OSError``, the old file kept)."""
    write_atomic(path, text)


def _gitignore_addition(root: Path) -> bytes:
    """What to append to ``.gitignore`` so that it ignores ``.keel/`` (empty if it does)."""
    gitignore = root / ".gitignore"
    raw = gitignore.read_bytes() if os.path.lexists(gitignore) else b""
    entries = {line.strip() for line in raw.splitlines()}
    name = STATE_DIR.encode()
    if entries & {name, name + b"/", b"/" + name, b"/" + name + b"/"}:
        return b""
    return (b"" if not raw or raw.endswith(b"\n") else b"\n") + name + b"/\n"
