"""What the tests of ``keel ui`` share: a scripted workspace, a real server, plain HTTP.

The workspace is built as an agent would fill it: Claude Code's hook calls through the real
``keel hook`` (allowed, denied by the policy, denied by the monitor with guidance, a Write
with its checkpoints and a real change, a command carrying ``<script>`` text) and a real
``keel plan run``. Every keel process of one workspace gets the same ``KEEL_STATE_DIR`` (the
journal's key lives there), since module fixtures run before the per-test environment.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _support import KEEL, TIMEOUT, hook, keel, keel_env, make_workspace

SESSION = "scripted-1"
HOSTILE = "echo '<script>document.title=\"pwned\"</script><img src=x onerror=alert(1)>'"
KEEL_TOML = """
[policy]
preset = "developer"
[sandbox]
contain = "off"
[monitor]
repeat_consecutive = 2
repeat_hint = 2
cooldown_steps = 0
"""
PLAN = {
    "goal": "Read the database host from config.yaml",
    "steps": [
        {"id": "look", "type": "evidence_collection",
         "action": {"function": "filesystem.check_exists", "args": ["config.yaml"]},
         "output_to": "has_config"},
        {"id": "branch", "type": "conditional",
         "condition": {"op": "and", "vars": ["{{has_config}}"]},
         "true_branch": [
             {"id": "parse", "type": "evidence_collection",
              "action": {"function": "parsing.safe_load_yaml", "args": ["config.yaml"]},
              "output_to": "config"},
             {"id": "answer", "type": "final_action",
              "action": {"function": "output.result", "args": ["config: {{config}}"]}},
         ],
         "false_branch": [
             {"id": "ask_first", "type": "final_action",
              "action": {"function": "ui.prompt_user", "args": ["No config.yaml: create one?"]}},
         ]},
    ],
}  # fmt: skip
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)")


@dataclass
class Workspace:
    """A workspace and the environment every keel process of it runs with."""

    root: Path
    env: dict[str, str]
    calls: int = 0
    checkpoints: list[str] = field(default_factory=list[str])
    plan_session: str | None = None

    def keel(self, *args: str) -> subprocess.CompletedProcess[str]:
        return keel(*args, workspace=self.root, env=self.env)

    def pre(self, tool: str, tool_input: dict[str, Any], session: str = SESSION) -> str:
        """Claude Code's PreToolUse for one call: keel's verdict (allow, ask, deny)."""
        self.calls += 1
        payload = self._payload("PreToolUse", tool, tool_input, session)
        done = hook("PreToolUse", payload, workspace=self.root, via="keel", env=self.env)
        assert done.returncode in (0, 2), done.stderr
        if done.returncode == 2 or not done.stdout.strip():
            return "deny" if done.returncode == 2 else "allow"
        answer = json.loads(done.stdout).get("hookSpecificOutput", {})
        return answer.get("permissionDecision", "allow")

    def post(self, tool: str, tool_input: dict[str, Any], session: str = SESSION) -> None:
        """Claude Code's PostToolUse for the last call."""
        payload = {**self._payload("PostToolUse", tool, tool_input, session),
                   "tool_response": {"stdout": "", "stderr": "", "interrupted": False}}  # fmt: skip
        done = hook("PostToolUse", payload, workspace=self.root, via="keel", env=self.env)
        assert done.returncode == 0, done.stderr

    def bash(self, command: str, session: str = SESSION) -> str:
        """A Bash call, run (PostToolUse) when allowed; the verdict."""
        verdict = self.pre("Bash", {"command": command}, session)
        if verdict == "allow":
            self.post("Bash", {"command": command}, session)
        return verdict

    def _payload(
        self, event: str, tool: str, tool_input: dict[str, Any], session: str
    ) -> dict[str, Any]:
        return {
            "session_id": session,
            "cwd": str(self.root),
            "hook_event_name": event,
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": f"toolu_{self.calls}",
        }


