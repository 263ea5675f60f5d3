"""Helpers for the ``keel exec`` tests: the real CLI, fake homes, canaries, local servers."""

from __future__ import annotations

import http.server
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from _support import KEEL, make_workspace

SECRET = "KEEL-EXEC-SECRET-5d1e"
"""Planted in every fake secret; it must never come out of a contained command."""
PYTHON = os.path.realpath(sys.executable)
"""An interpreter with pip whose installation is visible inside (its prefix is on PATH)."""
HOME_SECRETS = (".ssh/id_rsa", ".aws/credentials", ".netrc", ".config/gh/hosts.yml", ".npmrc")


@dataclass
class Box:
    """A workspace for contained runs, a fake HOME next to it and an outside marker dir."""

    base: Path
    ws: Path
    home: Path
    outside: Path
    backend: str
    env: dict[str, str] = field(default_factory=dict)

    def run(
        self,
        *command: str,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        cwd: Path | None = None,
        options: Sequence[str] = (),
        stdin: int | None = subprocess.DEVNULL,
    ) -> subprocess.CompletedProcess[str]:
        """``keel exec --workspace WS --backend B -- command`` as a real subprocess."""
        argv = [KEEL, "exec", "--workspace", str(self.ws), "--backend", self.backend, *options]
        return subprocess.run(
            [*argv, "--", *command],
            cwd=cwd or self.ws,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=stdin,
            check=False,
        )

    def sh(self, script: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """Run ``/bin/sh -c script`` contained."""
        return self.run("/bin/sh", "-c", script, **kwargs)  # type: ignore[arg-type]

    def config(self, text: str) -> None:
        """Write the workspace's keel.toml."""
        (self.ws / "keel.toml").write_text(text)


def make_box(base: Path, backend: str) -> Box:
    ws = make_workspace(base / "ws")
    home = base / "home"
    home.mkdir(mode=0o755)
    for rel in HOME_SECRETS:
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_text(f"{SECRET} {rel}\n")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Box Tester\n\temail = box@example.invalid\n"
        f"[http]\n\textraheader = AUTHORIZATION: bearer {SECRET}\n"
    )
    outside = base / "outside"
    outside.mkdir(mode=0o755)
    (outside / "marker.txt").write_text("untouched\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("KEEL_") or k in ("KEEL_STATE_DIR", "KEEL_REQUIRE_ALL")
    }
    env.update(HOME=str(home), PATH=f"{os.path.dirname(PYTHON)}:{os.environ.get('PATH', '')}")
    env["GITHUB_TOKEN"] = SECRET
    return Box(base, ws, home, outside, backend, env)


