"""Registering keel's hooks in a client's project settings, and taking them out again.

Two forms (``keel init --agent X`` and ``keel init --agent X --shared``):

- **per-user** (the default): this machine's keel by absolute path, in a file that is not
  committed. Claude Code: its personal ``.claude/settings.local.json``. Codex CLI and Gemini
  CLI have no user-level place that applies to one project only (Codex 0.171.0's
  ``[projects."<dir>"]`` holds only ``trust_level``; Gemini CLI 0.61.0 runs the hooks of
  ``~/.gemini/settings.json`` in every project), so their project file (``.codex/hooks.json``,
  ``.gemini/settings.json``) is used and listed in the repository's ``.git/info/exclude``
  (``keel.hook.gitexclude``; never ``.gitignore``). Claude's personal file is listed too;
- **shared**: the project file (``.claude/settings.json``, ``.codex/hooks.json``,
  ``.gemini/settings.json``), to be committed, with a command that finds ``keel`` on ``PATH``
  when it runs (``shared_command``), so it works for every teammate who has keel; for one who
  has not, each tool call is blocked with the command that installs it.

Installing merges: the user's own hooks and every other setting stay as they are, keel's
entries are recognised by their command (``... hook EVENT --agent AGENT``) and replaced, never
duplicated; keel's entries in the other form's file are taken out, so they never run twice.
Files and directories keel had to create, and the exclude line it added, are remembered in
``.keel/installed-hooks.json`` so that ``remove_hooks`` undoes exactly what was added: keel's
entries go, the user's stay, a settings file keel created is deleted once it is empty, and the
exclude line keel added is taken out.

**A per-user hook survives a reinstall of keel.** The command (``default_keel_command``) names
no path a reinstall changes: the interpreter by its least versioned name in its directory
(``<venv>/bin/python``, which ``pipx reinstall`` and ``uv tool upgrade`` recreate in place),
and a fixed program (``HOOK_PROGRAM``, under ``-I -S -c``) that puts keel's import root on
``sys.path`` with the ``pythonX.Y`` of that root's path filled in when it runs, so a venv
rebuilt on another Python minor version (``lib/python3.12/site-packages``) is found. Before,
the command named ``<venv>/lib/python3.11/site-packages/keel/_launch.py``, and a missing
script makes Python exit with 2, the clients' "block" (even for a finish, which kept the
agent going). ``-I`` keeps the workspace off ``sys.path`` under ``-c`` as for a script
(Python 3.11's ``-I`` implies ``-P``); ``-S`` skips site (``keel.hook.main`` loads it only
when the call is decided in process). The program is compiled on each start, as the launcher
script was: it is a line, and the hook costs what it cost (bench/RESULTS.md).

The interpreter runs isolated from the workspace: nothing the agent writes in the project is
imported. The shared command finds keel on ``PATH`` without the entries inside the project or
relative ones (``keel.core.gitsafe.safe_path``'s rule: an activated ``.venv/bin`` is the
agent's), so a ``keel`` the agent planted there is never what runs.

**A hook that stays on.** Every registered command ends with a shell fallback
(``fail_closed_command``): keel's hook exits only with 0 or 2, so any other status means
keel or its interpreter is missing or broken (a moved checkout, ``make clean``, a deleted
venv: the shell answers 127, Python 1), and the fallback turns it into the clients' blocking
code 2 with a message naming ``keel doctor`` (the shared form: the install command when keel
is not found), where the client would otherwise run the call. All three clients run hook
commands through a POSIX shell (measured with the pinned clients: Claude Code 2.1.332
``/bin/sh -c``, Codex 0.171.0 ``/bin/bash -c``, Gemini CLI 0.61.0 ``bash -c``). Only the
tool events block on such a failure; the others (a prompt, a finish, the session's start and
end) go on with the message on stderr, since blocking a finish would keep a broken agent going
forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import ConfigError, UsageError
from keel.core.files import write_atomic
from keel.core.installed import DISTRIBUTION
from keel.core.root import ensure_state_dir, state_dir
from keel.hook import gitexclude
from keel.hook.main import HOOK_TIMEOUT
from keel.hook.protocol import AGENTS, Agent

SETTINGS: dict[Agent, str] = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
}
"""The shared project settings file, per client: where ``--shared`` registers."""
USER_SETTINGS: dict[Agent, str] = {
    "claude": ".claude/settings.local.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
}
"""Where a per-user registration goes, per client (see the module), kept out of git."""
TOOL_EVENTS = frozenset(
    {"PreToolUse", "PostToolUse", "PostToolUseFailure", "BeforeTool", "AfterTool"}
)
"""Events whose hook command blocks (exit 2) when keel itself cannot run."""
BROKEN_MESSAGE = (
    "keel: the hook could not run (exit $s): keel or its Python interpreter is missing or "
    "broken (a moved checkout or a deleted venv?), so tool calls are blocked until it is "
    "fixed. Run: keel doctor"
)
"""What the fallback of a registered hook command says on stderr (``$s``: the exit status)."""
INSTALL_KEEL = f"pipx install {DISTRIBUTION}"
"""The command the shared form's fallback tells a teammate without keel to run."""
MISSING_MESSAGE = (
    "keel: this project's hooks run keel, which is not installed here (no keel on PATH "
    f"outside the project), so tool calls are blocked until it is. Install it: {INSTALL_KEEL} "
    f"(or: uv tool install {DISTRIBUTION}), then run: keel doctor"
)
"""What the shared form's fallback says on stderr when no ``keel`` is found on ``PATH``."""
FIND_KEEL = (
    "w=${CLAUDE_PROJECT_DIR:-${GEMINI_PROJECT_DIR:-$PWD}}; k=; IFS=:; set -f; "
    'for d in $PATH; do case $d in /*) case $d/ in "$w"/*) ;; '
    '*) if [ -f "$d/keel" ] && [ -x "$d/keel" ]; then k=$d/keel; break; fi;; esac;; esac; '
    "done; set +f; unset IFS"
)
"""The start of a shared command: ``k`` = the first ``keel`` on ``PATH``, absolute entries
outside the project only (the clients' project variable, else the hook's directory)."""
VERSION_SLOT = "{X.Y}"
"""In the import root a per-user command names: the running Python's ``major.minor``."""
ROOT_PROGRAM = (
    'import sys;sys.path.insert(0,sys.argv.pop(1).replace("{X.Y}","%d.%d"%sys.version_info[:2]))'
)
"""Puts the import root given as the first argument first on ``sys.path`` (``VERSION_SLOT``
filled in) and takes it out of ``sys.argv``."""
HOOK_PROGRAM = ROOT_PROGRAM + ";from keel.hook.main import main;main()"
"""The program of a per-user hook command: ``python -I -S -c HOOK_PROGRAM ROOT hook EVENT ...``
(``keel.hook.main.main`` skips the leading ``hook``)."""

