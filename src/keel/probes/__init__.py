"""Probes: read-only functions that collect evidence for plans, hardened against hostile input.

``PROBES`` is the registry (typed parameters, result types, aliases for the seed article's
names); :func:`execute` runs one request in this process; ``python -m keel.probes.runner`` runs
one inside the sandbox. A probe that finds a problem returns a :class:`ProbeResult` with a
structured :class:`ProbeIssue`; it never raises.

Standard library only: the sandboxed runner imports this package.
"""

from keel.core.errors import BindError
from keel.probes._exec import execute
from keel.probes._fs import ProbeContext
from keel.probes._registry import (
    PROBES,
    Param,
    ParamType,
    ProbeSpec,
    ValueType,
    all_names,
    bind,
    check_types,
    resolve,
    type_ok,
)
from keel.probes._result import Failure, ProbeIssue, ProbeResult

__all__ = [
    "PROBES",
    "BindError",
    "Failure",
    "Param",
    "ParamType",
    "ProbeContext",
    "ProbeIssue",
    "ProbeResult",
    "ProbeSpec",
    "ValueType",
    "all_names",
    "bind",
    "check_types",
    "execute",
    "resolve",
    "type_ok",
]
