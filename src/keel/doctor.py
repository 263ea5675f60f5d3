"""``keel doctor``: is every client that should be guarded actually guarded?

For each client with keel's hooks in the workspace (or the one asked for), in order:

1. **hooks**: keel's hooks are registered for the client's events, in its settings file, and
   in which form (``keel.hook.install``): per-user (this machine's keel, in Claude Code's
   ``settings.local.json`` or a project file listed in ``.git/info/exclude``) or shared (keel
   from ``PATH``); **git** (a warning): git tracks the file of a per-user registration, so a
   commit would hand this machine's paths to every teammate;
2. **command**: the registered command resolves: its interpreter exists, keel is importable by
   it (with its dependencies), it runs isolated from the workspace (not ``python -c`` or
   ``-m`` without ``-I``, which put the project first on ``sys.path``: keel's form before
   issue 22), and it carries the fail-closed fallback
   (``keel.hook.install.fail_closed_command``). The shared form: a ``keel`` is on ``PATH``
   outside the project (without one, every tool call is blocked);
3. **trust** (Codex): the project is trusted in ``$CODEX_HOME/config.toml``, without which
   Codex never runs the project's hooks; **review** (Codex, a warning): whether Codex recorded
   a review of the hooks, without which ``codex exec`` runs them only with
   ``--dangerously-bypass-hook-trust``;
4. **settings** (Claude Code): no settings file turns hooks off (``disableAllHooks``);
5. **probe**: the exact command string from the settings file, run through ``sh -c`` as the
   client runs it, given a pre-tool payload of a known-dangerous call (``rm -rf /``), must
   answer "blocked" in that client's dialect. The call is only described to the hook; nothing
   runs it. The probe is journaled like any decision, in a session of its own. A command that
   is not isolated is not run (it would import what the agent wrote): the probe fails.

And for the workspace: keel.toml is valid, the sandbox is available (a warning when not: the
text policy then judges alone) and works (``true`` run through ``keel exec``: a sandbox that is
chosen but cannot start fails every shell command keel allows), and whether the emergency stop
is set.

A client is guarded when none of its checks failed; the report is ``ok`` when every client is
guarded, at least one is, and the workspace has no failure. ``quick=True`` skips what starts
processes (the import check and the probe), for ``keel status``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from keel.hook.protocol import AGENTS

Status = Literal["ok", "warn", "fail"]
PROBE_COMMAND = "rm -rf /"
"""The known-dangerous call the probe describes to the hook (never run)."""
PRE_TOOL = {"claude": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}
SHELL_TOOL = {"claude": "Bash", "codex": "Bash", "gemini": "run_shell_command"}
PROJECT_VAR = {"claude": "CLAUDE_PROJECT_DIR", "gemini": "GEMINI_PROJECT_DIR"}
_LAUNCHER_PATH = re.compile(r"sys\.path\.insert\(0, ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\)")
CHECK_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: what was checked, how it went, and what to do about it."""

    name: str
    status: Status
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True, slots=True)
class ClientReport:
    """The checks of one client."""

    agent: str
    checks: tuple[Check, ...]

    @property
    def guarded(self) -> bool:
        """True when no check failed."""
        return all(c.status != "fail" for c in self.checks)

    def problem(self) -> str | None:
        """The first failure, in words; None when guarded."""
        for check in self.checks:
            if check.status == "fail":
                return check.detail
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "agent": self.agent,
            "guarded": self.guarded,
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Everything ``diagnose`` found."""

    root: Path
    workspace: tuple[Check, ...]
    clients: tuple[ClientReport, ...]
    quick: bool = False

    @property
    def ok(self) -> bool:
        """Every client guarded, at least one client, and no workspace failure."""
        return (
            bool(self.clients)
            and all(c.guarded for c in self.clients)
            and all(c.status != "fail" for c in self.workspace)
        )

    def summary(self) -> str:
        """One line: each client guarded or not, and why not."""
        if not self.clients:
            return "NOT guarded: no client has keel's hooks here (keel init --agent NAME)"
        parts = []
        for client in self.clients:
            problem = client.problem()
            parts.append(
                f"{client.agent} guarded"
                if problem is None
                else f"{client.agent} NOT guarded ({problem})"
            )
        for check in self.workspace:
            if check.status == "fail":
                parts.append(f"{check.name}: {check.detail}")
        text = "; ".join(parts)
        return f"{text} (run keel doctor for the end-to-end probe)" if self.quick else text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``keel doctor --json``)."""
        return {
            "root": str(self.root),
            "ok": self.ok,
            "quick": self.quick,
            "workspace": [c.to_dict() for c in self.workspace],
            "clients": [c.to_dict() for c in self.clients],
        }


