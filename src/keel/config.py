"""keel.toml: the reviewed statement of what an agent may do.

The schema is pydantic with ``extra="forbid"``, so a misspelt key is an error, not a silent
default. Errors name the file, the line and the key. Sections:

- ``[policy]``: the preset, extra command rules, the network allowlist, protected paths;
- ``[scope]``: the paths the task may change;
- ``[[constraints]]``: rules in words, optionally enforced (``protect``, ``forbid``);
- ``[limits]``: step, time, token and plan budgets;
- ``[gates]``: commands that must pass after the last edit before a session may finish;
- ``[monitor]``, ``[probes]``, ``[sandbox]``: thresholds and switches of those parts;
- ``[model]``: the model keel talks to, and each session's budget of calls, tokens and dollars;
- ``[agent]``: keel's own agent (``keel run``): phases, limits and the prompt's size.
"""

from __future__ import annotations

import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from keel.core.errors import ConfigError
from keel.core.root import CONFIG_NAME

PresetName = Literal["strict", "developer", "readonly"]
PRESETS: tuple[PresetName, ...] = ("strict", "developer", "readonly")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _command_patterns(values: list[str], info: ValidationInfo) -> list[str]:
    """Command patterns, with client rules (``Bash(npm test:*)``) translated or refused.

    A pattern written in Claude Code's rule syntax is never kept as it is (it would never
    match): it becomes the keel pattern that means the same (``npm test``), or the config is
    invalid, with a message naming the keel form (``keel.core.clientrules``).
    """
    from keel.core.clientrules import (
        blanket_tool_rule,
        client_rule_pattern,
        looks_like_client_rule,
        malformed_client_rule,
    )

    tier = info.field_name or "allow"
    out: list[str] = []
    for pattern in values:
        if malformed_client_rule(pattern):
            raise ValueError(
                f"{pattern!r} is neither a command pattern nor a Claude Code rule "
                '(Tool(specifier), e.g. "Bash(npm test:*)")'
            )
        rule = looks_like_client_rule(pattern) or blanket_tool_rule(pattern)
        out.append(client_rule_pattern(pattern, tier) if rule else pattern)
    return out


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
    """Extra command patterns to allow, e.g. ``"docker compose ps"`` (argv prefix, word globs)."""
    ask: list[str] = Field(default_factory=list)
    """Command patterns that need the user's approval."""
    deny: list[str] = Field(default_factory=list)
    """Command patterns that are always denied.

    ``allow``, ``ask`` and ``deny`` also take Claude Code's shell rules: ``Bash(npm test:*)`` is
    read as ``npm test``, ``Bash(git status)`` as ``git status $``; a rule keel cannot express
    (other tools, a ``*`` inside the rule) is an error that names the keel form."""
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

    _commands = field_validator("allow", "ask", "deny")(_command_patterns)
    _globs = field_validator("protected", "read_outside")(
        lambda v: _check_globs(v) if v is not None else v
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
    _commands = field_validator("forbid")(_command_patterns)


class LimitsConfig(_Section):
    """``[limits]``: budgets."""

    max_steps: int = Field(default=500, ge=1)
    max_wall_seconds: float = Field(default=7200, gt=0)
    max_tokens: int = Field(default=5_000_000, ge=1)
    plan_max_steps: int = Field(default=10, ge=1)
    plan_max_depth: int = Field(default=3, ge=1)
    probe_timeout_seconds: float = Field(default=10, gt=0)
    max_input_bytes: int = Field(default=1_000_000, ge=1024)
    """Largest command, payload or patch keel will judge; larger input is denied."""


class GatesConfig(_Section):
    """``[gates]``: what must have passed after the last edit before finishing."""

    required: list[str] = Field(default_factory=list)
    """Commands, e.g. ``"pytest -q"``, that must have run and passed after the last edit."""
    max_blocks: int = Field(default=3, ge=0)
    """How many times finishing may be blocked in a row, so an agent is never trapped."""


class MonitorConfig(_Section):
    """``[monitor]``: detector thresholds."""

    repeat_consecutive: int = Field(default=5, ge=2)
    """Identical consecutive calls (same tool, same arguments) that are denied (Gemini CLI: 5)."""
    repeat_window: int = Field(default=20, ge=2)
    """The window, in calls, of the non-consecutive repeat check."""
    repeat_in_window: int = Field(default=6, ge=2)
    """Identical calls within ``repeat_window`` that earn a hint."""
    alternation_steps: int = Field(default=6, ge=4)
    """Length of an A-B-A-B alternation that asks for a new plan (OpenHands: 6)."""
    failure_repeats: int = Field(default=3, ge=2)
    """The same call failing, or the same error, this many times (OpenHands: 3)."""
    identical_pairs: int = Field(default=4, ge=2)
    """Identical (call, result) pairs in a row that count as stuck (OpenHands: 4)."""
    no_progress_steps: int = Field(default=8, ge=2)
    """Results with nothing new (content seen before, no edit) in a row that earn a hint."""
    drift_window: int = Field(default=6, ge=2)
    """Calls in a row whose targets the current plan does not mention."""
    cooldown_steps: int = Field(default=3, ge=0)
    """Calls a detector stays quiet after guidance before it may escalate."""
    task_is_about_tests: bool = False
    """Set when the task is to change tests: turns the test-weakening detector off."""
    enabled: bool = True
    """Switch the monitor off entirely (budgets and gates included)."""
    repeat_hint: int = Field(default=3, ge=2)
    """Identical consecutive calls that earn a hint, before ``repeat_consecutive`` denies."""
    poll_multiplier: int = Field(default=3, ge=1)
    """Repeat thresholds are multiplied by this for waits and status checks (``sleep``…)."""
    escalation_reset_steps: int = Field(default=20, ge=1)
    """Calls without a detection after which a detector's ladder starts again at its base level."""
    budget_warn_fraction: float = Field(default=0.8, gt=0, le=1)
    """Fraction of a ``[limits]`` budget at which a hint warns that it is running out."""
    monologue_repeats: int = Field(default=3, ge=2)
    """The same agent message this many times with no tool call between (OpenHands: 3)."""
    planning_tools: list[str] = Field(
        default_factory=lambda: ["TodoWrite", "ExitPlanMode", "update_plan", "write_todos"]
    )
    """Tools whose call states a new plan (clears a pending replan)."""
    seen_cap: int = Field(default=512, ge=16)
    """Result hashes remembered for the no-progress check (bounds the persisted state)."""


class ProbesConfig(_Section):
    """``[probes]``: what plan probes may do."""

    http_allow: list[str] = Field(default_factory=list)
    """Hosts the http probes may reach; empty means http probes are off."""
    read_cap_bytes: int = Field(default=1_000_000, ge=1)
    """Largest file a probe reads, in bytes."""
    max_parallel: int = Field(default=8, ge=1, le=64)
    """How many independent probes of one plan run at the same time."""
    command_timeout_seconds: float = Field(default=60, gt=0)
    """Wall-clock limit of a plan's ``command.run`` final action (sandboxed, on a scratch copy)."""


class SandboxConfig(_Section):
    """``[sandbox]``: resource limits of sandboxed probes and commands."""

    memory_mb: int = Field(default=1024, ge=64)
    cpu_seconds: int = Field(default=10, ge=1)
    max_processes: int = Field(default=64, ge=4)
    max_file_mb: int = Field(default=64, ge=1)
    tmp_mb: int = Field(default=64, ge=1)
    uid: int = 65534
    backend: Literal["auto", "bwrap", "landlock"] = "auto"
    """Which backend to use; ``auto`` takes the first that works (bwrap, then landlock)."""
    max_open_files: int = Field(default=256, ge=16)
    """RLIMIT_NOFILE of sandboxed processes."""
    max_output_kb: int = Field(default=4096, ge=1)
    """Bytes of stdout and of stderr kept per run (in KiB); the rest is discarded."""
    contain: Literal["auto", "always", "off"] = "auto"
    """Hooks rewrite every shell command they allow to run inside ``keel exec``: ``auto``
    when a sandbox works here (else the text policy judges alone, more strictly), ``always``
    (no sandbox: shell commands are denied), ``off`` (never; not recommended)."""
    writable: list[str] = Field(default_factory=list)
    """``keel exec``: extra writable paths, absolute or ``~/``-relative (missing ones skipped)."""
    read_only: list[str] = Field(default_factory=list)
    """``keel exec``: workspace-relative globs kept read-only (and quarantined when created)."""
    home_read_only: list[str] = Field(default_factory=list)
    """``keel exec``: entries of your HOME (``~/``-relative) visible read-only; never secrets."""
    show_secrets: list[str] = Field(default_factory=list)
    """``keel exec``: workspace-relative globs of secret files (``.env``, keys) contained
    commands may read; every other one reads as empty inside the sandbox."""
    protect_ci: bool = True
    """Also protect ``.github/workflows``, ``.pre-commit-config.yaml`` and ``.husky`` (the
    policy refuses writes to them, ``keel exec`` keeps them read-only)."""
    control_depth: int = Field(default=6, ge=0, le=64)
    """``keel exec``: how many directory levels below the workspace root protected files
    (``keel.core.protected``: ``keel.toml``, ``.envrc``, ``.git/hooks``...) are mounted read-only;
    deeper ones are put back after the run, and new ones are quarantined at any depth."""
    exec_timeout_seconds: float = Field(default=600, gt=0)
    """``keel exec``: the wall-clock limit when ``--timeout`` is not given."""
    exec_tmp_mb: int = Field(default=1024, ge=16)
    """``keel exec``: size of the private ``/tmp`` and of the fresh HOME (each a tmpfs, in MiB)."""
    exec_memory_mb: int = Field(default=0, ge=0)
    """``keel exec``: RLIMIT_AS in MiB; 0 means no limit (JVM, Go and node reserve large ranges)."""
    exec_max_processes: int = Field(default=4096, ge=16)
    """``keel exec``: RLIMIT_NPROC (not enforced by the kernel for root)."""
    exec_max_open_files: int = Field(default=8192, ge=64)
    """``keel exec``: RLIMIT_NOFILE (clamped to the current hard limit)."""


class ModelConfig(_Section):
    """``[model]``: which model keel talks to, how, and the budget of one session."""

    spec: str | None = None
    """The model: ``openai:MODEL``, ``anthropic:MODEL``, ``local`` or ``script:FILE``
    (``--model`` wins)."""
    base_url: str | None = None
    """The API's base URL, e.g. ``http://127.0.0.1:8080/v1`` for llama.cpp's server
    (``--base-url`` and ``OPENAI_BASE_URL``/``ANTHROPIC_BASE_URL`` win)."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    """The environment variable holding the API key (default ``OPENAI_API_KEY`` or
    ``ANTHROPIC_API_KEY``). Keys never go in keel.toml."""
    structured_output: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    """How to ask for JSON: OpenAI's ``json_schema``, llama.cpp's ``json_object`` with a schema,
    or ``off``; ``auto`` is ``json_schema``, and ``json_object`` for ``local``."""
    temperature: float = Field(default=0.0, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Sent only when set."""
    seed: int | None = 0
    """Sent where the API takes one."""
    max_output_tokens: int = Field(default=2048, ge=1)
    """The most tokens one answer may have."""
    timeout_seconds: float = Field(default=60, gt=0)
    """The wall-clock limit of one attempt."""
    max_retries: int = Field(default=3, ge=0, le=10)
    """Retries after a 429, a 5xx, a connection error or a timeout."""
    retry_backoff_seconds: float = Field(default=0.5, ge=0)
    """The first wait between attempts; it doubles each time (a ``Retry-After`` wins)."""
    max_calls: int | None = Field(default=100, ge=0)
    """Model calls one session may make; ``None`` is no limit."""
    max_tokens: int | None = Field(default=1_000_000, ge=0)
    """Tokens (in and out) one session may use. A call whose worst case would go over is
    refused before it is sent."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    """Dollars one session may spend; needs the two prices below (or every call is refused)."""
    input_price_per_mtok: float | None = Field(default=None, ge=0)
    """US dollars per million input tokens, for cost accounting."""
    output_price_per_mtok: float | None = Field(default=None, ge=0)
    """US dollars per million output tokens, for cost accounting."""
    local_path: str | None = None
    """``local``: a GGUF file to load instead of the shipped small model."""
    local_chat_format: str | None = None
    """``local``: llama-cpp-python's chat format (``gemma``, ``chatml``...); default: the
    model's own template."""
    local_context: int = Field(default=4096, ge=512)
    """``local``: the context window in tokens."""
    local_threads: int | None = Field(default=None, ge=1, le=256)
    """``local``: CPU threads; default half the cores (llama.cpp's threads spin, and slow
    down sharply when they outnumber the free cores)."""


class AgentConfig(_Section):
    """``[agent]``: keel's own agent (``keel run``): phases, limits and the prompt's size."""

    require_plan: bool = True
    """Writing tools need a plan whose conditions held first; ``false`` allows writing
    right after ``understand``."""
    context_tokens: int = Field(default=16000, ge=2000)
    """The most tokens (estimated) one request to the model may hold."""
    repo_map_tokens: int = Field(default=1500, ge=0)
    """The share of ``context_tokens`` the repository map may take (0: no map)."""
    max_steps: int = Field(default=50, ge=1)
    """Model calls one run may make (``--max-steps`` wins)."""
    tool_timeout_seconds: float = Field(default=30, gt=0)
    """The wall-clock limit of one tool call (a command, a plan, a gate)."""
    max_wall_seconds: float = Field(default=1800, gt=0)
    """The wall-clock limit of one run."""
    tool_output_chars: int = Field(default=6000, ge=200)
    """Characters of one tool result the model sees (the journal keeps more)."""


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
    model: ModelConfig = Field(default_factory=ModelConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)

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
        raise ConfigError(
            f"not valid TOML: {exc}", file=file, line=line, code="config.toml"
        ) from exc
    try:
        return KeelConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        key = ".".join(str(p) for p in loc)
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"unknown key {key!r}"
        elif first["type"] == "value_error" and "error" in (ctx := first.get("ctx", {})):
            message = f"{key}: {ctx['error']}"
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
        raise ConfigError(
            f"cannot read: {exc.strerror}", file=str(path), code="config.read"
        ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError("not UTF-8", file=str(path), line=line, code="config.encoding") from exc
    return parse_config(text, str(path))


def config_for(root: Path, preset: PresetName | None = None) -> KeelConfig:
    """The config of a workspace: its keel.toml if present, else the embedded defaults."""
    path = root / CONFIG_NAME
    if config_present(path):
        config = load_config(path)
        if preset is not None:
            policy = config.policy.model_copy(update={"preset": preset})
            config = config.model_copy(update={"policy": policy})
        return config
    return KeelConfig.for_preset(preset or "developer")


def config_present(path: Path) -> bool:
    """True if the workspace's keel.toml exists and is a regular file; False if there is none.

    Raises:
        ConfigError: something is there that cannot be a config (a directory, a FIFO, a
            symlink loop, no permission): an error, never a silent fall back to the defaults.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():  # the config it points to is gone: not the same as no config
            raise ConfigError(
                "a symlink to a missing file", file=str(path), code="config.read"
            ) from None
        return False
    except OSError as exc:
        raise ConfigError(
            f"cannot read: {exc.strerror}", file=str(path), code="config.read"
        ) from exc
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError("not a regular file", file=str(path), code="config.read")
    return True


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
            if (
                best is None
                and _matches(path, loc[: len(path)])
                and len(path) == len(loc[: len(path)])
            ):
                best = number
    return best


def _matches(path: list[str], loc: tuple[Any, ...]) -> bool:
    return [str(p) for p in loc[: len(path)]] == path and len(path) <= len(loc)
