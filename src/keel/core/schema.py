"""keel.toml's one shape: every section, field, type, default and bound, written once.

Sections:

- ``[policy]``: the preset, extra command rules, the network allowlist, protected paths;
- ``[scope]``: the paths the task may change;
- ``[[constraints]]``: rules in words, optionally enforced (``protect``, ``forbid``);
- ``[limits]``: step, time, token and plan budgets;
- ``[gates]``: commands that must pass after the last edit before a session may finish;
- ``[monitor]``, ``[probes]``, ``[sandbox]``: thresholds and switches of those parts;
- ``[model]``: the model keel talks to, and each session's budget of calls, tokens and dollars;
- ``[agent]``: keel's own agent (``keel run``): phases, limits and the prompt's size;
- ``[judge]``: the model evaluator (``keel.judge``): its model, when it runs, its threshold,
  categories and budget;
- ``[export]``: where ``keel hookd`` and ``keel run`` push OpenTelemetry traces;
- ``[journal]``: where the journal lives (a PostgreSQL database shared by a team).

Each section is a frozen value class declared here, once, with plain annotations and
``setting()`` (default, bounds, a check); pyright reads the classes as dataclasses. This
module is stdlib only, so the hook path reads a config without pydantic: ``KeelConfig.trusted``
rebuilds the values from the data cached by ``keel.core.configview``. Data from outside is
validated once, at the boundary: ``keel.config`` builds its pydantic validators from these
classes (the same fields, types, defaults, bounds and checks), so a misspelt key, a bad bound
or a bad glob in keel.toml is an error naming the file, the line and the key. Values written in
code (``PolicyConfig(allow=[...])``) are typed by pyright and not checked again.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, ClassVar, Literal, NoReturn, Self, dataclass_transform

    PresetName = Literal["strict", "developer", "readonly"]
    Check = Callable[[Any, str], Any]
else:

    def dataclass_transform(**_: object) -> object:
        """At run time: nothing (pyright reads the real one)."""
        return lambda cls: cls


_REQUIRED = object()


class Setting:
    """How one field is declared: its default (or factory) and what a valid value is."""

    __slots__ = ("check", "default", "default_factory", "ge", "gt", "le", "pattern")

    def __init__(
        self,
        default: object = _REQUIRED,
        default_factory: Callable[[], object] | None = None,
        ge: float | None = None,
        gt: float | None = None,
        le: float | None = None,
        pattern: str | None = None,
        check: Check | None = None,
    ) -> None:
        """Declare a field (use ``setting()`` in a class body)."""
        self.default = default
        self.default_factory = default_factory
        self.ge, self.gt, self.le, self.pattern, self.check = ge, gt, le, pattern, check

    @property
    def required(self) -> bool:
        """True if the field has no default."""
        return self.default is _REQUIRED and self.default_factory is None

    def make_default(self) -> object:
        """A fresh default value (lists are frozen)."""
        value = self.default if self.default_factory is None else self.default_factory()
        return FrozenList(value) if isinstance(value, list) else value


def setting(
    *,
    default: object = _REQUIRED,
    default_factory: Callable[[], object] | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    pattern: str | None = None,
    check: Check | None = None,
) -> Any:
    """Declare a field: its default (or factory) and what a valid value is.

    ``ge``/``gt``/``le`` bound numbers, ``pattern`` text; ``check(value, field)`` returns the
    value (perhaps rewritten) or raises ``ValueError``.
    """
    return Setting(default, default_factory, ge, gt, le, pattern, check)


class FrozenList(list):
    """A list that refuses changes; equal to a ``list`` with the same items."""

    __slots__ = ()

    def _frozen(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a config list is read-only")

    append = extend = insert = remove = pop = clear = sort = reverse = _frozen  # pyright: ignore[reportAssignmentType]
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen

    def __hash__(self) -> int:  # pyright: ignore[reportIncompatibleVariableOverride]
        """Hashable like a tuple, since it cannot change."""
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        """Copy and pickle without the refused mutators."""
        return (FrozenList, (list(self),))


_SECTIONS: dict[str, type[Section]] = {}
"""Every section class by name: how an annotation string names a nested section."""


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(setting,))
class _SectionType(type):
    """Turns a class body's annotated names into slots and their ``Setting``."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _SectionType:
        settings: dict[str, Setting] = {}
        nested: dict[str, tuple[str, str]] = {}
        for field, annotation in ns.get("__annotations__", {}).items():
            value = ns.pop(field, _REQUIRED)
            settings[field] = value if isinstance(value, Setting) else Setting(value)
            if kind := _nested(str(annotation)):
                nested[field] = kind
        ns["__slots__"] = tuple(settings)
        cls = super().__new__(mcs, name, bases, ns)
        cls._settings = settings  # pyright: ignore[reportAttributeAccessIssue]
        cls._nested = nested  # pyright: ignore[reportAttributeAccessIssue]
        if settings:
            _SECTIONS[name] = cls  # pyright: ignore[reportArgumentType]
        return cls


