"""The protected paths: one table of what an agent may not leave behind, and why.

Every file the agent can write is hostile input to every process that is not contained:
keel's own hook, daemon and git, the client's file tools, and the user's tools, later, when
the user opens the folder, ``cd``s into it, runs ``git status`` or starts the next agent
session. This table lists the paths through which a file turns into code (or instructions)
run by such a process without the user choosing to run it. It is the one copy of that rule:

- the **policy** refuses (``deny``) or asks about (``ask``) a write by a file tool or by the
  text of a shell command to any of them, at any depth (``policy_globs``);
- the **sandbox** (``keel exec``) keeps the existing ``deny`` entries read-only at any depth
  within ``[sandbox] control_depth``, restores them beyond it, and moves new ones to
  ``.keel/quarantine/`` after the run (``keel.sandbox.exec._control`` walks the workspace with
  ``names``, ``pairs`` and ``GIT_DIR``); a contained change to an ``ask`` entry is reported
  (journaled, shown by ``keel diff``, guidance to the agent);
- ``keel diff`` names the ``ask`` entries among the changes.

An entry's ``path`` is one name, or a directory name and a child name (``.cargo/config*``: a
trailing ``*`` is the only wildcard), matched case-insensitively in any directory of the
workspace; a directory entry covers everything below it. ``GIT_DIR`` lists what inside a git
directory (the workspace's ``.git/``, and each ``.git/modules/*`` of its submodules) stays
read-only: git's ordinary work writes objects, refs, logs, the index, ``HEAD`` and the other
ref and state files, ``packed-refs`` and rebase/merge state, and nothing of this list. Any
other repository's ``.git`` (a nested repository, at any depth) and every ``.git`` *file* (a
gitdir pointer) is read-only as a whole. keel's own installation, when it lies inside the
workspace (``own_installation``), is protected the same way.

What is deliberately not here: code the user chooses to run later (``src/*.py`` under
pytest, a Makefile under make, ``package.json`` scripts under npm). Writing code is the
agent's job; ``keel diff`` is how the user sees it before running it.

Standard library only: the hook path and ``keel exec`` read this on every call.
"""

from __future__ import annotations

import os
import sys

from keel.core.frozen import Frozen
from keel.core.root import CONFIG_NAME, STATE_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    Verdict = Literal["deny", "ask"]


class Protected(Frozen):
    """One protected path: where it is, what an agent's write gets, and why."""

    __slots__ = ("ci", "path", "reason", "verdict")
    path: str
    """A name, or ``directory/child-glob``, matched case-insensitively in any directory."""
    verdict: Verdict
    """``deny``: never written by an agent; ``ask``: a person approves (a contained change
    is reported, not refused)."""
    reason: str
    """Why: the process outside the sandbox that reads it, and what it would run."""
    ci: bool
    """CI and pre-commit configuration: protected unless ``[sandbox] protect_ci = false``."""

    def __init__(self, path: str, verdict: Verdict, reason: str, *, ci: bool = False) -> None:
        self._init(path=path, verdict=verdict, reason=reason, ci=ci)


def _deny(path: str, reason: str, *, ci: bool = False) -> Protected:
    return Protected(path, "deny", reason, ci=ci)


def _ask(path: str, reason: str) -> Protected:
    return Protected(path, "ask", reason)


_SHELL = "a shell reads it at start-up"
_AGENT = "the next agent session reads it as its instructions"

ENTRIES: tuple[Protected, ...] = (
    # keel and the agents
    _deny(CONFIG_NAME, "keel's policy: it decides what the agent may do"),
    _deny(STATE_DIR, "keel's state: journal, checkpoints, emergency stop, the hook daemon socket"),
    _deny(".claude", "Claude Code's project settings, hooks, commands and agents"),
    _deny(".codex", "Codex CLI's project config and hooks"),
    _deny(".gemini", "Gemini CLI's project settings and hooks"),
    _deny(".mcp.json", "Claude Code starts the MCP servers it names (any command) on start-up"),
    # git outside its directory
    _deny(".gitconfig", "git configuration: fsmonitor, hooksPath, filters and pagers run programs"),
    _deny(".gitmodules", "submodule URLs and paths git fetches and checks out"),
    # shells and environment managers: run on start-up or on cd
    _deny(".bashrc", _SHELL),
    _deny(".bash_profile", _SHELL),
    _deny(".bash_login", _SHELL),
    _deny(".profile", _SHELL),
    _deny(".zshrc", _SHELL),
    _deny(".zshenv", _SHELL),
    _deny(".zprofile", _SHELL),
    _deny(".envrc", "direnv runs it when a shell enters the directory"),
    _deny(".mise.toml", "mise runs its hooks and env scripts when a shell enters the directory"),
    _deny("mise.toml", "mise runs its hooks and env scripts when a shell enters the directory"),
    # tools that run programs named in their configuration
    _deny(".ripgreprc", "ripgrep (the clients' own search) reads its options from it"),
    _deny(".npmrc", "npm runs script-shell and node-options from it on every npm command"),
    _deny(".yarnrc*", "yarn runs yarn-path, yarnPath and plugins named in it on every command"),
    _deny(".cargo/config", "cargo runs build.rustc-wrapper and runners named in it"),
    _deny(".cargo/config.toml", "cargo runs build.rustc-wrapper and runners named in it"),
    # editors: run tasks and extensions when the folder is opened
    _deny(".vscode", "VS Code runs tasks (runOn: folderOpen) and settings-named programs"),
    _deny(".idea", "JetBrains IDEs run startup tasks and run configurations from it"),
    # CI and pre-commit: run by other people's machines and by git commit
    _deny(".github/workflows", "CI runs it with the repository's secrets", ci=True),
    _deny(".pre-commit-config.yaml", "pre-commit runs the hooks it names on git commit", ci=True),
    _deny(".husky", "husky's git hooks run on git commit", ci=True),
    # prompt files of future agent sessions: a person reviews them
    _ask("CLAUDE.md", _AGENT),
    _ask("CLAUDE.local.md", _AGENT),
    _ask("AGENTS.md", _AGENT),
    _ask("AGENTS.override.md", _AGENT),
    _ask("GEMINI.md", _AGENT),
    _ask(".cursorrules", _AGENT),
    _ask(".cursor/rules", _AGENT),
    _ask(".github/copilot-instructions.md", _AGENT),
)
"""Every protected path outside git directories (see the module docstring)."""

