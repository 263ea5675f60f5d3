"""Run the real ``keel`` console script on hostile input and check how it fails."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from _support import TIMEOUT
from _support import keel as run_keel

HOOK_EVENTS = {"claude": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}


@dataclass(frozen=True, slots=True)
class Run:
    """What one ``keel`` process did."""

    rc: int
    out: str
    err: str


def keel(args: list[str], cwd: Path, stdin: bytes = b"", timeout: float = TIMEOUT) -> Run:
    """``_support.keel`` with ``stdin``, as a ``Run`` (what these tests read)."""
    proc = run_keel(*args, cwd=cwd, input=stdin, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def assert_error(run: Run, rc: int, code: str) -> str:
    """One ``keel: error: ... [code]`` line on stderr (``code`` may end in ``.``), exit ``rc``."""
    assert "Traceback" not in run.err + run.out, run.err
    assert run.rc == rc, (run.rc, run.err)
    lines = [line for line in run.err.splitlines() if line.startswith("keel: error: ")]
    assert len(lines) == 1, run.err
    found = lines[0].rsplit("[", 1)[-1].rstrip("]")
    assert found.startswith(code) if code.endswith(".") else found == code, lines[0]
    return lines[0]


def hook_payload(agent: str, root: Path, tool: str = "exec") -> bytes:
    """A PreToolUse-style payload of ``agent`` for a harmless shell command or a write."""
    event = HOOK_EVENTS[agent]
    if tool == "exec":
        name = {"claude": "Bash", "codex": "shell", "gemini": "run_shell_command"}[agent]
        command = ["ls"] if agent == "codex" else "ls"
        tool_input: dict[str, object] = {"command": command}
    else:
        name = {"claude": "Write", "codex": "Write", "gemini": "write_file"}[agent]
        tool_input = {"file_path": str(root / "README"), "content": "changed\n"}
    data = {
        "session_id": "s-bad-input",
        "hook_event_name": event,
        "tool_name": name,
        "tool_input": tool_input,
        "cwd": str(root),
    }
    return json.dumps(data).encode()


def assert_hook_blocked(run: Run) -> None:
    """The client's blocking channel: exit 2 with the reason on stderr, never an allow."""
    assert "Traceback" not in run.err + run.out, run.err
    assert run.rc == 2, (run.rc, run.out, run.err)
    assert "block" in run.err, run.err
    assert '"allow"' not in run.out, run.out


def assert_hook_denied(run: Run) -> None:
    """A deny in the client's dialect (exit 0 with a deny decision) or the blocking channel."""
    assert "Traceback" not in run.err + run.out, run.err
    if run.rc == 2:
        assert_hook_blocked(run)
        return
    assert run.rc == 0, (run.rc, run.err)
    assert '"deny"' in run.out, run.out


def snapshot(root: Path) -> dict[str, bytes]:
    """The bytes of every regular file under ``root`` outside .keel and .git."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".keel", ".git") or path.is_symlink() or not path.is_file():
            continue
        files[str(rel)] = path.read_bytes()
    return files