def _nested(annotation: str) -> tuple[str, str] | None:
    """``("one", name)`` for a section-typed field, ``("list", name)`` for a list of them."""
    if annotation in _SECTIONS:
        return ("one", annotation)
    if annotation.startswith("list[") and annotation[5:-1] in _SECTIONS:
        return ("list", annotation[5:-1])
    return None


class Section(metaclass=_SectionType):
    """A frozen config section: compared by value, hashable, rebuilt from its ``to_dict()``."""

    __slots__ = ()
    if TYPE_CHECKING:
        _settings: ClassVar[dict[str, Setting]]
        _nested: ClassVar[dict[str, tuple[str, str]]]

    def __init__(self, **values: Any) -> None:
        """A section from values written in code (missing fields take their defaults).

        Values are not checked here (pyright checks their types against the annotations):
        data from outside goes through ``keel.config.validate`` or ``parse_config``.

        Raises:
            TypeError: an unknown field, or a required one missing.
        """
        unknown = values.keys() - self._settings.keys()
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        for name, declared in self._settings.items():
            if name not in values:
                if declared.required:
                    raise TypeError(f"{type(self).__name__} needs {name!r}")
                values[name] = declared.make_default()
        _fill(self, _rebuilt(type(self), values))

    @classmethod
    def trusted(cls, data: dict[str, Any]) -> Self:
        """Rebuild from a validated ``to_dict()`` without checking (the hook path's cache).

        Raises:
            KeyError: ``data`` lacks a field or has one too many (a stale or damaged dump).
        """
        new = object.__new__(cls)
        _fill(new, _rebuilt(cls, data))
        return new

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The section's fields, in declaration order."""
        return tuple(cls._settings)

    @classmethod
    def setting_of(cls, field: str) -> Setting:
        """How ``field`` is declared."""
        return cls._settings[field]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (nested sections as dicts, lists as lists), as keel.toml would say it."""
        return {name: _plain(getattr(self, name)) for name in self._settings}

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (not checked, like ``__init__``)."""
        unknown = changes.keys() - self._settings.keys()
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{**dict(self), **changes})

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """``(field, value)`` pairs."""
        return ((name, getattr(self, name)) for name in self._settings)

    def __setattr__(self, name: str, value: object) -> None:
        """Refuse: a config is read-only."""
        raise AttributeError(f"config is read-only (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        """Refuse: a config is read-only."""
        raise AttributeError(f"config is read-only (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        """Equal to a section of the same class with equal fields."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._settings)

    def __hash__(self) -> int:
        """The hash of the fields."""
        return hash(tuple(getattr(self, n) for n in self._settings))

    def __repr__(self) -> str:
        """``Class(field=value, ...)``."""
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._settings)
        return f"{type(self).__name__}({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Copy and pickle through the plain data."""
        return (_trusted, (type(self), self.to_dict()))


