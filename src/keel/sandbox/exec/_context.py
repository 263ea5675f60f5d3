"""What both ``keel exec`` backends share: the run's context, its outcome, and their helpers.

``_exec`` decides everything before a backend starts (a ``Context``) and runs the bubblewrap
backend; ``_landlock`` runs the Landlock one. Both build the view and the environment, set the
soft rlimits, stop the proxy and report what the command left behind through this module, so
neither imports the other's internals.

Standard library only at import time: this runs for every contained shell call.
"""

from __future__ import annotations

import os
import sys
import time

from keel.sandbox.exec import _control
from keel.sandbox.exec._view import ViewError
from keel.sandbox.os import _quiet
from keel.sandbox.os._registry import EXEC_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, TextIO

    from keel.sandbox.exec._proxy import Proxy
    from keel.sandbox.exec._view import View
    from keel.sandbox.os._registry import Registration

EXIT_QUARANTINED = 123
EXIT_TIMEOUT = 124
EXIT_UNAVAILABLE = 125
EXIT_REFUSED = 126
EXIT_NOT_FOUND = 127
PROXY_LOG = os.path.join(EXEC_DIR, "proxy.log")


class ExecRefused(Exception):
    """``keel exec`` did not run the command: a coded reason and the exit status to use."""

    def __init__(self, message: str, code: str, status: int = EXIT_UNAVAILABLE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status

    def as_error(self) -> Exception:
        """The same refusal as a ``keel.core.errors`` exception (for the library API)."""
        from keel.core.errors import ConfigError, SandboxError, StopRequested, UsageError

        if self.code.startswith("stop."):
            return StopRequested(self.message, code=self.code)
        if self.code.startswith("config."):
            return ConfigError(self.message, code=self.code)
        if self.code.startswith("usage."):
            return UsageError(self.message, code=self.code)
        return SandboxError(self.message, code=self.code)


class Outcome:
    """What one contained run did (the CLI's view; ``ExecResult`` is the public one)."""

    __slots__ = (
        "backend",
        "connections",
        "duration_ms",
        "exit_code",
        "interrupted",
        "prompts",
        "quarantined",
        "restored",
        "timed_out",
        "timeout",
        "unchecked",
    )

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.unchecked = False
        self.exit_code = 0
        self.timed_out = False
        self.timeout = 0.0
        self.interrupted: int | None = None
        self.quarantined: list[str] = []
        self.restored: list[str] = []
        self.prompts: list[str] = []
        """Prompt files of future agent sessions the command created, changed or removed."""
        self.connections: list[Any] = []
        self.duration_ms = 0.0


class Context:
    """Everything decided before the backend starts."""

    def __init__(
        self,
        command: Sequence[str],
        root: str,
        cwd: str,
        timeout: float,
        config: Any,
        environ: Mapping[str, str],
        state_dir: str,
        err: TextIO,
    ) -> None:
        self.command = list(command)
        self.root = root
        self.cwd = cwd
        self.timeout = timeout
        self.config = config
        self.sandbox = config.sandbox
        self.environ = environ
        self.state_dir = state_dir
        self.err = err
        self.network = network_on(config)
        self.wrap: Any = None
        """``keel wrap``'s additions (``keel.sandbox.wrap._wrap.Wrap``); ``None`` for keel exec."""
        self.registration: Registration | None = None
        self.interrupted: int | None = None
        self.kill: Any = None
        """Set by the backend while its sandbox runs: kills it (signal handlers call this)."""
        self.report: str | None = None
        """``--report ID``: write what the run left behind to ``.keel/exec/reports/ID.json``."""
        self.stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
        self.started = time.time()
        """When the run began (wall clock): what changed since is the command's doing."""

    def rules(self) -> _control.ControlRules:
        """The control-file rules of ``[sandbox]``."""
        from keel.core.protected import own_installation

        s = self.sandbox
        globs = (*s.read_only, *own_installation(self.root))
        return _control.ControlRules(s.control_depth, s.protect_ci, globs, tuple(s.show_secrets))

    def say(self, text: str) -> None:
        """One line on stderr, prefixed ``keel:``."""
        self.err.write(f"keel: {text}\n")
        self.err.flush()


def network_on(config: Any) -> bool:
    """Whether the policy allows any host at all (then the proxy is started)."""
    if config.policy.network_allow:
        return True
    from keel.core.presets import PRESETS

    preset = PRESETS.get(config.policy.preset)
    return bool(preset and preset["network"])


# -- what both backends build ------------------------------------------------------------------


def view_for(ctx: Context) -> View:
    """The host paths the command sees (``_view.build_view``), or ``ExecRefused``."""
    from keel.sandbox.exec._view import build_view

    home = ctx.environ.get("HOME") or passwd_home()
    extra = (_bridge_prefix(),) if ctx.network else ()
    if ctx.wrap is not None:
        extra = (*extra, *ctx.wrap.read_only)
    try:
        return build_view(
            ctx.root,
            home=home,
            path=ctx.environ.get("PATH", ""),
            writable=tuple(ctx.sandbox.writable),
            home_read_only=tuple(ctx.sandbox.home_read_only),
            state_dir=ctx.state_dir,
            extra_read_only=tuple(p for p in extra if p),
        )
    except ViewError as exc:
        raise ExecRefused(exc.message, exc.code) from exc


def passwd_home() -> str:
    """The invoking user's home directory from the password database (``HOME`` unset)."""
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir


def _bridge_prefix() -> str | None:
    """The interpreter's installation, bound read-only so the bridge can run inside."""
    prefix = os.path.realpath(sys.base_prefix)
    return None if prefix == "/usr" or prefix.startswith("/usr/") else prefix


def environment(ctx: Context, home: str, tmpdir: str, proxy_url: str) -> dict[str, str]:
    """The command's filtered environment (``_environ.contained_env``)."""
    from keel.sandbox.exec._environ import contained_env

    extra = {"PWD": ctx.cwd, **(ctx.wrap.environ if ctx.wrap is not None else {})}
    return contained_env(
        ctx.environ,
        home=home,
        tmpdir=tmpdir,
        proxy_url=proxy_url if ctx.network else None,
        extra=extra,
    )


class Limits:
    """``[sandbox] exec_*`` soft rlimits on this process around the spawn (the child inherits).

    Only soft limits change: a lowered hard limit could not be raised back without
    CAP_SYS_RESOURCE, and ``run_contained`` runs inside the caller's process. They guard
    against runaway builds, not against the command (which may raise them to the hard limit).
    """

    def __init__(self, sandbox: Any) -> None:
        import resource

        self.resource = resource
        wanted = [
            (resource.RLIMIT_NPROC, sandbox.exec_max_processes),
            (resource.RLIMIT_NOFILE, sandbox.exec_max_open_files),
            (resource.RLIMIT_CORE, 0),
        ]
        if sandbox.exec_memory_mb:
            wanted.append((resource.RLIMIT_AS, sandbox.exec_memory_mb << 20))
        self.wanted = wanted
        self.saved: list[tuple[int, tuple[int, int]]] = []

    def __enter__(self) -> None:
        r = self.resource
        for res, value in self.wanted:
            old = r.getrlimit(res)
            soft = value if old[1] == r.RLIM_INFINITY else min(value, old[1])
            if self._set(res, (soft, old[1])):
                self.saved.append((res, old))

    def __exit__(self, *_: object) -> None:
        for res, old in reversed(self.saved):
            self._set(res, old)

    def _set(self, res: int, limits: tuple[int, int]) -> bool:
        try:
            self.resource.setrlimit(res, limits)
        except (ValueError, OSError):
            return False
        return True


def private_dir() -> str:
    """A fresh private directory (0700) for the proxy's socket, under ``XDG_RUNTIME_DIR``."""
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    if not os.path.isdir(base):
        base = "/tmp"
    for _ in range(8):
        path = os.path.join(base, f"keel-exec-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise ExecRefused("cannot create a private directory for the proxy", "sandbox.tmpdir")


def stop_proxy(proxy: Proxy | None, private: str | None) -> None:
    """Close the proxy and remove its private directory (``private_dir``), if any."""
    if proxy is not None:
        proxy.close()
    if private is not None:
        for name in ("proxy.sock", "bridge.py"):
            _quiet.unlink(os.path.join(private, name))
        _quiet.call(os.rmdir, private)


# -- after the run -------------------------------------------------------------------------------


def planted_submodules(ctx: Context) -> list[str]:
    """Gitlinks below directories the walk skips whose ``.git`` the command touched."""
    if not os.path.isdir(os.path.join(ctx.root, ".git")):
        return []
    from keel.sandbox.exec._gitlinks import changed_gitlinks

    # the coarse clock behind inode times can lag time.time() by a tick
    return changed_gitlinks(ctx.root, ctx.started - 0.05)


def report_restored(ctx: Context, restored: list[str]) -> None:
    """Say which control files were put back (the changed copies are in quarantine)."""
    if restored:
        ctx.say(
            "the command changed control files; restored them (the changed copies are in "
            f"{_control.QUARANTINE}/{ctx.stamp}/): {', '.join(restored)}"
        )


def report_prompts(ctx: Context, prompts: list[str]) -> None:
    """Say which prompt files of future agent sessions the command changed (they stay)."""
    if prompts:
        ctx.say(
            "the command changed prompt files that the next agent session reads as its "
            f"instructions (kept; a person should review them: keel diff): {', '.join(prompts)}"
        )


def report_quarantine(ctx: Context, fresh: list[str], moved: list[str]) -> None:
    """Say what was quarantined, and why each file (and what could not be)."""
    if moved:
        where = f"{_control.QUARANTINE}/{ctx.stamp}/"
        from keel.core.protected import reason_for

        named = "; ".join(f"{rel} ({reason_for(rel)})" for rel in moved)
        ctx.say(
            "the command created files that programs outside the sandbox would read or run; "
            f"moved to {where}: {named}"
        )
    left = [r for r in fresh if r not in moved]
    if left:
        ctx.say(f"could not quarantine: {', '.join(left)} (remove them by hand)")


def write_report(ctx: Context, outcome: Outcome) -> None:
    """``.keel/exec/reports/ID.json``: what the run left behind, for the hook's journal."""
    if ctx.report is None or not (
        outcome.quarantined or outcome.restored or outcome.prompts or outcome.unchecked
    ):
        return
    import json

    data = {
        "quarantined": outcome.quarantined,
        "restored": outcome.restored,
        "prompts": outcome.prompts,
        "unchecked": outcome.unchecked,
        "stamp": ctx.stamp,
    }
    _control.write_report(ctx.root, ctx.report, json.dumps(data, sort_keys=True))


def unchecked(ctx: Context, outcome: Outcome, exc: OSError) -> None:
    """Fail closed when the workspace could not be checked: the run does not count as clean."""
    outcome.unchecked = True
    ctx.say(f"could not check the workspace for planted control files: {exc}")
