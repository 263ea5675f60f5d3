"""The sandbox seam: run probes and commands isolated from the host.

One protocol, ``Sandbox``, with a backend per isolation technique, chosen by probing once per
process (``detect``) and never silently downgraded:

1. ``bwrap``: bubblewrap as an unprivileged uid, with seccomp, rlimits, a pid namespace, no
   network and a wall-clock timeout (see ``probe._bwrap``);
2. ``landlock``: Landlock plus seccomp and rlimits where user namespaces are blocked (see
   ``probe._landlock`` for its documented gaps);
3. otherwise ``get_sandbox`` refuses with ``SandboxError`` (``sandbox.unavailable``), unless
   the caller passes ``unsafe=True`` (``--unsafe-no-sandbox``), which gives ``none-unsafe``.

Sandboxed outputs are untrusted: read files they leave with ``read_artifact``, which never
follows a symlink. ``keel.sandbox.probe.testing.FunctionSandbox`` is the test double.

``keel exec`` (``run_contained``, ``exec_argv``, ``kill_contained``; see ``contain``) is the
other form of the seam: a command run in place in the workspace as the invoking user, contained
by mounts, seccomp and a proxy instead of a scratch copy.

The subpackages: ``os`` (kernel mechanisms: seccomp, Landlock, processes, the run registry; no
policy), ``probe`` (the probe backends), ``exec`` (``keel exec``) and ``wrap`` (``keel wrap``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~3 ms to import, and `keel exec` imports this package
if TYPE_CHECKING:
    from typing import Any

    from keel.sandbox.exec.contain import (
        ExecResult,
        exec_argv,
        exec_backend,
        kill_contained,
        run_contained,
    )
    from keel.sandbox.probe._artifact import read_artifact
    from keel.sandbox.probe._detect import detect, get_sandbox
    from keel.sandbox.probe._types import (
        BACKENDS,
        WORKSPACE_MOUNT,
        BackendName,
        BackendStatus,
        Mode,
        PythonStatus,
        Sandbox,
        SandboxReport,
        SandboxResult,
    )

__all__ = [
    "BACKENDS",
    "WORKSPACE_MOUNT",
    "BackendName",
    "BackendStatus",
    "ExecResult",
    "Mode",
    "PythonStatus",
    "Sandbox",
    "SandboxReport",
    "SandboxResult",
    "detect",
    "exec_argv",
    "exec_backend",
    "get_sandbox",
    "kill_contained",
    "read_artifact",
    "run_contained",
]

# Loaded on first use, so ``python -m keel.sandbox.probe._selftest`` (or any light submodule)
# does not pay for pydantic inside the sandbox.
_WHERE = {
    "read_artifact": "probe._artifact",
    "detect": "probe._detect",
    "get_sandbox": "probe._detect",
    **dict.fromkeys(
        ("ExecResult", "exec_argv", "exec_backend", "kill_contained", "run_contained"),
        "exec.contain",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = __import__(f"keel.sandbox.{_WHERE.get(name, 'probe._types')}", fromlist=[name])
    value = getattr(module, name)
    globals()[name] = value
    return value
