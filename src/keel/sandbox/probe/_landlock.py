"""The Landlock backend, for machines where user namespaces (and so bwrap) are blocked.

The child drops to the sandbox uid, applies rlimits, then restricts itself with Landlock
(filesystem: read and execute on ``/usr`` and the interpreter's trees, read on the workspace,
write only to its private run directory or, in ``exec`` mode, a scratch copy of the workspace;
network: TCP bind and connect denied from ABI 4; scope: abstract unix sockets and signals to
outside processes denied from ABI 6) and installs a seccomp filter that also refuses
``socket()`` outright, so UDP, raw and unix sockets are closed too.

Gaps compared with bwrap, by construction: there is no pid namespace (host processes of other
uids are visible through ``/proc`` paths if a program guesses them; ``/proc`` itself is not
granted), no mount namespace (the sandbox sees real paths: cwd is the workspace itself or the
scratch copy, not ``/workspace``), no sized tmpfs (the private temp dir is on disk, bounded per
file by RLIMIT_FSIZE only), and a ``setsid`` daemon escapes the process-group kill; such
leftovers are found afterwards by a per-run marker in their environment, or, when they cleared
it, as unmarked orphans of the sandbox uid reparented to keel (a subreaper), and killed.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from keel.core.errors import SandboxError
from keel.sandbox.os._landlock_abi import (
    CLEANUP_SECONDS,
    DEVICES,
    MARKER,
    READ_EXEC,
    READ_FILE,
    SYSTEM_FILES,
    SYSTEM_TREES,
    WRITE_FILE,
    Ruleset,
    fs_mask,
    landlock_abi,
)
from keel.sandbox.os._process import Spawn, Stdin, become_subreaper, clear_marked, run_process
from keel.sandbox.os._seccomp import PreparedFilter, seccomp_blob
from keel.sandbox.probe import _common
from keel.sandbox.probe._common import Identity
from keel.sandbox.probe._python import PythonLayout, python_layout
from keel.sandbox.probe._types import BackendStatus, Mode, SandboxResult

TYPE_CHECKING = False
if TYPE_CHECKING:
    from keel.core.schema import SandboxConfig


class LandlockSandbox:
    """The Landlock + seccomp + rlimits backend (see the module docstring for its gaps)."""

    def __init__(self, config: SandboxConfig, ident: Identity) -> None:
        self.config = config
        self.ident = ident
        self.abi = landlock_abi()
        self._limits = _common.rlimits(config)
        self._filter = PreparedFilter(seccomp_blob("landlock"))

    @property
    def name(self) -> str:
        """``landlock``."""
        return "landlock"

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
        return self._run(argv, workspace, mode, timeout, stdin, dict(env or {}), None)

    def run_python(
        self,
        module: str,
        *,
        workspace: Path,
        mode: Mode = "probe",
        timeout: float,
        stdin: Stdin = None,
    ) -> SandboxResult:
        """Run ``python -m module`` with keel importable read-only."""
        from keel.sandbox.probe._bwrap import python_argv, python_env

        layout = python_layout(self.ident.uid, self.ident.gid)
        if isinstance(layout, str):
            raise SandboxError(layout, code="sandbox.python")
        argv = python_argv(layout, module)
        return self._run(argv, workspace, mode, timeout, stdin, python_env(layout), layout)

    def _run(
        self,
        argv: Sequence[str],
        workspace: Path,
        mode: Mode,
        timeout: float,
        stdin: Stdin,
        env: dict[str, str],
        layout: PythonLayout | None,
    ) -> SandboxResult:
        if not argv:
            raise SandboxError("empty command", code="sandbox.argv")
        real = _common.check_workspace(workspace, self.ident)
        become_subreaper()
        token = secrets.token_hex(8)
        with _common.run_dir(self.ident) as private:
            tmp, cwd = self._layout(private, real, mode)
            fixed = {"HOME": str(tmp), "TMPDIR": str(tmp), MARKER: token}
            full_env = _common.sandbox_env(env, **fixed)
            try:
                ruleset = Ruleset(self.abi, self._rules(real, cwd, mode, tmp, layout))
            except OSError as exc:
                raise SandboxError(
                    f"cannot build the Landlock ruleset: {exc}", code="sandbox.setup"
                ) from exc
            try:
                spawn = Spawn(
                    argv,
                    full_env,
                    cwd=str(cwd),
                    user=self.ident.uid if self.ident.drop else None,
                    group=self.ident.gid if self.ident.drop else None,
                    preexec=self._preexec(ruleset),
                )
                done = run_process(
                    spawn,
                    stdin=stdin,
                    timeout=timeout,
                    max_output=self.config.max_output_kb * 1024,
                    after_exit=lambda _proc: _kill_marked(token, self.ident.uid),
                )
            finally:
                ruleset.close()
        return SandboxResult(
            done.returncode, done.stdout, done.stderr, done.timed_out, self.name,
            done.duration_ms, done.truncated,
        )  # fmt: skip

    def _layout(self, private: Path, real: Path, mode: Mode) -> tuple[Path, Path]:
        """The temp dir and the cwd: the run dir and the workspace, or for exec a scratch copy."""
        if mode == "probe":
            return private, real
        tmp = private / "tmp"
        tmp.mkdir(mode=0o700)
        if self.ident.drop:
            os.chown(tmp, self.ident.uid, self.ident.gid)
        scratch = private / "workspace"
        _common.scratch_copy(real, scratch, self.ident)
        return tmp, scratch

    def _rules(
        self, real: Path, cwd: Path, mode: Mode, tmp: Path, layout: PythonLayout | None
    ) -> list[tuple[str, int]]:
        everything = fs_mask(self.abi)
        rules = [(p, READ_EXEC) for p in (*SYSTEM_TREES, *SYSTEM_FILES)]
        rules += [(p, READ_FILE | WRITE_FILE) for p in DEVICES]
        if layout is not None:
            rules += [(p, READ_EXEC) for p in layout.binds]
        rules.append((str(tmp), everything))
        if mode == "exec":
            rules.append((str(cwd), everything))
        else:
            rules.append((str(real), READ_EXEC))
        return rules

    def _preexec(self, ruleset: Ruleset) -> Callable[[], None]:
        seccomp = self._filter

        def confine() -> None:
            ruleset.restrict()
            seccomp.install()

        return _common.limits_preexec(self._limits, confine)


def _kill_marked(token: str, uid: int) -> None:
    """Kill this run's leftovers and reap them (they are orphaned to us, the subreaper)."""
    clear_marked(token, uid, CLEANUP_SECONDS)


