"""The user's Codex configuration: project trust, hook reviews, execpolicy rules.

Codex reads a project's ``.codex/`` (where ``keel init --agent codex`` registers keel's hooks)
only when the project is trusted: ``[projects."<absolute path>"] trust_level = "trusted"`` in
``$CODEX_HOME/config.toml`` (``CODEX_HOME`` defaults to ``~/.codex``). Measured with the pinned
Codex 0.171.0 and ``codex exec``:

- an untrusted project's hooks never run, silently (an outside write ran, nothing journaled);
- trusting a parent directory is not enough: the project's own path must be trusted;
- a trusted project's hooks run in ``codex exec`` only with ``--dangerously-bypass-hook-trust``
  or once they were reviewed (``/hooks`` in the TUI, recorded by Codex as
  ``[hooks.state."<file>:<event>:<i>:<j>"] trusted_hash = ...``); a changed command needs a
  new review.

``trust_project`` records trust with a minimal edit of the file: the project's table is
appended, or its ``trust_level`` line replaced, and nothing else; comments and the user's
settings (``sandbox_mode`` among them) stay as they are. The result is parsed again and
compared with the original: if anything but that one value would change, nothing is written.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import ConfigError
from keel.core.files import write_atomic

TRUSTED = "trusted"
_HEADER = re.compile(r"^\s*\[(?!\[)\s*projects\s*\.(?P<key>.+?)\]\s*(?:#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")
_TRUST_LINE = re.compile(r"^\s*trust_level\s*=")


@dataclass(frozen=True, slots=True)
class TrustResult:
    """What ``trust_project`` did."""

    config: Path
    """The Codex config file."""
    changed: bool
    """False when the project was trusted already."""
    previous: str | None
    """The ``trust_level`` it had before (None: no entry)."""
    sandbox_mode: str | None
    """The user's ``sandbox_mode``, left as it was."""


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``."""
    env = os.environ if env is None else env
    explicit = env.get("CODEX_HOME")
    if explicit:
        return Path(explicit).expanduser()
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".codex"


def codex_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The user's Codex config file, ``$CODEX_HOME/config.toml``."""
    return codex_home(env) / "config.toml"


def read_codex_config(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The user's Codex config; empty when there is none.

    Raises:
        ConfigError: the file exists but cannot be read or is not valid TOML.
    """
    path = codex_config_path(env)
    return _parse(_read(path), path)


def project_trust(root: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The ``trust_level`` Codex has for ``root`` (None when there is no entry).

    Raises:
        ConfigError: the Codex config cannot be read or is not valid TOML.
    """
    entry = _projects(read_codex_config(env)).get(_key(root))
    level = entry.get("trust_level") if isinstance(entry, dict) else None
    return str(level) if level is not None else None


def hook_reviews(root: Path, env: Mapping[str, str] | None = None) -> int:
    """How many hooks of ``root``'s ``.codex/hooks.json`` have a review recorded by Codex.

    Codex checks each recorded hash against the current command itself; keel only counts.

    Raises:
        ConfigError: the Codex config cannot be read or is not valid TOML.
    """
    hooks = read_codex_config(env).get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if not isinstance(state, dict):
        return 0
    prefix = f"{_key(root)}/.codex/hooks.json:"
    return sum(
        1
        for name, value in state.items()
        if str(name).startswith(prefix) and isinstance(value, dict) and value.get("trusted_hash")
    )


def trust_project(root: Path, env: Mapping[str, str] | None = None) -> TrustResult:
    """Record ``[projects."<root>"] trust_level = "trusted"`` in the user's Codex config.

    Raises:
        ConfigError: the config cannot be read, is not valid TOML, or holds the project's entry
            in a form keel will not edit (an inline table, dotted keys): nothing is written,
            and the message says what to add by hand.
    """
    path = codex_config_path(env)
    text = _read(path)
    data = _parse(text, path)
    key = _key(root)
    sandbox = data.get("sandbox_mode")
    entry = _projects(data).get(key)
    previous = entry.get("trust_level") if isinstance(entry, dict) else None
    result = TrustResult(path, False, previous, None if sandbox is None else str(sandbox))
    if previous == TRUSTED:
        return result
    new_text = _with_trust(text, key)
    expected = copy.deepcopy(data)
    table = expected.setdefault("projects", {})
    if isinstance(table, dict):
        table.setdefault(key, {})["trust_level"] = TRUSTED
    try:
        ok = tomllib.loads(new_text) == expected
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise ConfigError(
            f"keel could not record trust in {path} without changing anything else; add "
            f"these two lines to it yourself:\n[projects.{_toml_string(key)}]\n"
            f'trust_level = "{TRUSTED}"',
            file=str(path),
            code="config.codex_trust",
        )
    target = Path(os.path.realpath(path))  # a symlinked config (dotfiles) stays a symlink
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        mode = target.stat().st_mode & 0o7777 if target.exists() else 0o600
        write_atomic(target, new_text, fsync=True, mode=mode)
        os.chmod(target, mode)
    except OSError as exc:
        raise ConfigError(
            f"cannot write: {exc.strerror or exc}", file=str(path), code="config.codex"
        ) from exc
    return TrustResult(path, True, result.previous, result.sandbox_mode)


def codex_rules_files(root: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Codex's execpolicy rule files: ``$CODEX_HOME/rules/*.rules``, ``.codex/rules/*.rules``."""
    found: list[Path] = []
    for directory in (codex_home(env) / "rules", root / ".codex" / "rules"):
        try:
            found.extend(sorted(p for p in directory.glob("*.rules") if p.is_file()))
        except OSError:
            continue
    return found


def _key(root: Path) -> str:
    return os.path.realpath(root)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(path), code="config.codex") from exc


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(path), code="config.codex") from exc


def _projects(data: dict[str, Any]) -> dict[str, Any]:
    projects = data.get("projects")
    return projects if isinstance(projects, dict) else {}


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are all valid TOML)."""
    return json.dumps(text, ensure_ascii=False)


def _header_key(raw: str) -> str | None:
    try:
        parsed = tomllib.loads(f"[t.{raw}]\n")
    except tomllib.TOMLDecodeError:
        return None
    inner = parsed.get("t")
    if isinstance(inner, dict) and len(inner) == 1:
        (name,) = inner
        return str(name)
    return None


def _with_trust(text: str, key: str) -> str:
    """``text`` with the project's ``trust_level`` set: replaced, inserted or appended."""
    lines = text.splitlines(keepends=True)
    trust = f'trust_level = "{TRUSTED}"\n'
    for i, line in enumerate(lines):
        header = _HEADER.match(line.rstrip("\r\n"))
        if not header or _header_key(header.group("key").strip()) != key:
            continue
        j = i + 1
        while j < len(lines) and not _ANY_HEADER.match(lines[j]):
            if _TRUST_LINE.match(lines[j]):
                return "".join([*lines[:j], trust, *lines[j + 1 :]])
            j += 1
        return "".join([*lines[: i + 1], trust, *lines[i + 1 :]])
    sep = "" if not text or text.endswith("\n") else "\n"
    blank = "\n" if text.strip() else ""
    return f"{text}{sep}{blank}[projects.{_toml_string(key)}]\n{trust}"
