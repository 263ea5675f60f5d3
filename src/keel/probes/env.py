"""Environment probes, answered on the host (the sandbox starts with an empty environment).

Values of names that look like secrets are never returned, only their presence.
"""

from __future__ import annotations

import os
import re

from keel.probes._fs import ProbeContext
from keel.probes._result import Failure

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION", re.I)
REDACTED = "<redacted>"


def _check(name: str) -> None:
    if not _NAME.match(name):
        raise Failure("env.bad_name", f"{name!r} is not an environment variable name")


def get(ctx: ProbeContext, name: str, default: str | None = None) -> str | None:
    """The value of ``name`` (``<redacted>`` for secret-looking names), else ``default``."""
    _check(name)
    current = os.environ.get(name)
    if current is None:
        return default
    if _SECRET.search(name):
        ctx.note(f"{name} looks like a secret; its value is not reported")
        return REDACTED
    return current


def has(ctx: ProbeContext, name: str) -> bool:
    """Whether ``name`` is set."""
    del ctx
    _check(name)
    return name in os.environ
