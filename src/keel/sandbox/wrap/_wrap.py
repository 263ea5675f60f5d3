"""``keel wrap``: a whole agent client inside ``keel exec``'s sandbox.

``keel exec`` does the work (``keel.sandbox.exec._exec``, bubblewrap only); a ``Wrap`` is passed to
it as ``Context.wrap`` and adds what a client needs:

- its state, writable, with its settings read-only (``keel.sandbox.wrap._state``);
- its install directory (the outermost ``node_modules`` of an npm install) and keel's own
  installation, read-only, so the client and its ``keel hook`` calls run inside;
- its API key variables, which ``keel exec``'s filter removes, back in its environment;
- the network through ``keel exec``'s proxy, which also allows the client's model hosts and
  ``--allow-host`` (``ALLOW``); the policy's ``network_allow`` still applies to everything;
- loopback relays: each allowed ``127.0.0.1:PORT`` or ``localhost:PORT`` (a local or fake
  model server) is also listened on inside and tunnelled through the proxy, for clients that
  ignore ``HTTP(S)_PROXY``;
- the hooks' decisions, outside (``keel.sandbox.wrap._decide``): inside, ``.keel/`` holds only
  the hook relay's socket and record, bound read-only from a private host directory that is
  also mounted at ``/run/keel-wrap``.

Everything the client spawns inherits the sandbox. There is no wall-clock limit unless one is
given. See ``keel.sandbox.wrap`` for the library API.
"""

from __future__ import annotations

import os
import sys

from keel.core.errors import UsageError
from keel.core.frozen import Frozen
from keel.core.root import STATE_DIR
from keel.sandbox.exec._bwrap import PROXY_MOUNT
from keel.sandbox.exec._context import passwd_home, private_dir
from keel.sandbox.exec._exec import PROXY_PORT
from keel.sandbox.exec._view import SYSTEM_TREES, within
from keel.sandbox.os import _quiet
from keel.sandbox.os._registry import EXEC_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from keel.sandbox.exec._bwrap import Mounts
    from keel.sandbox.exec._context import Context
    from keel.sandbox.wrap._clients import ClientProfile
    from keel.sandbox.wrap._decide import Decider
    from keel.sandbox.wrap._state import ClientState

    Check = Callable[[str, int], tuple[bool, str, str]]

WRAP_MOUNT = "/run/keel-wrap"
BRIDGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_inside.py")
NO_LIMIT = 24 * 86400.0
"""The wall-clock limit when none is given: about the longest ``poll`` can wait."""
LOOPBACK = ("127.0.0.1", "localhost")


class WrapSpec(Frozen):
    """What ``keel wrap`` adds to one run, decided from the command line and the environment."""

    __slots__ = ("allow", "client", "pass_env")
    client: ClientProfile
    allow: tuple[tuple[str, int | None], ...]
    """``(host, port)`` allowed through the proxy besides the policy: the client's model hosts
    and ``--allow-host`` (``None``: ports 80 and 443, as a ``network_allow`` entry without a
    port)."""
    pass_env: tuple[str, ...]
    """Variables given to the client as they are: its keys and ``--pass-env``."""

    def __init__(
        self,
        client: ClientProfile,
        allow: tuple[tuple[str, int | None], ...],
        pass_env: tuple[str, ...],
    ) -> None:
        self._init(allow=allow, client=client, pass_env=pass_env)


