"""``keel exec`` with Landlock and seccomp, for machines where bubblewrap cannot run.

The same promises as the bwrap backend where Landlock can give them:

- reads only from the system trees, the ``/etc`` entries, the read-only view (toolchains,
  ``PATH``, ``[sandbox] home_read_only``), the workspace and a private run directory; HOME is a
  private empty directory (``HOME=`` points there) holding links to the granted toolchains and
  a filtered copy of git's user config; the real HOME's secrets are simply never granted;
- writes only to the workspace, ``[sandbox] writable`` and the run directory;
- TCP connect only to the proxy's port on the host (Landlock ABI 4), no TCP bind, and a seccomp
  filter that allows TCP sockets only (or none when the policy allows no host), so no UDP, no
  raw sockets and no Unix sockets (the hook daemon's socket is unreachable);
- every capability dropped (bounding set too) and no_new_privs, also when run as root.

Documented gaps, by construction:

- no mount namespace, so existing control files cannot be made read-only everywhere: the root's
  own entries are (Landlock grants write per root entry, never on the root itself or on
  ``.keel``, ``keel.toml`` and the other root-level control entries), but nested ones and the
  root's ``.git/hooks`` and ``.git/config`` are writable during the run; they are restored
  byte-for-byte afterwards and the changed copies quarantined. A consequence: the command
  cannot create or delete entries directly in the workspace root (subdirectories are fine).
  The root stays listable, so the names inside ``.keel/`` are visible (not their content);
- no pid namespace: leftovers are killed by process group, by a per-run marker in their
  environment and, having made ``keel exec`` a subreaper, as unmarked orphans it inherited;
- ``/proc`` is not granted (other processes' environments would be readable): tools that need
  it fail; the private ``/tmp`` is a directory on disk, not a sized tmpfs;
- the connect rule is per port: a host other than 127.0.0.1 listening on the proxy's port
  would be reachable too; no local TCP servers (bind is denied);
- Landlock does not govern file modes and times: the command can ``chmod`` or ``touch`` files
  it owns outside the workspace (not read or write them). Run by root, it owns the host's
  system files: the seccomp filter then refuses setuid and setgid modes, but other mode and
  time changes go through. As root, prefer bwrap;
- ``/tmp`` is the host's and not granted: ``TMPDIR`` points to the private directory;
- RLIMIT_NPROC is not enforced by the kernel for root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from keel.core.isolated import resume_collection
from keel.core.root import STATE_DIR
from keel.sandbox.exec import _control
from keel.sandbox.exec._context import (
    Context,
    Limits,
    Tally,
    environment,
    new_proxy,
    planted_submodules,
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
from keel.sandbox.os._landlock_abi import (
    CLEANUP_SECONDS,
    DEVICES,
    MARKER,
    NET_CONNECT_TCP,
    READ_DIR,
    READ_EXEC,
    SYSTEM_TREES,
    Ruleset,
    fs_mask,
    landlock_abi,
)
from keel.sandbox.os._seccomp import PreparedFilter, cached_blob

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from keel.sandbox.exec._proxy import Proxy
    from keel.sandbox.exec._view import View

NO_DEVICES = (1 << 6) | (1 << 11)  # MAKE_CHAR, MAKE_BLOCK
WRITE_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
PR_CAPBSET_DROP = 24


def run_landlock(ctx: Context) -> Tally:
    """Run ``ctx.command`` under Landlock (see the module docstring)."""
    abi = landlock_abi()
    outcome = Tally("landlock")
    scan = _control.scan_controls(ctx.root, ctx.rules())
    before = _control.snapshot(ctx.root, scan)
    private = tempfile.mkdtemp(prefix="keel-exec-")
    proxy: Proxy | None = None
    network = ctx.network and abi >= 4
    if ctx.network and not network:
        ctx.say("network off: Landlock ABI < 4 cannot confine TCP to the proxy")
    try:
        view = view_for(ctx)
        port = None
        if network:
            proxy, port = _start_proxy_tcp(ctx, outcome)
        env = _landlock_env(ctx, view, private, port)
        ruleset = Ruleset(abi, _rules(ctx, view, scan, private, abi), _ports(port))
        try:
            _spawn_and_wait(ctx, outcome, env, ruleset, network)
        finally:
            ruleset.close()
    except OSError as exc:
        raise refused(f"cannot set up the Landlock sandbox: {exc}", "sandbox.setup") from exc
    finally:
        stop_proxy(proxy, None)
        shutil.rmtree(private, ignore_errors=True)
        _after(ctx, outcome, scan, before)
    return outcome


def _start_proxy_tcp(ctx: Context, outcome: Tally) -> tuple[Proxy, int]:
    proxy = new_proxy(ctx)
    port = proxy.listen_tcp()
    outcome.connections = proxy.decisions
    return proxy, port


def _ports(port: int | None) -> list[tuple[int, int]]:
    return [] if port is None else [(port, NET_CONNECT_TCP)]


def _landlock_env(ctx: Context, view: View, private: str, port: int | None) -> dict[str, str]:
    home = os.path.join(private, "home")
    tmp = os.path.join(private, "tmp")
    os.mkdir(home, 0o700)
    os.mkdir(tmp, 0o700)
    env = environment(ctx, home, tmp, f"http://127.0.0.1:{port}")
    for path, content in view.git_configs:
        copy = os.path.join(home, os.path.relpath(path, view.home))
        os.makedirs(os.path.dirname(copy), mode=0o700, exist_ok=True)
        with open(copy, "wb") as fh:
            fh.write(content)
    # What bwrap would bind into the fresh HOME appears as links to the (granted) originals.
    for path in view.read_only:
        if path.startswith(view.home + "/"):
            link = os.path.join(home, os.path.relpath(path, view.home))
            os.makedirs(os.path.dirname(link), mode=0o700, exist_ok=True)
            if not os.path.lexists(link):
                os.symlink(path, link)
    env[MARKER] = ctx.stamp + os.urandom(4).hex()
    return env


def _rules(
    ctx: Context, view: View, scan: _control.Scan, private: str, abi: int
) -> list[tuple[str, int]]:
    everything = fs_mask(abi) & ~NO_DEVICES
    rules = [(p, READ_EXEC) for p in (*SYSTEM_TREES, *view.etc)]
    rules += [(p, WRITE_FILE_RIGHTS) for p in DEVICES]
    rules += [(p, READ_EXEC) for p in _around_masks(view)]
    # The root itself only lists: a read or write right on it would reach .keel/ below it.
    rules += [(ctx.root, READ_DIR)]
    writable, readable = _root_children(ctx.root, scan)
    rules += [(p, everything) for p in writable] + [(p, READ_EXEC) for p in readable]
    rules += [(p, everything) for p in (*view.writable[1:], private)]
    return rules


def _root_children(root: str, scan: _control.Scan) -> tuple[list[str], list[str]]:
    """The workspace root's entries: writable ones, and read-only ones (control entries).

    ``.keel`` is in neither.
    """
    protected = {rel for rel in scan.controls if "/" not in rel}
    with os.scandir(root) as entries:
        names = sorted(e.name for e in entries)
    writable = [os.path.join(root, n) for n in names if n not in protected]
    readable = [os.path.join(root, n) for n in names if n in protected and n != STATE_DIR]
    return writable, readable


def _around_masks(view: View) -> list[str]:
    """The read-only trees, split around the secrets inside them (Landlock cannot subtract)."""
    out: list[str] = []
    for tree in view.read_only:
        inner = [m for m in view.masks if m.startswith(tree + "/")]
        out += _split(tree, inner) if inner else [tree]
    return out


def _split(tree: str, masks: list[str]) -> list[str]:
    if any(m == tree for m in masks):
        return []
    if not any(m.startswith(tree + "/") for m in masks) or not os.path.isdir(tree):
        return [tree]
    try:
        names = sorted(os.listdir(tree))
    except OSError:
        return []
    out: list[str] = []
    for name in names:
        out += _split(os.path.join(tree, name), masks)
    return out


def _spawn_and_wait(
    ctx: Context, outcome: Tally, env: dict[str, str], ruleset: Ruleset, network: bool
) -> None:
    from keel.core.daemon import process_start
    from keel.sandbox.os._process import become_subreaper

    become_subreaper()
    profile = "exec-landlock" if network else "exec-landlock-nonet"
    blob = cached_blob(profile + ("-root" if os.geteuid() == 0 else ""), ctx.state_dir)
    filt = PreparedFilter(blob)
    with Limits(ctx.sandbox):
        proc = subprocess.Popen(
            ctx.command,
            env=env,
            cwd=ctx.cwd,
            close_fds=True,
            start_new_session=True,
            preexec_fn=_confine(ruleset, filt),
        )
    token = env[MARKER]

    def kill() -> None:
        _kill_all(proc.pid, token)

    ctx.kill = kill
    try:
        assert ctx.registration is not None
        ctx.registration.update(
            backend="landlock", processes=[(proc.pid, process_start(proc.pid))], pgid=proc.pid,
            marker=token,
        )  # fmt: skip
        resume_collection()
        try:
            outcome.exit_code = _code(proc.wait(ctx.timeout))
        except subprocess.TimeoutExpired:
            outcome.timed_out = True
            kill()
            proc.wait()
    finally:
        ctx.kill = None
        kill()
        proc.wait()


def _code(status: int) -> int:
    return 128 - status if status < 0 else status


def _confine(ruleset: Ruleset, filt: PreparedFilter) -> Callable[[], None]:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def confine() -> None:
        # Empty the bounding set, so root's next exec gains no capability; past the kernel's
        # last capability (or when not root) the call fails, harmlessly.
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        ruleset.restrict()
        filt.install()

    return confine


def _kill_all(pgid: int, token: str) -> None:
    """SIGKILL the command's process group, then sweep for marked leftovers until none."""
    import signal

    from keel.sandbox.os._process import clear_marked

    _quiet.call(os.killpg, pgid, signal.SIGKILL)
    clear_marked(token, os.getuid(), CLEANUP_SECONDS)


