"""``keel exec``: one command, contained, in place in the workspace, as the invoking user.

The steps, each fail-closed (anything unexpected refuses with exit 125 before the command
runs): read ``[sandbox]`` and ``[policy]`` through the pydantic-free config view; refuse while
the emergency stop is set; register in ``.keel/exec/`` (and check the stop again, so a
``keel stop`` racing with the start still reaches this run); choose the backend; scan the
control files; build the view, the environment and, when the policy allows any host, the
proxy; run the backend with a wall-clock limit; when every process of the command is gone,
scan again and quarantine what the command planted; unregister.

Exit codes: the command's own, ``128 + N`` when it died of signal N; ``123`` the command
succeeded but planted control files, which were quarantined (or they could not be checked);
``124`` the wall-clock limit;
``125`` keel could not contain it (no backend, setup failed, bad config, refused view);
``126`` refused: the emergency stop is set; ``127`` the command was not found.

Standard library only at import time: this runs for every contained shell call.
"""

from __future__ import annotations

import os
import sys
import time

from keel.sandbox.exec import _control
from keel.sandbox.exec._view import ViewError
from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Mapping, Sequence
    from typing import Any, TextIO

    from keel.sandbox.exec._control import Scan
    from keel.sandbox.exec._proxy import Proxy
    from keel.sandbox.exec._view import View
    from keel.sandbox.os._registry import Registration
else:  # the C module: ``signal`` builds three enums at import (2 ms on this path)
    import _signal

EXIT_QUARANTINED = 123
EXIT_TIMEOUT = 124
EXIT_UNAVAILABLE = 125
EXIT_REFUSED = 126
EXIT_NOT_FOUND = 127
PROXY_PORT = 3128
"""The proxy's port on the sandbox's own loopback (bwrap; Landlock uses a free host port)."""
STOP_FILE = os.path.join(".keel", "STOP")
_SIGNALS: dict[int, str] = {
    _signal.SIGINT: "SIGINT",
    _signal.SIGTERM: "SIGTERM",
    _signal.SIGHUP: "SIGHUP",
}