def _trusted(cls: type[Section], data: dict[str, Any]) -> Section:
    return cls.trusted(data)


def _fill(section: Section, values: dict[str, Any]) -> None:
    for name, value in values.items():
        object.__setattr__(section, name, value)


def _rebuilt(cls: type[Section], data: dict[str, Any]) -> dict[str, Any]:
    if len(data) != len(cls._settings):
        unknown = set(data) - set(cls._settings)
        raise KeyError(f"{cls.__name__}: unknown {sorted(unknown)}" if unknown else cls.__name__)
    out: dict[str, Any] = {}
    for name in cls._settings:
        value = data[name]
        kind = cls._nested.get(name)
        if kind is not None and value is not None:
            section = _SECTIONS[kind[1]]
            if kind[0] == "one":
                value = value if isinstance(value, section) else section.trusted(value)
            else:
                value = [v if isinstance(v, section) else section.trusted(v) for v in value]
        out[name] = FrozenList(value) if isinstance(value, list) else value
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# The checks: plain functions of (value, field), run by the validator keel.config builds.


def command_patterns(values: list[str], field: str) -> list[str]:
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

    tier = field if field in ("allow", "ask", "deny") else "deny"
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


def globs(values: list[str] | None, field: str) -> list[str] | None:
    """Path globs: none empty, none with NUL, brackets balanced."""
    for glob in values or ():
        if not glob or "\x00" in glob:
            raise ValueError(f"bad glob {glob!r}: empty or contains NUL")
        if glob.count("[") != glob.count("]"):
            raise ValueError(f"bad glob {glob!r}: unbalanced brackets")
    return values


class PolicyConfig(Section):
    """``[policy]``: commands, paths and network."""

    preset: PresetName = setting(default="developer")
    """The base rule set: ``developer``, ``strict`` or ``readonly``."""
    allow: list[str] = setting(default_factory=list, check=command_patterns)
    """Extra command patterns to allow, e.g. ``"docker compose ps"`` (argv prefix, word globs)."""
    ask: list[str] = setting(default_factory=list, check=command_patterns)
    """Command patterns that need the user's approval."""
    deny: list[str] = setting(default_factory=list, check=command_patterns)
    """Command patterns that are always denied.

    ``allow``, ``ask`` and ``deny`` also take Claude Code's shell rules: ``Bash(npm test:*)`` is
    read as ``npm test``, ``Bash(git status)`` as ``git status $``; a rule keel cannot express
    (other tools, a ``*`` inside the rule) is an error that names the keel form."""
    network_allow: list[str] = setting(default_factory=list)
    """Hosts (globs such as ``*.github.com``) commands may reach, on top of the preset's."""
    protected: list[str] | None = setting(default=None, check=globs)
    """Path globs no agent may write; ``None`` keeps the preset's list."""
    read_outside: list[str] = setting(default_factory=list, check=globs)
    """Absolute path globs outside the workspace that may be read."""
    unparseable: Literal["ask", "deny"] | None = None
    """What a command the parser cannot understand gets; ``None`` keeps the preset's."""
    unknown: Literal["ask", "deny"] | None = None
    """What a command no rule mentions gets; ``None`` keeps the preset's."""


class ScopeConfig(Section):
    """``[scope]``: the paths this task may change (workspace-relative globs)."""

    include: list[str] = setting(default_factory=lambda: ["**"], check=globs)
    exclude: list[str] = setting(default_factory=list, check=globs)


class Constraint(Section):
    """One ``[[constraints]]`` entry: a rule in words, optionally enforced."""

    text: str = setting()
    """The rule in words; re-injected into the agent's context."""
    id: str | None = None
    protect: list[str] = setting(default_factory=list, check=globs)
    """Path globs this constraint forbids writing."""
    forbid: list[str] = setting(default_factory=list, check=command_patterns)
    """Command patterns this constraint forbids."""


