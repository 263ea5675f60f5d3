"""The policy engine: plain data in, :class:`Ruling` named tuples out.

The public :class:`keel.policy.Policy` wraps this in :class:`keel.core.decision.Decision`; the fast
``keel policy check`` path uses it directly so a decision costs no dataclass machinery.
Every check starts from the preset's default (ask or deny) and collects verdicts from
constraints, risk rules, paths, network and command patterns; the strictest wins, and a tie
goes to the most specific rule, so that is the one reported.

The rules live in three layers, each a class the next one extends: network
(``_judge_net``), paths (``_judge_paths``), commands (``_judge_cmds``). ``Engine`` compiles a
snapshot into what they read.

**Two modes.** *Contained* (``contained=True``): every command the engine allows runs inside
``keel exec`` (the hooks rewrite it so), which confines writes to the workspace minus the
control files, hides secrets outside it and lets network out only through a proxy that
enforces the same allowlist. There the developer preset also allows running project code and
installs, local git history work, deletes inside the workspace, reads outside the workspace
that are not secrets and variables that inject programs. *Uncontained*: the text policy is
the only layer, and asks about everything it cannot see.
"""

from __future__ import annotations

import os
import re

from keel.core import presets as presets
from keel.core.protected import own_installation, policy_globs
from keel.policy._judge_cmds import WRITE_OPS, CommandRules
from keel.policy._match import GLOB_CHARS, Argv, Loose, match_prefix, matches
from keel.policy._paths import DEVICES_WRITE, GlobSet, expand_home
from keel.policy._rules import interpreter_code, positional, risks, writes
from keel.policy._ruling import Ruling, with_suggestion, worst
from keel.policy._shell import Cmd
from keel.policy._tools import hidden_programs

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any

    from keel.policy._judge_cmds import Indexes, Tier
    from keel.policy._match import Pattern

__all__ = ["Engine", "Ruling", "split_pattern", "with_suggestion", "worst"]

_TIERS: dict[tuple[str, bool], Tier] = {}
_INSPECT_ASK: list[Loose] = []
_INDEXES: dict[tuple[str, bool], Indexes] = {}
# Read-only commands: the strict preset's allow list (inspection), minus the options with
# which some of them write a file or run another program.
_READ_ONLY_BUILTINS = frozenset({"cd", "pushd", "popd", ":"})
_READ_ONLY_WRAPPERS = frozenset({"env", "timeout", "nice", "time", "command", "stdbuf", "ionice"})
_NOT_READ_ONLY = frozenset({"awk", "gawk", "mawk", "nawk", "xxd", "man", "sed"})
_SED_PRINT = r"^(?:(?:\d+|\$)(?:,(?:\d+|\$))?p;?)+$"  # the ``sed -n 1,80p`` idiom
_READ_ONLY_EXCLUDED: dict[str, tuple[str, ...]] = {
    "tree": ("-o", "--output"),
    "fd": ("-x", "-X", "--exec", "--exec-batch"),
    "fdfind": ("-x", "-X", "--exec", "--exec-batch"),
    "rg": ("--pre",),
    "sort": ("-o", "--output", "--compress-program"),
    "ag": ("--pager",),
    "ack": ("--pager",),
    "file": ("-C", "--compile"),
    "less": ("-o", "-O", "--log-file", "--LOG-FILE"),
}


def split_pattern(pattern: str) -> Pattern:
    """A command pattern's words (shell quoting respected).

    A pattern in Claude Code's rule syntax (``Bash(npm test:*)``) is read as the keel pattern
    it means; one keel cannot express raises ``ValueError`` (``keel.core.clientrules``), so
    it is never compiled into a pattern that silently matches nothing.
    """
    import shlex

    if pattern.rstrip().endswith(")"):  # only the Tool(specifier) form is a client rule
        from keel.core.clientrules import client_rule_pattern, looks_like_client_rule

        if looks_like_client_rule(pattern):
            pattern = client_rule_pattern(pattern)

    try:
        return tuple(shlex.split(pattern))
    except ValueError:
        return tuple(pattern.split())


def _preset_tier(name: str, contained: bool = False) -> Tier:
    key = (name, contained)
    if key not in _TIERS:
        data = presets.PRESETS[name]
        extra = data["contained_allow"] if contained else ()
        _TIERS[key] = (
            tuple(tuple(p.split()) for p in (*data["allow"], *extra)),
            tuple(tuple(p.split()) for p in data["ask"]),
            tuple(tuple(p.split()) for p in data["deny"]),
        )
    return _TIERS[key]