MCP_CONFIG = ".mcp.json"
"""Claude Code's project file of MCP servers, where ``keel init --agent claude --mcp`` registers
``keel mcp`` (per-user, as the hooks: listed in ``.git/info/exclude``)."""
MCP_SERVER = "keel"
"""The server's name there: its tools reach the model as ``mcp__keel__run`` and so on."""
MCP_PROGRAM = ROOT_PROGRAM + ";from keel.cli._entry import main;sys.exit(main())"
"""The program of the registered ``keel mcp``: ``python -I -c MCP_PROGRAM ROOT mcp``."""
_MCP_RECORD = "claude-mcp"
"""The key of the MCP registration in ``.keel/installed-hooks.json``."""

HOOKS: dict[Agent, tuple[tuple[str, str | None], ...]] = {
    "claude": (
        ("PreToolUse", "*"),
        ("PostToolUse", "*"),
        ("PostToolUseFailure", "*"),
        ("Stop", None),
        ("SessionStart", None),
        ("UserPromptSubmit", None),
        ("PreCompact", None),
        ("SessionEnd", None),
    ),
    "codex": (
        ("PreToolUse", ".*"),
        ("PostToolUse", ".*"),
        ("Stop", None),
        ("SessionStart", None),
        ("UserPromptSubmit", None),
    ),
    "gemini": (
        ("BeforeTool", ".*"),
        ("AfterTool", ".*"),
        ("AfterAgent", None),
        ("SessionStart", None),
        ("BeforeAgent", None),
        ("PreCompress", None),
        ("SessionEnd", None),
    ),
}
"""(event, tool matcher) keel registers, per client."""