def status(config: SandboxConfig, ident: Identity, seccomp_problem: str | None) -> BackendStatus:
    """Whether the Landlock backend works here, with its gaps as notes."""
    abi = landlock_abi()
    if abi < 1:
        return BackendStatus(
            "landlock", False, True, reason="Landlock is not enabled in this kernel"
        )
    version = f"ABI {abi}"
    if seccomp_problem:
        return BackendStatus("landlock", False, True, version, reason=seccomp_problem)
    problem = _probe(config, ident)
    if problem:
        return BackendStatus("landlock", False, True, version, reason=problem)
    notes = ["no pid or mount namespace: cwd is the real workspace path"]
    if abi < 4:
        notes.append("ABI < 4: TCP is stopped by seccomp only")
    if abi < 6:
        notes.append("ABI < 6: no signal or abstract-socket scoping")
    return BackendStatus("landlock", True, True, version, reason="; ".join(notes))


def _probe(config: SandboxConfig, ident: Identity) -> str | None:
    try:
        with _common.run_dir(ident) as tmp:
            os.chmod(tmp, 0o755)
            result = LandlockSandbox(config, ident).run(
                ["/usr/bin/true"], workspace=tmp, mode="probe", timeout=10
            )
    except (SandboxError, OSError) as exc:
        return str(exc)
    if result.exit_code != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip()
        return f"landlock probe exited {result.exit_code}: {stderr}"
    return None
