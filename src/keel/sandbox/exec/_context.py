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

from keel.core.frozen import Frozen
from keel.sandbox.exec import _control
from keel.sandbox.os import _quiet
from keel.sandbox.os._registry import PROXY_LOG

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, TextIO

    from keel.core.errors import ExecRefused
    from keel.sandbox.exec._proxy import Proxy
    from keel.sandbox.exec._proxyd import Session
    from keel.sandbox.exec._view import View
    from keel.sandbox.os._registry import Registration

EXIT_QUARANTINED = 123
EXIT_TIMEOUT = 124
EXIT_UNAVAILABLE = 125  # ExecRefused.default_status
EXIT_REFUSED = 126
EXIT_NOT_FOUND = 127


# ``keel.core.errors`` is imported only once a run is refused: ~0.4 ms that ``keel exec -- true``
# would otherwise pay on every contained call.


def refused(message: str, code: str, status: int = EXIT_UNAVAILABLE) -> ExecRefused:
    """``ExecRefused(message, code, status)``, to raise: the command did not run."""
    from keel.core.errors import ExecRefused

    return ExecRefused(message, code, status)


def exit_status(error: BaseException) -> int:
    """The exit status of ``keel exec`` (and ``keel wrap``) that refused with ``error``.

    2 bad usage, 126 the emergency stop, an ``ExecRefused``'s own ``status``; 125 (could not
    contain it) for anything else: a bad keel.toml, or a failure that is no keel error.
    """
    from keel.core.errors import ExecRefused, StopRequested, UsageError

    if isinstance(error, UsageError):
        return 2
    if isinstance(error, StopRequested):
        return EXIT_REFUSED
    if isinstance(error, ExecRefused):
        return error.status
    return EXIT_UNAVAILABLE


def report_refusal(error: BaseException, err: TextIO) -> int:
    """Say in one line why the command did not run; its exit status (``exit_status``)."""
    from keel.core.errors import KeelError

    if isinstance(error, KeelError):
        err.write(f"keel: error: {error.message} [{error.code}]\n")
    else:  # fail closed: a bug in keel never runs the command
        err.write(
            f"keel: error: internal error: {type(error).__name__}: {error} [internal_error]\n"
        )
    return exit_status(error)


class Tally:
    """What a backend records while the command runs; ``outcome`` freezes it when it is over."""

    __slots__ = (
        "backend",
        "connections",
        "exit_code",
        "prompts",
        "quarantined",
        "restored",
        "stopped",
        "timed_out",
        "unchecked",
    )

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.unchecked = False
        self.exit_code = 0
        self.timed_out = False
        self.stopped: str | None = None
        self.quarantined: list[str] = []
        self.restored: list[str] = []
        self.prompts: list[str] = []
        self.connections: list[Any] = []

    def outcome(self, duration_ms: float, timeout: float, interrupted: int | None) -> Outcome:
        """The run as a frozen ``Outcome``."""
        return Outcome(
            backend=self.backend,
            connections=tuple(self.connections),
            duration_ms=duration_ms,
            exit_code=self.exit_code,
            interrupted=interrupted,
            prompts=tuple(self.prompts),
            quarantined=tuple(self.quarantined),
            restored=tuple(self.restored),
            stopped=self.stopped,
            timed_out=self.timed_out,
            timeout=timeout,
            unchecked=self.unchecked,
        )


class Outcome(Frozen):
    """What one contained run did (the CLI's view; ``ExecResult`` is the public one).

    ``prompts``: prompt files of future agent sessions the command created, changed or
    removed; ``interrupted``: the signal that ended ``keel exec`` early; ``stopped``: the
    emergency stop's reason when ``keel stop`` ended the run; ``unchecked``: the workspace
    could not be checked afterwards (the run does not count as clean).
    """

    __slots__ = (
        "backend",
        "connections",
        "duration_ms",
        "exit_code",
        "interrupted",
        "prompts",
        "quarantined",
        "restored",
        "stopped",
        "timed_out",
        "timeout",
        "unchecked",
    )
    backend: str
    connections: tuple[Any, ...]
    duration_ms: float
    exit_code: int
    interrupted: int | None
    prompts: tuple[str, ...]
    quarantined: tuple[str, ...]
    restored: tuple[str, ...]
    stopped: str | None
    timed_out: bool
    timeout: float
    unchecked: bool

    def __init__(
        self,
        *,
        backend: str,
        connections: tuple[Any, ...],
        duration_ms: float,
        exit_code: int,
        interrupted: int | None,
        prompts: tuple[str, ...],
        quarantined: tuple[str, ...],
        restored: tuple[str, ...],
        stopped: str | None,
        timed_out: bool,
        timeout: float,
        unchecked: bool,
    ) -> None:
        self._init(
            backend=backend,
            connections=connections,
            duration_ms=duration_ms,
            exit_code=exit_code,
            interrupted=interrupted,
            prompts=prompts,
            quarantined=quarantined,
            restored=restored,
            stopped=stopped,
            timed_out=timed_out,
            timeout=timeout,
            unchecked=unchecked,
        )


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
        self.decisions = True
        """Collect the proxy's decisions (``Outcome.connections``; the CLI shows none)."""
        self.served: Session | None = None
        """The connection to the daemon that served the run's proxy, when no decisions were
        collected: kept open, once the command is over, for the run's own event."""
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
    """The host paths the command sees (``_view.build_view``); ``ViewError`` if refused."""
    from keel.sandbox.exec._view import build_view

    home = ctx.environ.get("HOME") or passwd_home()
    extra: tuple[str | None, ...] = ()
    if ctx.wrap is not None:  # its relay inside is a Python script (``keel exec`` has none)
        extra = (_bridge_prefix(), *ctx.wrap.read_only)
    return build_view(
        ctx.root,
        home=home,
        path=ctx.environ.get("PATH", ""),
        writable=tuple(ctx.sandbox.writable),
        home_read_only=tuple(ctx.sandbox.home_read_only),
        state_dir=ctx.state_dir,
        extra_read_only=tuple(p for p in extra if p),
    )


def passwd_home() -> str:
    """The invoking user's home directory from the password database (``HOME`` unset)."""
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir


def _bridge_prefix() -> str | None:
    """The interpreter's installation, bound read-only so ``keel wrap``'s relay runs inside."""
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
    raise refused("cannot create a private directory for the proxy", "sandbox.tmpdir")


def new_proxy(ctx: Context, check: Any = None) -> Proxy:
    """The run's proxy: judged by the workspace's policy (or ``check``).

    Its decisions are logged to ``PROXY_LOG``, its refusals journaled with the command
    (``_journal``).
    """
    from keel.sandbox.exec._journal import denial_recorder
    from keel.sandbox.exec._proxy import Proxy, policy_check

    on_deny = denial_recorder(ctx.root, ctx.command, ctx.report)
    log = os.path.join(ctx.root, PROXY_LOG)
    return Proxy(check or policy_check(ctx.root), log, on_deny)


def stop_proxy(proxy: Proxy | None, private: str | None) -> None:
    """Close the proxy and remove its private directory (``private_dir``), if any."""
    if proxy is not None:
        proxy.close()
    if private is not None:
        _quiet.unlink(os.path.join(private, "proxy.sock"))
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


def write_report(ctx: Context, outcome: Tally) -> None:
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


def unchecked(ctx: Context, outcome: Tally, exc: OSError) -> None:
    """Fail closed when the workspace could not be checked: the run does not count as clean."""
    outcome.unchecked = True
    ctx.say(f"could not check the workspace for planted control files: {exc}")
