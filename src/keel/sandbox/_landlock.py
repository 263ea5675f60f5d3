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

import contextlib
import ctypes
import functools
import os
import secrets
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from keel.config import SandboxConfig
from keel.errors import SandboxError
from keel.sandbox import _common
from keel.sandbox._common import Identity
from keel.sandbox._process import Spawn, run_process, sweep
from keel.sandbox._python import PythonLayout, python_layout
from keel.sandbox._seccomp import PreparedFilter, seccomp_blob
from keel.sandbox._types import BackendStatus, Mode, SandboxResult, Stdin

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_EXEC = EXECUTE | READ_FILE | READ_DIR
MARKER = "KEEL_SANDBOX_RUN"
CLEANUP_SECONDS = 2.0
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache",)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    return max(int(abi), 0)


def _fs_mask(abi: int) -> int:
    mask = (1 << 13) - 1
    if abi >= 2:
        mask |= 1 << 13  # REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


class Ruleset:
    """A Landlock ruleset built in the parent; the child only calls ``restrict_self``.

    Building it before ``fork`` keeps the forked child's work to three syscalls (the ruleset
    fd is close-on-exec, and ``subprocess`` closes other fds only after ``preexec_fn``).
    """

    def __init__(self, abi: int, rules: Sequence[tuple[str, int]]) -> None:
        libc = _libc()
        fs = _fs_mask(abi)
        attr = _RulesetAttr(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        self.fd = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        try:
            for path, access in rules:
                self._add(path, access & fs)
        except OSError:
            self.close()
            raise

    def _add(self, path: str, access: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # optional trees such as /lib32 may be absent
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= FILE_RIGHTS
            rule = _PathBeneath(access, fd)
            if _libc().syscall(SYS_ADD_RULE, self.fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                raise OSError(ctypes.get_errno(), f"landlock_add_rule({path!r})")
        finally:
            os.close(fd)

    def restrict(self) -> None:
        """Restrict the calling process (call in the child)."""
        libc = _libc()
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, self.fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")

    def close(self) -> None:
        """Close the ruleset fd (in the parent, after the child started)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


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
        from keel.sandbox._bwrap import python_argv, python_env

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
        _common.become_subreaper()
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
        everything = _fs_mask(self.abi)
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
    deadline = time.monotonic() + CLEANUP_SECONDS
    while True:
        killed, reaped = kill_marked(token, uid)
        if not (killed or reaped) or time.monotonic() > deadline:
            return
        time.sleep(0.005)


def kill_marked(token: str, uid: int) -> tuple[int, int]:
    """SIGKILL this run's leftovers and reap zombie orphans; returns ``(killed, reaped)``.

    A leftover is a live process of ``uid`` carrying this run's marker, or an orphan of
    ``uid`` reparented to us (we are a subreaper) that carries no run marker at all: it
    cleared its environment to hide, and no live run owns it.
    """
    needle = f"{MARKER}={token}".encode()
    prefix = f"{MARKER}=".encode()

    def doomed(pid: int, orphan: bool) -> bool:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            return False
        return needle in env or (orphan and not any(e.startswith(prefix) for e in env))

    return sweep(uid, doomed)


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
