"""Choosing a backend: probe each once per process, pick the first safe one, or refuse."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Literal, assert_never

from keel.core.errors import SandboxError
from keel.core.schema import SandboxConfig
from keel.sandbox.os._seccomp import seccomp_blob
from keel.sandbox.probe import _common, _landlock
from keel.sandbox.probe._bwrap import SAFE_VERSION, BwrapSandbox, find_bwrap, probe_bwrap
from keel.sandbox.probe._python import python_layout
from keel.sandbox.probe._types import (
    BACKENDS,
    BackendName,
    BackendStatus,
    PythonStatus,
    Sandbox,
    SandboxReport,
)
from keel.sandbox.probe._unsafe import UnsafeSandbox

SAFE_ORDER: tuple[BackendName, ...] = ("bwrap", "landlock")


def detect(config: SandboxConfig | None = None, *, refresh: bool = False) -> SandboxReport:
    """Which backends work here (versions, and why the others do not); cached per process."""
    config = config or SandboxConfig()
    if refresh:
        _STATUS.clear()
        find_bwrap.cache_clear()
        python_layout.cache_clear()
    return _detect(config)


def _detect(config: SandboxConfig) -> SandboxReport:
    ident = _common.identity(config)
    statuses = tuple(_status(name, config) for name in BACKENDS)
    return SandboxReport(statuses, _choose(config), ident.uid, _python_status(ident))


def _choose(config: SandboxConfig) -> BackendName | None:
    """The first wanted backend that works, probing only as far as needed."""
    wanted = SAFE_ORDER if config.backend == "auto" else (config.backend,)
    return next((name for name in wanted if _status(name, config).available), None)


_STATUS: dict[tuple[BackendName, SandboxConfig], BackendStatus] = {}


def _status(name: BackendName, config: SandboxConfig) -> BackendStatus:
    """One backend's status, probed once per process and config."""
    key = (name, config)
    found = _STATUS.get(key)
    if found is None:
        found = _STATUS[key] = _probe_status(name, config)
    return found


def _probe_status(name: BackendName, config: SandboxConfig) -> BackendStatus:
    ident = _common.identity(config)
    match name:
        case "bwrap":
            return _bwrap_status(config, ident, _seccomp_problem())
        case "landlock":
            return _landlock.status(config, ident, _seccomp_problem())
        case "none-unsafe":
            return BackendStatus(
                "none-unsafe", True, False, reason="no isolation: only with --unsafe-no-sandbox"
            )
        case _:
            assert_never(name)


def _seccomp_problem() -> str | None:
    try:
        seccomp_blob("bwrap")
        seccomp_blob("landlock")
    except SandboxError as exc:
        return exc.message
    return None


def _bwrap_status(
    config: SandboxConfig, ident: _common.Identity, seccomp_problem: str | None
) -> BackendStatus:
    binary = find_bwrap(ident.uid, ident.gid)
    if isinstance(binary, str):
        return BackendStatus("bwrap", False, True, reason=binary)
    if seccomp_problem:
        return BackendStatus(
            "bwrap", False, True, binary.version_text, binary.path, seccomp_problem
        )
    problem = probe_bwrap(binary, ident, config)
    if problem:
        return BackendStatus("bwrap", False, True, binary.version_text, binary.path, problem)
    note = f"from {binary.source}"
    if binary.version < SAFE_VERSION:
        note += (
            "; bwrap < 0.12 has CVE-2026-87766 (setup symlink following): keel creates no "
            "mount point inside agent-controlled trees"
        )
    return BackendStatus("bwrap", True, True, binary.version_text, binary.path, note)


def _python_status(ident: _common.Identity) -> PythonStatus:
    layout = python_layout(ident.uid, ident.gid)
    if isinstance(layout, str):
        return PythonStatus(None, None, reason=layout)
    same = layout.executable == sys.executable
    note = "the host interpreter" if same else f"same X.Y as the host ({sys.version.split()[0]})"
    return PythonStatus(layout.executable, layout.version, layout.pythonpath, note)


def get_sandbox(
    config: SandboxConfig | None = None,
    *,
    unsafe: bool = False,
    backend: BackendName | None = None,
) -> Sandbox:
    """The sandbox to use: ``backend`` (or ``[sandbox] backend``), else the first safe one.

    Args:
        config: The ``[sandbox]`` section (defaults when ``None``).
        unsafe: Allow the ``none-unsafe`` backend when no safe one works (the caller journals
            this). It never replaces a backend that was asked for by name.
        backend: Force a backend, e.g. to test Landlock on a machine where bwrap works.

    Raises:
        SandboxError: ``sandbox.unavailable`` when nothing safe works and ``unsafe`` is false.
    """
    config = config or SandboxConfig()
    requested = backend or config.backend
    name = select_backend(requested, lambda n: _status(n, config), unsafe=unsafe)
    return _build(name, config)


def select_backend(
    requested: BackendName | Literal["auto"],
    status_of: Callable[[BackendName], BackendStatus],
    *,
    unsafe: bool,
) -> BackendName:
    """The backend to build, given how each one probes (asked lazily, in preference order).

    Raises:
        SandboxError: ``sandbox.unavailable`` naming every reason when nothing fits.
    """
    if requested == "none-unsafe":
        if unsafe:
            return "none-unsafe"
        raise SandboxError(
            "the none-unsafe backend needs an explicit --unsafe-no-sandbox",
            code="sandbox.unavailable",
        )
    wanted = SAFE_ORDER if requested == "auto" else (requested,)
    for name in wanted:
        if status_of(name).available:
            return name
    if unsafe and requested == "auto":
        return "none-unsafe"
    reasons = {n: status_of(n).reason for n in wanted}
    text = "; ".join(f"{n}: {r}" for n, r in reasons.items())
    raise SandboxError(
        f"no sandbox backend works here ({text}); fix it or pass --unsafe-no-sandbox",
        code="sandbox.unavailable",
        reasons=reasons,
    )


def _build(name: BackendName, config: SandboxConfig) -> Sandbox:
    ident = _common.identity(config)
    match name:
        case "bwrap":
            binary = find_bwrap(ident.uid, ident.gid)
            assert not isinstance(binary, str)
            return BwrapSandbox(config, binary, ident)
        case "landlock":
            return _landlock.LandlockSandbox(config, ident)
        case "none-unsafe":
            return UnsafeSandbox(config)
        case _:
            assert_never(name)