GIT_DIR: tuple[Protected, ...] = (
    _deny("config", "git runs programs it names (core.fsmonitor, hooksPath, filters, diff)"),
    _deny("config.worktree", "per-worktree git configuration, read like config"),
    _deny("hooks", "git runs these on commit, checkout, merge and push"),
    _deny("commondir", "points git at another git directory, with its own config and hooks"),
    _deny("gitdir", "points git at another git directory"),
    _deny("info", "git reads excludes, attributes and sparse-checkout patterns from it"),
    _deny("objects/info/alternates", "makes git read objects from another directory"),
    _deny("objects/info/http-alternates", "makes git read objects from another place"),
    _deny("worktrees", "linked worktrees' git directories, each with its own gitdir and config"),
)
"""What stays read-only inside a git directory (relative to it)."""

GIT_POINTER = _deny(".git", "a gitdir pointer (a .git file): git follows it to another directory")
"""A ``.git`` that is a file, at any depth (the scan's and the policy's entry for it)."""
NESTED_REPO = _deny(".git", "another repository's git directory: git runs its config and hooks")
"""A ``.git`` below the workspace root: read-only as a whole (``policy_globs``, the scan)."""


OWN_REASON = "keel's own installation: the hooks run it, outside the sandbox"


def own_installation(root: str) -> tuple[str, ...]:
    """Globs of keel's own installation inside the workspace ``root``, if it is there.

    The hooks run keel's interpreter (``sys.prefix``: a project's ``.venv``, say) and keel's
    import root outside the sandbox: an agent that could write them (``pip install`` into
    that venv, a ``.pth`` file) would run code in the next hook. Kept read-only like a
    control file; installing keel outside the project avoids it.
    """
    home = os.path.realpath(root)
    found: list[str] = []
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    for path in (os.path.realpath(sys.prefix), package):
        if path.startswith(home + "/"):
            rel = path[len(home) + 1 :]
            found += [rel, f"{rel}/**"]
    return tuple(dict.fromkeys(found))


def entries(protect_ci: bool = True) -> tuple[Protected, ...]:
    """``ENTRIES``, without the CI ones when ``protect_ci`` is off."""
    return ENTRIES if protect_ci else tuple(e for e in ENTRIES if not e.ci)


def policy_globs(verdict: Verdict, protect_ci: bool = True) -> tuple[str, ...]:
    """Workspace-relative globs (``keel.policy`` syntax) of every ``verdict`` entry.

    Each entry matches at any depth, and below it when it is a directory. For ``deny``, the
    git-directory entries of every ``.git`` (submodules' ``.git/modules/**`` included) and any
    ``.git`` other than the root's, as a whole, are added.
    """
    out: list[str] = []
    for entry in entries(protect_ci):
        if entry.verdict == verdict:
            out += [f"**/{entry.path}", f"**/{entry.path}/**"]
    if verdict == "deny":
        for entry in GIT_DIR:
            for base in ("**/.git", "**/.git/modules/**"):
                out += [f"{base}/{entry.path}", f"{base}/{entry.path}/**"]
        out += ["**/.git", "*/**/.git/**"]  # a pointer anywhere; a nested repository, whole
    return tuple(out)


