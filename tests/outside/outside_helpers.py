"""Shared by the issue-22 regression suite: the sandbox gate and the registered hook, as run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest


def require_sandbox(backend: str = "auto") -> str:
    """The backend ``keel exec`` uses for ``backend`` here; a skip (a failure in CI) if none.

    A named backend must be exactly that one (Landlock is optional in CI, bwrap is not).
    """
    from keel.sandbox.exec.contain import exec_backend

    got, reason = exec_backend(backend)
    if got is None or (backend != "auto" and got != backend):
        if os.environ.get("KEEL_REQUIRE_ALL") == "1" and backend in ("auto", "bwrap"):
            pytest.fail(f"no {backend} sandbox: {reason}")
        pytest.skip(f"no {backend} sandbox: {reason}")
    return got


def registered_command(root: Path, event: str = "PreToolUse") -> str:
    """The exact command ``keel init --agent claude`` registered for ``event``."""
    settings = json.loads((root / ".claude" / "settings.json").read_text())
    return settings["hooks"][event][0]["hooks"][0]["command"]


def call_hook(
    root: Path,
    event: str,
    payload: dict[str, Any],
    *,
    session: str = "outside",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """One call of the registered hook, as Claude Code makes it: ``/bin/sh -c`` in ``root``."""
    body = {"session_id": session, "cwd": str(root), "hook_event_name": event, **payload}
    return subprocess.run(
        ["/bin/sh", "-c", registered_command(root, event)],
        input=json.dumps(body),
        cwd=root,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


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
