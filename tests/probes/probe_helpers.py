"""Helpers for the probe tests: run a probe in-process against a workspace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from keel.probes import ProbeResult, execute


def skip_or_fail(reason: str) -> None:
    """Skip locally; fail when KEEL_REQUIRE_ALL=1."""
    if os.environ.get("KEEL_REQUIRE_ALL") == "1":
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def probe(workspace: Path, function: str, *args: Any, **extra: Any) -> ProbeResult:
    """Run one probe in this process."""
    request: dict[str, Any] = {
        "function": function,
        "args": list(args),
        "workspace": str(workspace),
    }
    request.update(extra)
    return execute(request)


def error_code(result: ProbeResult) -> str | None:
    """The error code of a failed result."""
    return result.error.code if result.error else None
