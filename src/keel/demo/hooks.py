"""Demo section: `keel init --agent claude`, then Claude Code's hook calls answered by keel.

The hook payloads are the shapes Claude Code sends on stdin (see shared/reference/hook-captures);
here they go through the same code path as a real client's, as a subprocess of ``keel hook``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from keel.core.errors import DemoFailed
from keel.core.isolated import launcher_argv
from keel.hook.install import default_keel_command, install_hooks
from keel.init import init_workspace

SESSION = "demo-hooks-0001"


def _payload(root: Path, event: str, tool: str, tool_input: dict[str, str], n: int) -> str:
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(root / "transcript.jsonl"),
            "cwd": str(root),
            "permission_mode": "default",
            "hook_event_name": event,
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": f"toolu_demo_{n:02d}",
        }
    )


def _hook(root: Path, event: str, stdin: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KEEL_HOOKD": "0", "CLAUDE_PROJECT_DIR": str(root)}
    return subprocess.run(
        [*default_keel_command(), "hook", event, "--agent", "claude"],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=60,
    )


def run(console: Console, base: Path) -> None:
    """Register Claude Code hooks, answer three tool calls, show the session's timeline."""
    root = base / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_workspace(root, "developer")
    (settings,) = install_hooks(root, "claude", keel_command=default_keel_command())
    console.print(f"keel init --agent claude: hooks registered in {settings.relative_to(root)}")
    calls = [
        ("Bash", {"command": "pytest -q"}),
        ("Bash", {"command": "git push --force origin main"}),
        ("Write", {"file_path": str(root / ".env"), "content": "TOKEN=x\n"}),
    ]
    for n, (tool, tool_input) in enumerate(calls):
        out = _hook(root, "PreToolUse", _payload(root, "PreToolUse", tool, tool_input, n))
        answer = json.loads(out.stdout) if out.stdout.strip() else {}
        decision = answer.get("hookSpecificOutput", {}).get("permissionDecision", "allow")
        reason = answer.get("hookSpecificOutput", {}).get("permissionDecisionReason", "")
        subject = tool_input.get("command") or tool_input.get("file_path", "")
        console.print(
            f"  PreToolUse {tool} {escape(repr(subject))} -> [bold]{decision}[/] {escape(reason)}"
        )
        expected = "allow" if n == 0 else "deny"
        if decision != expected or out.returncode != 0:
            raise DemoFailed(f"hook answered {decision} (rc {out.returncode}): {out.stderr}")
    show = subprocess.run(
        launcher_argv("show", SESSION, "--workspace", str(root)),  # isolated, as keel runs keel
        capture_output=True,
        text=True,
        check=True,
    )
    console.print(f"keel show {SESSION}:")
    for line in show.stdout.splitlines()[3:]:
        console.print(f"  {line}", markup=False, highlight=False)
