"""Run the real Claude Code, Codex and Gemini CLIs offline against a fake model, with keel's hooks.

Every run gets its own HOME (and CODEX_HOME), the no-telemetry settings from
reference/real-clients.md, and a model server on 127.0.0.1 only. The clients are found under
``$KEEL_CLIENTS_DIR`` (default ``<repo>/.clients``), installed by ``scripts/install-clients.sh``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fakes"))

from fake_models import FakeModel, Turn

from _support import keel, make_workspace
from keel.hook.install import install_hooks

REPO = Path(__file__).resolve().parents[2]
BINARIES = {
    "claude": "claude/node_modules/.bin/claude",
    "codex": "codex/node_modules/.bin/codex",
    "gemini": "gemini/node_modules/.bin/gemini",
}
PROVIDER = {"claude": "anthropic", "codex": "openai", "gemini": "gemini"}
RUN_TIMEOUT = 180

__all__ = [
    "FakeModel",
    "Run",
    "Turn",
    "client_binary",
    "codex_home",
    "new_project",
    "run_client",
]


def clients_dir() -> Path:
    return Path(os.environ.get("KEEL_CLIENTS_DIR") or REPO / ".clients")


def client_binary(agent: str) -> Path:
    """The client's executable, or a skip (a failure when KEEL_REQUIRE_ALL=1)."""
    path = clients_dir() / BINARIES[agent]
    if not path.exists():
        reason = (
            f"{agent} is not installed at {path}; run scripts/install-clients.sh {clients_dir()}"
        )
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH") if os.environ.get(
            "KEEL_REQUIRE_ALL"
        ) == "1" else pytest.skip("no node")
    return path


@dataclass
class Run:
    """One client run: its project, exit code, output and the fake model's log."""

    project: Path
    proc: subprocess.CompletedProcess[str]
    model: FakeModel

    @property
    def told_model(self) -> str:
        """Everything the client sent the model in main requests, as JSON text."""
        return self.model.all_text()

    def diagnose(self) -> str:
        """What went on, for assertion messages: client output, keel's errors and decisions."""
        lines = [
            f"rc={self.proc.returncode}",
            "stdout: " + self.proc.stdout[-1500:],
            "stderr: " + self.proc.stderr[-1500:],
        ]
        errors = self.project / ".keel" / "hook-errors.jsonl"
        if errors.exists():
            lines.append("hook errors: " + errors.read_text()[-2000:])
        try:
            from keel.journal import open_journal

            with open_journal(self.project) as journal:
                for event in journal.events():
                    lines.append(f"journal {event.kind}: {str(event.payload)[:300]}")
        except Exception as exc:  # diagnostics only
            lines.append(f"journal unreadable: {exc}")
        return "\n".join(lines)

    def result_json(self) -> Any:
        out = self.proc.stdout.strip()
        try:
            return json.loads(out)
        except ValueError:
            return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def new_project(base: Path, keel_toml: str, files: dict[str, str] | None = None) -> Path:
    return make_workspace(base / "proj", keel_toml=keel_toml, files=files, commit=True)


def make_base() -> Path:
    base = Path(tempfile.mkdtemp(prefix="keel-client-", dir="/tmp"))
    base.chmod(0o755)
    return base


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    if "KEEL_STATE_DIR" in os.environ:  # the hooks share the test's journal key and heads
        env["KEEL_STATE_DIR"] = os.environ["KEEL_STATE_DIR"]
    env.update(extra)
    return env