def diagnose(
    root: Path,
    agents: Sequence[str] | None = None,
    *,
    quick: bool = False,
    env: Mapping[str, str] | None = None,
) -> DoctorReport:
    """Check ``root``'s workspace and each client in ``agents`` (default: those registered).

    Never raises for what it finds: every problem is a failed check.
    """
    from keel.hook.install import registered_hooks

    env = dict(os.environ if env is None else env)
    workspace = _workspace_checks(root, quick)
    if agents is None:
        chosen: list[str] = []
        for agent in AGENTS:
            try:
                if registered_hooks(root, agent):
                    chosen.append(agent)
            except Exception:  # an unreadable settings file: that client is checked, and fails
                chosen.append(agent)
    else:
        chosen = list(agents)
    clients = tuple(ClientReport(a, tuple(_client_checks(root, a, quick, env))) for a in chosen)
    return DoctorReport(root, tuple(workspace), clients, quick)


# -- the workspace ---------------------------------------------------------------------------


def _workspace_checks(root: Path, quick: bool) -> list[Check]:
    from keel.config import config_for
    from keel.core.errors import KeelError
    from keel.core.root import CONFIG_NAME
    from keel.core.stop import stop_status

    checks: list[Check] = []
    config = None
    try:
        config = config_for(root)
        where = root / CONFIG_NAME
        what = f"{where} is valid" if where.exists() else "no keel.toml: the developer defaults"
        checks.append(Check("config", "ok", what))
    except KeelError as exc:
        checks.append(
            Check(
                "config",
                "fail",
                f"keel.toml is invalid, so every call is denied: {exc.message}",
                "fix keel.toml (keel policy explain shows the error)",
            )
        )
    if config is not None:
        if config.sandbox.contain == "off":
            checks.append(
                Check(
                    "sandbox", "warn", '[sandbox] contain = "off": allowed commands run uncontained'
                )
            )
        else:
            try:
                from keel.sandbox.exec.contain import exec_backend

                backend, reason = exec_backend(config.sandbox.backend)
            except Exception as exc:
                backend, reason = None, f"cannot check: {exc}"
            if backend is not None:
                ran = None if quick or stop_status(root).active else _contained_run(root, backend)
                if ran is None:
                    checks.append(Check("sandbox", "ok", f"commands run contained ({backend})"))
                else:
                    checks.append(ran)
            elif config.sandbox.contain == "always":
                checks.append(
                    Check(
                        "sandbox",
                        "warn",
                        f'no sandbox ({reason}); contain = "always": shell commands are denied',
                        "keel sandbox check",
                    )
                )
            else:
                checks.append(
                    Check(
                        "sandbox",
                        "warn",
                        f"no sandbox ({reason}): the text policy judges alone, more strictly",
                        "keel sandbox check",
                    )
                )
    stop = stop_status(root)
    if stop.active:
        checks.append(
            Check("stop", "warn", f"the emergency stop is set: {stop.reason}", "keel resume")
        )
    from keel.hook.server import socket_problem

    hookd = socket_problem(root)
    if hookd is not None:  # not a failure: every call is still decided, in process
        checks.append(Check("hookd", "warn", hookd.context["reason"], hookd.context["fix"]))
    return checks


