"""What the detectors share: the monitor's ``Context``, the ``Detector`` base and its values.

A detector is a small stateless object: ``before(ctx, seen)`` looks at a call before it runs,
``after(ctx, done)`` at its result, and ``reset(ctx)`` forgets what a new user prompt makes
stale. Each returns ``Finding`` values at its base level; the ladder (``_ladder``) turns them
into guidance. Whatever a detector remembers lives in ``ctx.state`` (``MonitorState``), so it
survives between hook processes. Standard library only.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from keel.monitor._state import MAP_CAP, CallEntry, DetectorName, MonitorState
from keel.monitor._text import relative_to

if TYPE_CHECKING:
    from collections.abc import Callable

    from keel.core.calls import ToolCall, ToolResult
    from keel.core.decision import GuidanceLevel
    from keel.core.schema import KeelConfig
    from keel.policy import CommandFacts

    FactsReader = Callable[[str, str | None], CommandFacts]


class Finding(NamedTuple):
    """A detector fired: at its base level, with a message and the evidence behind it."""

    detector: DetectorName
    level: GuidanceLevel
    message: str
    evidence: dict[str, Any]
    rung: str | None = None
    """The ladder's key when it is not the detector's name (each budget climbs on its own)."""


class Seen(NamedTuple):
    """A call about to run, read once for every detector."""

    call: ToolCall
    key: str
    """``call_key(call)``."""
    flags: int
    """``EDIT | TEST | POLL | READ | WRITES``."""
    label: str
    """``describe(call)``, for messages."""
    changed: tuple[str, ...]
    """Files it writes or deletes: a write or edit tool's paths, a command's written files,
    a patch's files."""
    targets: tuple[str, ...]
    """Files it touches or names, for the plan-drift detector."""
    words: tuple[tuple[str, ...], ...]
    """The argv of each simple command of a shell call."""
    gates: tuple[str, ...]
    """The ``[gates]`` commands it runs so that their exit status is its own."""
    now: float


class Done(NamedTuple):
    """A call's result, next to what was remembered of the call."""

    entry: CallEntry
    result: ToolResult
    latest: bool
    """The call is the most recent one (a result may come late, after other calls)."""
    changed: tuple[str, ...] = ()
    """Files (workspace-relative) the call was seen to change once it ran: what a shell
    command changed between its ``before`` and ``after`` checkpoints."""


class Context:
    """One monitor's config, state and readers, as the detectors see them.

    Args:
        config: the workspace's settings (keel.toml).
        state: the session's ``MonitorState``.
        in_scope: the policy's ``in_scope(path)``, which takes absolute paths and paths
            relative to the workspace root; ``None`` for ``[scope]`` globs matched against
            paths relative to each call's ``cwd``.
        facts: the policy's ``command_facts(line, cwd)``; ``None`` to build a policy of
            ``config`` on first use.
    """

    def __init__(
        self,
        config: KeelConfig,
        state: MonitorState,
        in_scope: Callable[[str], bool] | None,
        facts: FactsReader | None,
    ) -> None:
        self.config = config
        self.settings = config.monitor
        self.state = state
        self._in_scope = in_scope
        self._default_scope: Callable[[str], bool] | None = None
        self._facts = facts
        self.plan_cache: tuple[list[str] | None, frozenset[str]] = (None, frozenset())

    def facts(self, line: str, cwd: str | None) -> CommandFacts:
        """What the policy's parser says of a command line; conservative if the reader fails."""
        try:
            if self._facts is None:
                self._facts = _own_reader(self.config)
            return self._facts(line, cwd)
        except Exception:
            from keel.policy import CONSERVATIVE

            return CONSERVATIVE

    def in_scope(self, path: str, cwd: str | None) -> bool:
        """True if changing ``path`` (as a call in ``cwd`` names it) is inside ``[scope]``."""
        if self._in_scope is not None:
            if cwd and not path.startswith("/"):
                path = posixpath.normpath(posixpath.join(cwd, path))
            return self._in_scope(path)
        if self._default_scope is None:
            self._default_scope = _scope_matcher(self.config)
        # without a workspace, a call without cwd runs at "/" (see _own_reader)
        return self._default_scope(relative_to(path, cwd or "/"))


class Detector:
    """The base of every detector: each hook does nothing unless a detector overrides it."""

    name: ClassVar[DetectorName]

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """Findings about a call before it runs (a level above hint denies it)."""
        return []

    def after(self, ctx: Context, done: Done) -> list[Finding]:
        """Findings about a call's result."""
        return []

    def reset(self, ctx: Context) -> None:
        """Forget streaks and counts: a new user prompt means a person has taken over."""


def put(mapping: dict[str, Any], key: str, value: Any) -> Any:
    """Set ``mapping[key]`` as its newest entry, dropping the oldest beyond ``MAP_CAP``."""
    mapping.pop(key, None)
    mapping[key] = value
    while len(mapping) > MAP_CAP:
        del mapping[next(iter(mapping))]
    return value


_OWN_READERS: list[tuple[KeelConfig, FactsReader]] = []
_OWN_READERS_CAP = 4


def _own_reader(config: KeelConfig) -> FactsReader:
    """A policy of ``config`` for a monitor used without a guard (``scan``, the demo, tests).

    Rooted at ``/`` so that every call's own ``cwd`` is honoured (a policy judges a command
    outside its root as if run at the root). Monitors made one after another from the same
    config object share it, and with it its memory of command lines.
    """
    for known, reader in _OWN_READERS:
        if known is config:
            return reader
    from pathlib import Path

    from keel.policy import Policy

    reader = Policy.from_config(config, Path("/")).command_facts
    _OWN_READERS.append((config, reader))
    del _OWN_READERS[:-_OWN_READERS_CAP]
    return reader


def _scope_matcher(config: KeelConfig) -> Callable[[str], bool]:
    """``[scope]`` with the policy's glob semantics, for a monitor used without a guard."""
    from keel.policy import GlobSet

    included = GlobSet(tuple(config.scope.include))
    excluded = GlobSet(tuple(config.scope.exclude))

    def in_scope(path: str) -> bool:
        path = path.removeprefix("./")
        return included.match(path) is not None and excluded.match(path) is None

    return in_scope
