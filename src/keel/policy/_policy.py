"""The public policy object: compiled once per workspace, immutable, fail-closed."""

from __future__ import annotations

import os

from keel.core.calls import ToolCall
from keel.core.decision import Decision
from keel.core.patchtext import patch_paths
from keel.policy._core import Engine
from keel.policy._ruling import NO_VERDICT, Ruling, with_suggestion, worst
from keel.policy._snapshot import default_snapshot, snapshot_from_config

TYPE_CHECKING = False  # typing and pathlib cost ~6 ms on the `keel policy check` path
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, Literal

    from keel.core.schema import KeelConfig
    from keel.policy._facts import CommandFacts

    PathOp = Literal["read", "write", "edit"]
_FACTS_CAP = 128
"""Command lines whose facts a policy remembers (the guard and the monitor ask in turn)."""


class Policy:
    """Decides commands, paths, URLs and tool calls for one workspace.

    Build it with :meth:`from_config` (a validated config) or :meth:`for_root` (the
    workspace's keel.toml through the config cache). Every check returns a
    :class:`~keel.core.decision.Decision`; an exception inside a check becomes
    ``deny`` with rule ``internal_error``, never a traceback or an allow.
    """

    __slots__ = ("_engine", "_facts")

    def __init__(self, engine: Engine) -> None:
        """Wrap a compiled engine (use the class methods instead)."""
        self._engine = engine
        self._facts: dict[tuple[str, str | None], CommandFacts] = {}

    @classmethod
    def from_config(
        cls,
        config: KeelConfig,
        root: str | os.PathLike[str],
        *,
        source: str | None = None,
        contained: bool = False,
    ) -> Policy:
        """The policy of ``config`` (read from ``source``) for the workspace at ``root``.

        ``contained``: the commands it allows will run inside ``keel exec``.
        """
        snapshot = snapshot_from_config(config, source)
        return cls(Engine(snapshot, os.fspath(root), contained=contained))

    @classmethod
    def for_root(
        cls,
        root: str | os.PathLike[str],
        *,
        preset: str | None = None,
        config_file: str | os.PathLike[str] | None = None,
        contained: bool = False,
    ) -> Policy:
        """The policy of ``root``'s keel.toml (or ``config_file``), through the config cache.

        Raises:
            ConfigError: the config file is unreadable or invalid.
            UsageError: ``preset`` is not a known preset.
        """
        from keel.core.configview import config_source, config_view

        config = config_view(os.fspath(root), preset, config_file=config_file)
        source = config_source(os.fspath(root), config_file)
        return cls.from_config(config, root, source=source, contained=contained)

    @classmethod
    def for_preset(
        cls, preset: str, root: str | os.PathLike[str], *, contained: bool = False
    ) -> Policy:
        """The embedded defaults of ``preset``, ignoring any keel.toml.

        ``contained``: the commands it allows will run inside ``keel exec``.
        """
        _check_preset(preset)
        return cls(Engine(default_snapshot(preset), os.fspath(root), contained=contained))

    @property
    def preset(self) -> str:
        """The preset in effect."""
        return self._engine.preset

    @property
    def contained(self) -> bool:
        """Whether what this policy allows runs inside ``keel exec``."""
        return self._engine.contained

    @property
    def root(self) -> Path:
        """The workspace root."""
        from pathlib import Path

        return Path(self._engine.root)

    def check_command(self, line: str, cwd: str | None = None) -> Decision:
        """Judge a shell command line (``cwd``: where it runs, default the root)."""
        return _guard(lambda: self._engine.check_line(line, cwd))

    def check_path(self, path: str, op: PathOp, cwd: str | None = None) -> Decision:
        """Judge reading (``read``) or changing (``write``, ``edit``) ``path``."""
        return _guard(lambda: self._engine.check_path(path, op, cwd))

    def check_url(self, url: str) -> Decision:
        """Judge fetching ``url`` against the network allowlist."""
        return _guard(lambda: self._engine.check_url(url))

    def check_host(self, host: str, port: int | None = None) -> Decision:
        """Judge connecting to ``host`` on ``port`` against the network allowlist.

        ``port=None`` is a web port: an entry without a port allows 80 and 443 only (see
        ``NetRules.check_host``).
        """
        return _guard(lambda: self._engine.check_host(host, f"{host}:{port}", port))

    def check_call(self, call: ToolCall) -> Decision:
        """Judge a tool call by its kind; patches are judged by every path they touch.

        A read is judged by its paths and by every glob it selects files with; a search
        that reads contents below a directory also by what it would read there
        (``keel.policy._judge_search``).
        """
        return _guard(lambda: self._call(call))

    def _call(self, call: ToolCall) -> Ruling:
        engine = self._engine
        match call.kind:
            case "exec":
                return engine.check_line(call.command or "", call.cwd)
            case "read":  # paths, the globs that select files, and what a search would read
                # imported here: a command (the common call) never needs the search judge
                from keel.policy._judge_search import judge_read

                return judge_read(engine, call)
            case "write" | "edit":
                paths = [*call.paths, *patch_paths(call.patch or "")]
                if not paths:
                    return engine.level(
                        "unparseable", "call.no_path", f"{call.tool} names no file", None
                    )
                return worst([engine.check_path(p, "write", call.cwd) for p in paths]) or NO_VERDICT
            case "network" if call.url:
                return engine.check_url(call.url)
            case "network" | "mcp" | "other":
                # a web search has no URL, so no host to allowlist: judged by name, like a
                # tool keel does not know
                verdict = engine.tier([call.tool], tool=True)
                if verdict.rule.startswith("default."):
                    return Ruling(
                        verdict.decision,
                        verdict.rule,
                        f"{call.kind} tool {call.tool!r} is not on an allow list",
                        "add it to [policy] allow in keel.toml",
                    )
                return verdict
            case _:
                raise AssertionError(f"unknown tool kind {call.kind!r}")

    def is_read_only(self, line: str, cwd: str | None = None) -> bool:
        """True only if every simple command of ``line`` certainly changes no file.

        Read-only means: on the strict preset's allow list of inspection commands (``ls``,
        ``cat``, ``grep``, ``git range-diff``...), without an argument, option or redirect
        that writes a file or runs another program, and with no variable assignment. A line
        the parser does not fully understand, and any error, gives ``False``. The guard skips
        the checkpoint of a read-only command.
        """
        return self.command_facts(line, cwd).read_only

    def command_facts(self, line: str, cwd: str | None = None) -> CommandFacts:
        """What ``line`` (run in ``cwd``, default the root) does, from one parse of it.

        Whether it is read-only (exactly :meth:`is_read_only`), the files it writes, whether
        it runs a test suite or may change files, the argv of each simple command, and
        ``runs(gate)``. Remembered for the last ``_FACTS_CAP`` lines; any error gives the
        conservative answer (not read-only, may change files, runs nothing).
        """
        from keel.policy._facts import CONSERVATIVE, read_facts

        try:
            key = (line, cwd)
            facts = self._facts.pop(key, None)
            if facts is None:
                facts = read_facts(self._engine, line, cwd)
            self._facts[key] = facts
            if len(self._facts) > _FACTS_CAP:
                del self._facts[next(iter(self._facts))]
            return facts
        except Exception:  # an unhashable "line" from a malformed payload
            return CONSERVATIVE

    def written_paths(self, line: str) -> list[Path]:
        """Files a command line writes: redirects, tee, sed -i, cp, mv, rm, touch, chmod, ln..."""
        try:
            from pathlib import Path

            return [Path(p) for p in self._engine.written_paths(line)]
        except Exception:
            return []

    def in_scope(self, path: str) -> bool:
        """True if ``path`` is inside the workspace and matched by ``[scope]``."""
        try:
            return self._engine.in_scope(path)
        except Exception:
            return False

    def explain(self) -> dict[str, Any]:
        """The effective policy: preset, command tiers, paths, network, constraints."""
        return self._engine.explain()


def _check_preset(preset: str | None) -> None:
    from keel.core.presets import check_preset

    check_preset(preset)


def _guard(check: Callable[[], Ruling]) -> Decision:
    try:
        decision, rule, reason, suggestion = with_suggestion(check())
    except Exception as exc:  # fail closed: a bug in a rule must never allow
        return Decision.deny(
            "internal_error",
            f"the policy check failed: {type(exc).__name__}: {exc}",
            "report this as a keel bug; the action was blocked to be safe",
        )
    match decision:
        case "allow":
            return Decision.allow(rule, reason)
        case "ask":
            return Decision.ask(rule, reason, suggestion)
        case _:
            return Decision.deny(rule, reason, suggestion)