_RECORD = "installed-hooks.json"


@dataclass(frozen=True, slots=True)
class Placement:
    """Where keel's hooks for a client are registered, in which form, and what git makes of it."""

    settings: Path
    """The settings file holding keel's hooks (the first, if they are in two)."""
    shared: bool
    """The shared form (``shared_command``: keel from ``PATH``), else per-user."""
    repository: bool
    """The workspace lies in a git repository."""
    exclude: Path | None
    """The ``info/exclude`` that lists ``settings``; None when it is not listed there."""
    tracked: bool | None
    """git tracks ``settings`` (None: not asked, no repository, or it cannot be told)."""


def default_keel_command() -> list[str]:
    """The per-user command that runs keel's hook from this interpreter, past any PATH shim.

    ``[python, "-I", "-S", "-c", HOOK_PROGRAM, ROOT]``: ``python`` is ``stable_interpreter()``,
    ``ROOT`` keel's import root with its ``pythonX.Y`` as ``python{X.Y}`` (``root_template``).
    See the module for why (a reinstall moves neither). Before issue 24 keel registered
    ``python -I -S <keel>/_launch.py``, before issue 22 ``python -S -c PROGRAM``;
    ``is_keel_hook`` recognises all of them, so ``keel init`` replaces an old registration and
    ``keel doctor`` reports one.
    """
    from keel.core.isolated import LAUNCHER

    root = os.path.dirname(os.path.dirname(LAUNCHER))
    return [stable_interpreter(), "-I", "-S", "-c", HOOK_PROGRAM, root_template(root)]


def stable_interpreter(executable: str | None = None) -> str:
    """``executable`` (default: this one) by the least versioned name in its own directory.

    ``python``, else ``python3``, where that names the same interpreter: a venv recreated on
    another minor version has ``bin/python`` again, not ``bin/python3.11``.
    """
    exe = executable or sys.executable
    for name in ("python", "python3"):
        candidate = os.path.join(os.path.dirname(exe), name)
        try:
            if os.path.samefile(candidate, exe):
                return candidate
        except OSError:
            continue
    return exe


def root_template(root: str, version: tuple[int, int] | None = None) -> str:
    """``root`` with its ``pythonX.Y`` path component (this Python's) as ``python{X.Y}``."""
    major, minor = version or sys.version_info[:2]
    tag = f"python{major}.{minor}"
    return "/".join(f"python{VERSION_SLOT}" if part == tag else part for part in root.split("/"))


def import_root_of(words: Sequence[str]) -> str | None:
    """The import root (a ``root_template``) of a per-user command's words, else None."""
    if len(words) > 5 and list(words[1:5]) == ["-I", "-S", "-c", HOOK_PROGRAM]:
        return words[5]
    return None


def hook_command(
    keel_command: Sequence[str], agent: str, event: str, extra: Sequence[str] = ()
) -> str:
    """The shell command that runs keel's hook for ``event`` (without the fallback)."""
    return shlex.join([*keel_command, "hook", event, "--agent", agent, *extra])


def fail_closed_command(command: str, event: str, *, fail_open: bool = False) -> str:
    """``command`` with a POSIX-shell fallback for when keel itself cannot run.

    keel's hook exits only with 0 or 2; any other status (127: the interpreter is gone, 1: keel
    cannot be imported) is replaced by 2 for the tool events (``TOOL_EVENTS``: the call is
    blocked) and by 0 for the others (and for every event with ``fail_open``, the journaled
    ``--fail-open`` choice), with ``BROKEN_MESSAGE`` on stderr either way.
    """
    code = _fallback_code(event, fail_open)
    return (
        f'{command}; s=$?; [ $s = 0 ] || [ $s = 2 ] || {{ echo "{BROKEN_MESSAGE}" >&2; '
        f"s={code}; }}; exit $s"
    )