class ExecRefused(Exception):
    """``keel exec`` did not run the command: a coded reason and the exit status to use."""

    def __init__(self, message: str, code: str, status: int = EXIT_UNAVAILABLE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


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
        self.network = _network_on(config)
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


def execute(
    command: Sequence[str],
    *,
    workspace: str | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    backend: str | None = None,
    environ: Mapping[str, str] | None = None,
    err: TextIO | None = None,
    wrap: Any = None,
    report: str | None = None,
) -> Outcome:
    """Run ``command`` contained; raises ``ExecRefused`` when it cannot (see the module).

    ``wrap`` (``keel wrap``) adds to the sandbox what a whole agent client needs; see
    ``keel.sandbox.wrap._wrap``. ``report``: write what the run left behind to
    ``.keel/exec/reports/<report>.json`` (``_control.write_report``).
    """
    started = time.perf_counter()
    if not command:
        raise ExecRefused("no command given (keel exec -- CMD...)", "usage.invalid", 2)
    environ = os.environ if environ is None else environ
    root = _workspace(workspace, cwd)
    config = _config(root)
    _refuse_if_stopped(root)
    _ensure_state(root)
    from keel.core.userstate import user_state_dir
    from keel.sandbox.os._registry import Registration

    limit = timeout if timeout is not None else float(config.sandbox.exec_timeout_seconds)
    ctx = Context(
        command, root, _cwd(root, cwd), limit, config, environ, user_state_dir(), err or sys.stderr
    )
    if wrap is not None:
        ctx.wrap, ctx.network = wrap, True
    ctx.report = report
    previous = {sig: _signal.signal(sig, _handler(ctx)) for sig in _SIGNALS}
    try:
        ctx.registration = Registration(root, {"argv": ctx.command, "cwd": ctx.cwd})
        try:
            _refuse_if_stopped(root)
            outcome = _run(ctx, backend or ctx.sandbox.backend)
        finally:
            ctx.registration.remove()
    finally:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    outcome.timeout = limit
    outcome.interrupted = ctx.interrupted
    return outcome


def _run(ctx: Context, requested: str) -> Outcome:
    from keel.sandbox.exec._select import choose

    choice = choose(requested, ctx.state_dir)
    if choice.name is None:
        raise ExecRefused(
            f"no sandbox can contain this command here: {choice.reason} (`keel sandbox check` "
            "explains; install bubblewrap or enable Landlock)",
            "sandbox.unavailable",
        )
    _check_command(ctx)
    if ctx.wrap is not None and choice.name != "bwrap":
        raise ExecRefused(
            f"keel wrap needs bubblewrap ({choice.reason}): Landlock cannot give the client a "
            "private HOME with its own config, nor a loopback for its model server",
            "sandbox.unavailable",
        )
    if ctx.interrupted is not None:
        status = 128 + ctx.interrupted
        raise ExecRefused("interrupted before the command started", "exec.interrupted", status)
    if choice.name == "bwrap":
        assert choice.binary is not None
        return _run_bwrap(ctx, choice.binary)
    from keel.sandbox.exec._landlock import run_landlock

    return run_landlock(ctx)


def _handler(ctx: Context) -> Any:
    def on_signal(signum: int, _frame: object) -> None:
        ctx.interrupted = signum
        if ctx.kill is not None:
            ctx.kill()

    return on_signal


def _run_bwrap(ctx: Context, binary: str) -> Outcome:
    from keel.sandbox.exec import _bwrap as eb

    outcome = Outcome("bwrap")
    scan = _control.scan_controls(ctx.root, ctx.rules(), keep_fds=True)
    deep = _control.snapshot(ctx.root, scan.only(scan.deep)) if scan.deep else None
    proxy: Proxy | None = None
    proxy_dir: str | None = None
    fds: list[int] = []
    try:
        view = _build_view(ctx)
        env = _env(ctx, view.home, "/tmp", f"http://127.0.0.1:{PROXY_PORT}")
        command, proxy_fd = ctx.command, None
        if ctx.network:
            proxy, proxy_dir = _start_proxy(ctx, outcome)
            proxy_fd = os.open(proxy_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            fds.append(proxy_fd)
            command = (
                _bridged(command, proxy_dir)
                if ctx.wrap is None
                else ctx.wrap.command(ctx, proxy_dir)
            )
        root_fd = os.open(ctx.root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        fds.append(root_fd)
        tmp_bytes = ctx.sandbox.exec_tmp_mb << 20
        mounts = eb.user_mounts(ctx.root, root_fd, view, scan, tmp_bytes, proxy_fd)
        fds += mounts.fds
        if ctx.wrap is not None:
            fds += ctx.wrap.mounts(ctx, mounts)
        _spawn_and_wait(ctx, outcome, binary, env, view, mounts, command)
    finally:
        for fd in fds:
            _close(fd)
        scan.close()
        _stop_proxy(proxy, proxy_dir)
        after_run(ctx, outcome, scan, deep)
    return outcome


def _spawn_and_wait(
    ctx: Context,
    outcome: Outcome,
    binary: str,
    env: dict[str, str],
    view: View,
    mounts: Any,
    command: list[str],
) -> None:
    from keel.sandbox.exec import _bwrap as eb
    from keel.sandbox.os._registry import start_time

    seccomp = _seccomp_fd(ctx, "exec")
    status_r, status_w = os.pipe()
    try:
        argv = eb.bwrap_argv(
            binary,
            system=eb.system_args(view, ctx.sandbox.exec_tmp_mb << 20, ctx.state_dir),
            mounts=mounts,
            cwd=ctx.cwd,
            seccomp_fd=seccomp,
            status_fd=status_w,
            command=command,
        )
        with _limits(ctx.sandbox):
            proc = eb.BwrapProcess(argv, env, [seccomp, status_w, *mounts.fds], status_r)
    except OSError as exc:
        _close(status_r)
        raise ExecRefused(f"cannot start bwrap: {exc}", "sandbox.spawn") from exc
    finally:
        _close(seccomp)
        _close(status_w)
    try:
        ctx.kill = proc.kill
        if ctx.interrupted is not None:
            proc.kill()
        init = proc.read_child_pid()
        processes = [(p, start_time(p)) for p in (proc.pid, init) if p is not None]
        assert ctx.registration is not None
        ctx.registration.update(backend="bwrap", processes=processes)
        _wait(ctx, outcome, proc)
    except BaseException:
        proc.kill()  # never leave the command running behind an error
        proc.wait(60.0)
        proc.finish()
        raise
    finally:
        ctx.kill = None
        proc.close()


def _wait(ctx: Context, outcome: Outcome, proc: Any) -> None:
    status = proc.wait(ctx.timeout)
    if status is None:
        outcome.timed_out = True
        proc.kill()
        status = proc.wait(60.0)
    started = proc.finish()
    killed = status is not None and os.WIFSIGNALED(status)  # from outside: not a setup error
    if not started and not killed and not outcome.timed_out and ctx.interrupted is None:
        from keel.sandbox.exec._select import forget

        forget(ctx.state_dir)
        raise ExecRefused(
            "the bwrap sandbox failed to start (its message is above; `keel sandbox check` "
            "explains)",
            "sandbox.setup",
        )
    outcome.exit_code = _exit_code(status)


def _exit_code(status: int | None) -> int:
    if status is None:
        return EXIT_TIMEOUT
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def after_run(ctx: Context, outcome: Outcome, before: Scan, deep: _control.Snapshot | None) -> None:
    """What the command left behind, once every process of it is gone.

    New (or replaced) control entries are quarantined; control entries below the mount depth
    (``deep``, snapshotted before the run) are put back if they changed; changed prompt
    files are reported. Then the report is written for the hook (``Context.report``).
    """
    try:
        after = _control.scan_controls(ctx.root, ctx.rules())
        fresh = [r for r in _control.new_controls(before, after) if r not in before.deep]
        fresh += _planted_submodules(ctx)
        if fresh:
            outcome.quarantined = _control.quarantine(ctx.root, fresh, ctx.stamp)
            report_quarantine(ctx, fresh, outcome.quarantined)
        if deep is not None:
            now = _control.snapshot(ctx.root, before.only(before.deep))
            outcome.restored = _control.restore(ctx.root, deep, now, ctx.stamp)
            report_restored(ctx, outcome.restored)
        outcome.prompts = _control.changed_prompts(before, after)
        report_prompts(ctx, outcome.prompts)
    except OSError as exc:  # fail closed: an unchecked run does not count as a clean one
        outcome.unchecked = True
        ctx.say(f"could not check the workspace for planted control files: {exc}")
    write_report(ctx, outcome)


def _planted_submodules(ctx: Context) -> list[str]:
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


def final_code(outcome: Outcome, err: TextIO | None = None) -> int:
    """The exit status of ``keel exec`` for ``outcome`` (see the module docstring)."""
    out: Any = err if err is not None else sys.stderr
    if outcome.timed_out:
        out.write(f"keel: timed out after {outcome.timeout:g} s; the command was killed\n")
        return EXIT_TIMEOUT
    if outcome.interrupted is not None:
        name = _SIGNALS.get(outcome.interrupted, str(outcome.interrupted))
        out.write(f"keel: interrupted by {name}; the contained command was killed\n")
        return 128 + outcome.interrupted
    planted = outcome.quarantined or outcome.restored or outcome.unchecked
    if planted and outcome.exit_code == 0:
        return EXIT_QUARANTINED
    return outcome.exit_code


# -- preparation -----------------------------------------------------------------------------


def _workspace(workspace: str | None, cwd: str | None) -> str:
    if workspace is None:
        return find_root(cwd or os.getcwd())
    root = os.path.realpath(os.path.expanduser(workspace))
    if not os.path.isdir(root):
        raise ExecRefused(f"the workspace {workspace} is not a directory", "usage.workspace", 2)
    return root


def find_root(start: str) -> str:
    """``keel.core.root.find_root`` without ``pathlib`` (4 ms of imports on this path).

    The nearest ancestor holding ``keel.toml``, else the nearest one holding ``.git``, else
    ``start`` itself (all resolved).
    """
    here = os.path.realpath(start)
    chain = [here]
    while chain[-1] != "/":
        chain.append(os.path.dirname(chain[-1]))
    for marker, want_file in (("keel.toml", True), (".git", False)):
        for candidate in chain:
            path = os.path.join(candidate, marker)
            if os.path.isfile(path) if want_file else os.path.exists(path):
                return candidate
    return here


def _cwd(root: str, cwd: str | None) -> str:
    """The caller's directory when it is inside the workspace, else the workspace root."""
    try:
        here = os.path.realpath(cwd or os.getcwd())
    except OSError:
        return root
    return here if here == root or here.startswith(root + "/") else root


def _config(root: str) -> Any:
    from keel.core.configview import config_view

    try:
        return config_view(root)
    except Exception as exc:  # an invalid keel.toml: refuse, never run with defaults
        message = getattr(exc, "message", None) or str(exc)
        raise ExecRefused(f"cannot read keel.toml: {message}", "config.invalid") from exc


def _refuse_if_stopped(root: str) -> None:
    try:
        os.lstat(os.path.join(root, STOP_FILE))
    except FileNotFoundError:
        return
    except OSError:
        pass  # an unreadable flag is a set flag
    from pathlib import Path

    from keel.core.stop import stop_reason

    reason = stop_reason(Path(root)) or "emergency stop"
    raise ExecRefused(
        f"refused: the emergency stop is set ({reason}); `keel resume` clears it",
        "stop.active",
        EXIT_REFUSED,
    )


def _ensure_state(root: str) -> None:
    """``.keel/exec`` as real directories (a symlinked ``.keel`` is refused)."""
    for rel in (".keel", os.path.join(".keel", "exec")):
        path = os.path.join(root, rel)
        try:
            _quiet.mkdir(path, 0o755 if rel == ".keel" else 0o700)
        except OSError as exc:
            raise ExecRefused(f"cannot create {path}: {exc.strerror}", "sandbox.state") from exc
        st = os.lstat(path)
        if not (st.st_mode & 0o170000 == 0o040000):
            raise ExecRefused(f"{path} is not a directory (a symlink?)", "sandbox.state")


def _network_on(config: Any) -> bool:
    """Whether the policy allows any host at all (then the proxy is started)."""
    if config.policy.network_allow:
        return True
    from keel.core.presets import PRESETS

    preset = PRESETS.get(config.policy.preset)
    return bool(preset and preset["network"])


def _check_command(ctx: Context) -> None:
    name = ctx.command[0]
    if "/" in name:
        found = os.access(os.path.join(ctx.cwd, name), os.X_OK)
    else:
        path = ctx.environ.get("PATH", "")
        found = any(
            os.access(os.path.join(d or ".", name), os.X_OK)
            and not os.path.isdir(os.path.join(d or ".", name))
            for d in path.split(":")
        )
    if not found:
        raise ExecRefused(f"{name}: command not found", "exec.not_found", EXIT_NOT_FOUND)


def _build_view(ctx: Context) -> View:
    from keel.sandbox.exec._view import build_view

    home = ctx.environ.get("HOME") or _passwd_home()
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


def _passwd_home() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir


def _env(ctx: Context, home: str, tmpdir: str, proxy_url: str) -> dict[str, str]:
    from keel.sandbox.exec._environ import contained_env

    extra = {"PWD": ctx.cwd, **(ctx.wrap.environ if ctx.wrap is not None else {})}
    return contained_env(
        ctx.environ,
        home=home,
        tmpdir=tmpdir,
        proxy_url=proxy_url if ctx.network else None,
        extra=extra,
    )


def _seccomp_fd(ctx: Context, profile: Any) -> int:
    from keel.sandbox.os._seccomp import cached_blob

    try:
        blob = cached_blob(profile, ctx.state_dir)
    except Exception as exc:  # pyseccomp missing or failing: never run without the filter
        message = getattr(exc, "message", None) or str(exc)
        raise ExecRefused(message, "sandbox.seccomp") from exc
    fd = os.memfd_create("keel-seccomp", os.MFD_CLOEXEC)
    os.write(fd, blob)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _limits:
    """``[sandbox] exec_*`` soft rlimits on this process around the spawn (bwrap inherits them).

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


# -- the proxy -----------------------------------------------------------------------------------


def _start_proxy(ctx: Context, outcome: Outcome) -> tuple[Proxy, str]:
    from keel.sandbox.exec._proxy import Proxy, policy_check

    private = _private_dir()
    check = policy_check(ctx.root)
    if ctx.wrap is not None:
        check = ctx.wrap.check(check)
    proxy = Proxy(check, os.path.join(ctx.root, ".keel", "exec", "proxy.log"))
    proxy.listen_unix(os.path.join(private, "proxy.sock"))
    outcome.connections = proxy.decisions
    return proxy, private


def _stop_proxy(proxy: Proxy | None, private: str | None) -> None:
    if proxy is not None:
        proxy.close()
    if private is not None:
        for name in ("proxy.sock", "bridge.py"):
            _quiet.unlink(os.path.join(private, name))
        _quiet.call(os.rmdir, private)


def _private_dir() -> str:
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


def _bridged(command: list[str], private: str) -> list[str]:
    """The command behind the bridge, which is put in the proxy's directory (``/run/keel``)."""
    from keel.sandbox.exec._bridge import source
    from keel.sandbox.exec._bwrap import PROXY_MOUNT

    with open(os.path.join(private, "bridge.py"), "x", encoding="utf-8") as fh:
        fh.write(source())
    python = os.path.realpath(sys.executable)
    script, socket_path = f"{PROXY_MOUNT}/bridge.py", f"{PROXY_MOUNT}/proxy.sock"
    return [python, "-I", "-S", script, str(PROXY_PORT), socket_path, *command]


def _bridge_prefix() -> str | None:
    """The interpreter's installation, bound read-only so the bridge can run inside."""
    prefix = os.path.realpath(sys.base_prefix)
    return None if prefix == "/usr" or prefix.startswith("/usr/") else prefix


_close = _quiet.close
