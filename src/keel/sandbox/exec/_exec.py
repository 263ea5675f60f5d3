"""``keel exec``: one command, contained, in place in the workspace, as the invoking user.

The steps, each fail-closed (anything unexpected refuses with exit 125 before the command
runs): read ``[sandbox]`` and ``[policy]`` through the pydantic-free config view; refuse while
the emergency stop is set; choose the backend; scan the control files; build the view, the
environment and, when the policy allows any host, the proxy (with bwrap: the workspace
daemon's, or a thread of this process, accepting on a socket put in the sandbox's network
namespace before the command starts: ``_Network``); register in ``.keel/exec/`` before the
command can start (and check the stop again, so a ``keel stop`` racing with the start still
reaches this run: ``_register``; bwrap is started first and held at ``--block-fd`` meanwhile,
so the command check, the registration and the daemon's connection overlap its setup); run
the backend with a wall-clock limit; when every process of the command is gone, scan again
and quarantine what the command planted; unregister.

Exit codes: the command's own, ``128 + N`` when it died of signal N; ``123`` the command
succeeded but planted control files, which were quarantined (or they could not be checked);
``124`` the wall-clock limit;
``125`` keel could not contain it (no backend, setup failed, bad config, refused view);
``126`` the emergency stop: set before the run (refused) or during it (``keel stop`` killed
it); ``127`` the command was not found.

Run by root, the sandbox's pid namespace gets its own ``pid_max`` (``_pidns``): RLIMIT_NPROC
does not bind root, and a fork bomb would otherwise fill the host. Each run is journaled, and
each connection its proxy refused (``_journal``).

Standard library only at import time: this runs for every contained shell call.
"""

from __future__ import annotations

import os
import sys
import time

from keel.core.isolated import resume_collection
from keel.core.root import STATE_DIR, find_root, state_path
from keel.core.stop import STOP_FILE, stop_reason
from keel.sandbox.exec import _control
from keel.sandbox.exec._context import (
    EXIT_NOT_FOUND,
    EXIT_QUARANTINED,
    EXIT_REFUSED,
    EXIT_TIMEOUT,
    Context,
    Limits,
    Outcome,
    Tally,
    environment,
    new_proxy,
    planted_submodules,
    private_dir,
    refused,
    report_prompts,
    report_quarantine,
    report_restored,
    stop_proxy,
    unchecked,
    view_for,
    write_report,
)
from keel.sandbox.os import _quiet
from keel.sandbox.os._registry import EXEC_DIR, dumps

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TextIO

    from keel.sandbox.exec._control import Scan
    from keel.sandbox.exec._netns import Placer
    from keel.sandbox.exec._proxy import Proxy
    from keel.sandbox.exec._proxyd import Session
    from keel.sandbox.exec._view import View
else:  # the C module: ``signal`` builds three enums at import (2 ms on this path)
    import _signal

PROXY_PORT = 3128
"""The proxy's port on the sandbox's own loopback (bwrap; Landlock uses a free host port)."""
_SIGNALS: dict[int, str] = {
    _signal.SIGINT: "SIGINT",
    _signal.SIGTERM: "SIGTERM",
    _signal.SIGHUP: "SIGHUP",
}


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
    decisions: bool = True,
    detach_journal: bool = False,
) -> Outcome:
    """Run ``command`` contained; raises a ``keel.core.errors`` error when it cannot.

    ``UsageError``, ``ConfigError``, ``StopRequested`` or ``ExecRefused`` (``exit_status`` in
    ``_context`` gives each one's exit code; see the module).

    ``wrap`` (``keel wrap``) adds to the sandbox what a whole agent client needs; see
    ``keel.sandbox.wrap._wrap``. ``report``: write what the run left behind to
    ``.keel/exec/reports/<report>.json`` (``_control.write_report``). ``decisions=False``:
    leave ``Outcome.connections`` empty (the proxy log has them; not waiting for the
    workspace daemon to send them saves the CLI a round trip). The run is journaled
    (``_journal.record_run``; not ``keel wrap``'s, whose client's hooks journal its calls)
    once it is over; ``detach_journal``: by a fork that outlives this process (the command
    line, which exits next, does not wait for the journal).
    """
    started = time.perf_counter()
    if not command:
        from keel.core.errors import UsageError

        raise UsageError("no command given (keel exec -- CMD...)", code="usage.invalid")
    environ = os.environ if environ is None else environ
    root = _workspace(workspace, cwd)
    config = _config(root)
    _refuse_if_stopped(root)
    _ensure_state(root)
    from keel.core.userstate import user_state_dir

    limit = timeout if timeout is not None else float(config.sandbox.exec_timeout_seconds)
    ctx = Context(
        command, root, _cwd(root, cwd), limit, config, environ, user_state_dir(), err or sys.stderr
    )
    if wrap is not None:
        ctx.wrap, ctx.network = wrap, True
    ctx.report = report
    ctx.decisions = decisions
    try:
        return _registered(
            ctx, backend or ctx.sandbox.backend, started, wrap is None, detach_journal
        )
    finally:
        if ctx.served is not None:  # not journaled through it
            ctx.served.close()


