"""The sandbox seam: the ``Sandbox`` protocol, its result and the detection report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from keel.sandbox.os._process import Stdin

Mode = Literal["probe", "exec"]
"""``probe``: the workspace is read-only; ``exec``: a writable scratch copy that is thrown away."""
BackendName = Literal["bwrap", "landlock", "none-unsafe"]
BACKENDS: tuple[BackendName, ...] = ("bwrap", "landlock", "none-unsafe")
WORKSPACE_MOUNT = "/workspace"
"""Where the workspace appears inside namespace-based sandboxes."""


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What one sandboxed process did."""

    exit_code: int | None
    """The exit status; negative for a signal; ``None`` when it was killed at the timeout."""
    stdout: bytes
    stderr: bytes
    timed_out: bool
    backend: str
    duration_ms: float
    truncated: bool = False
    """Whether stdout or stderr went over the output cap and was cut."""

    @property
    def ok(self) -> bool:
        """Whether the process finished in time with exit code 0."""
        return self.exit_code == 0 and not self.timed_out


@runtime_checkable
class Sandbox(Protocol):
    """Runs a command isolated from the host; one implementation per backend."""

    @property
    def name(self) -> str:
        """The backend name: ``bwrap``, ``landlock``, ``none-unsafe`` or a test double's."""
        ...

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
        """Run ``argv`` with the workspace as cwd; raises ``SandboxError`` if it cannot start."""
        ...

    def run_python(
        self,
        module: str,
        *,
        workspace: Path,
        mode: Mode = "probe",
        timeout: float,
        stdin: Stdin = None,
    ) -> SandboxResult:
        """Run ``python -m module`` with keel and its dependencies importable read-only."""
        ...


@dataclass(frozen=True, slots=True)
class BackendStatus:
    """Whether one backend works on this machine, and why not."""

    name: BackendName
    available: bool
    safe: bool
    """Whether the backend actually isolates (``none-unsafe`` never does)."""
    version: str | None = None
    path: str | None = None
    reason: str = ""
    """Why it is unavailable, or notes (gaps, warnings) when it is available."""


@dataclass(frozen=True, slots=True)
class PythonStatus:
    """How ``run_python`` starts an interpreter inside the sandbox."""

    executable: str | None
    version: str | None
    pythonpath: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SandboxReport:
    """The result of probing every backend: what works here, and which one is chosen."""

    backends: tuple[BackendStatus, ...]
    chosen: BackendName | None
    uid: int
    python: PythonStatus = field(default_factory=lambda: PythonStatus(None, None))

    @property
    def safe(self) -> bool:
        """Whether a backend that really isolates works."""
        return any(b.available and b.safe for b in self.backends)

    def status(self, name: BackendName) -> BackendStatus:
        """The status of one backend."""
        return next(b for b in self.backends if b.name == name)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready object."""
        data = asdict(self)
        data["safe"] = self.safe
        return data