class LimitsConfig(Section):
    """``[limits]``: budgets."""

    max_steps: int = setting(default=500, ge=1)
    max_wall_seconds: float = setting(default=7200, gt=0)
    max_tokens: int = setting(default=5_000_000, ge=1)
    plan_max_steps: int = setting(default=10, ge=1)
    plan_max_depth: int = setting(default=3, ge=1)
    probe_timeout_seconds: float = setting(default=10, gt=0)
    max_input_bytes: int = setting(default=1_000_000, ge=1024)
    """Largest command, payload or patch keel will judge; larger input is denied."""


class GatesConfig(Section):
    """``[gates]``: what must have passed after the last edit before finishing."""

    required: list[str] = setting(default_factory=list)
    """Commands, e.g. ``"pytest -q"``, that must have run and passed after the last edit."""
    max_blocks: int = setting(default=3, ge=0)
    """How many times finishing may be blocked in a row, so an agent is never trapped."""


class MonitorConfig(Section):
    """``[monitor]``: detector thresholds."""

    repeat_consecutive: int = setting(default=5, ge=2)
    """Identical consecutive calls (same tool, same arguments) that are denied (Gemini CLI: 5)."""
    repeat_window: int = setting(default=20, ge=2)
    """The window, in calls, of the non-consecutive repeat check."""
    repeat_in_window: int = setting(default=6, ge=2)
    """Identical calls within ``repeat_window`` that earn a hint."""
    alternation_steps: int = setting(default=6, ge=4)
    """Length of an A-B-A-B alternation that asks for a new plan (OpenHands: 6)."""
    failure_repeats: int = setting(default=3, ge=2)
    """The same call failing, or the same error, this many times (OpenHands: 3)."""
    identical_pairs: int = setting(default=4, ge=2)
    """Identical (call, result) pairs in a row that count as stuck (OpenHands: 4)."""
    no_progress_steps: int = setting(default=8, ge=2)
    """Results with nothing new (content seen before, no edit) in a row that earn a hint."""
    drift_window: int = setting(default=6, ge=2)
    """Calls in a row whose targets the current plan does not mention."""
    cooldown_steps: int = setting(default=3, ge=0)
    """Calls a detector stays quiet after guidance before it may escalate."""
    task_is_about_tests: bool = False
    """Set when the task is to change tests: turns the test-weakening detector off."""
    enabled: bool = True
    """Switch the monitor off entirely (budgets and gates included)."""
    repeat_hint: int = setting(default=3, ge=2)
    """Identical consecutive calls that earn a hint, before ``repeat_consecutive`` denies."""
    poll_multiplier: int = setting(default=3, ge=1)
    """Repeat thresholds are multiplied by this for waits and status checks (``sleep``…)."""
    escalation_reset_steps: int = setting(default=20, ge=1)
    """Calls without a detection after which a detector's ladder starts again at its base level."""
    budget_warn_fraction: float = setting(default=0.8, gt=0, le=1)
    """Fraction of a ``[limits]`` budget at which a hint warns that it is running out."""
    monologue_repeats: int = setting(default=3, ge=2)
    """The same agent message this many times with no tool call between (OpenHands: 3)."""
    planning_tools: list[str] = setting(
        default_factory=lambda: ["TodoWrite", "ExitPlanMode", "update_plan", "write_todos"]
    )
    """Tools whose call states a new plan (clears a pending replan)."""
    seen_cap: int = setting(default=512, ge=16)
    """Result hashes remembered for the no-progress check (bounds the persisted state)."""


class ProbesConfig(Section):
    """``[probes]``: what plan probes may do."""

    http_allow: list[str] = setting(default_factory=list)
    """Hosts the http probes may reach; empty means http probes are off."""
    read_cap_bytes: int = setting(default=1_000_000, ge=1)
    """Largest file a probe reads, in bytes."""
    max_parallel: int = setting(default=8, ge=1, le=64)
    """How many independent probes of one plan run at the same time."""
    command_timeout_seconds: float = setting(default=60, gt=0)
    """Wall-clock limit of a plan's ``command.run`` final action (sandboxed, on a scratch copy)."""


