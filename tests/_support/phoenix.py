"""Arize Phoenix: a real OTLP receiver, with an API to read back what it received.

``phoenix_python()`` is the interpreter of a virtualenv holding ``arize-phoenix``
(``PHOENIX_VERSION``), made once with pip and kept in ``${XDG_CACHE_HOME:-~/.cache}/keel/phoenix/``
keyed by the version and Python's: Phoenix's dependencies are many and would clash with keel's
own test environment. A test that cannot have it is skipped with the reason (a failure under
``KEEL_REQUIRE_ALL=1``). ``.ci/run`` makes it ahead (``python tests/_support/phoenix.py``).

``Phoenix.start(workdir)`` runs ``phoenix serve`` on free ports of 127.0.0.1 (its gRPC receiver
binds every interface: Phoenix has no setting for it; nothing is sent to it), its database and
log in ``workdir``, telemetry off; ``spans(trace_id)`` reads the spans it stored through its REST
API (``/v1/projects/default/spans``), as a user's tool would.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PHOENIX_VERSION = "20.26.1"
INSTALL_TIMEOUT = 1800.0
"""Seconds pip may take to install Phoenix the first time (hundreds of MB of wheels)."""
START_TIMEOUT = 180.0
"""Seconds Phoenix may take to answer ``/healthz`` (it migrates its database first)."""


def cache_dir() -> Path:
    """Where the Phoenix virtualenv of this version and Python is kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tag = f"arize-phoenix-{PHOENIX_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
    return Path(base) / "keel" / "phoenix" / tag


def ensure_phoenix() -> Path:
    """The interpreter of the cached Phoenix virtualenv, made now if needed.

    Raises:
        RuntimeError: pip could not install it (its output's end in the message).
    """
    where = cache_dir()
    where.mkdir(parents=True, exist_ok=True)
    python = where / "venv" / "bin" / "python"
    ready = where / "ready"
    with open(where / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers and CI's early install take turns
        if ready.is_file() and ready.read_text().strip() == PHOENIX_VERSION and python.exists():
            return python
        shutil.rmtree(where / "venv", ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(where / "venv")], check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OTEL_"))}
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"arize-phoenix=={PHOENIX_VERSION}"],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=env, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"pip install arize-phoenix=={PHOENIX_VERSION}: {' | '.join(tail)}")
        ready.write_text(PHOENIX_VERSION + "\n")
        return python


def phoenix_python() -> Path:
    """``ensure_phoenix()``, or a skip with the reason (a failure under KEEL_REQUIRE_ALL=1)."""
    from _support import skip_or_fail

    try:
        return ensure_phoenix()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        skip_or_fail(f"Arize Phoenix (the OTLP receiver of these tests) is not available: {exc}")


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on (now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Phoenix:
    """A running ``phoenix serve``."""

    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def traces_endpoint(self) -> str:
        """The OTLP/HTTP traces URL to put in ``[export] otlp_endpoint``."""
        return f"{self.base}/v1/traces"

    @classmethod
    def start(cls, python: Path, workdir: Path) -> Phoenix:
        """Start Phoenix with its state in ``workdir`` and wait until it answers."""
        workdir.mkdir(parents=True, exist_ok=True)
        port, grpc = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OTEL_"))}
        env.update(
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(port),
            PHOENIX_GRPC_PORT=str(grpc),
            PHOENIX_WORKING_DIR=str(workdir),
            PHOENIX_TELEMETRY_ENABLED="false",
        )
        log = open(workdir / "phoenix.log", "wb")  # noqa: SIM115 - the child keeps writing it
        proc = subprocess.Popen(
            [str(python), "-m", "phoenix.server.main", "serve"],
            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        phoenix = cls(proc, port, workdir)
        try:
            wait_for("Phoenix to answer /healthz", phoenix.healthy, START_TIMEOUT)
        except BaseException:
            phoenix.stop()
            raise
        return phoenix

    def healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"phoenix serve exited {self.proc.returncode}: {self.log()}")
        try:
            with urllib.request.urlopen(f"{self.base}/healthz", timeout=5) as answer:
                return answer.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def log(self) -> str:
        """The end of Phoenix's log."""
        with contextlib.suppress(OSError):
            return (self.workdir / "phoenix.log").read_text(errors="replace")[-3000:]
        return ""

    def spans(self, trace_id: str | None = None) -> list[dict[str, Any]]:
        """Every span Phoenix stored (of ``trace_id`` only, when given), oldest first."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            url = f"{self.base}/v1/projects/default/spans?limit=1000"
            url += f"&cursor={cursor}" if cursor else ""
            with urllib.request.urlopen(url, timeout=30) as answer:
                page = json.load(answer)
            out.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if trace_id is not None:
            out = [s for s in out if s["context"]["trace_id"] == trace_id]
        return sorted(out, key=lambda s: (s["start_time"], s["context"]["span_id"]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def wait_for(what: str, check: Callable[[], object], limit: float) -> Any:
    """Poll ``check`` until it returns something true; a failure after ``limit`` seconds.

    A bound on a wait, never a measurement: nothing asserts how long it took.
    """
    end = time.monotonic() + limit
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


if __name__ == "__main__":  # .ci/run: make the virtualenv before the tests need it
    print(ensure_phoenix())
