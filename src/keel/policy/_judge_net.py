"""Network rules: URLs and hosts against the allowlist, read the way the clients read them."""

from __future__ import annotations

from fnmatch import fnmatchcase

from keel.policy._ruling import RuleBase, Ruling, allow, deny, worst
from keel.policy._url import (
    BAD,
    UNREADABLE_PORT,
    clean,
    dev_tcp_host,
    host_parse,
    scheme_of,
    url_endpoints,
)

WEB_PORTS = (80, 443)
"""The ports an allowlist entry without a port allows."""
_SCHEMES = frozenset(
    {"http", "https", "ws", "wss", "ftp", "ftps", "git", "ssh", "sftp", "git+ssh", "git+https",
     "git+http", "ssh+git"}
)  # fmt: skip


class NetRules(RuleBase):
    """``check_url`` and ``check_host``."""

    network: tuple[str, ...]
    preset: str

    def check_url(self, url: str) -> Ruling:
        """Judge fetching ``url``: every host a client could read in it must be allowed."""
        bad = self.bad_input(url, "URL")
        if bad is not None:
            return bad
        scheme = scheme_of(clean(url))
        endpoints = url_endpoints(url)
        if scheme not in _SCHEMES or endpoints is None:
            return deny(
                "network.bad_url", f"{url!r} is not a URL keel understands", "use an http(s) URL"
            )
        return worst([self.check_host(h, url, port) for h, port in endpoints]) or deny(
            "network.bad_url", f"{url!r} names no host", "use an http(s) URL"
        )

    def check_host(self, host: str | None, what: str, port: int | None = None) -> Ruling:
        """Judge connecting to ``host`` on ``port`` (host ``None``: known at run time only).

        The one port rule, for the text policy and ``keel exec``'s proxy alike: an allowlist
        entry without a port (``github.com``, ``*.example.com``) allows ports 80 and 443 only;
        ``host:port`` (``[::1]:8080``) exactly that port. Any other port must be named: a
        host on the list reached on another port is denied with ``network.port_not_allowed``,
        whose suggestion is the entry that would allow it. ``port=None`` means the text names
        no port and keel reads the tool's default as a web port (``curl github.com``, pip's
        index): entries without a port allow it, ``host:port`` entries do not. Callers pass
        every port they can read, a scheme's default included (``ssh://`` is 22, ``git://``
        9418), so those need their own entries; the proxy always knows the port. The host is
        compared in its WHATWG form (``0x7f.1`` is ``127.0.0.1``), trailing dot removed; a
        host that cannot be read (``BAD``) is denied.
        """
        if host is None:
            return self._dynamic_host(what)
        if host == "listen":
            return deny("network.not_allowed", f"{what!r} listens for network connections")
        canonical = canonical_host(host)
        if canonical == BAD:
            return deny(
                "network.bad_url", f"cannot read a host name in {what!r}", "use a plain http(s) URL"
            )
        forms = {host.strip().lower().strip("[]").rstrip("."), canonical}
        entries = [host_pattern(e) for e in self.network]
        if all(any(fnmatchcase(f, g) and port_allowed(p, port) for g, p in entries) for f in forms):
            return allow("network.allowed", f"{canonical} is on the network allowlist")
        if all(any(fnmatchcase(f, g) for g, _ in entries) for f in forms):
            # on the list, but not on this port: the answer names the entry that would allow it
            named = [(g, p) for g, p in entries if any(fnmatchcase(f, g) for f in forms)]
            return port_refused(canonical, port, named)
        hint = (
            "add the host to [policy] network_allow in keel.toml"
            if self.network
            else f"the {self.preset} preset allows no network"
        )
        return deny("network.not_allowed", f"{canonical} is not on the network allowlist", hint)

    def check_dev_tcp(self, path: str, what: str) -> Ruling:
        """Judge bash's ``/dev/tcp/HOST/PORT`` (or ``/dev/udp/``): connecting to HOST on PORT."""
        host = dev_tcp_host(path)
        return self.check_host(host or None, what, host.port if host else None)

    def _dynamic_host(self, what: str) -> Ruling:
        if self.contained:
            return allow(
                "network.proxied",
                f"the host of {what!r} is only known at run time; keel's proxy checks it",
            )
        return self.level(
            "unparseable",
            "network.unknown_host",
            f"the host of {what!r} is only known at run time",
            None,
        )


def port_allowed(entry_port: int | None, port: int | None) -> bool:
    """Whether an entry with ``entry_port`` (``None``: the entry names no port) allows ``port``.

    ``port`` ``None`` is one the text does not name (the tool's default, read as a web port).
    """
    if entry_port is None:
        return port is None or port in WEB_PORTS
    return port == entry_port


def port_refused(host: str, port: int | None, entries: list[tuple[str, int | None]]) -> Ruling:
    """The deny for ``host`` on ``port``, which ``entries`` (``(glob, port)``) match on others.

    The reason says which ports of which entries are allowed; the suggestion is the entry
    that would allow this one (``host:port``, the host itself rather than a wildcard).
    """
    ports = {p for _, p in entries if p is not None}
    if any(p is None for _, p in entries):
        ports.update(WEB_PORTS)
    numbers = [str(p) for p in sorted(ports)]
    listed = ", ".join(numbers[:-1]) + " and " + numbers[-1] if len(numbers) > 1 else numbers[0]
    globs = " or ".join(repr(g) for g in dict.fromkeys(g for g, _ in entries))
    allowed = f"only {'ports' if len(numbers) > 1 else 'port'} {listed} of {globs}"
    allowed += " are allowed" if len(numbers) > 1 else " is allowed"
    if port == UNREADABLE_PORT:
        return deny(
            "network.port_not_allowed",
            f"{allowed}, and keel cannot read which port this connects to",
            "name the port as a number",
        )
    if port is None:  # only ``host:port`` entries match
        return deny(
            "network.port_not_allowed",
            f"{allowed}, and no port is named",
            f'name the port, or add "{allow_entry(host, None)}" (ports 80 and 443) to [policy] '
            "network_allow in keel.toml",
        )
    return deny(
        "network.port_not_allowed",
        allowed,
        f'add "{allow_entry(host, port)}" to [policy] network_allow in keel.toml',
    )


def allow_entry(host: str, port: int | None) -> str:
    """The ``network_allow`` entry for ``host`` on ``port``; ``None``: no port (80 and 443).

    ``host:port``, or the host alone; an IPv6 address in brackets (``host_pattern`` reads it
    back).
    """
    entry = f"[{host}]" if ":" in host else host
    return entry if port is None else f"{entry}:{port}"


def canonical_host(host: str) -> str:
    """``host`` in its WHATWG form without brackets or trailing dot, or ``BAD``."""
    text = host.strip()
    if not text:
        return BAD
    if ":" in text and not text.startswith("["):
        text = f"[{text}]"  # a bare IPv6 address, as proxies and sockets give it
    parsed = host_parse(text)
    return parsed.rstrip(".") if parsed != BAD else BAD


def host_pattern(entry: str) -> tuple[str, int | None]:
    """``host:port`` as ``(host glob, port)``; a plain host (or a bare IPv6 address) has no port."""
    entry = entry.lower()
    head, sep, tail = entry.rpartition(":")
    if not sep or not tail.isdigit() or (":" in head and not head.endswith("]")):
        return entry.strip("[]"), None
    return head.removeprefix("[").removesuffix("]"), int(tail)