def git(ws: Path, *args: str) -> str:
    """Run git on the host in ``ws``."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(
        ["git", *args], cwd=ws, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


def snapshot(paths: Sequence[Path]) -> dict[str, tuple[int, bytes | None]]:
    """Mode and bytes of each path (``None`` for a directory's bytes; absent paths omitted)."""
    out: dict[str, tuple[int, bytes | None]] = {}
    for path in paths:
        if path.is_symlink() or not path.exists():
            continue
        for sub in [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]:
            data = None if sub.is_dir() else sub.read_bytes()
            out[str(sub)] = (sub.lstat().st_mode, data)
    return out


class Canary:
    """A TCP listener on 127.0.0.1 (port 0) that counts connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.hits = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

    def reached(self, count: int = 1, limit: float = 10.0) -> bool:
        """Whether ``count`` connections arrive within ``limit`` seconds.

        A client's connect completes in the listener's backlog before this thread accepts it.
        """
        deadline = time.monotonic() + limit
        while self.hits < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.hits >= count

    def close(self) -> None:
        self.sock.close()


@contextmanager
def canary() -> Iterator[Canary]:
    c = Canary()
    try:
        yield c
    finally:
        c.close()


def build_wheel(name: str, version: str = "1.0") -> tuple[str, bytes]:
    """A minimal pure-Python wheel with one module ``name`` (``VALUE = 42``)."""
    dist = f"{name}-{version}"
    files = {
        f"{name}.py": "VALUE = 42\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: keel-test\nRoot-Is-Purelib: "
        "true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}.dist-info/RECORD,,\n"
    files[f"{dist}.dist-info/RECORD"] = record
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return f"{dist}-py3-none-any.whl", buf.getvalue()


class PackageIndex:
    """A PEP 503 simple index on 127.0.0.1 (port 0) serving one wheel."""

    def __init__(self, name: str) -> None:
        filename, data = build_wheel(name)
        pages = {
            "/simple/": f'<a href="/simple/{name}/">{name}</a>'.encode(),
            f"/simple/{name}/": f'<a href="/files/{filename}">{filename}</a>'.encode(),
            f"/files/{filename}": data,
        }
        self.requests: list[str] = []
        requests = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                requests.append(self.path)
                body = pages.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                kind = "application/octet-stream" if self.path.endswith(".whl") else "text/html"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def require_backend(backend: str) -> None:
    """Skip (fail in CI) when ``backend`` cannot run ``keel exec`` here."""
    from keel.sandbox import exec_backend

    name, reason = exec_backend(backend)
    if name != backend:
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(f"required in CI: keel exec with {backend}: {reason}")
        pytest.skip(f"keel exec with {backend} is unavailable here: {reason}")


def journal_events(box: Box, kind: str, count: int, limit: float = 60.0) -> list[dict[str, Any]]:
    """The payloads of ``kind`` events of the session keel-exec, once ``count`` are there.

    ``keel exec`` journals a run from a detached fork once it is over, and the daemon a
    refusal from its own thread: they may land a moment after the run returned.
    """
    deadline = time.monotonic() + limit
    while True:
        done = subprocess.run(
            [KEEL, "--workspace", str(box.ws), "log", "-s", "keel-exec", "--json"],
            env=box.env,
            capture_output=True,
            text=True,
            check=False,
        )
        events = json.loads(done.stdout)["events"] if done.returncode == 0 else []
        found = [e["payload"]["data"] for e in events if e["kind"] == kind]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


BOMB = """
import os, time
born = os.open("born.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
while True:  # every process forks for ever; a refused fork is tried again
    try:
        child = os.fork()
    except OSError:
        time.sleep(0.05)
        continue
    if child == 0:
        os.write(born, b"x")  # one byte per process the bomb made, however starved the host
"""


def bombs(tag: str) -> list[int]:
    """Pids of live ``BOMB`` processes of the run marked ``tag``."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cmdline.startswith(b"/usr/bin/python3\0") and tag.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def run_fork_bomb(box: Box, max_processes: int, env: dict[str, str] | None = None) -> None:
    """Run ``BOMB`` contained for 2 s: it ends at its timeout, held to ``max_processes``.

    ``max_processes``: the workspace's ``[sandbox] exec_max_processes``. As root only the
    pid namespace's own ``pid_max`` holds it (Linux 6.14): elsewhere, as root, it is skipped.
    """
    from keel.sandbox.exec._pidns import supported

    if os.getuid() == 0 and not supported():  # nothing would hold it: do not run it
        pytest.skip("a fork bomb as root is held only by a pid_max per namespace (Linux 6.14)")
    tag = f"kxbomb{os.getpid()}{time.monotonic_ns() % 100000}"
    host_pid_max = Path("/proc/sys/kernel/pid_max").read_text()
    started = time.monotonic()
    done = box.run("/usr/bin/python3", "-c", BOMB, tag, options=["--timeout", "2"], env=env)
    elapsed = time.monotonic() - started
    assert done.returncode == 124, done.stderr[-500:]
    assert elapsed < 2 + 15  # a bound, not a speed: uncapped, it ended 11-22 s late
    assert bombs(tag) == []
    born = (box.ws / "born.log").stat().st_size
    assert 0 < born < max_processes  # the first process and its children, at most
    assert Path("/proc/sys/kernel/pid_max").read_text() == host_pid_max  # the sandbox's own
