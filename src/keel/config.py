"""keel.toml: the reviewed statement of what an agent may do.

The schema is pydantic with ``extra="forbid"``, so a misspelt key is an error, not a silent
default. Errors name the file, the line and the key. Sections:

- ``[policy]``: the preset, extra command rules, the network allowlist, protected paths;
- ``[scope]``: the paths the task may change;
- ``[[constraints]]``: rules in words, optionally enforced (``protect``, ``forbid``);
- ``[limits]``: step, time, token and plan budgets;
- ``[gates]``: commands that must pass after the last edit before a session may finish;
- ``[monitor]``, ``[probes]``, ``[sandbox]``: thresholds and switches of those parts.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from keel.errors import ConfigError

CONFIG_NAME = "keel.toml"
PresetName = Literal["strict", "developer", "readonly"]
PRESETS: tuple[PresetName, ...] = ("strict", "developer", "readonly")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_globs(values: list[str]) -> list[str]:
    for glob in values:
        if not glob or "\x00" in glob:
            raise ValueError(f"bad glob {glob!r}: empty or contains NUL")
        if glob.count("[") != glob.count("]"):
            raise ValueError(f"bad glob {glob!r}: unbalanced brackets")
    return values


class PolicyConfig(_Section):
    """``[policy]``: commands, paths and network."""

    preset: PresetName = "developer"
    """The base rule set: ``developer``, ``strict`` or ``readonly``."""
    allow: list[str] = Field(default_factory=list)
    """Extra command patterns to allow, e.g. ``"docker compose ps"`` (argv prefix, globs per word)."""
    ask: list[str] = Field(default_factory=list)
    """Command patterns that need the user's approval."""
    deny: list[str] = Field(default_factory=list)
    """Command patterns that are always denied."""
    network_allow: list[str] = Field(default_factory=list)
    """Hosts (globs such as ``*.github.com``) commands may reach, on top of the preset's."""
    protected: list[str] | None = None
    """Path globs no agent may write; ``None`` keeps the preset's list."""
    read_outside: list[str] = Field(default_factory=list)
    """Absolute path globs outside the workspace that may be read."""
    unparseable: Literal["ask", "deny"] | None = None
    """What a command the parser cannot understand gets; ``None`` keeps the preset's."""
    unknown: Literal["ask", "deny"] | None = None
    """What a command no rule mentions gets; ``None`` keeps the preset's."""

    _globs = field_validator("protected", "read_outside")(
        lambda v: _check_globs(v) if v is not None else v  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    )


class ScopeConfig(_Section):
    """``[scope]``: the paths this task may change (workspace-relative globs)."""

    include: list[str] = Field(default_factory=lambda: ["**"])
    exclude: list[str] = Field(default_factory=list)

    _globs = field_validator("include", "exclude")(_check_globs)


class Constraint(_Section):
    """One ``[[constraints]]`` entry: a rule in words, optionally enforced."""

    text: str
    """The rule in words; re-injected into the agent's context."""
    id: str | None = None
    protect: list[str] = Field(default_factory=list)
    """Path globs this constraint forbids writing."""
    forbid: list[str] = Field(default_factory=list)
    """Command patterns this constraint forbids."""

    _globs = field_validator("protect")(_check_globs)


class LimitsConfig(_Section):
    """``[limits]``: budgets."""

    max_steps: int = Field(500, ge=1)
    max_wall_seconds: float = Field(7200, gt=0)
    max_tokens: int = Field(5_000_000, ge=1)
    plan_max_steps: int = Field(10, ge=1)
    plan_max_depth: int = Field(3, ge=1)
    probe_timeout_seconds: float = Field(10, gt=0)
    max_input_bytes: int = Field(1_000_000, ge=1024)
    """Largest command, payload or patch keel will judge; larger input is denied."""


class GatesConfig(_Section):
    """``[gates]``: what must have passed after the last edit before finishing."""

    required: list[str] = Field(default_factory=list)
    """Commands, e.g. ``"pytest -q"``, that must have run and passed after the last edit."""
    max_blocks: int = Field(3, ge=0)
    """How many times finishing may be blocked in a row, so an agent is never trapped."""


