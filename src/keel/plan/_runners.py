"""How probes are run: the ``ProbeRunner`` seam, through the sandbox or in this process.

``run`` runs one probe; ``run_many`` (the optional ``BatchRunner`` side) runs independent probes
together, so a plan's ready probes share one sandbox start and run concurrently inside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from keel.probes import ProbeResult, execute
from keel.probes.runner import run_batch

if TYPE_CHECKING:
    from keel.sandbox import Sandbox

MAX_OUTPUT = 8 << 20


class ProbeRunner(Protocol):
    """Runs one probe request against a workspace and returns its result; never raises."""

    @property
    def name(self) -> str:
        """Where probes run: a sandbox backend name or ``in-process``."""
        ...

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> ProbeResult:
        """Run ``request`` (function, args, caps) with ``workspace`` as the probe's root."""
        ...


@runtime_checkable
class BatchRunner(Protocol):
    """A runner that can run several independent probes in one go (one sandbox start)."""

    def run_many(
        self, requests: list[dict[str, Any]], *, workspace: Path, timeout: float
    ) -> list[ProbeResult]:
        """Run ``requests`` concurrently; one result per request, in order."""
        ...


class SandboxedRunner:
    """Probes run as ``python -m keel.probes.runner`` in the sandbox, workspace read-only."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @property
    def name(self) -> str:
        """The sandbox backend."""
        return self.sandbox.name

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> ProbeResult:
        """Run one probe in the sandbox; a timeout or crash is a structured error."""
        payload = dict(request, workspace=None, backend=self.name)
        data = self._call(payload, workspace, timeout)
        return data if isinstance(data, ProbeResult) else ProbeResult.from_dict(data)

    def run_many(
        self, requests: list[dict[str, Any]], *, workspace: Path, timeout: float
    ) -> list[ProbeResult]:
        """Run independent probes in one sandboxed runner, concurrently, each with its timeout."""
        batch = [dict(r, workspace=None) for r in requests]
        data = self._call({"batch": batch, "backend": self.name}, workspace, timeout + 2)
        if isinstance(data, ProbeResult):
            return [data] * len(requests)
        if not isinstance(data, list) or len(data) != len(requests):
            failure = ProbeResult.failure("probe.bad_output", "the runner returned a bad batch")
            return [failure] * len(requests)
        return [ProbeResult.from_dict(item) for item in data]

    def _call(self, payload: dict[str, Any], workspace: Path, timeout: float) -> Any:
        from keel.core.errors import SandboxError

        try:
            done = self.sandbox.run_python(
                "keel.probes.runner",
                workspace=workspace,
                mode="probe",
                timeout=timeout,
                stdin=json.dumps(payload).encode(),
            )
        except SandboxError as exc:
            return ProbeResult.failure(exc.code, exc.message)
        if done.timed_out:
            return ProbeResult.failure(
                "probe.timeout", f"the probe did not finish in {timeout:g} s"
            )
        lines = done.stdout[:MAX_OUTPUT].strip().splitlines()
        if done.exit_code != 0 or not lines:
            tail = done.stderr[-400:].decode("utf-8", "replace").strip()
            return ProbeResult.failure(
                "probe.crashed", f"the probe runner exited with {done.exit_code}: {tail}"
            )
        try:
            return json.loads(lines[-1])
        except ValueError:
            return ProbeResult.failure("probe.bad_output", "the probe runner printed no JSON")


class InProcessRunner:
    """Probes called directly in this process: for tests of pure logic, no isolation."""

    @property
    def name(self) -> str:
        """``in-process``."""
        return "in-process"

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> ProbeResult:
        """Run one probe here (no timeout is enforced)."""
        del timeout
        return execute(dict(request, workspace=str(workspace)), backend=self.name)

    def run_many(
        self, requests: list[dict[str, Any]], *, workspace: Path, timeout: float
    ) -> list[ProbeResult]:
        """Run probes here, concurrently, each bounded by its own timeout."""
        del timeout
        ready = [dict(r, workspace=str(workspace)) for r in requests]
        return run_batch(ready, backend=self.name)
