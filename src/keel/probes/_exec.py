"""Run one probe request in this process: resolve, bind, type-check, call, never raise.

A request is ``{"function", "args", "workspace", "read_cap", "timeout", "http_allow"}`` (a null
``workspace`` means the current directory, where the sandbox starts the runner); the answer is
always a :class:`ProbeResult`, with a structured error for anything that went wrong.

Standard library only: the sandboxed runner imports this.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from keel.core.errors import BindError
from keel.probes._fs import ProbeContext
from keel.probes._registry import bind, check_types, resolve
from keel.probes._result import Failure, ProbeResult

MAX_VALUE_CHARS = 4_000_000


def execute(request: Any, *, backend: str = "in-process") -> ProbeResult:
    """Run the probe a request names and return its result (never raises)."""
    started = time.perf_counter()
    notes: list[str] = []
    try:
        result = _run(request, notes)
    except Failure as failure:
        result = ProbeResult(False, None, failure.issue)
    except RecursionError:
        result = ProbeResult.failure("probe.too_deep", "the input nests too deeply")
    except MemoryError:
        result = ProbeResult.failure("probe.out_of_memory", "the probe ran out of memory")
    except Exception as exc:
        result = ProbeResult.failure("probe.internal", f"{type(exc).__name__}: {exc}"[:500])
    elapsed = (time.perf_counter() - started) * 1000
    return replace(result, notes=tuple(notes), duration_ms=round(elapsed, 3), backend=backend)


def _run(request: Any, notes: list[str]) -> ProbeResult:
    if not isinstance(request, dict):
        raise Failure("probe.bad_request", "a probe request must be a JSON object")
    function = request.get("function")
    spec = resolve(function) if isinstance(function, str) else None
    if spec is None:
        raise Failure("probe.unknown_function", f"no probe called {function!r}")
    args = request.get("args", [])
    if not isinstance(args, list | dict):
        raise Failure("probe.bad_args", "args must be a list or an object")
    try:
        bound = bind(spec.params, args, spec.name)
        check_types(spec.params, bound, spec.name)
    except BindError as exc:
        raise Failure(exc.code, exc.message) from exc
    ctx = _context(request, notes)
    value = spec.load()(ctx, **bound)
    _check_serialisable(value)
    return ProbeResult.success(value)


def _context(request: dict[str, Any], notes: list[str]) -> ProbeContext:
    workspace = request.get("workspace")
    if workspace is None:
        workspace = os.getcwd()  # the sandbox starts the runner in the workspace
    if not isinstance(workspace, str) or not os.path.isabs(workspace):
        raise Failure("probe.bad_request", "the request needs an absolute workspace path")
    read_cap = request.get("read_cap", 1_000_000)
    timeout = request.get("timeout", 10.0)
    allow = request.get("http_allow", [])
    return ProbeContext(
        workspace=Path(os.path.realpath(workspace)),
        read_cap=read_cap if isinstance(read_cap, int) and read_cap > 0 else 1_000_000,
        timeout=float(timeout) if isinstance(timeout, int | float) and timeout > 0 else 10.0,
        http_allow=tuple(a for a in allow if isinstance(a, str)) if isinstance(allow, list) else (),
        notes=notes,
    )


def _check_serialisable(value: Any) -> None:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Failure("probe.unserialisable", f"the result is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise Failure("probe.too_deep", "the result nests too deeply") from exc
    if len(text) > MAX_VALUE_CHARS:
        raise Failure("probe.too_large", f"the result is larger than {MAX_VALUE_CHARS} characters")
