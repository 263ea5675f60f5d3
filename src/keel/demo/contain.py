"""Demo section: what keel allows runs contained; attacks that the text alone would miss."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from keel.core.errors import DemoFailed
from keel.core.root import CONFIG_NAME
from keel.init import init_workspace

SECRET = "DEMO-SECRET-not-a-real-key"


def run(console: Console, base: Path) -> None:
    """Run a few commands through ``keel exec`` and show that only the workspace changes."""
    from keel.sandbox.exec.contain import exec_backend
    from keel.sandbox.exec.line import shell_argv

    backend, reason = exec_backend()
    if backend is None:
        console.print(f"[yellow]no sandbox works here ({reason}): see `keel sandbox check`[/]")
        return
    repo, home, outside = _world(base)
    canary = _Canary()
    cases = [
        ("python3 -c \"open('made.txt', 'w').write('ok')\"", "made.txt in the workspace"),
        (f"echo pwned > {outside}/marker.txt", "nothing outside the workspace"),
        ("cat ~/.ssh/id_rsa", "HOME's secrets are not there"),
        ("cat .env; env | grep -c DEMO_TOKEN", "the workspace's .env reads empty; env filtered"),
        (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {canary.port}))\"",
         "no network but the allowlist, through keel's proxy"),
        ("echo '[policy]' >> keel.toml", "keel.toml is read-only"),
    ]  # fmt: skip
    env = {**os.environ, "HOME": str(home), "DEMO_TOKEN": SECRET}
    table = Table("contained command", "exit", "what must hold", "held", expand=True)
    before = (repo / CONFIG_NAME).read_bytes()
    for command, promise in cases:
        done = subprocess.run(
            shell_argv(repo, command),
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        held = _held(command, done, repo, outside, canary, before)
        shown = escape(command.replace(str(base), "…"))
        table.add_row(shown, str(done.returncode), promise, "[green]yes[/]" if held else "NO")
        if not held:
            canary.close()
            raise DemoFailed(f"containment did not hold for {command!r}: {done.stderr[-300:]}")
    canary.close()
    console.print(f"backend: {backend} ({reason})")
    console.print(table)
    console.print(
        "The hooks rewrite every shell command they allow into `keel exec -- bash -c '...'`, "
        "so this is how an agent's commands run."
    )


def _world(base: Path) -> tuple[Path, Path, Path]:
    repo = base / "sample"
    repo.mkdir(mode=0o755)
    (repo / ".env").write_text(f"API_KEY={SECRET}\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    init_workspace(repo, "developer")
    home = base / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o755)
    (home / ".ssh" / "id_rsa").write_text(f"{SECRET}\n")
    outside = base / "outside"
    outside.mkdir(mode=0o755)
    return repo, home, outside


def _held(
    command: str,
    done: subprocess.CompletedProcess[str],
    repo: Path,
    outside: Path,
    canary: _Canary,
    keel_toml: bytes,
) -> bool:
    leaked = SECRET in done.stdout + done.stderr
    if command.startswith('python3 -c "open'):
        return done.returncode == 0 and (repo / "made.txt").read_text() == "ok"
    return (
        not leaked
        and not any(outside.iterdir())
        and canary.hits == 0
        and (repo / CONFIG_NAME).read_bytes() == keel_toml
    )


class _Canary:
    """A TCP listener on 127.0.0.1 that counts the connections it gets (it should get none)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.open = True
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.open:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.open = False
        self.sock.close()
