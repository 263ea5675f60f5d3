"""Helpers for the probe tests: run a probe in-process against a workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from keel.probes import ProbeResult, execute


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