class SandboxConfig(Section):
    """``[sandbox]``: resource limits of sandboxed probes and commands."""

    memory_mb: int = setting(default=1024, ge=64)
    cpu_seconds: int = setting(default=10, ge=1)
    max_processes: int = setting(default=64, ge=4)
    max_file_mb: int = setting(default=64, ge=1)
    tmp_mb: int = setting(default=64, ge=1)
    uid: int = 65534
    backend: Literal["auto", "bwrap", "landlock"] = "auto"
    """Which backend to use; ``auto`` takes the first that works (bwrap, then landlock)."""
    max_open_files: int = setting(default=256, ge=16)
    """RLIMIT_NOFILE of sandboxed processes."""
    max_output_kb: int = setting(default=4096, ge=1)
    """Bytes of stdout and of stderr kept per run (in KiB); the rest is discarded."""
    contain: Literal["auto", "always", "off"] = "auto"
    """Hooks rewrite every shell command they allow to run inside ``keel exec``: ``auto``
    when a sandbox works here (else the text policy judges alone, more strictly), ``always``
    (no sandbox: shell commands are denied), ``off`` (never; not recommended)."""
    writable: list[str] = setting(default_factory=list)
    """``keel exec``: extra writable paths, absolute or ``~/``-relative (missing ones skipped)."""
    read_only: list[str] = setting(default_factory=list)
    """``keel exec``: workspace-relative globs kept read-only (and quarantined when created)."""
    home_read_only: list[str] = setting(default_factory=list)
    """``keel exec``: entries of your HOME (``~/``-relative) visible read-only; never secrets."""
    show_secrets: list[str] = setting(default_factory=list)
    """``keel exec``: workspace-relative globs of secret files (``.env``, keys) contained
    commands may read; every other one reads as empty inside the sandbox."""
    protect_ci: bool = True
    """Also protect ``.github/workflows``, ``.pre-commit-config.yaml`` and ``.husky`` (the
    policy refuses writes to them, ``keel exec`` keeps them read-only)."""
    control_depth: int = setting(default=6, ge=0, le=64)
    """``keel exec``: how many directory levels below the workspace root protected files
    (``keel.core.protected``: ``keel.toml``, ``.envrc``, ``.git/hooks``...) are mounted read-only;
    deeper ones are put back after the run, and new ones are quarantined at any depth."""
    exec_timeout_seconds: float = setting(default=600, gt=0)
    """``keel exec``: the wall-clock limit when ``--timeout`` is not given."""
    exec_tmp_mb: int = setting(default=1024, ge=16)
    """``keel exec``: size of the private ``/tmp`` and of the fresh HOME (each a tmpfs, in MiB)."""
    exec_memory_mb: int = setting(default=0, ge=0)
    """``keel exec``: RLIMIT_AS in MiB; 0 means no limit (JVM, Go and node reserve large ranges)."""
    exec_max_processes: int = setting(default=4096, ge=16)
    """``keel exec``: RLIMIT_NPROC; root, which it does not bind, gets the sandbox's own pid
    namespace limit instead (bwrap, Linux 6.14 and later; at least 299)."""
    exec_max_open_files: int = setting(default=8192, ge=64)
    """``keel exec``: RLIMIT_NOFILE (clamped to the current hard limit)."""


