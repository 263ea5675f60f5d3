"""Fixtures for the sandbox tests: real backends, 0755 workspaces, host canaries."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from exec_helpers import Box, make_box, require_backend
from sandbox_helpers import PYTHON, Host, SandboxFactory, make_host, make_sandbox, skip_or_fail

from keel.sandbox import Sandbox


@pytest.fixture(params=["bwrap", "landlock"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def sandbox(backend: str) -> Sandbox:
    return make_sandbox(backend)


@pytest.fixture
def sandbox_with(backend: str) -> SandboxFactory:
    return lambda **overrides: make_sandbox(backend, **overrides)


@pytest.fixture
def host() -> Iterator[Host]:
    base = Path(tempfile.mkdtemp(prefix="keel-sbx-test-", dir="/tmp"))
    base.chmod(0o755)  # the sandbox uid must traverse it (mkdtemp makes 0700)
    try:
        yield make_host(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def python3() -> str:
    if not os.path.exists(PYTHON):
        skip_or_fail(f"{PYTHON} is needed for the escape payloads")
    return PYTHON


@pytest.fixture(params=["bwrap", "landlock"])
def box(request: pytest.FixtureRequest, workdir: Path) -> Box:
    """A workspace, a fake HOME full of secrets and an outside marker, for one backend."""
    require_backend(request.param)
    return make_box(workdir, request.param)


@pytest.fixture
def bwrap_box(workdir: Path) -> Box:
    """``box`` with the bwrap backend only (mount-namespace behaviour)."""
    require_backend("bwrap")
    return make_box(workdir, "bwrap")
