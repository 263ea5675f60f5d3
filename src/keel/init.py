"""``keel init``: write a commented keel.toml and ``.keel/``, and git-ignore ``.keel/``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from keel.config import CONFIG_NAME, PRESETS, PresetName, parse_config
from keel.errors import UsageError
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
    include = "[" + ", ".join(f'"{g}"' for g in (scope or ["**"])) + "]"
    text = TEMPLATE.format(preset=preset, note=_PRESET_NOTES[preset], include=include)
    parse_config(text)
    return text


def init_workspace(
    root: Path, preset: str = "developer", *, force: bool = False, scope: list[str] | None = None
) -> InitResult:
    """Write keel.toml (unless present and not ``force``), create .keel/, git-ignore it."""
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / CONFIG_NAME
    wrote = False
    if force or not config_path.exists():
        config_path.write_text(render_config(preset, scope), encoding="utf-8")  # pyright: ignore[reportArgumentType]
        wrote = True
    ensure_state_dir(root)
    return InitResult(root, config_path, wrote, _ignore_state_dir(root))


def _ignore_state_dir(root: Path) -> bool:
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    entries = {line.strip() for line in existing.splitlines()}
    if entries & {".keel", ".keel/", "/.keel", "/.keel/"}:
        return False
    prefix = "" if not existing or existing.endswith("\n") else "\n"
    gitignore.write_text(f"{existing}{prefix}.keel/\n", encoding="utf-8")
    return True
