"""Helpers of the model tests: a distinctive key, the model variables, the journal's bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

KEY = "zq-KEEL-TEST-KEY-5c1d9e7a3b"
"""A distinctive API key, shaped like no credential: only keel's registration can hide it."""
MODEL_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
              "KEEL_TEST_MODEL_KEY")  # fmt: skip


def journal_bytes(root: Path) -> bytes:
    """Every byte keel stored under ``root/.keel`` (the database, its WAL, caches)."""
    return b"".join(p.read_bytes() for p in sorted((root / ".keel").rglob("*")) if p.is_file())


OPENED: list[Any] = []
"""Model clients a test opened; closed after each test (their SDK connections)."""


def opened(client: Any) -> Any:
    """``client``, closed when the test ends."""
    OPENED.append(client)
    return client
