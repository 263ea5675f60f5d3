"""A client's own permission rules, read for ``keel init`` to carry into keel.toml.

- **Claude Code**: ``permissions.allow``, ``ask`` and ``deny`` in the project's
  ``.claude/settings.json`` and ``.claude/settings.local.json`` (the user's own
  ``~/.claude/settings.json`` is personal and stays out of a keel.toml a team shares). Shell
  rules become keel command patterns (``keel.core.clientrules``); a bare tool name that keel
  judges by name (``WebSearch``, ``Task``, ``mcp__server__tool``; ``mcp__server`` becomes
  ``mcp__server__*``) is kept as keel's tool rule; everything else is listed with the keel
  form, never kept in a form that would not match.
- **Codex CLI**: execpolicy ``prefix_rule(pattern=[...], decision=...)`` calls in
  ``$CODEX_HOME/rules/*.rules`` and ``.codex/rules/*.rules`` (``allow`` → allow, ``prompt`` →
  ask, ``forbidden`` → deny), read with Python's parser (the files are Starlark), never run.

Why this matters: once keel rewrites an allowed shell command into ``keel exec -- bash -c
'...'``, Claude Code's own deny rules judge the rewritten command and no longer match it
(measured: tests/clients/REWRITE.md), so keel.toml is where those rules stay in force.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from keel.core.clientrules import blanket_tool_rule, client_rule_pattern, looks_like_client_rule

TIERS = ("allow", "ask", "deny")
_CODEX_DECISIONS = {"allow": "allow", "prompt": "ask", "forbidden": "deny"}
_MAX_ALTERNATIVES = 64


@dataclass(frozen=True, slots=True)
class ImportedRule:
    """A client rule keel expresses as a command pattern."""

    tier: str
    """``allow``, ``ask`` or ``deny``."""
    pattern: str
    """The keel command pattern."""
    rule: str
    """The rule as the client wrote it."""
    source: str
    """Where it was found (a path, ``~`` for the home directory)."""


@dataclass(frozen=True, slots=True)
class SkippedRule:
    """A client rule keel cannot express as a command pattern, and why."""

    tier: str
    rule: str
    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class PermissionImport:
    """What ``read_permissions`` found."""

    imported: tuple[ImportedRule, ...] = ()
    skipped: tuple[SkippedRule, ...] = ()

    def patterns(self, tier: str) -> list[str]:
        """The keel patterns of ``tier``, in the order found."""
        return [r.pattern for r in self.imported if r.tier == tier]

    def __bool__(self) -> bool:
        """True when any rule was found."""
        return bool(self.imported or self.skipped)


def read_permissions(
    root: Path, agent: str, *, env: Mapping[str, str] | None = None
) -> PermissionImport:
    """The permission rules ``agent`` has for ``root``, as keel patterns or skipped with why.

    Unreadable files are reported as skipped, never raised: importing is advisory.
    """
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    imported: list[ImportedRule] = []
    skipped: list[SkippedRule] = []
    if agent == "claude":
        for path in (root / ".claude" / "settings.json", root / ".claude" / "settings.local.json"):
            _claude_file(path, _shown(path, root, home), imported, skipped)
    elif agent == "codex":
        from keel.hook.codex_config import codex_rules_files

        for path in codex_rules_files(root, env):
            _codex_file(path, _shown(path, root, home), imported, skipped)
    seen: set[tuple[str, str]] = set()
    unique: list[ImportedRule] = []
    for rule in imported:
        if (rule.tier, rule.pattern) not in seen:
            seen.add((rule.tier, rule.pattern))
            unique.append(rule)
    return PermissionImport(tuple(unique), tuple(skipped))


def _shown(path: Path, root: Path, home: Path) -> str:
    for base, label in ((root, ""), (home, "~/")):
        try:
            return label + path.relative_to(base).as_posix()
        except ValueError:
            continue
    return str(path)


def _claude_file(
    path: Path, shown: str, imported: list[ImportedRule], skipped: list[SkippedRule]
) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        skipped.append(SkippedRule("-", shown, shown, f"cannot read it: {exc}"))
        return
    permissions = data.get("permissions") if isinstance(data, dict) else None
    if not isinstance(permissions, dict):
        return
    for tier in TIERS:
        rules = permissions.get(tier)
        for rule in rules if isinstance(rules, list) else []:
            if not isinstance(rule, str):
                skipped.append(SkippedRule(tier, repr(rule), shown, "not a string"))
                continue
            try:
                imported.append(ImportedRule(tier, claude_rule(rule, tier), rule, shown))
            except ValueError as exc:
                skipped.append(SkippedRule(tier, rule, shown, str(exc)))


def claude_rule(rule: str, tier: str) -> str:
    """The keel pattern for the Claude Code permission rule ``rule``.

    Raises:
        ValueError: keel cannot express it; the message names the keel form, if any.
    """
    text = rule.strip()
    if looks_like_client_rule(text) or blanket_tool_rule(text):
        return client_rule_pattern(text, tier)
    if not text.isidentifier():
        raise ValueError(
            f"{rule!r} is not Claude Code's rule syntax (Tool or Tool(specifier)); not imported"
        )
    if text.startswith("mcp__") and "__" not in text[5:]:
        return f"{text}__*"  # Claude's rule for every tool of that MCP server
    return text  # a tool keel judges by name (WebSearch, Task, an MCP tool): the same rule


def _codex_file(
    path: Path, shown: str, imported: list[ImportedRule], skipped: list[SkippedRule]
) -> None:
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except (OSError, ValueError, SyntaxError) as exc:
        skipped.append(SkippedRule("-", shown, shown, f"cannot read it: {exc}"))
        return
    for node in tree.body:
        text = ast.get_source_segment(source, node) or "?"
        text = " ".join(text.split())
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "prefix_rule"
        ):
            skipped.append(SkippedRule("-", text, shown, "not a prefix_rule(...) call"))
            continue
        try:
            tier, patterns = _prefix_rule(call)
        except (ValueError, TypeError, SyntaxError) as exc:
            skipped.append(SkippedRule("-", text, shown, str(exc)))
            continue
        imported.extend(ImportedRule(tier, p, text, shown) for p in patterns)


def _prefix_rule(call: ast.Call) -> tuple[str, list[str]]:
    import shlex

    args = {k.arg: k.value for k in call.keywords if k.arg}
    if call.args or "pattern" not in args:
        raise ValueError("keel reads prefix_rule(pattern=[...], decision=...) only")
    decision = ast.literal_eval(args["decision"]) if "decision" in args else "allow"
    tier = _CODEX_DECISIONS.get(str(decision))
    if tier is None:
        raise ValueError(f"unknown decision {decision!r}")
    raw = ast.literal_eval(args["pattern"])
    if not isinstance(raw, list) or not raw:
        raise ValueError("pattern must be a non-empty list")
    choices: list[list[str]] = []
    for word in raw:
        options: list[object] = list(word) if isinstance(word, list | tuple) else [word]
        if not options or not all(isinstance(o, str) and o for o in options):
            raise ValueError("every pattern word must be a string or a list of strings")
        if any(set(str(o)) & set("*?[") for o in options):
            raise ValueError("a pattern word holds a glob character keel would read as a glob")
        choices.append([str(o) for o in options])
    combos = list(itertools.islice(itertools.product(*choices), _MAX_ALTERNATIVES + 1))
    if len(combos) > _MAX_ALTERNATIVES:
        raise ValueError(f"more than {_MAX_ALTERNATIVES} alternatives")
    return tier, [shlex.join(c) for c in combos]
