"""Environment probes, answered on the host (the sandbox starts with an empty environment).

No value of any variable reaches the model: ``env.get`` answers ``<redacted>`` for a set
variable (and notes its length), whatever its name. A name is no guide: ``DATABASE_URL``
carries a password, ``CI`` could carry anything. The one exception is a value that holds
no more than a switch (``""``, ``0``, ``1``, ``true``, ``false``, ``yes``, ``no``, ``on``,
``off``, any case), which cannot hold a secret and is what plans test
(``env.get("CI") == "true"``). ``env.has`` tells whether a variable is set.
"""

from __future__ import annotations

import os
import re

from keel.probes._fs import ProbeContext
from keel.probes._result import Failure

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SWITCHES = frozenset({"", "0", "1", "true", "false", "yes", "no", "on", "off"})
REDACTED = "<redacted>"


def _check(name: str) -> None:
    if not _NAME.match(name):
        raise Failure("env.bad_name", f"{name!r} is not an environment variable name")


def get(ctx: ProbeContext, name: str, default: str | None = None) -> str | None:
    """``<redacted>`` if ``name`` is set (a switch such as ``true`` as is), else ``default``."""
    _check(name)
    current = os.environ.get(name)
    if current is None:
        return default
    if current.strip().lower() in _SWITCHES:
        return current
    ctx.note(f"{name} is set ({len(current)} characters); values are never reported")
    return REDACTED


def has(ctx: ProbeContext, name: str) -> bool:
    """Whether ``name`` is set."""
    del ctx
    _check(name)
    return name in os.environ