def _after(ctx: Context, outcome: Tally, scan: _control.Scan, before: _control.Snapshot) -> None:
    """Put changed control files back and quarantine new ones (every process is dead)."""
    try:
        changed, after = _changed(ctx, scan, before)
    except OSError as exc:  # fail closed: an unchecked run does not count as a clean one
        unchecked(ctx, outcome, exc)
        write_report(ctx, outcome)
        return
    outcome.restored = [r for r in changed if r in before.items]
    fresh = [r for r in changed if r not in before.items]
    tops = [r for r in fresh if not any(r.startswith(f"{t}/") for t in fresh)]  # moved by restore
    planted = planted_submodules(ctx)
    outcome.quarantined = [*tops, *_control.quarantine(ctx.root, planted, ctx.stamp)]
    report_restored(ctx, outcome.restored)
    report_quarantine(ctx, [*tops, *planted], outcome.quarantined)
    outcome.prompts = _control.changed_prompts(scan, after)
    report_prompts(ctx, outcome.prompts)
    write_report(ctx, outcome)


def _changed(
    ctx: Context, scan: _control.Scan, before: _control.Snapshot
) -> tuple[list[str], _control.Scan]:
    after = _control.scan_controls(ctx.root, ctx.rules())
    both = _control.Scan()
    both.controls = {**after.controls, **scan.controls}
    now = _control.snapshot(ctx.root, both)
    return _control.restore(ctx.root, before, now, ctx.stamp), after
