"""Fixtures of the trace export tests: a real OTLP receiver (Arize Phoenix) and keel hookd."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _support import KEEL, keel_env
from _support.phoenix import Phoenix, phoenix_python, wait_for
from keel.hook import relay
from keel.hook.server import stop_daemon


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """One ``phoenix serve`` for the session's tests (each reads back its own trace)."""
    python = phoenix_python()
    server = Phoenix.start(python, tmp_path_factory.mktemp("phoenix"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def hookd() -> Iterator[Callable[[Path, dict[str, str]], None]]:
    """Start ``keel hookd run`` for a workspace, with ``env`` (the agent's environment)."""
    started: list[tuple[Path, subprocess.Popen[bytes]]] = []

    def start(root: Path, env: dict[str, str]) -> None:
        proc = subprocess.Popen(
            [KEEL, "hookd", "run", "--workspace", str(root), "--idle", "120"],
            env=keel_env(env, hookd=True), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        started.append((root, proc))
        wait_for("keel hookd", lambda: relay.read_record(str(root / ".keel")), 60)

    yield start
    for root, proc in started:
        stop_daemon(root)
        proc.terminate()
        proc.wait(timeout=30)
