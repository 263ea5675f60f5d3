"""The real Claude Code inside ``keel wrap``, driven offline by a fake model on 127.0.0.1.

The whole client runs in keel's sandbox: its Bash calls run there too, its model requests leave
through keel's proxy (or the loopback relay), its state goes to ``~/.claude``, and keel's hooks
are decided outside the sandbox. Skipped when Claude Code is not installed (a failure when
KEEL_REQUIRE_ALL=1).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import (
    RUN_TIMEOUT,
    FakeModel,
    Turn,
    _claude,  # pyright: ignore[reportPrivateUsage]
    client_binary,
    make_base,
    new_project,
)

from _support import KEEL, keel

pytestmark = [pytest.mark.clients, pytest.mark.slow]

SECRET = "WRAP-SSH-SECRET-7f3a"
KEEL_TOML = '[policy]\npreset = "developer"\nallow = ["python3 probe.py"]\n'
PROBE = """
import json, os, socket
spec = json.load(open("probe.json"))
out = []
try:
    out.append(open(os.path.join(os.path.expanduser("~"), ".ssh", "id" + "_rsa")).read())
except OSError as exc:
    out.append(f"read blocked ({exc.strerror})")
try:
    open(os.path.join(spec["outside"], "pwn2.txt"), "w").write("x")
    out.append("WROTE OUTSIDE")
except OSError as exc:
    out.append(f"write blocked ({exc.strerror})")
try:
    socket.create_connection(("127.0.0.1", spec["port"]), 3)
    out.append("CONNECTED")
except OSError as exc:
    out.append(f"connect blocked ({exc.strerror})")
print("; ".join(out))
"""
SETTINGS = '{"permissions": {}}\n'


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Canary:
    """A listener on 127.0.0.1 that is on no allowlist; it counts connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port: int = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

    def __enter__(self) -> Canary:
        return self

    def __exit__(self, *_: object) -> None:
        self.sock.close()


def bash(command: str) -> Turn:
    return Turn(tool="Bash", input={"command": command, "description": "run it"})


def wrapped_claude(
    base: Path,
    turns: list[Turn],
    *,
    allow_host: bool = True,
    files: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], FakeModel, Path, Path]:
    """``keel init`` a project, then ``keel wrap ... -- claude -p`` against a fake model."""
    binary = client_binary("claude")
    project = new_project(base, KEEL_TOML, files)
    init = keel("init", "--agent", "claude", "--workspace", str(project))
    assert init.returncode == 0, init.stderr
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"{SECRET}\n")
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(SETTINGS)
    with FakeModel("anthropic", turns, final_text="Finished.") as model:
        argv, env = _claude(binary, home, model, "do the task", "Bash")
        hosts = ["--allow-host", f"127.0.0.1:{model.port}"] if allow_host else []
        wrap = [KEEL, "wrap", "--workspace", str(project), *hosts, "--"]
        proc = subprocess.run(
            [*wrap, *argv],
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    return proc, model, project, home


def journal_calls(project: Path) -> list[str]:
    from keel.journal import open_journal

    with open_journal(project) as journal:
        return [json.dumps(e.to_dict(), default=str) for e in journal.events(kinds=["tool.call"])]


def test_claude_code_runs_whole_inside_keel_wrap(base: Path) -> None:
    outside = base / "outside"
    outside.mkdir()
    with Canary() as canary:
        probe = {"outside": str(outside), "port": canary.port}
        turns = [
            bash("echo made-by-claude > made.txt"),
            bash(f"echo pwn > {outside}/pwn.txt; cat ~/.ssh/id_rsa"),  # the policy denies it
            bash("python3 probe.py"),  # the policy allows it: only the sandbox stands in the way
        ]
        files = {"probe.py": PROBE, "probe.json": json.dumps(probe)}
        proc, model, project, home = wrapped_claude(base, turns, files=files)
        hits = canary.hits
    diagnosis = f"rc={proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, diagnosis
    assert json.loads(proc.stdout)["result"] == "Finished.", diagnosis
    assert (project / "made.txt").read_text() == "made-by-claude\n"
    assert list(outside.iterdir()) == []
    assert SECRET not in model.all_text() and SECRET not in proc.stdout
    assert hits == 0
    told = model.all_text()
    assert "read blocked" in told and "write blocked" in told and "connect blocked" in told, told
    calls = journal_calls(project)  # decided and journaled outside, by keel's hooks
    assert any("made.txt" in c for c in calls) and any("id_rsa" in c for c in calls), calls
    assert (home / ".claude" / "projects").is_dir()  # the client's state is its own, writable
    assert (home / ".claude" / "settings.json").read_text() == SETTINGS
    assert json.loads((project / ".claude" / "settings.local.json").read_text())["hooks"]


def test_the_model_host_is_allowed_from_anthropic_base_url(base: Path) -> None:
    proc, model, project, _ = wrapped_claude(base, [bash("echo ok > ok.txt")], allow_host=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (project / "ok.txt").read_text() == "ok\n"
    assert len(model.requests) == 2
    log = (project / ".keel" / "exec" / "proxy.log").read_text().splitlines()
    assert {json.loads(line)["rule"] for line in log} == {"wrap.allowed"}
