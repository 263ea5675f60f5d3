"""The typed, read-only shape of keel's configuration: what the guard, policy and monitor read.

Two things have this shape: the validated pydantic model ``keel.config.KeelConfig`` (used
by the CLI, plans and ``keel init``) and the hook path's pydantic-free ``ConfigView``
(``keel.core.configview``), read from a cache of the validated dump. Code that only reads the
config is written against ``Settings``, and both pass without a cast: ``KeelConfig``
structurally, the view's section classes by deriving from these protocols.

The protocols exist for the type checker only (``typing`` costs ~9 ms to import on the hook
path); at run time their names are ``object``. Each property's body documents that the value
comes from the concrete class. ``tests/core/test_settings.py`` checks that every section here
lists exactly the fields of its pydantic model, so the two cannot drift apart.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Literal, Protocol

    class PolicySettings(Protocol):
        """``[policy]``."""

        @property
        def preset(self) -> Literal["strict", "developer", "readonly"]:
            raise AttributeError  # served by KeelConfig or the view

        @property
        def allow(self) -> Sequence[str]:
            raise AttributeError

        @property
        def ask(self) -> Sequence[str]:
            raise AttributeError

        @property
        def deny(self) -> Sequence[str]:
            raise AttributeError

        @property
        def network_allow(self) -> Sequence[str]:
            raise AttributeError

        @property
        def protected(self) -> Sequence[str] | None:
            raise AttributeError

        @property
        def read_outside(self) -> Sequence[str]:
            raise AttributeError

        @property
        def unparseable(self) -> Literal["ask", "deny"] | None:
            raise AttributeError

        @property
        def unknown(self) -> Literal["ask", "deny"] | None:
            raise AttributeError

    class ScopeSettings(Protocol):
        """``[scope]``."""

        @property
        def include(self) -> Sequence[str]:
            raise AttributeError

        @property
        def exclude(self) -> Sequence[str]:
            raise AttributeError

    class ConstraintSettings(Protocol):
        """One ``[[constraints]]`` entry."""

        @property
        def text(self) -> str:
            raise AttributeError

        @property
        def id(self) -> str | None:
            raise AttributeError

        @property
        def protect(self) -> Sequence[str]:
            raise AttributeError

        @property
        def forbid(self) -> Sequence[str]:
            raise AttributeError

    class LimitsSettings(Protocol):
        """``[limits]``."""

        @property
        def max_steps(self) -> int:
            raise AttributeError

        @property
        def max_wall_seconds(self) -> float:
            raise AttributeError

        @property
        def max_tokens(self) -> int:
            raise AttributeError

        @property
        def plan_max_steps(self) -> int:
            raise AttributeError

        @property
        def plan_max_depth(self) -> int:
            raise AttributeError

        @property
        def probe_timeout_seconds(self) -> float:
            raise AttributeError

        @property
        def max_input_bytes(self) -> int:
            raise AttributeError

    class GatesSettings(Protocol):
        """``[gates]``."""

        @property
        def required(self) -> Sequence[str]:
            raise AttributeError

        @property
        def max_blocks(self) -> int:
            raise AttributeError

    class MonitorSettings(Protocol):
        """``[monitor]``."""

        @property
        def repeat_consecutive(self) -> int:
            raise AttributeError

        @property
        def repeat_window(self) -> int:
            raise AttributeError

        @property
        def repeat_in_window(self) -> int:
            raise AttributeError

        @property
        def alternation_steps(self) -> int:
            raise AttributeError

        @property
        def failure_repeats(self) -> int:
            raise AttributeError

        @property
        def identical_pairs(self) -> int:
            raise AttributeError

        @property
        def no_progress_steps(self) -> int:
            raise AttributeError

        @property
        def drift_window(self) -> int:
            raise AttributeError

        @property
        def cooldown_steps(self) -> int:
            raise AttributeError

        @property
        def task_is_about_tests(self) -> bool:
            raise AttributeError

        @property
        def enabled(self) -> bool:
            raise AttributeError

        @property
        def repeat_hint(self) -> int:
            raise AttributeError

        @property
        def poll_multiplier(self) -> int:
            raise AttributeError

        @property
        def escalation_reset_steps(self) -> int:
            raise AttributeError

        @property
        def budget_warn_fraction(self) -> float:
            raise AttributeError

        @property
        def monologue_repeats(self) -> int:
            raise AttributeError

        @property
        def planning_tools(self) -> Sequence[str]:
            raise AttributeError

        @property
        def seen_cap(self) -> int:
            raise AttributeError

    class ProbesSettings(Protocol):
        """``[probes]``."""

        @property
        def http_allow(self) -> Sequence[str]:
            raise AttributeError

        @property
        def read_cap_bytes(self) -> int:
            raise AttributeError

        @property
        def max_parallel(self) -> int:
            raise AttributeError

        @property
        def command_timeout_seconds(self) -> float:
            raise AttributeError

    class SandboxSettings(Protocol):
        """``[sandbox]``."""

        @property
        def memory_mb(self) -> int:
            raise AttributeError

        @property
        def cpu_seconds(self) -> int:
            raise AttributeError

        @property
        def max_processes(self) -> int:
            raise AttributeError

        @property
        def max_file_mb(self) -> int:
            raise AttributeError

        @property
        def tmp_mb(self) -> int:
            raise AttributeError

        @property
        def uid(self) -> int:
            raise AttributeError

        @property
        def backend(self) -> Literal["auto", "bwrap", "landlock"]:
            raise AttributeError

        @property
        def max_open_files(self) -> int:
            raise AttributeError

        @property
        def max_output_kb(self) -> int:
            raise AttributeError

        @property
        def contain(self) -> Literal["auto", "always", "off"]:
            raise AttributeError

        @property
        def writable(self) -> Sequence[str]:
            raise AttributeError

        @property
        def read_only(self) -> Sequence[str]:
            raise AttributeError

        @property
        def home_read_only(self) -> Sequence[str]:
            raise AttributeError

        @property
        def show_secrets(self) -> Sequence[str]:
            raise AttributeError

        @property
        def protect_ci(self) -> bool:
            raise AttributeError

        @property
        def control_depth(self) -> int:
            raise AttributeError

        @property
        def exec_timeout_seconds(self) -> float:
            raise AttributeError

        @property
        def exec_tmp_mb(self) -> int:
            raise AttributeError

        @property
        def exec_memory_mb(self) -> int:
            raise AttributeError

        @property
        def exec_max_processes(self) -> int:
            raise AttributeError

        @property
        def exec_max_open_files(self) -> int:
            raise AttributeError

    class ModelSettings(Protocol):
        """``[model]``."""

        @property
        def spec(self) -> str | None:
            raise AttributeError

        @property
        def base_url(self) -> str | None:
            raise AttributeError

        @property
        def api_key_env(self) -> str | None:
            raise AttributeError

        @property
        def structured_output(self) -> Literal["auto", "json_schema", "json_object", "off"]:
            raise AttributeError

        @property
        def temperature(self) -> float:
            raise AttributeError

        @property
        def top_p(self) -> float | None:
            raise AttributeError

        @property
        def seed(self) -> int | None:
            raise AttributeError

        @property
        def max_output_tokens(self) -> int:
            raise AttributeError

        @property
        def timeout_seconds(self) -> float:
            raise AttributeError

        @property
        def max_retries(self) -> int:
            raise AttributeError

        @property
        def retry_backoff_seconds(self) -> float:
            raise AttributeError

        @property
        def max_calls(self) -> int | None:
            raise AttributeError

        @property
        def max_tokens(self) -> int | None:
            raise AttributeError

        @property
        def max_cost_usd(self) -> float | None:
            raise AttributeError

        @property
        def input_price_per_mtok(self) -> float | None:
            raise AttributeError

        @property
        def output_price_per_mtok(self) -> float | None:
            raise AttributeError

        @property
        def local_path(self) -> str | None:
            raise AttributeError

        @property
        def local_chat_format(self) -> str | None:
            raise AttributeError

        @property
        def local_context(self) -> int:
            raise AttributeError

        @property
        def local_threads(self) -> int | None:
            raise AttributeError

    class AgentSettings(Protocol):
        """``[agent]``."""

        @property
        def require_plan(self) -> bool:
            raise AttributeError

        @property
        def context_tokens(self) -> int:
            raise AttributeError

        @property
        def repo_map_tokens(self) -> int:
            raise AttributeError

        @property
        def max_steps(self) -> int:
            raise AttributeError

        @property
        def tool_timeout_seconds(self) -> float:
            raise AttributeError

        @property
        def max_wall_seconds(self) -> float:
            raise AttributeError

        @property
        def tool_output_chars(self) -> int:
            raise AttributeError

    class Settings(Protocol):
        """The whole of keel.toml, read-only."""

        @property
        def policy(self) -> PolicySettings:
            raise AttributeError

        @property
        def scope(self) -> ScopeSettings:
            raise AttributeError

        @property
        def constraints(self) -> Sequence[ConstraintSettings]:
            raise AttributeError

        @property
        def limits(self) -> LimitsSettings:
            raise AttributeError

        @property
        def gates(self) -> GatesSettings:
            raise AttributeError

        @property
        def monitor(self) -> MonitorSettings:
            raise AttributeError

        @property
        def probes(self) -> ProbesSettings:
            raise AttributeError

        @property
        def sandbox(self) -> SandboxSettings:
            raise AttributeError

        @property
        def model(self) -> ModelSettings:
            raise AttributeError

        @property
        def agent(self) -> AgentSettings:
            raise AttributeError

else:  # the run-time names: plain bases for the view classes that derive from them
    PolicySettings = ScopeSettings = ConstraintSettings = LimitsSettings = object
    GatesSettings = MonitorSettings = ProbesSettings = SandboxSettings = Settings = object
    ModelSettings = AgentSettings = object

SECTIONS: dict[str, str] = {
    "policy": "PolicySettings",
    "scope": "ScopeSettings",
    "constraints": "ConstraintSettings",
    "limits": "LimitsSettings",
    "gates": "GatesSettings",
    "monitor": "MonitorSettings",
    "probes": "ProbesSettings",
    "sandbox": "SandboxSettings",
    "model": "ModelSettings",
    "agent": "AgentSettings",
}
"""Each section of keel.toml and the protocol that types it."""
