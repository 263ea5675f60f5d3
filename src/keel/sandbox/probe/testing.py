"""Test doubles for the sandbox seam: ``FunctionSandbox`` wraps a plain function."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from keel.sandbox.os._process import Stdin
from keel.sandbox.probe._types import Mode, SandboxResult


@dataclass(frozen=True, slots=True)
class SandboxCall:
    """One call a ``FunctionSandbox`` received."""

    argv: tuple[str, ...]
    workspace: Path
    mode: Mode
    timeout: float
    stdin: bytes | None
    env: Mapping[str, str] = field(default_factory=dict)
    module: str | None = None
    """Set for ``run_python`` calls (``argv`` is then ``("python", "-m", module)``)."""


Handler = Callable[[SandboxCall], SandboxResult]


class FunctionSandbox:
    """A ``Sandbox`` whose every run is answered by ``fn``; records the calls it got."""

    def __init__(self, fn: Handler, name: str = "function") -> None:
        self.fn = fn
        self._name = name
        self.calls: list[SandboxCall] = []

    @property
    def name(self) -> str:
        """The name given at construction (``function`` by default)."""
        return self._name

    def run(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        mode: Mode,
        timeout: float,
        stdin: Stdin = None,
        env: Mapping[str, str] | None = None,
    ) -> SandboxResult:
        """Record the call and return ``fn(call)``."""
        data = stdin if isinstance(stdin, bytes) else None
        call = SandboxCall(tuple(argv), workspace, mode, timeout, data, dict(env or {}))
        self.calls.append(call)
        return self.fn(call)

    def run_python(
        self,
        module: str,
        *,
        workspace: Path,
        mode: Mode = "probe",
        timeout: float,
        stdin: Stdin = None,
    ) -> SandboxResult:
        """Record the call (with ``module`` set) and return ``fn(call)``."""
        data = stdin if isinstance(stdin, bytes) else None
        argv = ("python", "-m", module)
        call = SandboxCall(argv, workspace, mode, timeout, data, {}, module)
        self.calls.append(call)
        return self.fn(call)


def result(
    stdout: bytes = b"",
    *,
    exit_code: int | None = 0,
    stderr: bytes = b"",
    backend: str = "function",
) -> SandboxResult:
    """A ``SandboxResult`` with defaults, for handlers."""
    return SandboxResult(exit_code, stdout, stderr, exit_code is None, backend, 0.0)
