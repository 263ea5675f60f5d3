"""``keel init``: write a commented keel.toml and ``.keel/``, and git-ignore ``.keel/``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from keel._files import write_atomic
from keel.config import CONFIG_NAME, PRESETS, PresetName, config_present, parse_config
from keel.errors import UsageError, WorkspaceError
from keel.root import ensure_state_dir

_PRESET_NOTES: dict[str, str] = {
    "developer": "everyday read, build, test and git-inspection work runs without asking;\n"
    "# anything else asks you first; destructive and escape patterns are denied.",
    "strict": "only read-only inspection runs; everything else is denied,\n"
    "# including commands keel cannot parse.",
    "readonly": "nothing may be written or fetched; reads inside the workspace only.",
}

TEMPLATE = """\
# keel.toml: what an agent may do in this repository. Review it like code.
# Docs: `keel policy explain` prints the effective policy.

[policy]
# Preset "{preset}": {note}
preset = "{preset}"
# Extra command patterns (argv prefix; globs per word), e.g. "docker compose ps".
allow = []
ask = []
deny = []
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


def render_config(preset: PresetName, scope: list[str] | None = None) -> str:
    """The commented keel.toml text for ``preset``; it always validates."""
    include = "[" + ", ".join(json.dumps(g, ensure_ascii=False) for g in (scope or ["**"])) + "]"
    text = TEMPLATE.format(preset=preset, note=_PRESET_NOTES[preset], include=include)
    parse_config(text)
    return text


def init_workspace(
    root: Path, preset: str = "developer", *, force: bool = False, scope: list[str] | None = None
) -> InitResult:
    """Write keel.toml (unless present and not ``force``), create .keel/, git-ignore it.

    Raises:
        UsageError: ``preset`` is not a preset.
        ConfigError: something that is not a regular file is named keel.toml.
        WorkspaceError: the workspace cannot be written (checked before the first write).
    """
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    config_path = root / CONFIG_NAME
    text = render_config(preset, scope)  # pyright: ignore[reportArgumentType]
    if os.path.lexists(root) and not root.is_dir():
        raise WorkspaceError(f"cannot initialise {root}: not a directory", code="workspace.init")
    try:  # everything that can fail on a broken workspace before the first write
        write = force or not config_present(config_path)
        root.mkdir(parents=True, exist_ok=True)
        ensure_state_dir(root)
        gitignore = _gitignore_addition(root)
        if write:
            _write_atomic(config_path, text)
        if gitignore:
            with open(root / ".gitignore", "ab") as fh:  # the bytes already there stay as they are
                fh.write(gitignore)
    except OSError as exc:
        where = exc.filename or root
        raise WorkspaceError(
            f"cannot initialise {root}: {where}: {exc.strerror or exc}", code="workspace.init"
        ) from exc
    return InitResult(root, config_path, write, bool(gitignore))


def _write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (raises ``OSError``, the old file kept)."""
    write_atomic(path, text)


def _gitignore_addition(root: Path) -> bytes:
    """What to append to ``.gitignore`` so that it ignores ``.keel/`` (empty if it does)."""
    gitignore = root / ".gitignore"
    raw = gitignore.read_bytes() if os.path.lexists(gitignore) else b""
    entries = {line.strip() for line in raw.splitlines()}
    if entries & {b".keel", b".keel/", b"/.keel", b"/.keel/"}:
        return b""
    return (b"" if not raw or raw.endswith(b"\n") else b"\n") + b".keel/\n"