def wrap_spec(
    command: Sequence[str],
    *,
    environ: Mapping[str, str],
    home: str,
    client: str | None = None,
    allow_hosts: Sequence[str] = (),
    pass_env: Sequence[str] = (),
) -> WrapSpec:
    """The ``WrapSpec`` for running ``command`` (the client) for a user with ``home``.

    Raises:
        UsageError: no command, an unknown ``client``, a bad ``--allow-host`` entry.
        ExecRefused: a base URL without a host (``wrap.base_url``).
    """
    from keel.sandbox.wrap._clients import CLIENTS, client_profile, detect_client

    if not command:
        raise UsageError("no client given (keel wrap -- CLIENT...)", code="usage.invalid")
    if client is not None and client not in (*CLIENTS, "other"):
        choices = ", ".join((*CLIENTS, "other"))
        raise UsageError(f"--client must be one of {choices}, not {client!r}", code="usage.invalid")
    name = client or detect_client(command[0], environ)
    profile = client_profile(name, environ, home)
    entries = [*profile.hosts, *allow_hosts]
    allow = tuple(dict.fromkeys(host_entry(e) for e in entries))
    for var in pass_env:
        if not var or "=" in var:
            raise UsageError(f"--pass-env needs a variable name, not {var!r}", code="usage.invalid")
    return WrapSpec(profile, allow, tuple(dict.fromkeys((*profile.keys, *pass_env))))


def host_entry(text: str) -> tuple[str, int | None]:
    """``HOST``, ``HOST:PORT`` or ``[IPV6]:PORT`` as ``(host, port)``.

    Raises:
        UsageError: not a host name or address with an optional port (``usage.allow_host``).
    """
    entry = text.strip().lower().rstrip(".")
    host, port = entry, None
    if entry.startswith("["):
        inner, _, rest = entry[1:].partition("]")
        host, port = inner, _port(rest[1:]) if rest.startswith(":") else (None if not rest else -1)
    elif entry.count(":") == 1:
        head, _, tail = entry.partition(":")
        host, port = head.rstrip("."), _port(tail)
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-._:")
    if not host or port == -1 or not set(host) <= allowed or host.startswith((".", "-")):
        raise UsageError(
            f"--allow-host takes HOST or HOST:PORT, not {text!r}", code="usage.allow_host"
        )
    return host, port


def _port(text: str) -> int:
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else -1