def _index(patterns: tuple[Pattern, ...]) -> dict[str, tuple[Pattern, ...]]:
    """Patterns by their first word (``*`` for a first word with glob characters)."""
    out: dict[str, list[Pattern]] = {}
    for p in patterns:
        if p:
            out.setdefault(p[0] if GLOB_CHARS.isdisjoint(p[0]) else "*", []).append(p)
    return {key: tuple(value) for key, value in out.items()}


def _loose_index(patterns: tuple[Pattern, ...]) -> dict[str, tuple[Loose, ...]]:
    return {key: tuple(map(Loose, value)) for key, value in _index(patterns).items()}


def _indexes(tier: Tier) -> Indexes:
    return (_index(tier[0]), _loose_index(tier[1]), _loose_index(tier[2]))


def _preset_indexes(name: str, contained: bool = False) -> Indexes:
    if (name, contained) not in _INDEXES:
        _INDEXES[(name, contained)] = _indexes(_preset_tier(name, contained))
    return _INDEXES[(name, contained)]


class Engine(CommandRules):
    """A compiled policy for one workspace root."""

    def __init__(
        self,
        snapshot: dict[str, Any],
        root: str,
        preset: str | None = None,
        *,
        contained: bool = False,
    ) -> None:
        """Compile ``snapshot`` for ``root``; ``preset`` overrides the snapshot's preset.

        ``contained``: every command this engine allows runs inside ``keel exec`` (the hooks
        rewrite it so), which the rules count on (see the module docstring).

        Raises:
            KeyError: ``preset`` (or the snapshot's) is not a known preset.
        """
        name = preset or snapshot["preset"]
        data = presets.PRESETS[name]
        self.contained = contained
        self.snapshot = snapshot
        self.preset = name
        self.root = os.path.abspath(root)
        self.root_real = os.path.realpath(root)
        self.home = os.path.expanduser("~")
        self.cdpath = bool(os.environ.get("CDPATH"))
        self._last_parse = None
        self.command_writes: bool = data["command_writes"]
        self.file_writes: bool = data["file_writes"]
        self.runs_code = contained and self.command_writes
        self._compile_commands(snapshot, name, contained)
        self.unknown: str = snapshot["unknown"] or data["unknown"]
        self.unparseable: str = snapshot["unparseable"] or data["unparseable"]
        self.network: tuple[str, ...] = (*data["network"], *snapshot["network_allow"])
        self._compile_paths(snapshot, data)
        self.max_input: int = snapshot["max_input_bytes"]

    def _compile_commands(self, snapshot: dict[str, Any], name: str, contained: bool) -> None:
        split = split_pattern
        self.config_tier: Tier = (
            tuple(split(p) for p in snapshot["allow"]),
            tuple(split(p) for p in snapshot["ask"]),
            tuple(split(p) for p in snapshot["deny"]),
        )
        self.preset_tier = _preset_tier(name, contained)
        config = ("config", "keel.toml [policy]", _indexes(self.config_tier))
        where = f"the {name} preset" + (" (contained)" if contained else "")
        self._tiers = (config, (f"preset.{name}", where, _preset_indexes(name, contained)))
        self._tool_tiers = (config, (f"preset.{name}", f"the {name} preset", _preset_indexes(name)))
        self.constraints = tuple(
            (
                cid,
                text,
                GlobSet(tuple(protect), ignore_case=True),
                tuple(Loose(split(f)) for f in forbid),
            )
            for cid, text, protect, forbid in snapshot["constraints"]
        )

    def _compile_paths(self, snapshot: dict[str, Any], data: presets.PresetData) -> None:
        protected = snapshot["protected"]
        self.protected = GlobSet(
            presets.PROTECTED if protected is None else tuple(protected), ignore_case=True
        )
        protect_ci = snapshot.get("protect_ci", True)
        self.protect_ci: bool = protect_ci
        self.read_only = GlobSet(tuple(snapshot.get("read_only", ())))
        self.own = GlobSet(own_installation(self.root_real))
        home = self.home
        self.read_outside = GlobSet(
            tuple(expand_home(g, home) for g in (*data["read_outside"], *snapshot["read_outside"]))
        )
        self.secrets = GlobSet(
            tuple(expand_home(g, home) for g in presets.SECRETS), ignore_case=True
        )
        self.secret_ok = GlobSet(presets.SECRET_EXCEPTIONS, ignore_case=True)
        self.include = GlobSet(tuple(snapshot["scope_include"]))
        self.exclude = GlobSet(tuple(snapshot["scope_exclude"]))

    # -- read-only -----------------------------------------------------------------------------

    def is_read_only(self, line: str, cwd: str | None = None) -> bool:
        """True only if every simple command of ``line`` certainly changes no file.

        A command is read-only when the strict preset's allow list (inspection commands)
        matches it by name, no ask pattern of the inspection set matches, it writes through
        no argument or redirect (``/dev/null`` and descriptor copies aside), carries no
        variable assignment, and uses none of the options with which an inspection command
        writes or runs another program. Anything unparsed, dynamic or unknown is not.
        """
        if self.bad_input(line, "command") is not None:
            return False
        if not line.strip():
            return True
        parsed = self._parse(line, cwd)
        if parsed.issues:
            return False
        return all(self._reads_only(cmd) for cmd in parsed.cmds)

    def _reads_only(self, cmd: Cmd) -> bool:
        raw = cmd.name
        if raw is None or cmd.assigns or cmd.dynamic_tail or not _redirects_read_only(cmd):
            return False
        if raw == "":
            return True
        args = cmd.argv[1:]
        if None in cmd.argv[:1] or raw.startswith("/") or "/" in raw:
            return False
        if cmd.is_wrapper:
            return raw in _READ_ONLY_WRAPPERS
        if raw in _READ_ONLY_BUILTINS:
            return True
        if raw == "sed":
            return _sed_prints(args)
        if raw in _NOT_READ_ONLY or hidden_programs(raw, args):
            return False
        excluded = _READ_ONLY_EXCLUDED.get(raw, ())
        if any(a is not None and a.startswith(excluded) for a in args):
            return False
        if raw == "uniq" and len(positional(args, frozenset({"-f", "-s", "-w"}))) > 1:
            return False
        if writes(raw, args) or risks(cmd, raw, args) or interpreter_code(raw, args, cmd.heredoc):
            return False
        return _inspection(raw, args)

    # -- explain -------------------------------------------------------------------------------

    def explain(self) -> dict[str, Any]:
        """The effective policy as plain data."""
        return {
            "preset": self.preset,
            "root": self.root,
            "source": self.snapshot.get("source"),
            "contained": self.contained,
            "default": {"unknown": self.unknown, "unparseable": self.unparseable},
            "commands": {
                "config": _tier_dict(self.config_tier),
                "preset": _tier_dict(self.preset_tier),
                "command_writes": self.command_writes,
            },
            "paths": {
                "control": [
                    *policy_globs("deny", self.protect_ci),
                    *self.own.globs,
                    *self.read_only.globs,
                ],
                "prompt_files": list(policy_globs("ask", self.protect_ci)),
                "protected": list(self.protected.globs),
                "read_outside": list(self.read_outside.globs),
                "secrets": list(self.secrets.globs),
                "scope": {"include": list(self.include.globs), "exclude": list(self.exclude.globs)},
                "file_writes": self.file_writes,
            },
            "network_allow": list(self.network),
            "constraints": [
                {
                    "id": cid,
                    "rule": f"constraint.{cid}",
                    "text": text,
                    "protect": list(protect.globs),
                    "forbid": [" ".join(f.pattern) for f in forbid],
                }
                for cid, text, protect, forbid in self.constraints
            ],
            "max_input_bytes": self.max_input,
        }


