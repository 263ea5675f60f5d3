"""The policy parts of a config as plain data: what ``Engine`` compiles.

The config itself is read (and cached) by ``keel.core.configview``; this only picks the fields
the policy engine needs into dicts, tuples and strings.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any

    from keel.core.schema import KeelConfig

DEFAULT_MAX_INPUT = 1_000_000


def default_snapshot(preset: str = "developer") -> dict[str, Any]:
    """The snapshot of a workspace with no keel.toml."""
    return {
        "preset": preset,
        "allow": (),
        "ask": (),
        "deny": (),
        "network_allow": (),
        "protected": None,
        "read_outside": (),
        "unknown": None,
        "unparseable": None,
        "scope_include": ("**",),
        "scope_exclude": (),
        "constraints": (),
        "max_input_bytes": DEFAULT_MAX_INPUT,
        "read_only": (),
        "protect_ci": True,
        "source": None,
    }


def snapshot_from_config(config: KeelConfig, source: str | None = None) -> dict[str, Any]:
    """The plain-data snapshot of a validated config."""
    p = config.policy
    constraints = tuple(
        (c.id or str(i), c.text, tuple(c.protect), tuple(c.forbid))
        for i, c in enumerate(config.constraints)
    )
    return {
        "preset": p.preset,
        "allow": tuple(p.allow),
        "ask": tuple(p.ask),
        "deny": tuple(p.deny),
        "network_allow": tuple(p.network_allow),
        "protected": None if p.protected is None else tuple(p.protected),
        "read_outside": tuple(p.read_outside),
        "unknown": p.unknown,
        "unparseable": p.unparseable,
        "scope_include": tuple(config.scope.include),
        "scope_exclude": tuple(config.scope.exclude),
        "constraints": constraints,
        "max_input_bytes": config.limits.max_input_bytes,
        "read_only": tuple(config.sandbox.read_only),
        "protect_ci": bool(config.sandbox.protect_ci),
        "source": source,
    }