def empty_workspace(root: Path, state: Path) -> Workspace:
    """A git workspace with keel.toml, app.py and config.yaml, committed."""
    files = {"app.py": "x = 1\n", "config.yaml": "database:\n  host: db.local\n"}
    make_workspace(root, keel_toml=KEEL_TOML, files=files, git=True, commit=True)
    return Workspace(root, {"KEEL_STATE_DIR": str(state)})


def scripted_workspace(root: Path, state: Path, plans: Path) -> Workspace:
    """The scripted session (see the module) and one plan run, in a new workspace."""
    ws = empty_workspace(root, state)
    assert ws.bash("ls") == "allow"
    assert ws.bash("ls") == "deny"  # the monitor: a repeat, with guidance
    assert ws.bash("rm -rf /") == "deny"  # the policy: risk.rm_recursive
    write = {"file_path": str(root / "app.py"), "content": "x = 2\n"}
    assert ws.pre("Write", write) == "allow"
    (root / "app.py").write_text("x = 2\n", encoding="utf-8")
    ws.post("Write", write)
    assert ws.bash(HOSTILE) == "allow"
    ws.checkpoints = checkpoint_ids(ws)
    plan = plans / "plan.json"
    plan.write_text(json.dumps(PLAN), encoding="utf-8")
    done = ws.keel("plan", "run", str(plan), "--json", "--unsafe-no-sandbox")
    assert done.returncode == 0, done.stdout + done.stderr
    ws.plan_session = json.loads(done.stdout)["session_id"]
    return ws


def checkpoint_ids(ws: Workspace) -> list[str]:
    """The ids of the checkpoints the scripted session's events name, in order."""
    done = ws.keel("show", SESSION, "--json")
    assert done.returncode == 0, done.stderr
    events = json.loads(done.stdout)["events"]
    return [e["payload"]["checkpoint_id"] for e in events if e["kind"] == "checkpoint"]


@dataclass
class Tab:
    """A page of a fresh browser context, with every console error it logged."""

    page: Any
    name: str
    artifacts: Path
    errors: list[str] = field(default_factory=list[str])

    def shot(self, view: str) -> Path:
        """A full-page screenshot of the current view, kept as a test artefact."""
        self.artifacts.mkdir(parents=True, exist_ok=True)
        path = self.artifacts / f"{self.name}-{view}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


class Server:
    """``keel ui --no-browser`` on a free port, as a subprocess; its URL, token and port."""

    def __init__(self, ws: Workspace, log: Path) -> None:
        self._log = log.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [KEEL, "ui", "--no-browser", "--port", "0", "-w", str(ws.root)],
            stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL, text=True,
            env=keel_env(ws.env),
        )  # fmt: skip
        self.url, self.port, self.token = self._announced(log)
        self.base = f"http://127.0.0.1:{self.port}"

    def _announced(self, log: Path) -> tuple[str, int, str]:
        """The URL the server printed (read under a bound: a hung start fails the test)."""
        found: list[re.Match[str]] = []
        stdout = self.proc.stdout
        assert stdout is not None

        def read() -> None:
            for line in stdout:
                match = URL.search(line)
                if match:
                    found.append(match)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(TIMEOUT)
        assert found, f"keel ui printed no URL; stderr: {log.read_text()}"
        return found[0].group(0), int(found[0].group(1)), found[0].group(2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


@dataclass(frozen=True)
class Answer:
    """A plain HTTP answer."""

    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None,
    data: Any = None,
) -> Answer:  # fmt: skip
    """One HTTP request to 127.0.0.1, no cookie jar, no redirects followed."""
    body = json.dumps(data).encode() if data is not None else None
    sent = {**({"Content-Type": "application/json"} if body else {}), **(headers or {})}
    req = urllib.request.Request(url, data=body, method=method, headers=sent)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 only
    try:
        with direct.open(req, timeout=TIMEOUT) as res:
            return Answer(res.status, res.read(), {k.lower(): v for k, v in res.headers.items()})
    except urllib.error.HTTPError as err:
        with err:
            return Answer(err.code, err.read(), {k.lower(): v for k, v in err.headers.items()})