class Wrap:
    """``keel wrap``'s additions to one ``keel exec`` run (``Context.wrap``; see the module)."""

    def __init__(self, spec: WrapSpec, command: Sequence[str], environ: Mapping[str, str]) -> None:
        """Prepare the additions; nothing is opened or started before ``command`` is called."""
        from keel.sandbox.wrap._clients import install_roots

        self.spec = spec
        self.read_only = tuple(
            p
            for p in (*_keel_roots(), *install_roots(command[0], environ))
            if not any(within(p, t) for t in SYSTEM_TREES)
        )
        """Host paths shown read-only (``keel exec`` masks secrets inside them)."""
        self.environ = {k: environ[k] for k in spec.pass_env if k in environ}
        """Variables added to the filtered environment."""
        self.state: ClientState | None = None
        self.decider: Decider | None = None
        self.private: str | None = None
        self.stamp = ""
        self._owned: list[int] = []

    def check(self, base: Check) -> Check:
        """``base`` (the policy's host check), also allowing ``spec.allow``."""
        from keel.policy import port_allowed  # the policy's own port rule

        allow = self.spec.allow

        def check(host: str, port: int) -> tuple[bool, str, str]:
            name = host.lower().rstrip(".").removeprefix("[").removesuffix("]")
            if any(h == name and port_allowed(p, port) for h, p in allow):
                why = f"{host}:{port} is allowed for this keel wrap run (model or --allow-host)"
                return True, "wrap.allowed", why
            return base(host, port)

        return check

    def relays(self, policy_allow: Sequence[str]) -> list[str]:
        """The ``host:port`` loopback servers to relay: allowed ones with an explicit port."""
        entries = list(self.spec.allow)
        for text in policy_allow:
            try:
                entries.append(host_entry(text))
            except UsageError:
                continue  # the policy's own syntax (globs); not a loopback server
        out = [f"{h}:{p}" for h, p in entries if h in LOOPBACK and p and p != PROXY_PORT]
        return list(dict.fromkeys(out))

    def command(self, ctx: Context, proxy_dir: str) -> list[str]:
        """Open the client's state, the hook relay and the decision service; the argv to run."""
        from keel.sandbox.wrap._decide import Decider
        from keel.sandbox.wrap._state import ClientState

        self.stamp = ctx.stamp
        home = os.path.realpath(ctx.environ.get("HOME") or passwd_home())
        self.state = ClientState(self.spec.client, home, ctx.root, ctx.state_dir)
        self.private = private_dir()
        hook_fd, record_fd = self._hook_relay(os.path.join(self.private, "keel"))
        log = os.path.join(ctx.root, EXEC_DIR, "wrap-decide.log")
        self.decider = Decider(ctx.root, os.path.join(self.private, "decide.sock"), log)
        if any(h in LOOPBACK and p == PROXY_PORT for h, p in self.spec.allow):
            ctx.say(f"cannot relay 127.0.0.1:{PROXY_PORT} inside: keel's proxy listens there")
        relays = ",".join(self.relays(ctx.config.policy.network_allow)) or "-"
        python = os.path.realpath(sys.executable)
        spec = [str(PROXY_PORT), f"{PROXY_MOUNT}/proxy.sock", relays, str(hook_fd), str(record_fd)]
        return [python, "-I", "-S", BRIDGE, *spec, f"{WRAP_MOUNT}/decide.sock", "--", *ctx.command]

    def _hook_relay(self, keel_dir: str) -> tuple[int, int]:
        """What ``.keel/`` holds inside: the hook socket (bound, not listening) and its record.

        Returns their descriptors, for the sandbox's relay daemon to listen on and write to.
        """
        import _socket

        os.mkdir(keel_dir, 0o700)
        hook = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            hook.bind(os.path.join(keel_dir, "hookd.sock"))
        finally:
            os.umask(old)
        self._owned.append(hook.detach())
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self._owned.append(os.open(os.path.join(keel_dir, "hookd.pid"), flags, 0o644))
        return self._owned[-2], self._owned[-1]

    def mounts(self, ctx: Context, mounts: Mounts) -> list[int]:
        """Add the state, ``.keel`` and ``/run/keel-wrap`` binds and the relay's descriptors.

        Returns the descriptors handed over (the caller closes them after the run).
        """
        assert self.state is not None and self.private is not None
        fds = self.state.mounts(mounts)
        dest = os.path.join(ctx.root, STATE_DIR)
        mounts.items = [item for item in mounts.items if item[2] != dest]
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        keel_fd = os.open(os.path.join(self.private, "keel"), flags)
        mounts.add("ro", dest, ["--ro-bind-fd", str(keel_fd), dest], keel_fd)
        private_fd = os.open(self.private, flags)
        mounts.add("ro", WRAP_MOUNT, ["--ro-bind-fd", str(private_fd), WRAP_MOUNT], private_fd)
        fds += [keel_fd, private_fd, *self._owned]
        mounts.fds += self._owned  # inherited by the bridge, not mounted
        self._owned = []
        return fds

    def after(self) -> tuple[list[str], list[str]]:
        """After the run: the client's settings renamed aside and state files restored."""
        if self.state is None:
            return [], []
        return self.state.after(self.stamp)

    def close(self) -> None:
        """Stop the decision service and remove the private directory."""
        if self.decider is not None:
            self.decider.close()
        if self.state is not None:
            self.state.close()
        for fd in self._owned:
            _quiet.close(fd)
        self._owned = []
        if self.private is not None:
            for rel in ("keel/hookd.sock", "keel/hookd.pid", "decide.sock"):
                _quiet.unlink(os.path.join(self.private, rel))
            for rel in ("keel", ""):
                _quiet.call(os.rmdir, os.path.join(self.private, rel))


def _keel_roots() -> list[str]:
    """The import root of keel and, in a virtual environment, that (for ``keel hook``)."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    roots = [os.path.dirname(package)]
    if os.path.exists(os.path.join(sys.prefix, "pyvenv.cfg")):
        roots.append(os.path.abspath(sys.prefix))
    return roots