def _registered(ctx: Context, backend: str, started: float, journal: bool, detach: bool) -> Outcome:
    """Run the backend, registered (``keel stop`` finds the run) and with signal handlers.

    The backend registers the run before its command can start (``_register``). ``journal``:
    the run's ``exec`` event (``_journal``; not ``keel wrap``'s, whose client's hooks journal
    its calls), sent to the daemon before the registration is removed, so that the daemon
    journals it meanwhile (``detach``: the command line's run, see ``execute``).
    """
    sent: tuple[dict[str, Any], Session | None] | None = None
    previous = {sig: _signal.signal(sig, _handler(ctx)) for sig in _SIGNALS}
    try:
        try:
            tally = _run(ctx, backend)
            tally.stopped = _stopped_by(ctx, tally)
            elapsed = (time.perf_counter() - started) * 1000
            outcome = tally.outcome(elapsed, ctx.timeout, ctx.interrupted)
            if journal:
                sent = _send_run(ctx, outcome, detach)
        finally:
            if ctx.registration is not None:
                ctx.registration.remove()
    finally:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)
    if sent is not None:
        event, session = sent
        if session is None or not session.recorded():
            from keel.sandbox.exec._journal import record_run

            record_run(ctx.root, event, detach=detach)
    return outcome


def _send_run(
    ctx: Context, outcome: Outcome, detach: bool
) -> tuple[dict[str, Any], Session | None]:
    """The run's ``exec`` event: what ran, how it ended, what it left; and where it was sent.

    The command line's run (``detach``) goes to the workspace's daemon when it is there, on
    the connection that served the run's proxy if there was one: the connection to wait on
    (``Session.recorded``). None: the caller journals the event (``_journal.record_run``).
    """
    from keel.sandbox.exec import _proxyd

    data = {
        "argv": list(ctx.command),
        "cwd": ctx.cwd,
        "exit_code": code_of(outcome),
        "duration_ms": round(outcome.duration_ms, 1),
        "backend": outcome.backend,
        "timed_out": outcome.timed_out,
        "stopped": outcome.stopped,
        "interrupted": outcome.interrupted,
        "quarantined": list(outcome.quarantined),
        "restored": list(outcome.restored),
        "prompts": list(outcome.prompts),
        "unchecked": outcome.unchecked,
        "report": ctx.report,
    }
    served, ctx.served = ctx.served, None
    if not detach:
        if served is not None:
            served.close()
        return data, None
    return data, _proxyd.send_run(ctx.root, dumps(data).encode(), served)


def _run(ctx: Context, requested: str) -> Tally:
    from keel.sandbox.exec._select import choose

    choice = choose(requested, ctx.state_dir)
    if choice.name is None:
        raise refused(
            f"no sandbox can contain this command here: {choice.reason} (`keel sandbox check` "
            "explains; install bubblewrap or enable Landlock)",
            "sandbox.unavailable",
        )
    if ctx.wrap is not None and choice.name != "bwrap":
        raise refused(
            f"keel wrap needs bubblewrap ({choice.reason}): Landlock cannot give the client a "
            "private HOME with its own config, nor a loopback for its model server",
            "sandbox.unavailable",
        )
    if ctx.interrupted is not None:
        status = 128 + ctx.interrupted
        raise refused("interrupted before the command started", "exec.interrupted", status)
    if choice.name == "bwrap":  # checks the command and registers once bwrap is started
        assert choice.binary is not None
        return _run_bwrap(ctx, choice.binary)
    from keel.sandbox.exec._landlock import run_landlock

    _check_command(ctx)
    _register(ctx)
    return run_landlock(ctx)