class ModelConfig(Section):
    """``[model]``: which model keel talks to, how, and the budget of one session."""

    spec: str | None = None
    """The model: ``openai:MODEL``, ``anthropic:MODEL``, ``local`` or ``script:FILE``
    (``--model`` wins)."""
    base_url: str | None = None
    """The API's base URL, e.g. ``http://127.0.0.1:8080/v1`` for llama.cpp's server
    (``--base-url`` and ``OPENAI_BASE_URL``/``ANTHROPIC_BASE_URL`` win)."""
    api_key_env: str | None = setting(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    """The environment variable holding the API key (default ``OPENAI_API_KEY`` or
    ``ANTHROPIC_API_KEY``). Keys never go in keel.toml."""
    structured_output: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    """How to ask for JSON: OpenAI's ``json_schema``, llama.cpp's ``json_object`` with a schema,
    or ``off``; ``auto`` is ``json_schema``, and ``json_object`` for ``local``."""
    temperature: float = setting(default=0.0, ge=0, le=2)
    top_p: float | None = setting(default=None, gt=0, le=1)
    """Sent only when set."""
    seed: int | None = 0
    """Sent where the API takes one."""
    max_output_tokens: int = setting(default=2048, ge=1)
    """The most tokens one answer may have."""
    timeout_seconds: float = setting(default=60, gt=0)
    """The wall-clock limit of one attempt."""
    max_retries: int = setting(default=3, ge=0, le=10)
    """Retries after a 429, a 5xx, a connection error or a timeout."""
    retry_backoff_seconds: float = setting(default=0.5, ge=0)
    """The first wait between attempts; it doubles each time (a ``Retry-After`` wins)."""
    max_calls: int | None = setting(default=100, ge=0)
    """Model calls one session may make; ``None`` is no limit."""
    max_tokens: int | None = setting(default=1_000_000, ge=0)
    """Tokens (in and out) one session may use. A call whose worst case would go over is
    refused before it is sent."""
    max_cost_usd: float | None = setting(default=None, ge=0)
    """Dollars one session may spend; needs the two prices below (or every call is refused)."""
    input_price_per_mtok: float | None = setting(default=None, ge=0)
    """US dollars per million input tokens, for cost accounting."""
    output_price_per_mtok: float | None = setting(default=None, ge=0)
    """US dollars per million output tokens, for cost accounting."""
    local_path: str | None = None
    """``local``: a GGUF file to load instead of the shipped small model."""
    local_chat_format: str | None = None
    """``local``: llama-cpp-python's chat format (``gemma``, ``chatml``...); default: the
    model's own template."""
    local_context: int = setting(default=4096, ge=512)
    """``local``: the context window in tokens."""
    local_threads: int | None = setting(default=None, ge=1, le=256)
    """``local``: CPU threads; default half the cores (llama.cpp's threads spin, and slow
    down sharply when they outnumber the free cores)."""


class AgentConfig(Section):
    """``[agent]``: keel's own agent (``keel run``): phases, limits and the prompt's size."""

    require_plan: bool = True
    """Writing tools need a plan whose conditions held first; ``false`` allows writing
    right after ``understand``."""
    context_tokens: int = setting(default=16000, ge=2000)
    """The most tokens (estimated) one request to the model may hold."""
    repo_map_tokens: int = setting(default=1500, ge=0)
    """The share of ``context_tokens`` the repository map may take (0: no map)."""
    max_steps: int = setting(default=50, ge=1)
    """Model calls one run may make (``--max-steps`` wins)."""
    tool_timeout_seconds: float = setting(default=30, gt=0)
    """The wall-clock limit of one tool call (a command, a plan, a gate)."""
    max_wall_seconds: float = setting(default=1800, gt=0)
    """The wall-clock limit of one run."""
    tool_output_chars: int = setting(default=6000, ge=200)
    """Characters of one tool result the model sees (the journal keeps more)."""


def model_spec(value: str | None, field: str) -> str | None:
    """A model spec's shape (``keel.models.parse_spec`` reads it): backend, then a name.

    ``openai:M``, ``anthropic:M``, ``script:F``, ``replay:S`` need the name; ``local`` may have
    one. ``None`` and the empty string mean no model.
    """
    if not value:
        return None
    backend, colon, name = value.strip().partition(":")
    if backend not in MODEL_BACKENDS or (not name and backend != "local") or (colon and not name):
        raise ValueError(
            f"{value!r} is not a model spec: use openai:MODEL, anthropic:MODEL, local, "
            f"script:FILE or replay:SESSION"
        )
    return value.strip()


MODEL_BACKENDS: tuple[str, ...] = ("openai", "anthropic", "local", "script", "replay")
"""The model backends, once: ``model_spec`` checks a spec's shape with them and
``keel.models._spec`` (``BACKENDS``) opens them."""


class JudgeWhen(Section):
    """``[judge.when]``: what schedules a judgement (any of them; all off means never)."""

    on_finding: Literal["off", "hint", "correct", "replan", "stop"] = "correct"
    """A rule finding at or above this ladder level schedules a judgement (``off``: never)."""
    every_n_steps: int = setting(default=0, ge=0, le=10_000)
    """Every N tool calls (0: never)."""
    on_finish: bool = True
    """When the agent claims it is done (is "done, tests pass" true?)."""


class JudgeCategories(Section):
    """``[judge.categories]``: which failure categories the judge looks for and may deliver."""

    drift: bool = True
    """The step is no longer about the task."""
    gaming: bool = True
    """The agent games the check instead of solving the task (edits tests, special-cases,
    ``exit 0``, patches the harness)."""
    hijack: bool = True
    """A tool result (a file, a web page, an issue) redirected the agent's goal."""
    false_success: bool = True
    """The agent claims success the trajectory does not show."""


class JudgeConfig(Section):
    """``[judge]``: the model evaluator, off the hot path; off until ``model`` is set."""

    model: str | None = setting(default=None, check=model_spec)
    """The judge's model spec (``openai:MODEL``, ``anthropic:MODEL``, ``local``,
    ``script:FILE``); unset, the judge is off."""
    when: JudgeWhen = setting(default_factory=JudgeWhen)
    min_confidence: float = setting(default=0.7, ge=0, le=1)
    """Verdicts below this confidence are journaled, never delivered."""
    categories: JudgeCategories = setting(default_factory=JudgeCategories)
    window_steps: int = setting(default=12, ge=1, le=200)
    """The last K tool calls the judge sees (with the task, constraints and plan)."""
    max_calls: int | None = setting(default=20, ge=0)
    """Judge calls one session may make; ``None`` is no limit."""
    max_cost_usd: float | None = setting(default=None, ge=0)
    """Dollars the judge may spend in one session; needs both prices (or every call is
    refused)."""
    input_price_per_mtok: float | None = setting(default=None, ge=0)
    """US dollars per million input tokens of the judge's model."""
    output_price_per_mtok: float | None = setting(default=None, ge=0)
    """US dollars per million output tokens of the judge's model."""
    timeout_seconds: float = setting(default=30, gt=0, le=600)
    """The wall-clock limit of one judge call."""


def otlp_endpoint(value: str | None, field: str) -> str | None:
    """An OTLP/HTTP traces URL: ``http(s)://host[:port]/path``, with no user or password.

    Credentials go in ``OTEL_EXPORTER_OTLP_HEADERS``, never in keel.toml.
    """
    if not value:
        return None
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in netloc:
        raise ValueError("keep credentials out of keel.toml: set OTEL_EXPORTER_OTLP_HEADERS")
    host, colon, port = netloc.rpartition(":") if not netloc.endswith("]") else (netloc, "", "")
    host = host if colon else netloc
    if (
        not sep
        or scheme.lower() not in ("http", "https")
        or not host.strip("[]")
        or (colon and not (port.isdigit() and 0 < int(port) < 65536))
    ):
        raise ValueError(f"{value!r} is not an OTLP/HTTP endpoint: use http(s)://HOST:PORT/PATH")
    return text


class ExportConfig(Section):
    """``[export]``: pushing traces to an OpenTelemetry backend (``keel-guard[otel]``)."""

    otlp_endpoint: str | None = setting(default=None, check=otlp_endpoint)
    """The OTLP/HTTP traces URL, e.g. ``http://127.0.0.1:4318/v1/traces``; unset, nothing is
    pushed. Headers (an API key) come from ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or
    ``OTEL_EXPORTER_OTLP_HEADERS`` in the environment, never from this file."""
    include_arguments: bool = False
    """Add each tool call's arguments to its span (they may hold secrets)."""
    timeout_seconds: float = setting(default=10, gt=0, le=300)
    """How long one batch may take to send, retries included; then it is dropped and the
    failure journaled."""


def journal_url(value: str | None, field: str) -> str | None:
    """A PostgreSQL URL, ``postgresql://USER@HOST:PORT/DATABASE``, with no password in it.

    The password comes from the environment (``PGPASSWORD``, or the variable that
    ``password_env`` names), never from keel.toml, which is reviewed and committed like code.
    """
    if not value:
        return None
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    rest, _, query = rest.partition("?")
    netloc, slash, database = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    params = {p.partition("=")[0].strip().lower() for p in query.split("&")}
    if (at and ":" in userinfo) or "password" in params:
        raise ValueError(
            "keep the password out of keel.toml: set PGPASSWORD, or name the variable "
            "holding it in [journal] password_env"
        )
    port = hostport.rpartition("]")[2].rpartition(":")[2] if ":" in hostport else ""
    if (
        not sep
        or scheme not in ("postgresql", "postgres")
        or not slash
        or not database.strip("/")
        or (port and not (port.isdigit() and 0 < int(port) < 65536))
    ):
        raise ValueError(
            f"{value!r} is not a PostgreSQL URL: use postgresql://USER@HOST:PORT/DATABASE"
        )
    return text


class JournalConfig(Section):
    """``[journal]``: where the journal lives; unset, ``.keel/journal.db`` (SQLite)."""

    url: str | None = setting(default=None, check=journal_url)
    """A PostgreSQL database shared by a team, ``postgresql://USER@HOST:PORT/DATABASE``
    (``keel-guard[postgres]``); the password never goes here."""
    password_env: str | None = setting(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    """The environment variable holding the database password (default: libpq's own
    ``PGPASSWORD``)."""
    workspace: str | None = setting(default=None, pattern=r"^[^\x00-\x1f\x7f]{1,200}$")
    """This workspace's name in the database: one chain per name. Default
    ``HOST:/real/path``; give every checkout of a repository the same name to have them
    append to one chain."""


class KeelConfig(Section):
    """The whole of keel.toml."""

    policy: PolicyConfig = setting(default_factory=PolicyConfig)
    scope: ScopeConfig = setting(default_factory=ScopeConfig)
    constraints: list[Constraint] = setting(default_factory=list)
    limits: LimitsConfig = setting(default_factory=LimitsConfig)
    gates: GatesConfig = setting(default_factory=GatesConfig)
    monitor: MonitorConfig = setting(default_factory=MonitorConfig)
    probes: ProbesConfig = setting(default_factory=ProbesConfig)
    sandbox: SandboxConfig = setting(default_factory=SandboxConfig)
    model: ModelConfig = setting(default_factory=ModelConfig)
    agent: AgentConfig = setting(default_factory=AgentConfig)
    judge: JudgeConfig = setting(default_factory=JudgeConfig)
    export: ExportConfig = setting(default_factory=ExportConfig)
    journal: JournalConfig = setting(default_factory=JournalConfig)

    @classmethod
    def for_preset(cls, preset: PresetName) -> KeelConfig:
        """The embedded defaults for a preset, with no file.

        Raises:
            UsageError: ``preset`` is not a known preset.
        """
        from keel.core.presets import check_preset

        check_preset(preset)
        data = cls().to_dict()
        data["policy"]["preset"] = preset
        return cls.trusted(data)