def shared_command(agent: str, event: str, extra: Sequence[str] = ()) -> str:
    """The shared form's command for ``event``: ``keel`` from ``PATH`` (``FIND_KEEL``), fail closed.

    No ``keel`` found counts as 127, and the fallback then says ``MISSING_MESSAGE`` (how to
    install keel); any other status but 0 and 2 says ``BROKEN_MESSAGE``. Either way the tool
    events block and the others go on, as in ``fail_closed_command``.
    """
    call = shlex.join(["hook", event, "--agent", agent, *extra])
    code = _fallback_code(event, "--fail-open" in extra)
    return (
        f'{FIND_KEEL}; if [ -n "$k" ]; then "$k" {call}; s=$?; else s=127; fi; '
        f'[ $s = 0 ] || [ $s = 2 ] || {{ if [ $s = 127 ]; then echo "{MISSING_MESSAGE}" >&2; '
        f'else echo "{BROKEN_MESSAGE}" >&2; fi; s={code}; }}; exit $s'
    )


def is_shared(command: str) -> bool:
    """True when ``command`` is the shared form (``shared_command``)."""
    return command.startswith(FIND_KEEL + ";")


def _fallback_code(event: str, fail_open: bool) -> int:
    return 2 if event in TOOL_EVENTS and not fail_open else 0


def registered_command(
    keel_command: Sequence[str], agent: str, event: str, extra: Sequence[str] = ()
) -> str:
    """The per-user command ``install_hooks`` registers for ``event``: the hook and its fallback."""
    command = hook_command(keel_command, agent, event, extra)
    return fail_closed_command(command, event, fail_open="--fail-open" in extra)


def command_words(command: str) -> list[str]:
    """The words of a registered command up to its first shell operator (the hook call itself).

    Raises:
        ValueError: the command is not valid shell quoting.
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words: list[str] = []
    for token in lexer:
        if token and set(token) <= set("();<>|&"):
            break
        words.append(token)
    return words


def is_keel_hook(command: str, agent: str, event: str | None = None) -> bool:
    """True when ``command`` is a keel hook for ``agent`` (and ``event``, if given).

    Every form is recognised: the bare hook call keel registered before, the hook call with its
    fail-closed fallback (``registered_command``), the shared form (``shared_command``, whose
    hook call follows the search for keel); and whatever starts keel (``default_keel_command``,
    the launcher script of before issue 24, the ``python -S -c`` program of before issue 22, a
    console script), since only the words ``hook EVENT --agent A`` count, wherever they are.
    """
    try:
        words = _all_words(command)
    except ValueError:
        return False
    return any(
        word == "hook"
        and words[i + 2 : i + 4] == ["--agent", agent]
        and (event is None or words[i + 1] == event)
        for i, word in enumerate(words[:-3])
    )


def _all_words(command: str) -> list[str]:
    """Every word and operator of ``command`` (``ValueError``: not valid shell quoting)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def is_fail_closed(command: str) -> bool:
    """True when ``command`` carries the fallback of ``fail_closed_command``."""
    return "[ $s = 0 ] || [ $s = 2 ] ||" in command


def settings_files(agent: str) -> tuple[str, ...]:
    """Every project settings file (relative to the root) keel may register ``agent`` in."""
    name = _agent(agent)
    user = USER_SETTINGS[name]
    return (SETTINGS[name],) if user == SETTINGS[name] else (SETTINGS[name], user)


def settings_file(agent: str, *, shared: bool = False) -> str:
    """The file (relative to the root) ``install_hooks`` registers ``agent`` in."""
    name = _agent(agent)
    return SETTINGS[name] if shared else USER_SETTINGS[name]


def install_hooks(
    root: Path,
    agent: str,
    *,
    keel_command: Sequence[str] | None = None,
    extra_args: Sequence[str] = (),
    shared: bool = False,
) -> list[Path]:
    """Register keel's hooks for ``agent`` in ``root``'s project settings; the files written.

    Args:
        root: the workspace root.
        agent: ``claude``, ``codex`` or ``gemini``.
        keel_command: the argv that runs keel in the per-user form (default:
            ``default_keel_command()``); not used with ``shared``.
        extra_args: more arguments for ``keel hook``.
        shared: the shared form (``shared_command``, in ``SETTINGS``) instead of the per-user
            one (``USER_SETTINGS``, listed in ``.git/info/exclude`` when ``root`` lies in a git
            repository). keel's hooks in the other form's file are taken out, so they never
            run twice, and so is an exclude line keel added before, for the shared file.

    Raises:
        UsageError: an unknown agent.
        ConfigError: the settings file exists but is not a JSON object (it is left alone).
    """
    name = _agent(agent)
    rel = settings_file(name, shared=shared)
    path = root / rel
    for other in settings_files(name):
        if other != rel:
            _strip_file(root, root / other, name, _created_before(root, name))
    created = _created_paths(root, path)
    data = _load(path)
    hooks = _hooks_table(data, path)
    command = keel_command if keel_command is not None or shared else default_keel_command()
    for event, matcher in HOOKS[name]:
        groups = _without_keel(hooks.get(event), name, event, path)
        if command is None:
            line = shared_command(name, event, extra_args)
        else:
            line = registered_command(command, name, event, extra_args)
        groups.append(_group(name, matcher, line))
        hooks[event] = groups
    _write(path, data)
    before = _recorded_exclude(root, name)
    exclude = None if shared else _keep_out_of_git(root, path, before)
    if before is not None and before != exclude:
        _drop_exclude(before)
    _remember(root, name, created, exclude)
    return [path]