def _register(ctx: Context, **fields: Any) -> None:
    """Register the run (``keel stop`` finds it from now on), then check the stop again.

    Called before the command can start: a ``keel stop`` that set its flag before the record
    was written is seen here (``StopRequested``), one after it finds the record.
    """
    from keel.sandbox.os._registry import Registration

    record = {"argv": ctx.command, "cwd": ctx.cwd, "report": ctx.report, **fields}
    ctx.registration = Registration(ctx.root, record)
    _refuse_if_stopped(ctx.root)


def _handler(ctx: Context) -> Any:
    def on_signal(signum: int, _frame: object) -> None:
        ctx.interrupted = signum
        if ctx.kill is not None:
            ctx.kill()

    return on_signal


def _run_bwrap(ctx: Context, binary: str) -> Tally:
    from keel.sandbox.exec import _bwrap as eb

    outcome = Tally("bwrap")
    scan = _control.scan_controls(ctx.root, ctx.rules(), keep_fds=True)
    deep = _control.snapshot(ctx.root, scan.only(scan.deep)) if scan.deep else None
    proxy: Proxy | None = None
    proxy_dir: str | None = None
    fds: list[int] = []
    try:
        view = view_for(ctx)
        env = environment(ctx, view.home, "/tmp", f"http://127.0.0.1:{PROXY_PORT}")
        command, proxy_fd = ctx.command, None
        if ctx.wrap is not None:  # keel exec's proxy is placed once bwrap runs (_Network)
            proxy, proxy_dir = _start_proxy(ctx, outcome)
            proxy_fd = os.open(proxy_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            fds.append(proxy_fd)
            command = ctx.wrap.command(ctx, proxy_dir)
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
        stop_proxy(proxy, proxy_dir)
        after_run(ctx, outcome, scan, deep)
    return outcome


def _spawn_and_wait(
    ctx: Context,
    outcome: Tally,
    binary: str,
    env: dict[str, str],
    view: View,
    mounts: Any,
    command: list[str],
) -> None:
    from keel.core.daemon import process_start
    from keel.sandbox.exec import _bwrap as eb

    seccomp = _seccomp_fd(ctx, "exec")
    network = None
    if ctx.network and ctx.wrap is None:  # before the pipes: the fork must not hold them
        try:
            network = _Network(ctx)
        except BaseException:
            _close(seccomp)
            raise
    status_r, status_w = os.pipe()
    # bwrap waits (--block-fd) until the run is registered, the proxy's listener is inside
    # and the processes capped: what needs no bwrap argument is done while it starts
    cap = _caps_processes()
    block_r, block_w = os.pipe()
    try:
        argv = eb.bwrap_argv(
            binary,
            system=eb.system_args(view, ctx.sandbox.exec_tmp_mb << 20, ctx.state_dir),
            mounts=mounts,
            cwd=ctx.cwd,
            seccomp_fd=seccomp,
            status_fd=status_w,
            command=command,
            block_fd=block_r,
        )
        passed = [seccomp, status_w, block_r, *mounts.fds]
        with Limits(ctx.sandbox):
            proc = eb.BwrapProcess(argv, env, passed, status_r)
    except OSError as exc:
        _close(status_r)
        _close(block_w)
        if network is not None:
            network.finish(False)
        raise refused(f"cannot start bwrap: {exc}", "sandbox.spawn") from exc
    finally:
        _close(seccomp)
        _close(status_w)
        _close(block_r)
    try:
        ctx.kill = proc.kill
        if ctx.interrupted is not None:
            proc.kill()
        _check_command(ctx)  # while bwrap starts, as is what follows up to its report
        if network is not None:
            network.connect()
        init = proc.read_child_pid()

        def register() -> None:  # keel stop finds the sandbox before the command runs
            processes = [(p, process_start(p)) for p in (proc.pid, init) if p is not None]
            _register(ctx, backend="bwrap", processes=processes)

        if init is not None:
            _release(ctx, network, proc.status, block_w, cap, register)
        else:  # bwrap failed before its report: _wait says so
            register()
        resume_collection()
        _wait(ctx, outcome, proc)
    except BaseException:
        proc.kill()  # never leave the command running behind an error
        proc.wait(60.0)
        proc.finish()
        raise
    finally:
        ctx.kill = None
        _close(block_w)  # only now: a closed pipe would also let bwrap go on
        proc.close()
        if network is not None:
            outcome.connections = network.finish(ctx.decisions)


def _caps_processes() -> bool:
    """Whether the run's pid namespace gets its own ``pid_max`` (``_pidns``).

    Only for root: everyone else is held by RLIMIT_NPROC (``Limits``), which the kernel does
    not enforce for root.
    """
    if os.getuid() != 0:
        return False
    from keel.sandbox.exec._pidns import supported

    return supported()


def _release(
    ctx: Context,
    network: _Network | None,
    status: dict[str, int],
    block_w: int,
    cap: bool,
    register: Callable[[], None],
) -> None:
    """Register, cap the sandbox's processes, put the proxy's listener in, let bwrap go on.

    With a proxy, the process that places its listener (the daemon's namespace helper, or
    the fork of ``_netns.Placer``) caps in the same request, and the run registers its
    sandbox while that is done; without one, ``_cap`` does.
    """
    try:
        if network is not None:
            network.ask(status, _pid_cap(ctx, status) if cap else None)
            register()
            network.place()
        else:
            register()
            if cap:
                _cap(ctx, status)
    except Exception as exc:
        if ctx.interrupted is None:
            raise
        signum = ctx.interrupted  # the signal killed the sandbox: that is what failed
        message = "interrupted before the command started"
        raise refused(message, "exec.interrupted", 128 + signum) from exc
    _quiet.call(os.write, block_w, b"x")  # bwrap gone already: _wait tells


def _pid_cap(ctx: Context, status: dict[str, int]) -> tuple[int, int]:
    """The pid namespace bwrap reported and the ``pid_max`` it gets (``_pidns``).

    Raises:
        ExecRefused: bwrap did not report it.
    """
    from keel.sandbox.exec._pidns import pid_max_for

    pid_ns = status.get("pid-namespace")
    if status.get("child-pid") is None or pid_ns is None:
        raise refused("bwrap did not report its pid namespace", "sandbox.processes")
    return pid_ns, pid_max_for(ctx.sandbox.exec_max_processes)


def _cap(ctx: Context, status: dict[str, int]) -> None:
    """Set the ``pid_max`` of the sandbox's pid namespace (root's runs; see ``_pidns``).

    A kernel or system that does not let it be set leaves the run uncapped, as before.

    Raises:
        ExecRefused: bwrap's report does not name the namespace there is (the caller kills
            the sandbox).
    """
    from keel.sandbox.exec._pidns import cap

    pid, pid_ns = status.get("child-pid"), status.get("pid-namespace")
    if pid is None or pid_ns is None:
        raise refused("bwrap did not report its pid namespace", "sandbox.processes")
    try:
        cap(pid, pid_ns, ctx.sandbox.exec_max_processes)
    except OSError as exc:
        message = f"cannot cap the sandbox's processes: {exc}"
        raise refused(message, "sandbox.processes") from exc


def _wait(ctx: Context, outcome: Tally, proc: Any) -> None:
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
        raise refused(
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


def after_run(ctx: Context, outcome: Tally, before: Scan, deep: _control.Snapshot | None) -> None:
    """What the command left behind, once every process of it is gone.

    New (or replaced) control entries are quarantined; control entries below the mount depth
    (``deep``, snapshotted before the run) are put back if they changed; changed prompt
    files are reported. Then the report is written for the hook (``Context.report``).
    """
    try:
        after = _control.scan_controls(ctx.root, ctx.rules())
        fresh = [r for r in _control.new_controls(before, after) if r not in before.deep]
        fresh += planted_submodules(ctx)
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
        unchecked(ctx, outcome, exc)
    write_report(ctx, outcome)


def final_code(outcome: Outcome, err: TextIO | None = None) -> int:
    """The exit status of ``keel exec`` for ``outcome``, said on ``err`` when keel ended it."""
    ending = _ending(outcome)
    if ending is not None:
        out: Any = err if err is not None else sys.stderr
        out.write(f"keel: {ending}\n")
    return code_of(outcome)


def code_of(outcome: Outcome) -> int:
    """The exit status of ``keel exec`` for ``outcome`` (see the module docstring)."""
    if outcome.stopped is not None:
        return EXIT_REFUSED
    if outcome.timed_out:
        return EXIT_TIMEOUT
    if outcome.interrupted is not None:
        return 128 + outcome.interrupted
    planted = outcome.quarantined or outcome.restored or outcome.unchecked
    if planted and outcome.exit_code == 0:
        return EXIT_QUARANTINED
    return outcome.exit_code


def _ending(outcome: Outcome) -> str | None:
    """Why keel ended the command, if it did."""
    if outcome.stopped is not None:
        return (
            f"stopped: the emergency stop is set ({outcome.stopped}); the contained command "
            "was killed (`keel resume` clears the stop)"
        )
    if outcome.timed_out:
        return f"timed out after {outcome.timeout:g} s; the command was killed"
    if outcome.interrupted is not None:
        name = _SIGNALS.get(outcome.interrupted, str(outcome.interrupted))
        return f"interrupted by {name}; the contained command was killed"
    return None


# -- preparation -----------------------------------------------------------------------------


def _workspace(workspace: str | None, cwd: str | None) -> str:
    if workspace is None:
        return find_root(cwd or os.getcwd())
    root = os.path.realpath(os.path.expanduser(workspace))
    if not os.path.isdir(root):
        from keel.core.errors import UsageError

        raise UsageError(f"the workspace {workspace} is not a directory", code="usage.workspace")
    return root


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
        from keel.core.errors import ConfigError

        raise ConfigError(f"cannot read keel.toml: {message}", code="config.invalid") from exc


def _stopped_by(ctx: Context, outcome: Tally) -> str | None:
    """The emergency stop's reason if ``keel stop`` ended the run, else ``None``.

    ``keel stop`` sets the flag, then SIGTERMs ``keel exec`` and SIGKILLs the sandbox: a run
    ended from outside (a signal here, or the sandbox killed) while the flag is set was
    ended by the stop, and exits 126 as a run the stop refused does.
    """
    killed = outcome.exit_code == 128 + _signal.SIGKILL
    if ctx.interrupted is None and not killed:
        return None
    return _stop_set(ctx.root)


def _refuse_if_stopped(root: str) -> None:
    reason = _stop_set(root)
    if reason is None:
        return
    from keel.core.errors import StopRequested

    raise StopRequested(
        f"refused: the emergency stop is set ({reason}); `keel resume` clears it",
        code="stop.active",
    )


def _stop_set(root: str) -> str | None:
    """The emergency stop's reason when its flag is set (unreadable counts as set)."""
    try:
        os.lstat(os.path.join(root, STATE_DIR, STOP_FILE))
    except FileNotFoundError:
        return None
    except OSError:
        pass  # an unreadable flag is a set flag
    return stop_reason(root) or "emergency stop"


def _ensure_state(root: str) -> None:
    """``.keel/exec`` as real directories (a symlinked ``.keel`` is refused)."""
    for rel in (STATE_DIR, EXEC_DIR):
        path = os.path.join(root, rel)
        try:
            _quiet.mkdir(path, 0o755 if rel == STATE_DIR else 0o700)
        except OSError as exc:
            raise refused(f"cannot create {path}: {exc.strerror}", "sandbox.state") from exc
        st = os.lstat(path)
        if not (st.st_mode & 0o170000 == 0o040000):
            raise refused(f"{path} is not a directory (a symlink?)", "sandbox.state")


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
        raise refused(f"{name}: command not found", "exec.not_found", EXIT_NOT_FOUND)


def _seccomp_fd(ctx: Context, profile: Any) -> int:
    from keel.sandbox.os._seccomp import cached_blob

    try:
        blob = cached_blob(profile, ctx.state_dir)
    except Exception as exc:  # pyseccomp missing or failing: never run without the filter
        message = getattr(exc, "message", None) or str(exc)
        raise refused(message, "sandbox.seccomp") from exc
    fd = os.memfd_create("keel-seccomp", os.MFD_CLOEXEC)
    os.write(fd, blob)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# -- the proxy -----------------------------------------------------------------------------------


def _start_proxy(ctx: Context, outcome: Tally) -> tuple[Proxy, str]:
    from keel.sandbox.exec._proxy import policy_check

    private = private_dir()
    check = policy_check(ctx.root)
    if ctx.wrap is not None:
        check = ctx.wrap.check(check)
    proxy = new_proxy(ctx, check)
    proxy.listen_unix(os.path.join(private, "proxy.sock"))
    outcome.connections = proxy.decisions
    return proxy, private


class _Network:
    """keel exec's proxy with bwrap: a listener inside the sandbox, served by hookd or by us.

    Before bwrap starts: with no daemon recorded for the workspace, a fork is made ready to
    put the listener in (``_netns.Placer``; forked first, its start overlaps bwrap's). While
    bwrap starts, the daemon's proxy is connected to (``connect``). Once bwrap has reported its
    namespace (``ask``; ``place`` waits for the answer), the daemon puts the listener there
    (and caps the processes: ``_release``) and serves it with the policy it has loaded, or the
    fork puts it there and a proxy thread of this process serves it. When the CLI collects no
    decisions, the daemon's connection is kept for the run's event (``Context.served``).
    Anything failing before the command starts refuses the run (exit 125): it never runs with
    a way out that no proxy judges.
    """

    def __init__(self, ctx: Context) -> None:
        """Find the daemon's record, or fork the placer (see the class).

        Raises:
            ExecRefused: neither (no fork).
        """
        from keel.core.daemon import recorded_proxy

        self.ctx = ctx
        self.root = ctx.root
        self.daemon = recorded_proxy(state_path(ctx.root), ctx.environ)
        self.session: Session | None = None
        self.placer: Placer | None = None
        self.proxy: Proxy | None = None
        self.request: tuple[int, int, int, tuple[int, int] | None] = (0, 0, 0, None)
        """What ``ask`` asked for: the sandbox's pid, its network namespace, port, cap."""
        if self.daemon is None:
            self.placer = _placer()

    def connect(self) -> None:
        """Connect to the recorded daemon's proxy (``place`` falls back if it cannot)."""
        if self.daemon is not None:
            from keel.sandbox.exec._proxyd import connect

            self.session = connect(self.root, self.daemon)

    def ask(self, status: dict[str, int], cap: tuple[int, int] | None = None) -> None:
        """Ask for the listener in the sandbox bwrap reported in ``status``; ``place`` waits.

        ``cap``: the pid namespace (as reported) and its ``pid_max``, set in the same request
        by whoever places the listener (``_pidns``).

        Raises:
            ExecRefused: it cannot be asked (the caller kills the sandbox).
        """
        pid, net_ns = status.get("child-pid"), status.get("net-namespace")
        if pid is None or net_ns is None:
            raise refused("bwrap did not report its network namespace", "sandbox.network")
        self.request = (pid, net_ns, PROXY_PORT, cap)
        if self.session is not None:
            if self.session.ask(*self.request):
                return
            self.session = None  # that daemon would not: place our own (and cap)
        self._ask_placer()

    def place(self) -> None:
        """Once what ``ask`` asked for is done, serve the listener (unless the daemon does).

        Raises:
            ExecRefused: it could not be done (the caller kills the sandbox).
        """
        if self.session is not None:
            if self.session.placed():
                return
            self.session = None  # that daemon would not: place our own (and cap)
            self._ask_placer()
        assert self.placer is not None
        try:
            listener = self.placer.listener()
        except OSError as exc:
            message = f"cannot put the proxy inside the sandbox: {exc}"
            raise refused(message, "sandbox.network") from exc
        self.proxy = new_proxy(self.ctx)
        self.proxy.serve(listener)

    def _ask_placer(self) -> None:
        if self.placer is None:
            self.placer = _placer()
        try:
            self.placer.ask(*self.request)
        except OSError as exc:
            message = f"cannot put the proxy inside the sandbox: {exc}"
            raise refused(message, "sandbox.network") from exc

    def finish(self, decisions: bool) -> list[Any]:
        """Once the sandbox is gone: stop serving and end the fork; the proxy's decisions.

        ``decisions=False``: the daemon is not waited for (none are returned).
        """
        if self.placer is not None:
            self.placer.close()
        if self.session is not None and not decisions:
            # the daemon stops serving this run at the run's event or end of file
            self.ctx.served, self.session = self.session, None
            return []
        if self.session is not None:
            return list(self.session.finish())
        if self.proxy is None:
            return []
        self.proxy.close()
        return self.proxy.decisions


def _placer() -> Placer:
    from keel.sandbox.exec._netns import Placer

    try:
        return Placer()
    except OSError as exc:
        raise refused(f"cannot prepare the sandbox's proxy: {exc}", "sandbox.network") from exc


_close = _quiet.close