class MonitorConfig(_Section):
    """``[monitor]``: detector thresholds."""

    repeat_consecutive: int = Field(5, ge=2)
    repeat_window: int = Field(20, ge=2)
    repeat_in_window: int = Field(6, ge=2)
    alternation_steps: int = Field(6, ge=4)
    failure_repeats: int = Field(3, ge=2)
    identical_pairs: int = Field(4, ge=2)
    no_progress_steps: int = Field(8, ge=2)
    drift_window: int = Field(6, ge=2)
    cooldown_steps: int = Field(3, ge=0)
    task_is_about_tests: bool = False


class ProbesConfig(_Section):
    """``[probes]``: what plan probes may do."""

    http_allow: list[str] = Field(default_factory=list)
    """Hosts the http probes may reach; empty means http probes are off."""
    read_cap_bytes: int = Field(1_000_000, ge=1)


class SandboxConfig(_Section):
    """``[sandbox]``: resource limits of sandboxed probes and commands."""

    memory_mb: int = Field(1024, ge=64)
    cpu_seconds: int = Field(10, ge=1)
    max_processes: int = Field(64, ge=4)
    max_file_mb: int = Field(64, ge=1)
    tmp_mb: int = Field(64, ge=1)
    uid: int = 65534


class KeelConfig(_Section):
    """The whole of keel.toml."""

    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    scope: ScopeConfig = Field(default_factory=ScopeConfig)
    constraints: list[Constraint] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    gates: GatesConfig = Field(default_factory=GatesConfig)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)
    probes: ProbesConfig = Field(default_factory=ProbesConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    @classmethod
    def for_preset(cls, preset: PresetName) -> KeelConfig:
        """The embedded defaults for a preset, with no file."""
        return cls(policy=PolicyConfig(preset=preset))


def parse_config(text: str, file: str = CONFIG_NAME) -> KeelConfig:
    """Parse and validate keel.toml text; a ``ConfigError`` names file, line and key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _toml_error_line(str(exc))
        raise ConfigError(f"not valid TOML: {exc}", file=file, line=line, code="config.toml") from exc
    try:
        return KeelConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        key = ".".join(str(p) for p in loc)
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"unknown key {key!r}"
        else:
            message = f"{key}: {message}"
        more = exc.error_count() - 1
        if more:
            message += f" (and {more} more error{'s' if more > 1 else ''})"
        raise ConfigError(
            message, file=file, line=_locate(text, loc), key=key, code="config.schema"
        ) from exc


def load_config(path: Path) -> KeelConfig:
    """Read and validate a keel.toml file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path), code="config.read") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError("not UTF-8", file=str(path), line=line, code="config.encoding") from exc
    return parse_config(text, str(path))


def config_for(root: Path, preset: PresetName | None = None) -> KeelConfig:
    """The config of a workspace: its keel.toml if present, else the embedded defaults."""
    path = root / CONFIG_NAME
    if path.is_file():
        config = load_config(path)
        if preset is not None:
            policy = config.policy.model_copy(update={"preset": preset})
            config = config.model_copy(update={"policy": policy})
        return config
    return KeelConfig.for_preset(preset or "developer")


def config_schema() -> dict[str, Any]:
    """The JSON Schema of keel.toml."""
    return KeelConfig.model_json_schema()


def _toml_error_line(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"']+)\s*=")


def _locate(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the key at ``loc`` (e.g. ``("policy", "preset")``), best effort."""
    table: list[str] = []
    array_index: dict[str, int] = {}
    best: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            name = header.group(2).strip().strip("\"'")
            if header.group(1) == "[[":
                array_index[name] = array_index.get(name, -1) + 1
                table = [name, str(array_index[name])]
            else:
                table = name.split(".")
            if _matches(table, loc):
                best = number
            continue
        key = _KEY.match(line)
        if key:
            path = [*table, key.group(1).strip("\"'")]
            if _matches(path, loc):
                return number
            if best is None and _matches(path, loc[: len(path)]) and len(path) == len(loc[: len(path)]):
                best = number
    return best


def _matches(path: list[str], loc: tuple[Any, ...]) -> bool:
    return [str(p) for p in loc[: len(path)]] == path and len(path) <= len(loc)
