"""Registering keel's hooks in a client's project settings, and taking them out again.

- Claude Code: ``.claude/settings.json``;
- Codex CLI: ``.codex/hooks.json`` (same shape as Claude's ``hooks`` object);
- Gemini CLI: ``.gemini/settings.json`` (timeouts in milliseconds, a ``name`` per hook).

Installing merges: the user's own hooks and every other setting stay as they are, keel's
entries are recognised by their command (``... hook EVENT --agent AGENT``) and replaced, never
duplicated. Files and directories keel had to create are remembered in
``.keel/installed-hooks.json`` so that ``remove_hooks`` undoes exactly what was added: keel's
entries go, the user's stay, and a settings file keel created is deleted once it is empty.

The hook command is the real interpreter (or the console script next to it), never a shim
on PATH: a pyenv shim adds about 50 ms to every tool call. The interpreter runs isolated from
the workspace (``default_keel_command``): nothing the agent writes in the project is imported.

**A hook that stays on.** The command registered is the launcher followed by a shell fallback
(``fail_closed_command``): keel's launcher exits only with 0 or 2, so any other status means
keel or its interpreter is missing or broken (a moved checkout, ``make clean``, a deleted
venv: the shell answers 127, Python 1), and the fallback turns it into the clients' blocking
code 2 with a message naming ``keel doctor``, where the client would otherwise run the call.
All three clients run hook commands through a POSIX shell (measured with the pinned clients:
Claude Code 2.1.332 ``/bin/sh -c``, Codex 0.171.0 ``/bin/bash -c``, Gemini CLI 0.61.0
``bash -c``). Only the tool events block on such a failure; the others (a prompt, a finish,
the session's start and end) go on with the message on stderr, since blocking a finish would
keep a broken agent going forever.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keel.core.errors import ConfigError, UsageError
from keel.core.files import write_atomic
from keel.core.root import ensure_state_dir, state_dir
from keel.hook.main import HOOK_TIMEOUT
from keel.hook.protocol import AGENTS, Agent

SETTINGS: dict[Agent, str] = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
}
"""The project settings file keel registers its hooks in, per client."""
LOCAL_SETTINGS: dict[Agent, str] = {"claude": ".claude/settings.local.json"}
"""The personal (not shared, not committed) settings file, for clients that have one."""
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


def default_keel_command() -> list[str]:
    """The command that runs keel's hook from this interpreter, past any PATH shim.

    ``python -I -S <keel>/_launch.py`` (``keel.core.isolated``): isolated (the clients run hooks in
    the project, and ``-c`` or ``-m`` would put it first on ``sys.path``, so that a module the
    agent wrote there ran in keel's hook), a script by absolute path, and without site (its
    ``.pth`` files cost a hook up to the interpreter's own start; ``keel.hook.main`` loads site
    only when the call must be decided in process). Before issue 22 keel registered
    ``python -S -c PROGRAM``; ``is_keel_hook`` recognises both, so ``keel init`` replaces an
    old registration and ``keel doctor`` reports one.
    """
    from keel.core.isolated import launcher_argv

    return launcher_argv(site=False)


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
    code = 2 if event in TOOL_EVENTS and not fail_open else 0
    return (
        f'{command}; s=$?; [ $s = 0 ] || [ $s = 2 ] || {{ echo "{BROKEN_MESSAGE}" >&2; '
        f"s={code}; }}; exit $s"
    )


def registered_command(
    keel_command: Sequence[str], agent: str, event: str, extra: Sequence[str] = ()
) -> str:
    """The command ``install_hooks`` registers for ``event``: the hook and its fallback."""
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

    Both forms are recognised: the bare hook call keel registered before, and the hook call
    with its fail-closed fallback (``registered_command``); and whatever starts keel (the
    isolated launcher of ``default_keel_command``, the ``python -S -c`` program keel registered
    before issue 22, a console script), since only the words ``hook EVENT --agent A`` count.
    """
    try:
        words = command_words(command)
    except ValueError:
        return False
    for i, word in enumerate(words[:-3]):
        if word == "hook" and words[i + 2 : i + 4] == ["--agent", agent]:
            return event is None or words[i + 1] == event
    return False


def is_fail_closed(command: str) -> bool:
    """True when ``command`` carries the fallback of ``fail_closed_command``."""
    return "[ $s = 0 ] || [ $s = 2 ] ||" in command


def settings_files(agent: str) -> tuple[str, ...]:
    """Every project settings file (relative to the root) keel may register ``agent`` in."""
    name = _agent(agent)
    local = LOCAL_SETTINGS.get(name)
    return (SETTINGS[name],) if local is None else (SETTINGS[name], local)


def install_hooks(
    root: Path,
    agent: str,
    *,
    keel_command: Sequence[str],
    extra_args: Sequence[str] = (),
    local: bool = False,
) -> list[Path]:
    """Register keel's hooks for ``agent`` in ``root``'s project settings; the files written.

    Args:
        root: the workspace root.
        agent: ``claude``, ``codex`` or ``gemini``.
        keel_command: the argv that runs keel (``default_keel_command()``).
        extra_args: more arguments for ``keel hook``.
        local: register in the client's personal settings file (``LOCAL_SETTINGS``, Claude
            Code's ``.claude/settings.local.json``) instead of the shared one; keel's hooks
            in the other file are taken out, so they never run twice.

    Raises:
        UsageError: an unknown agent, or ``local`` for a client without a personal file.
        ConfigError: the settings file exists but is not a JSON object (it is left alone).
    """
    name = _agent(agent)
    if local and name not in LOCAL_SETTINGS:
        raise UsageError(
            f"--local: {name} has no personal settings file (only claude: "
            f"{LOCAL_SETTINGS['claude']})",
            code="usage.local",
        )
    rel = LOCAL_SETTINGS[name] if local else SETTINGS[name]
    path = root / rel
    for other in settings_files(name):
        if other != rel:
            _strip_file(root, root / other, name, _created_before(root, name))
    created = _created_paths(root, path)
    data = _load(path)
    hooks = _hooks_table(data, path)
    for event, matcher in HOOKS[name]:
        groups = _without_keel(hooks.get(event), name, event, path)
        command = registered_command(keel_command, name, event, extra_args)
        groups.append(_group(name, matcher, command))
        hooks[event] = groups
    _write(path, data)
    _remember(root, name, created)
    return [path]


def remove_hooks(root: Path, agent: str) -> list[Path]:
    """Take keel's hooks for ``agent`` out of ``root``'s project settings.

    Returns:
        The settings files keel's hooks were taken out of; empty when there were none (a
        file without keel's hooks is left untouched).

    Raises:
        UsageError: an unknown agent.
        ConfigError: a settings file is not a JSON object (it is left alone).
    """
    name = _agent(agent)
    created = _forget(root, name)
    return [
        root / rel for rel in settings_files(name) if _strip_file(root, root / rel, name, created)
    ]


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


def _remember(root: Path, agent: Agent, created: list[str]) -> None:
    record = _read_record(root)
    entry = record.setdefault(agent, {"created": []})
    entry["created"] = sorted({*entry.get("created", []), *created})
    _write(ensure_state_dir(root) / _RECORD, record)


def _forget(root: Path, agent: Agent) -> set[str]:
    record = _read_record(root)
    entry = record.pop(agent, None)
    if entry is not None:
        _write(ensure_state_dir(root) / _RECORD, record)
    created = entry.get("created", []) if isinstance(entry, dict) else []
    return {str(c) for c in created}
