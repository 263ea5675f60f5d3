"""Network rules: URLs and hosts against the allowlist, read the way the clients read them."""

from __future__ import annotations

from fnmatch import fnmatchcase

from keel.policy._ruling import RuleBase, Ruling, allow, deny, worst
from keel.policy._url import BAD, clean, host_parse, scheme_of, url_endpoints

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
        """Judge connecting to ``host`` (``None``: only known at run time; ``BAD``: unreadable).

        An allowlist entry ``host:port`` allows that port only; it never matches when ``port``
        is not known. An entry without a port allows every port. The host is compared in its
        WHATWG form (``0x7f.1`` is ``127.0.0.1``), trailing dot removed.
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
        patterns = [p for p in map(host_pattern, self.network) if p[1] in (None, port)]
        if all(any(fnmatchcase(f, pat) for pat, _ in patterns) for f in forms):
            return allow("network.allowed", f"{canonical} is on the network allowlist")
        hint = (
            "add the host to [policy] network_allow in keel.toml"
            if self.network
            else f"the {self.preset} preset allows no network"
        )
        return deny("network.not_allowed", f"{canonical} is not on the network allowlist", hint)

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