class NameTable:
    """The entries of ``ENTRIES`` indexed for a directory walk (``keel.sandbox.exec._control``).

    ``names`` maps a lower-cased name to its one-name entry, ``prefixes`` holds the one-name
    entries that end in ``*``; ``pairs`` maps a lower-cased directory name to ``(child name,
    entry)`` of its two-name entries. A trailing ``*`` is the only wildcard (no ``fnmatch``:
    it imports ``re``, and ``keel exec`` reads this on every call).
    """

    __slots__ = ("names", "pairs", "prefixes")

    def __init__(self, protect_ci: bool = True) -> None:
        """Index the entries (the CI ones only with ``protect_ci``)."""
        self.names: dict[str, Protected] = {}
        self.prefixes: tuple[tuple[str, Protected], ...] = ()
        self.pairs: dict[str, list[tuple[str, Protected]]] = {}
        for entry in entries(protect_ci):
            head, _, child = entry.path.lower().partition("/")
            if child:
                self.pairs.setdefault(head, []).append((child, entry))
            elif head.endswith("*"):
                self.prefixes += ((head[:-1], entry),)
            else:
                self.names[head] = entry

    def name(self, name: str) -> Protected | None:
        """The entry ``name`` (one path segment) is, in any directory."""
        lowered = name.lower()
        found = self.names.get(lowered)
        if found is None:
            for prefix, entry in self.prefixes:
                if lowered.startswith(prefix):
                    return entry
        return found

    def child(self, parent: str, name: str) -> Protected | None:
        """The entry ``name`` is inside a directory called ``parent``."""
        lowered = name.lower()
        for pattern, entry in self.pairs.get(parent.lower(), ()):
            if lowered == pattern or (pattern.endswith("*") and lowered.startswith(pattern[:-1])):
                return entry
        return None


def entry_for(rel: str, protect_ci: bool = True) -> Protected | None:
    """The entry a workspace-relative path falls under, if any (see ``match``)."""
    found = match(rel, protect_ci)
    return found[0] if found is not None else None


def match(rel: str, protect_ci: bool = True) -> tuple[Protected, str] | None:
    """The entry ``rel`` (workspace-relative) falls under, and the glob that names it.

    A ``deny`` entry anywhere on the path wins over an ``ask`` one. The verdict is the one of
    matching ``policy_globs`` (case-insensitively) without compiling them: a name lookup per
    path segment, which a fresh process (``keel policy check``, a hook decided in process)
    can afford on every call. Inside the workspace's own ``.git`` only ``GIT_DIR`` entries
    count; any other ``.git`` is ``NESTED_REPO``.
    """
    table = _table(protect_ci)
    parts = [p for p in rel.split("/") if p]
    asked: tuple[Protected, str] | None = None
    for i, part in enumerate(parts):
        if part.lower() == ".git":
            found = _git_entry(parts, i)
            return found if found is not None else asked
        entry = table.name(part)
        if entry is None and i > 0:
            entry = table.child(parts[i - 1], part)
        if entry is None:
            continue
        glob = f"**/{entry.path}" if i == len(parts) - 1 else f"**/{entry.path}/**"
        if entry.verdict == "deny":
            return entry, glob
        asked = asked or (entry, glob)
    return asked


_TABLES: dict[bool, NameTable] = {}


def _table(protect_ci: bool) -> NameTable:
    if protect_ci not in _TABLES:
        _TABLES[protect_ci] = NameTable(protect_ci)
    return _TABLES[protect_ci]


def prompt_paths(paths: list[str]) -> list[str]:
    """The workspace-relative ``paths`` that are prompt files of future agent sessions.

    No ``protect_ci``: it turns off ``deny`` entries only.
    """
    found = [(p, entry_for(p)) for p in paths]
    return [p for p, entry in found if entry is not None and entry.verdict == "ask"]


def reason_for(rel: str) -> str:
    """Why ``rel``, found protected by the sandbox's walk, is protected (for messages).

    The table's reason; for what the table does not name, the other sources of the walk's
    control set (``[sandbox] read_only``, ``core.hooksPath``, ``own_installation``).
    """
    entry = entry_for(rel)
    if entry is not None:
        return entry.reason
    return "keel's own installation, core.hooksPath or [sandbox] read_only names it"


def _git_entry(parts: list[str], at: int) -> tuple[Protected, str] | None:
    """The entry of ``parts`` whose segment ``at`` is a ``.git`` (see ``match``)."""
    if at > 0:
        tail = "/**" if len(parts) > at + 1 else ""
        return NESTED_REPO, f"*/**/.git{tail}" if tail else "**/.git"
    inner = [p.lower() for p in parts[1:]]
    if not inner:
        return GIT_POINTER, "**/.git"
    starts = [(0, "**/.git")]
    if inner[0] == "modules":  # a submodule's git directory, its name may hold slashes
        starts += [(k, "**/.git/modules/**") for k in range(1, len(inner))]
    for k, base in starts:
        for entry in GIT_DIR:
            depth = entry.path.count("/") + 1
            if "/".join(inner[k : k + depth]) == entry.path:
                tail = "/**" if len(inner) > k + depth else ""
                return entry, f"{base}/{entry.path}{tail}"
    return None