def placement(root: Path, agent: str, *, ask_git: bool = True) -> Placement | None:
    """Where and in which form keel's hooks for ``agent`` are registered; None: nowhere.

    ``ask_git=False`` reads files only (``tracked`` stays None): git is not run.

    Raises:
        UsageError: an unknown agent.
        ConfigError: a settings file is not a JSON object.
    """
    found = registered_hooks(root, agent)
    if not found:
        return None
    path, _, command = found[0]
    repo = gitexclude.repository(root)
    exclude = None
    if repo is not None and gitexclude.listed(repo.exclude, gitexclude.pattern(repo, path)):
        exclude = repo.exclude
    tracked = gitexclude.tracked(repo, path) if repo is not None and ask_git else None
    return Placement(path, is_shared(command), repo is not None, exclude, tracked)


def recorded_exclude(root: Path, agent: str) -> tuple[Path, str] | None:
    """The exclude file and line keel added for ``agent`` (``remove_hooks`` takes it out)."""
    entry = _recorded_exclude(root, _agent(agent))
    return None if entry is None else (Path(entry["file"]), entry["line"])


def remove_hooks(root: Path, agent: str) -> list[Path]:
    """Take keel's hooks for ``agent`` out of ``root``'s project settings.

    The exclude line keel added for them (``recorded_exclude``) goes too.

    Returns:
        The settings files keel's hooks were taken out of; empty when there were none (a
        file without keel's hooks is left untouched).

    Raises:
        UsageError: an unknown agent.
        ConfigError: a settings file is not a JSON object (it is left alone).
    """
    name = _agent(agent)
    exclude = _recorded_exclude(root, name)
    created = _forget(root, name)
    if exclude is not None:
        _drop_exclude(exclude)
    return [
        root / rel for rel in settings_files(name) if _strip_file(root, root / rel, name, created)
    ]


def mcp_server_entry() -> dict[str, Any]:
    """The ``mcpServers.keel`` entry: ``keel mcp`` started as the per-user hooks start keel.

    ``python -I -c MCP_PROGRAM ROOT mcp``: this interpreter by its least versioned name and
    keel's import root with ``python{X.Y}`` (a reinstall keeps both, ``default_keel_command``),
    isolated (``-I``): Claude Code starts it in the project, where the agent writes, and
    nothing there is imported. Unlike the hook, ``site`` is loaded: the MCP SDK is in
    site-packages. It serves the workspace it is started in (``keel mcp`` finds its root).
    """
    from keel.core.isolated import LAUNCHER

    root = os.path.dirname(os.path.dirname(LAUNCHER))
    args = ["-I", "-c", MCP_PROGRAM, root_template(root), "mcp"]
    return {"type": "stdio", "command": stable_interpreter(), "args": args}


def install_mcp(root: Path) -> Path:
    """Register ``keel mcp`` for Claude Code in ``root``'s ``.mcp.json``; the file written.

    Other servers and settings stay as they are; a ``keel`` server there is replaced. The
    file is listed in the repository's ``.git/info/exclude`` (it names this machine's keel),
    and what keel created is remembered so that ``remove_mcp`` takes out exactly that.

    Raises:
        ConfigError: ``.mcp.json`` exists but is not a JSON object (it is left alone).
    """
    path = root / MCP_CONFIG
    created = _created_paths(root, path)
    data = _load(path)
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: 'mcpServers' must be an object", code="config.hooks")
    servers[MCP_SERVER] = mcp_server_entry()
    _write(path, data)
    before = _recorded_exclude(root, _MCP_RECORD)
    exclude = _keep_out_of_git(root, path, before)
    _remember(root, _MCP_RECORD, created, exclude)
    return path


