"""The ``none-unsafe`` backend: a plain subprocess, for machines with no sandbox.

It isolates nothing. It exists so a user can explicitly choose to run without a sandbox
(``--unsafe-no-sandbox``); the caller journals that choice. It still clears the environment,
applies the rlimits (when not root, where NPROC is not enforced anyway), enforces the timeout
by killing the process group, and gives ``exec`` a scratch copy so the workspace is not
written. The command sees the real paths: its cwd is the workspace (or the scratch copy).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from keel.core.errors import SandboxError
from keel.core.schema import SandboxConfig
from keel.sandbox.os._process import Spawn, Stdin, run_process
from keel.sandbox.probe import _common
from keel.sandbox.probe._types import Mode, SandboxResult


class UnsafeSandbox:
    """No isolation: a subprocess with a timeout and a process-group kill."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.ident = _common.Identity(0, 0, False)

    @property
    def name(self) -> str:
        """``none-unsafe``."""
        return "none-unsafe"

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
        """Run ``argv`` with the workspace (or, for exec, a scratch copy) as cwd."""
        full_env = _common.sandbox_env(env, HOME="/tmp")
        return self._run(argv, workspace, mode, timeout, stdin, full_env)

    def run_python(
        self,
        module: str,
        *,
        workspace: Path,
        mode: Mode = "probe",
        timeout: float,
        stdin: Stdin = None,
    ) -> SandboxResult:
        """Run ``python -m module`` with the current interpreter and ``sys.path``."""
        from keel.sandbox.probe._bwrap import python_argv
        from keel.sandbox.probe._python import PythonLayout, import_roots

        layout = PythonLayout(sys.executable, "", (), import_roots())
        env = {"PYTHONPATH": ":".join(layout.pythonpath), "PYTHONSAFEPATH": "1", "HOME": "/tmp"}
        argv = python_argv(layout, module)
        return self._run(argv, workspace, mode, timeout, stdin, _common.sandbox_env(None, **env))

    def _run(
        self,
        argv: Sequence[str],
        workspace: Path,
        mode: Mode,
        timeout: float,
        stdin: Stdin,
        env: dict[str, str],
    ) -> SandboxResult:
        if not argv:
            raise SandboxError("empty command", code="sandbox.argv")
        real = _common.check_workspace(workspace, self.ident)
        limits = _common.rlimits(self.config)
        with contextlib.ExitStack() as stack:
            cwd = real
            if mode == "exec":
                cwd = stack.enter_context(_common.run_dir(self.ident)) / "workspace"
                _common.scratch_copy(real, cwd, self.ident)
            spawn = Spawn(argv, env, cwd=str(cwd), preexec=_common.limits_preexec(limits))
            done = run_process(
                spawn, stdin=stdin, timeout=timeout, max_output=self.config.max_output_kb * 1024
            )
        return SandboxResult(
            done.returncode, done.stdout, done.stderr, done.timed_out, self.name,
            done.duration_ms, done.truncated,
        )  # fmt: skip
