"""Helpers of the model tests: a distinctive key, the real keel command, the journal's bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

KEY = "zq-KEEL-TEST-KEY-5c1d9e7a3b"
"""A distinctive API key, shaped like no credential: only keel's registration can hide it."""
KEEL = str(Path(sys.executable).with_name("keel"))
MODEL_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
              "KEEL_TEST_MODEL_KEY")  # fmt: skip


def keel(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the real ``keel`` command in ``cwd`` with ``env`` added to a clean environment."""
    base = {k: v for k, v in os.environ.items() if k not in MODEL_VARS}
    return subprocess.run(
        [KEEL, *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def journal_bytes(root: Path) -> bytes:
    """Every byte keel stored under ``root/.keel`` (the database, its WAL, caches)."""
    return b"".join(p.read_bytes() for p in sorted((root / ".keel").rglob("*")) if p.is_file())


OPENED: list[Any] = []
"""Model clients a test opened; closed after each test (their SDK connections)."""


def opened(client: Any) -> Any:
    """``client``, closed when the test ends."""
    OPENED.append(client)
    return client