def run_client(
    agent: str,
    project: Path,
    turns: list[Turn],
    *,
    prompt: str = "do the task",
    install: bool = True,
    final_text: str = "Finished.",
    extra_args: list[str] | None = None,
    before_turn: Callable[[int], None] | None = None,
    hook_cmd: list[str] | None = None,
    claude_allowed_tools: str | None = "Bash,Read,Edit,Write",
    env: dict[str, str] | None = None,
    codex_trusted: bool = True,
) -> Run:
    """Install keel's hooks for ``agent`` in ``project`` and run the client once.

    ``claude_allowed_tools=None`` runs Claude Code without ``--allowedTools`` and
    ``--permission-mode acceptEdits``, so its own permission check decides (and refuses in -p).
    ``env`` adds to (or overrides) the client's environment (its HOME is always
    ``home-AGENT`` next to the project). ``codex_trusted=False`` leaves Codex's trust of the
    project as ``$CODEX_HOME/config.toml`` (``codex_home(project)``) has it, instead of
    writing the trust entry: a config from an earlier run is kept, only the model's URL is
    updated.
    """
    binary = client_binary(agent)
    env_extra = dict(env or {})
    if install and hook_cmd:
        install_hooks(project, agent, keel_command=hook_cmd)
    elif install:
        # what a user does: `keel init --agent AGENT` in the repository
        init = keel("init", "--agent", agent, "--workspace", str(project))
        assert init.returncode == 0, init.stderr
    home = project.parent / f"home-{agent}"
    home.mkdir(exist_ok=True)
    model_server = FakeModel(PROVIDER[agent], turns, final_text=final_text, before_turn=before_turn)
    with model_server as model:
        match agent:
            case "claude":
                argv, env = _claude(binary, home, model, prompt, claude_allowed_tools)
            case "codex":
                argv, env = _codex(binary, home, project, model, prompt, codex_trusted)
            case "gemini":
                argv, env = _gemini(binary, home, project, model, prompt)
            case _:
                raise AssertionError(agent)
        env.update(env_extra)
        if extra_args and agent == "codex":
            argv[-1:-1] = extra_args  # codex exec takes the prompt last
        elif extra_args:
            argv += extra_args
        proc = subprocess.run(
            argv,
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    return Run(project, proc, model)


def _claude(
    binary: Path,
    home: Path,
    model: FakeModel,
    prompt: str,
    allowed_tools: str | None = "Bash,Read,Edit,Write",
) -> tuple[list[str], dict[str, str]]:
    env = _env(
        home,
        {
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "dummy",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        },
    )
    argv = [
        str(binary),
        "-p",
        prompt,
        "--output-format",
        "json",
        "--tools",
        "Bash,Read,Edit,Write",
    ]
    if allowed_tools is not None:
        argv += ["--allowedTools", allowed_tools, "--permission-mode", "acceptEdits"]
    return argv, env


def codex_home(project: Path) -> Path:
    """The ``CODEX_HOME`` ``run_client`` gives Codex for ``project``."""
    return project.parent / "home-codex" / "codex_home"


def _codex(
    binary: Path,
    home: Path,
    project: Path,
    model: FakeModel,
    prompt: str,
    trusted: bool = True,
) -> tuple[list[str], dict[str, str]]:
    codex_home = home / "codex_home"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = codex_home / "config.toml"
    base_url = f'base_url = "{model.url}/v1"'
    if not trusted and config.exists():
        config.write_text(re.sub(r"^base_url = .*$", base_url, config.read_text(), flags=re.M))
    else:
        config.write_text(_codex_config(base_url, project, trusted))
    env = _env(home, {"CODEX_HOME": str(codex_home), "FAKE_API_KEY": "dummy"})
    argv = [
        str(binary),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-hook-trust",
        prompt,
    ]
    return argv, env


def _codex_config(base_url: str, project: Path, trusted: bool) -> str:
    text = f"""
model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
{base_url}
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false
in_app_updates = false
"""
    if not trusted:
        return text
    # keel's hooks live in the project's .codex/hooks.json, which Codex reads for trusted projects.
    return text + f'\n[projects."{project}"]\ntrust_level = "trusted"\n'


GEMINI_SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
}


def _gemini(
    binary: Path, home: Path, project: Path, model: FakeModel, prompt: str
) -> tuple[list[str], dict[str, str]]:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(GEMINI_SETTINGS))
    env = _env(
        home,
        {
            "GEMINI_API_KEY": "dummy",
            "GOOGLE_GEMINI_BASE_URL": model.url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        },
    )
    argv = [str(binary), "-p", prompt, "--output-format", "json", "--yolo"]
    return argv, env