def _contained_run(root: Path, backend: str) -> Check:
    """Run ``true`` through ``keel exec`` in ``root``, as every allowed shell command runs."""
    from keel.core.installed import hint
    from keel.sandbox.exec.contain import exec_argv

    try:
        proc = subprocess.run(
            exec_argv(root, ["true"], timeout=CHECK_TIMEOUT),
            capture_output=True,
            text=True,
            cwd=root,
            timeout=CHECK_TIMEOUT + 10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        proc = None
        why = str(exc)
    else:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    if proc is not None and proc.returncode == 0:
        return Check("sandbox", "ok", f"commands run contained ({backend}: a contained `true` ran)")
    return Check(
        "sandbox",
        "fail",
        f"keel exec cannot run a contained command, so every shell command keel allows fails: "
        f"{why}",
        "see `keel sandbox check` and [sandbox] in keel.toml; a missing module: " + hint("sandbox"),
    )


# -- one client ------------------------------------------------------------------------------


def _client_checks(root: Path, agent: str, quick: bool, env: dict[str, str]) -> list[Check]:
    from keel.core.errors import KeelError
    from keel.hook.install import HOOKS, is_shared, registered_hooks, settings_files

    again = f"keel init --agent {agent}"
    try:
        found = registered_hooks(root, agent)
    except KeelError as exc:
        return [Check("hooks", "fail", exc.message, f"fix the file, then {again}")]
    files = ", ".join(settings_files(agent))
    if not found:
        return [
            Check("hooks", "fail", f"keel's hooks are not registered (looked in {files})", again)
        ]
    by_event: dict[str, list[tuple[Path, str]]] = {}
    for path, event, command in found:
        by_event.setdefault(event, []).append((path, command))
    expected = [event for event, _ in HOOKS[agent]]  # pyright: ignore[reportArgumentType]
    missing = [e for e in expected if e not in by_event]
    pre = PRE_TOOL[agent]
    checks: list[Check] = []
    where = sorted({str(p.relative_to(root)) for p, _, _ in found})
    if pre in missing:
        checks.append(Check("hooks", "fail", f"no {pre} hook: tool calls are not checked", again))
    elif missing:
        checks.append(Check("hooks", "warn", f"hooks missing for {', '.join(missing)}", again))
    elif any(len(v) > 1 for v in by_event.values()):
        checks.append(
            Check("hooks", "warn", f"keel's hooks are registered twice ({', '.join(where)})", again)
        )
    else:
        checks.append(Check("hooks", "ok", f"registered in {', '.join(where)}{_form(root, found)}"))
    if pre not in by_event:
        return checks
    command = by_event[pre][0][1]
    if is_shared(command):
        checks.append(_shared_command_check(root, quick, env))
    else:
        checks.append(_command_check(command, agent, quick))
    if not quick:
        checks.extend(_git_checks(root, agent))
    if agent == "codex":
        checks.extend(_codex_checks(root, env))
    if agent == "claude":
        checks.extend(_claude_settings_checks(root, env))
    if agent == "gemini":
        checks.extend(_gemini_settings_checks(root, env))
    if quick:
        return checks
    if _runs_isolated(command):
        checks.append(_probe(root, agent, command, env))
    else:  # doctor runs nothing that imports what the agent wrote
        checks.append(Check("probe", "fail", "not run: the command is not isolated", again))
    return checks


def _form(root: Path, found: list[tuple[Path, str, str]]) -> str:
    """The registration's form in words, for the hooks check: per-user or shared."""
    from keel.hook import gitexclude
    from keel.hook.install import is_shared

    if any(is_shared(command) for _, _, command in found):
        return " (shared: keel from PATH)"
    repo = gitexclude.repository(root)
    if repo is not None and all(
        gitexclude.listed(repo.exclude, gitexclude.pattern(repo, path)) for path, _, _ in found
    ):
        return " (per-user, listed in .git/info/exclude)"
    return " (per-user)"


def _git_checks(root: Path, agent: str) -> list[Check]:
    """A warning when git tracks the file of a per-user registration."""
    from keel.hook.install import placement

    try:
        where = placement(root, agent)
    except Exception:  # the hooks check has said what is wrong with the file
        return []
    if where is None or where.shared or not where.tracked:
        return []
    rel = where.settings.relative_to(root).as_posix()
    return [
        Check(
            "git",
            "warn",
            f"git tracks {rel}, which holds this machine's per-user hook command: committed, "
            "it blocks every tool call of a teammate",
            f"keel init --agent {agent} --shared (a command for every teammate), or keep "
            f"{rel} out of your commits",
        )
    ]


def _shared_command_check(root: Path, quick: bool, env: dict[str, str]) -> Check:
    """The shared form runs the first ``keel`` on PATH outside the project: is there one?"""
    import shutil

    from keel import __version__
    from keel.core.gitsafe import safe_path
    from keel.hook.install import INSTALL_KEEL

    search = safe_path(env.get("PATH"), str(root))
    found = shutil.which("keel", path=search) if search else None
    if found is None:
        return Check(
            "command",
            "fail",
            "the shared registration runs keel from PATH, and there is no keel on PATH outside "
            "the project here: every tool call is blocked",
            INSTALL_KEEL,
        )
    version = None
    if not quick:
        try:
            proc = subprocess.run(
                [found, "--version"], capture_output=True, text=True, cwd=root, env=env,
                timeout=CHECK_TIMEOUT, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Check("command", "fail", f"{found} does not start: {exc}", INSTALL_KEEL)
        words = proc.stdout.split()
        if proc.returncode != 0 or not words:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return Check("command", "fail", f"{found} does not run: {last}", INSTALL_KEEL)
        version = words[-1]
    if version is not None and version != __version__:
        return Check(
            "command",
            "warn",
            f"the hook runs keel {version} ({found}), this is keel {__version__}",
            f"upgrade the keel on PATH ({found})",
        )
    return Check(
        "command", "ok", f"{found} (from PATH) runs keel" + (f" {version}" if version else "")
    )


def _runs_isolated(command: str) -> bool:
    """False when the registered ``command`` would import from the directory it runs in.

    That is Python started with ``-c`` or ``-m`` and without ``-I`` or ``-P``: both put the
    current directory (the project, where the clients run hooks) first on ``sys.path``, so a
    ``select.py`` the agent wrote there runs in keel's hook, outside the sandbox. keel
    registered ``python -S -c PROGRAM`` before issue 22. Anything else (keel's launcher by
    absolute path under ``-I``, a console script) imports nothing from that directory. A
    command that does not parse counts as not isolated.
    """
    from keel.hook.install import command_words

    try:
        words = command_words(command)
    except ValueError:
        return False
    safe, i = False, 1
    while i < len(words):
        word = words[i]
        if word in ("-", "--") or not word.startswith("-") or word.startswith("--"):
            return True  # a script (or a program that is not Python): no -c, no -m
        for j, flag in enumerate(word[1:]):
            if flag in "IP":
                safe = True
            elif flag in "cm":
                return safe
            elif flag in "WX":  # takes a value: the rest of this word, else the next word
                i += j == len(word) - 2
                break
        i += 1
    return True


def _command_check(command: str, agent: str, quick: bool) -> Check:
    from keel import __version__
    from keel.hook.install import command_words, is_fail_closed

    again = f"keel init --agent {agent}"
    try:
        words = command_words(command)
    except ValueError as exc:
        return Check("command", "fail", f"the registered command cannot be parsed: {exc}", again)
    program = words[0] if words else ""
    if not program or not os.path.isfile(program) or not os.access(program, os.X_OK):
        return Check(
            "command",
            "fail",
            f"the registered interpreter {program or '(none)'} does not exist or cannot run "
            "(a moved checkout or a deleted venv?)",
            f"reinstall keel, then {again}",
        )
    parent = _launcher_dir(words)
    if parent is not None and not _keel_in(parent):
        return Check(
            "command",
            "fail",
            f"keel is not in {parent} any more, where the registered command imports it from",
            f"reinstall keel, then {again}",
        )
    version = None
    if not quick:
        cwd = None
        if parent is not None:
            from keel.hook.install import ROOT_PROGRAM

            code = (
                ROOT_PROGRAM + ";import keel,keel.config,keel.hook.runner;print(keel.__version__)"
            )
            # isolated (no current directory, no PYTHON* variables), in keel's own directory
            argv, cwd = [program, "-I", "-c", code, parent], _existing_dir(parent)
        else:
            argv = [program, "--version"]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, cwd=cwd, timeout=CHECK_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Check("command", "fail", f"the registered command does not start: {exc}", again)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return Check(
                "command",
                "fail",
                f"keel cannot be imported by {program}: {last}",
                f"reinstall keel, then {again}",
            )
        version = proc.stdout.strip().split()[-1] if proc.stdout.strip() else None
    if not _runs_isolated(command):
        return Check(
            "command",
            "fail",
            "the registered command starts Python with the project first on sys.path (-c or -m "
            "without -I, as keel registered before): a module the agent writes there "
            "(select.py, json.py) would run in keel's hook, outside the sandbox",
            again,
        )
    if not is_fail_closed(command):
        return Check(
            "command",
            "warn",
            "the registered command has no fail-closed fallback: if keel or its Python goes "
            "away, the client runs every call",
            again,
        )
    if version is not None and version != __version__:
        return Check(
            "command",
            "warn",
            f"the hook runs keel {version}, this is keel {__version__}",
            again,
        )
    return Check("command", "ok", f"{program} runs keel" + (f" {version}" if version else ""))


def _keel_in(parent: str) -> bool:
    """Whether keel's hook is in the import root ``parent`` (any Python's, for a template)."""
    from keel.hook.install import VERSION_SLOT

    if VERSION_SLOT not in parent:
        return os.path.isfile(os.path.join(parent, "keel", "hook", "main.py"))
    import glob

    head, _, tail = parent.partition(VERSION_SLOT)
    pattern = glob.escape(head) + "[0-9]*.[0-9]*" + glob.escape(tail)
    return any(
        os.path.isfile(os.path.join(p, "keel", "hook", "main.py")) for p in glob.glob(pattern)
    )


def _existing_dir(parent: str) -> str:
    """``parent`` where it is a directory, else ``/`` (a template names no one directory)."""
    return parent if os.path.isdir(parent) else "/"


def _launcher_dir(words: list[str]) -> str | None:
    """The import root of keel in a registered command of keel's own form, else None.

    ``python -I -S -c HOOK_PROGRAM ROOT`` (``default_keel_command``: ROOT may hold
    ``python{X.Y}``), ``python -I -S <root>/keel/_launch.py`` (before issue 24), or the
    directory the ``python -S -c PROGRAM`` form of before issue 22 puts on ``sys.path``.
    """
    from keel.hook.install import import_root_of

    root = import_root_of(words)
    if root is not None:
        return root
    if len(words) >= 4 and words[1:3] == ["-I", "-S"] and words[3].endswith("/keel/_launch.py"):
        return os.path.dirname(os.path.dirname(words[3]))
    if len(words) < 4 or words[1:3] != ["-S", "-c"]:
        return None
    match = _LAUNCHER_PATH.search(words[3])
    if match is None:
        return None
    import ast

    try:
        value = ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError):
        return None
    return str(value)


def _codex_checks(root: Path, env: dict[str, str]) -> list[Check]:
    from keel.core.errors import KeelError
    from keel.hook.codex_config import codex_config_path, hook_reviews, project_trust

    config = codex_config_path(env)
    try:
        level = project_trust(root, env)
        reviews = hook_reviews(root, env)
    except KeelError as exc:
        return [Check("trust", "fail", exc.message, "fix the Codex config")]
    checks: list[Check] = []
    if level == "trusted":
        checks.append(Check("trust", "ok", f"the project is trusted in {config}"))
    else:
        state = f'trust_level = "{level}"' if level else "no entry"
        checks.append(
            Check(
                "trust",
                "fail",
                f"Codex does not trust this project ({state} in {config}), so it never runs "
                "the project's hooks",
                "keel init --agent codex --trust",
            )
        )
    if reviews:
        checks.append(
            Check("review", "ok", f"Codex recorded a review of {reviews} of keel's hooks")
        )
    else:
        checks.append(
            Check(
                "review",
                "warn",
                "Codex has no review of keel's hooks recorded: `codex exec` runs them only with "
                "--dangerously-bypass-hook-trust",
                "review them with /hooks in the Codex TUI, or pass "
                "--dangerously-bypass-hook-trust to codex exec",
            )
        )
    return checks


def _claude_settings_checks(root: Path, env: dict[str, str]) -> list[Check]:
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    for path in (
        root / ".claude" / "settings.json",
        root / ".claude" / "settings.local.json",
        home / ".claude" / "settings.json",
    ):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("disableAllHooks") is True:
            return [
                Check(
                    "settings",
                    "fail",
                    f"{path} sets disableAllHooks: Claude Code runs no hooks",
                    f"remove disableAllHooks from {path}",
                )
            ]
    return []


def _gemini_settings_files(root: Path, env: dict[str, str]) -> list[Path]:
    """Gemini CLI's settings files in the order it merges them (a later boolean wins).

    System defaults, the user's, the project's, then the system's own settings, where Gemini
    CLI 0.x looks for them (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``,
    ``GEMINI_CLI_SYSTEM_DEFAULTS_PATH`` and ``GEMINI_CLI_HOME`` move them).
    """
    system = Path(env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json")
    defaults = env.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH")
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or os.path.expanduser("~"))
    return [
        Path(defaults) if defaults else system.parent / "system-defaults.json",
        home / ".gemini" / "settings.json",
        root / ".gemini" / "settings.json",
        system,
    ]


def _gemini_settings_checks(root: Path, env: dict[str, str]) -> list[Check]:
    """Fail when Gemini CLI's settings switch hooks off, or keel's hook by its name."""
    enabled: tuple[bool, Path] | None = None
    disabled: list[tuple[str, Path]] = []
    for path in _gemini_settings_files(root, env):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        config = data.get("hooksConfig") if isinstance(data, dict) else None
        if not isinstance(config, dict):
            continue
        if isinstance(config.get("enabled"), bool):
            enabled = (config["enabled"], path)
        names = config.get("disabled")
        disabled += (
            [(n, path) for n in names if isinstance(n, str)] if isinstance(names, list) else []
        )
    if enabled is not None and not enabled[0]:
        where = enabled[1]
        return [
            Check(
                "settings",
                "fail",
                f"{where} sets hooksConfig.enabled to false: Gemini CLI runs no hooks",
                f"remove hooksConfig.enabled from {where}",
            )
        ]
    for name, where in disabled:
        if name in _gemini_hook_names(root):
            return [
                Check(
                    "settings",
                    "fail",
                    f"{where} lists {name!r} in hooksConfig.disabled: Gemini CLI skips keel's hook",
                    f"remove {name!r} from hooksConfig.disabled in {where}",
                )
            ]
    return []


def _gemini_hook_names(root: Path) -> set[str]:
    """The names Gemini CLI knows keel's hooks by: a hook's ``name``, else its command."""
    from keel.hook.install import registered_hook_names

    return registered_hook_names(root, "gemini")


def _probe(root: Path, agent: str, command: str, env: dict[str, str]) -> Check:
    """Run the registered command as the client would, with a dangerous call; blocked?"""
    from keel.core.events import PROBE_SESSION_PREFIX

    session = f"{PROBE_SESSION_PREFIX}{os.urandom(4).hex()}"
    event = PRE_TOOL[agent]
    payload: dict[str, Any] = {
        "session_id": session,
        "cwd": str(root),
        "hook_event_name": event,
        "tool_name": SHELL_TOOL[agent],
        "tool_input": {"command": PROBE_COMMAND},
    }
    if agent == "gemini":
        payload["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    else:
        payload["tool_use_id"] = f"toolu_{session}"
        payload["permission_mode"] = "default"
    child = dict(env)  # KEEL_STATE_DIR and the rest are kept: the hook runs as the client's
    var = PROJECT_VAR.get(agent)
    if var:
        child[var] = str(root)
    try:
        proc = subprocess.run(
            ["sh", "-c", command],
            input=json.dumps(payload).encode(),
            capture_output=True,
            cwd=root,
            env=child,
            timeout=CHECK_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("probe", "fail", f"the registered command did not answer: {exc}")
    blocked, how = _blocked(agent, proc.returncode, proc.stdout)
    shown = f"`{PROBE_COMMAND}` through the registered command"
    if blocked:
        return Check("probe", "ok", f"{shown}: blocked ({how})")
    err = " ".join(proc.stderr.decode("utf-8", "replace").split())[-300:]
    return Check(
        "probe",
        "fail",
        f"{shown}: NOT blocked (exit {proc.returncode}, {how}){f': {err}' if err else ''}",
        f"keel init --agent {agent}",
    )


def _blocked(agent: str, code: int, stdout: bytes) -> tuple[bool, str]:
    """Whether a pre-tool answer blocks the call in ``agent``'s dialect, and how it said so."""
    if code == 2:
        return True, "exit 2"
    if code != 0:
        return False, f"exit {code}, which the client treats as go on"
    try:
        answer = json.loads(stdout) if stdout.strip() else {}
    except ValueError:
        return False, "stdout is not JSON"
    if not isinstance(answer, dict):
        return False, "stdout is not a JSON object"
    if agent == "gemini":
        decision = answer.get("decision")
        return decision in ("deny", "block"), f"decision {decision!r}"
    spec = answer.get("hookSpecificOutput")
    if isinstance(spec, dict) and spec.get("hookEventName") == "PreToolUse":
        verdict = spec.get("permissionDecision")
        return verdict == "deny", f"permissionDecision {verdict!r}"
    return False, "no permissionDecision"