def registered_mcp(root: Path) -> dict[str, Any] | None:
    """The ``mcpServers`` entry of ``keel mcp`` in ``root``'s ``.mcp.json``, or None.

    Raises:
        ConfigError: ``.mcp.json`` is not a JSON object.
    """
    servers = _load(root / MCP_CONFIG).get("mcpServers")
    entry = servers.get(MCP_SERVER) if isinstance(servers, dict) else None
    return entry if _is_keel_mcp(entry) else None


def remove_mcp(root: Path) -> Path | None:
    """Take ``keel mcp`` out of ``root``'s ``.mcp.json``; the file, or None if it was not there.

    A file keel created is deleted once empty; the exclude line keel added goes too.

    Raises:
        ConfigError: ``.mcp.json`` is not a JSON object (it is left alone).
    """
    path = root / MCP_CONFIG
    exclude = _recorded_exclude(root, _MCP_RECORD)
    created = _forget(root, _MCP_RECORD)
    if exclude is not None:
        _drop_exclude(exclude)
    if registered_mcp(root) is None:
        return None
    data = _load(path)
    servers = data["mcpServers"]
    del servers[MCP_SERVER]
    if not servers:
        del data["mcpServers"]
    if not data and MCP_CONFIG in created:
        path.unlink()
    else:
        _write(path, data)
    return path


def _is_keel_mcp(entry: Any) -> bool:
    args = entry.get("args") if isinstance(entry, dict) else None
    return isinstance(args, list) and MCP_PROGRAM in args


def _strip_file(root: Path, path: Path, agent: Agent, created: set[str]) -> bool:
    """Take ``agent``'s keel hooks out of ``path``; False when it held none.

    A file (and its directory) keel created, in ``created``, is deleted once it is empty.
    """
    if not path.is_file():
        return False
    data = _load(path)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict) or not any(
        _without_keel(groups, agent, None, path) != groups for groups in hooks.values()
    ):
        return False
    for event in list(hooks):
        groups = _without_keel(hooks[event], agent, None, path)
        if groups:
            hooks[event] = groups
        else:
            del hooks[event]
    if not hooks:
        del data["hooks"]
    if not data and path.relative_to(root).as_posix() in created:
        path.unlink()
        parent = path.parent
        if parent.relative_to(root).as_posix() in created and not any(parent.iterdir()):
            parent.rmdir()
    else:
        _write(path, data)
    return True


def registered_hooks(root: Path, agent: str) -> list[tuple[Path, str, str]]:
    """The keel hooks for ``agent`` in ``root``'s settings files: ``(file, event, command)``.

    Raises:
        UsageError: an unknown agent.
        ConfigError: a settings file is not a JSON object.
    """
    name = _agent(agent)
    found: list[tuple[Path, str, str]] = []
    for rel in settings_files(name):
        path = root / rel
        if not path.is_file():
            continue
        hooks = _load(path).get("hooks")
        if not isinstance(hooks, dict):
            continue
        for event, groups in hooks.items():
            for group in groups if isinstance(groups, list) else []:
                inner = group.get("hooks") if isinstance(group, dict) else None
                for hook in inner if isinstance(inner, list) else []:
                    if _is_mine(hook, name, str(event)):
                        found.append((path, str(event), str(hook["command"])))
    return found


def registered_hook_names(root: Path, agent: str) -> set[str]:
    """What ``agent`` calls keel's registered hooks: each one's ``name``, else its command.

    Gemini CLI matches ``hooksConfig.disabled`` against these.
    """
    names: set[str] = set()
    for path, _, command in registered_hooks(root, agent):
        hooks = _load(path).get("hooks")
        for groups in hooks.values() if isinstance(hooks, dict) else ():
            for group in groups if isinstance(groups, list) else []:
                inner = group.get("hooks") if isinstance(group, dict) else None
                for hook in inner if isinstance(inner, list) else []:
                    if isinstance(hook, dict) and hook.get("command") == command:
                        name = hook.get("name")
                        names.add(name if isinstance(name, str) and name else command)
    return names


