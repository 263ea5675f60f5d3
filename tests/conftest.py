"""Shared fixtures: external test material, 0755 workspaces, a clean environment."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from _support import skip_or_fail

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """Keep "::" out of generated test ids: pytest splits a node id on it."""
    text = val.decode("ascii", "backslashreplace") if isinstance(val, bytes) else val
    if isinstance(text, str) and "::" in text:
        return text.replace("::", ": :")
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test must be addressable by its node id (``make mutate`` runs tests by id)."""
    for item in items:
        _, _, params = item.nodeid.partition("[")
        if "::" in params:
            raise pytest.UsageError(f"test id {item.nodeid!r} has '::' in its parameters")


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or a skip (a failure in CI) when it is absent."""
    if not SHARED_DATA.is_dir():
        skip_or_fail(f"external test material not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A fresh directory with 0755 parents, reachable by an unprivileged sandbox uid."""
    path = Path(tempfile.mkdtemp(prefix="keel-test-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def _clean_keel_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for name in list(os.environ):
        if name.startswith("KEEL_") and name not in ("KEEL_REQUIRE_ALL", "KEEL_CLIENTS_DIR"):
            monkeypatch.delenv(name)
    # keel's per-user state (journal key, chain heads) never touches the real HOME in tests.
    monkeypatch.setenv("KEEL_STATE_DIR", str(tmp_path_factory.mktemp("keel-state")))