def _tier_dict(tier: Tier) -> dict[str, list[str]]:
    return {
        k: [" ".join(p) for p in t] for k, t in zip(("allow", "ask", "deny"), tier, strict=True)
    }


def _redirects_read_only(cmd: Cmd) -> bool:
    for op, target in cmd.redirects:
        if op in WRITE_OPS and not (
            target is not None
            and (target in DEVICES_WRITE or (op == ">&" and (target.isdigit() or target == "-")))
        ):
            return False
    return True


def _inspection(raw: str, args: list[str | None]) -> bool:
    """On the strict preset's allow list, and no inspection ask pattern matches."""
    argv: list[str | None] = [raw, *args]
    allow, _, deny = _preset_tier("strict")
    if not _INSPECT_ASK:
        _INSPECT_ASK.extend(Loose(tuple(p.split())) for p in presets.INSPECT_ASK)
        _INSPECT_ASK.extend(map(Loose, deny))
    split = Argv(args)
    if any(matches(p, raw, split) for p in _INSPECT_ASK):
        return False
    return any(match_prefix(p, argv, conservative=False) for p in allow)


def _sed_prints(args: list[str | None]) -> bool:
    """True for ``sed -n 'N,Mp' FILE...``: printing lines, the only sed taken as read-only."""
    if "-n" not in args:
        return False
    scripts = [a for a in args if a is None or not a.startswith("-")]
    return (
        bool(scripts)
        and scripts[0] is not None
        and bool(re.match(_SED_PRINT, scripts[0]))
        and all(a is not None and (a == "-n" or not a.startswith("-")) for a in args)
    )