def _agent(agent: str) -> Agent:
    if agent not in AGENTS:
        raise UsageError(
            f"unknown agent {agent!r}; expected one of {', '.join(AGENTS)}", code="usage.agent"
        )
    return agent


def _group(agent: Agent, matcher: str | None, command: str) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command}
    if agent == "gemini":
        hook = {"name": "keel", **hook, "timeout": HOOK_TIMEOUT * 1000}
    else:
        hook["timeout"] = HOOK_TIMEOUT
    group: dict[str, Any] = {"hooks": [hook]}
    if matcher is not None:
        group = {"matcher": matcher, **group}
    return group


def _without_keel(groups: Any, agent: str, event: str | None, path: Path) -> list[Any]:
    """``groups`` with keel's hooks taken out, and groups left empty by that dropped."""
    if groups is None:
        return []
    if not isinstance(groups, list):
        raise ConfigError(f"{path}: hooks.{event} must be a list", code="config.hooks")
    kept: list[Any] = []
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list):
            kept.append(group)
            continue
        mine = [h for h in inner if _is_mine(h, agent, event)]
        if not mine:
            kept.append(group)
        elif len(mine) < len(inner):
            kept.append({**group, "hooks": [h for h in inner if h not in mine]})
    return kept


def _is_mine(hook: Any, agent: str, event: str | None) -> bool:
    if not isinstance(hook, dict):
        return False
    command = hook.get("command")
    return isinstance(command, str) and is_keel_hook(command, agent, event)


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}", code="config.hooks_file") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); keel will not overwrite it",
            code="config.hooks_json",
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object", code="config.hooks_json")
    return data


def _hooks_table(data: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' must be an object", code="config.hooks")
    return hooks


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _created_paths(root: Path, path: Path) -> list[str]:
    """The settings file and its directory, relative to ``root``, where they do not exist yet."""
    found: list[str] = []
    if not path.parent.exists():
        found.append(path.parent.relative_to(root).as_posix())
    if not path.exists():
        found.append(path.relative_to(root).as_posix())
    return found


def _read_record(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((state_dir(root) / _RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _created_before(root: Path, agent: Agent) -> set[str]:
    entry = _read_record(root).get(agent)
    created = entry.get("created", []) if isinstance(entry, dict) else []
    return {str(c) for c in created}


def _recorded_exclude(root: Path, agent: str) -> dict[str, str] | None:
    entry = _read_record(root).get(agent)
    exclude = entry.get("exclude") if isinstance(entry, dict) else None
    if isinstance(exclude, dict) and all(isinstance(exclude.get(k), str) for k in ("file", "line")):
        return {"file": exclude["file"], "line": exclude["line"]}
    return None


def _keep_out_of_git(
    root: Path, path: Path, before: dict[str, str] | None
) -> dict[str, str] | None:
    """List ``path`` in the repository's exclude file; the record of a line keel added.

    None when there is no repository, or the line was there already and not keel's (it stays,
    and ``remove_hooks`` leaves it). A file that cannot be written is left as it was
    (``placement`` reports the registration as not excluded).
    """
    repo = gitexclude.repository(root)
    if repo is None:
        return None
    entry = {"file": str(repo.exclude), "line": gitexclude.pattern(repo, path)}
    try:
        added = gitexclude.add(repo.exclude, entry["line"])
    except OSError:
        return before
    return entry if added or before == entry else None


def _drop_exclude(entry: dict[str, str]) -> None:
    # the hooks are out; a line left in the exclude file only hides a file
    with contextlib.suppress(OSError):
        gitexclude.remove(Path(entry["file"]), entry["line"])


def _remember(root: Path, agent: str, created: list[str], exclude: dict[str, str] | None) -> None:
    record = _read_record(root)
    entry = record.setdefault(agent, {"created": []})
    entry["created"] = sorted({*entry.get("created", []), *created})
    if exclude is None:
        entry.pop("exclude", None)
    else:
        entry["exclude"] = exclude
    _write(ensure_state_dir(root) / _RECORD, record)


def _forget(root: Path, agent: str) -> set[str]:
    record = _read_record(root)
    entry = record.pop(agent, None)
    if entry is not None:
        _write(ensure_state_dir(root) / _RECORD, record)
    created = entry.get("created", []) if isinstance(entry, dict) else []
    return {str(c) for c in created}
