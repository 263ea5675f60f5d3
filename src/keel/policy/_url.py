r"""URL hosts the way the clients read them: a small WHATWG host parser, standard library only.

``urllib.parse`` follows RFC 3986 and disagrees with browsers, node and the agents' fetch tools
on exactly the inputs an attacker sends: in ``http://127.0.0.1:1\\@github.com/`` a WHATWG parser
ends the authority at the backslash (host ``127.0.0.1``), tabs and newlines are dropped anywhere,
``http://2130706433/`` and ``http://0x7f.1/`` are ``127.0.0.1``, ``%2e`` in a host is decoded,
and a full-width ``ｇｉｔｈｕｂ.com`` is ``github.com``. ``url_hosts`` returns the WHATWG host
and, when it differs, the host an RFC 3986 reader (curl, git, ssh) would reach, so a check can
require every reading to be allowed.

A host that cannot be parsed is ``BAD`` (the empty string): the engine denies it.
"""

from __future__ import annotations

import re

SPECIAL = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
"""WHATWG special schemes with a host, and their default ports."""
BAD = ""
"""The host of a URL that cannot be parsed."""
UNREADABLE_PORT = -1
"""The port of a command that names one keel cannot read (``nc host $P``, ``/dev/tcp/h/ssh``):
no allowlist entry allows it."""
_OTHER_PORTS = {"ssh": 22, "sftp": 22, "scp": 22, "git": 9418, "ftps": 990, "rsync": 873}
"""Default ports of schemes that are not special."""
_SCHEME = r"^([A-Za-z][A-Za-z0-9+.\-]*):"
_C0_SPACE = "".join(map(chr, range(0x21)))
_FORBIDDEN_HOST = frozenset("\x00\t\n\r #/:<>?@[\\]^|")
_FORBIDDEN_DOMAIN = _FORBIDDEN_HOST | frozenset("%\x7f") | frozenset(map(chr, range(0x20)))
_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")
"""Characters IDNA 2003 (Python's codec) maps differently from UTS 46 (the clients)."""


def scheme_of(text: str) -> str | None:
    """The lower-cased scheme of ``text`` if it starts like a URL (``x:``), else ``None``."""
    m = re.match(_SCHEME, text)
    return m.group(1).lower() if m else None


def is_url(text: str) -> bool:
    """True for ``scheme://...`` and for a special scheme followed by ``:`` (``http:x``)."""
    if ":" not in text:
        return False
    cleaned = clean(text)
    scheme = scheme_of(cleaned)
    if scheme is None:
        return False
    rest = cleaned[len(scheme) + 1 :]
    return scheme != "file" and (rest.startswith("//") or scheme in SPECIAL)


def url_hosts(text: str) -> tuple[str, ...] | None:
    """The hosts ``text`` reaches (``BAD`` when unparseable), or ``None`` if it is not a URL.

    The WHATWG reading comes first; an RFC 3986 reading is added when it differs.
    """
    found = url_endpoints(text)
    return None if found is None else tuple(dict.fromkeys(host for host, _ in found))


class HostAt(str):
    """A host name that also knows the port it is reached on.

    ``port``: ``None`` when the text names none and the tool's default is a web port;
    ``UNREADABLE_PORT`` when it names one keel cannot read.
    """

    __slots__ = ("port",)
    port: int | None

    def __new__(cls, host: str, port: int | None) -> HostAt:
        """``host`` reached on ``port``."""
        made = super().__new__(cls, host)
        made.port = port
        return made


def url_host_ports(text: str) -> tuple[HostAt, ...] | None:
    """``url_hosts`` with each host's port attached (``HostAt``)."""
    found = url_endpoints(text)
    return None if found is None else tuple(HostAt(h, p) for h, p in dict.fromkeys(found))


def url_endpoints(text: str) -> tuple[tuple[str, int | None], ...] | None:
    """``(host, port)`` for each reading of ``text`` (see ``url_hosts``); None if no URL.

    The port is the explicit one, else the scheme's default (``http`` 80, ``https`` 443,
    ``ssh`` 22...), else ``UNREADABLE_PORT`` (a scheme whose port keel does not know; never
    ``None``, which the policy reads as a web port).
    """
    if not is_url(text):
        return None
    cleaned = clean(text)
    scheme = scheme_of(cleaned) or ""
    rest = cleaned[len(scheme) + 1 :]
    base = scheme.rsplit("+", 1)[-1]  # git+https, svn+ssh
    default = SPECIAL.get(base) or _OTHER_PORTS.get(base, UNREADABLE_PORT)
    rfc = _rfc_endpoint(rest, default)
    found = [_special_endpoint(rest, base)] if base in SPECIAL else [rfc]
    if rfc not in found:
        found.append(rfc)
    return tuple(found)


def port_number(text: str | None) -> int:
    """``text`` as a TCP port (1-65535), else ``UNREADABLE_PORT``."""
    if text and text.isascii() and text.isdigit() and 0 < int(text) < 65536:
        return int(text)
    return UNREADABLE_PORT


def dev_tcp_host(path: str) -> HostAt | None:
    """The host of bash's ``/dev/tcp/HOST/PORT`` (or ``/dev/udp/``) with its port attached.

    ``None`` when the path ends before the host. The port is ``UNREADABLE_PORT`` unless it is
    a number (bash also takes a service name, which keel does not look up), and ``None``
    when the path has none (bash then opens nothing).
    """
    parts = path.split("/dev/", 1)[-1].split("/")
    if len(parts) < 2:
        return None
    return HostAt(parts[1].lower(), port_number(parts[2]) if len(parts) > 2 else None)


def whatwg_host(url: str) -> str | None:
    """The WHATWG host of a special-scheme URL (``BAD`` if unparseable), else ``None``."""
    cleaned = clean(url)
    scheme = scheme_of(cleaned)
    if scheme not in SPECIAL:
        return None
    return _special_host(cleaned[len(scheme) + 1 :], scheme)


def clean(text: str) -> str:
    """``text`` as a WHATWG parser reads it: trimmed, tabs and newlines removed."""
    text = text.strip(_C0_SPACE)
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", "").replace("\n", "").replace("\r", "")
    return text


def _special_host(rest: str, scheme: str) -> str:
    return _special_endpoint(rest, scheme)[0]


def _special_endpoint(rest: str, scheme: str) -> tuple[str, int | None]:
    rest = rest.lstrip("/\\")
    end = len(rest)
    for stop in "/\\?#":
        i = rest.find(stop)
        if 0 <= i < end:
            end = i
    authority = rest[:end]
    host, port = _split_authority(authority)
    if host is None or not _port_ok(port):
        return BAD, None
    return host_parse(host), int(port) if port else SPECIAL.get(scheme)


def _rfc_endpoint(rest: str, default: int | None) -> tuple[str, int | None]:
    """The host an RFC 3986 reader takes: the authority ends at ``/``, ``?`` or ``#``."""
    if not rest.startswith("//"):
        return BAD, None
    authority = re.split(r"[/?#]", rest[2:], maxsplit=1)[0]
    host, port = _split_authority(authority)
    if host is None or not _port_ok(port):
        return BAD, None
    return host_parse(host), int(port) if port else default


def _split_authority(authority: str) -> tuple[str | None, str]:
    """``(host, port)`` after the last ``@``; ``None`` host when it is empty."""
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            return None, ""
        host, after = hostport[: close + 1], hostport[close + 1 :]
        if after and not after.startswith(":"):
            return None, ""
        return host, after[1:]
    host, _, port = hostport.partition(":")
    return (host or None), port


def _port_ok(port: str) -> bool:
    return port == "" or (port.isascii() and port.isdigit() and int(port) <= 65535)


def host_parse(text: str) -> str:
    """The WHATWG host of ``text`` (an IPv6 address without brackets), or ``BAD``."""
    if text.startswith("["):
        return _ipv6(text[1:-1]) if text.endswith("]") else BAD
    domain = _percent_decode(text)
    if domain is None:
        return BAD
    ascii_domain = _to_ascii(domain)
    if not ascii_domain or not _FORBIDDEN_DOMAIN.isdisjoint(ascii_domain):
        return BAD
    if _ends_in_number(ascii_domain):
        return _ipv4(ascii_domain)
    return ascii_domain


def _percent_decode(text: str) -> str | None:
    if "%" not in text:
        return text
    raw = re.sub(
        rb"%([0-9A-Fa-f]{2})",
        lambda m: bytes((int(m.group(1), 16),)),
        text.encode("utf-8", "surrogatepass"),
    )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _to_ascii(domain: str) -> str:
    """UTS 46 to ASCII, as far as the standard library can do it exactly; else ``BAD``."""
    if domain.isascii():
        lowered = domain.lower()
        for label in lowered.split("."):
            if label.startswith("xn--") and not _punycode_ok(label):
                return BAD
        return lowered
    if not _DEVIATIONS.isdisjoint(domain):
        return BAD
    import unicodedata

    mapped = unicodedata.normalize("NFKC", domain).lower()
    mapped = mapped.replace("\u3002", ".").replace("\uff0e", ".").replace("\uff61", ".")
    if mapped.isascii():
        return mapped
    try:
        labels = [
            label if label.isascii() else label.encode("idna").decode("ascii")
            for label in mapped.split(".")
        ]
    except (UnicodeError, ValueError):
        return BAD
    return ".".join(labels)


def _punycode_ok(label: str) -> bool:
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except (UnicodeError, ValueError):
        return False
    return bool(decoded) and not decoded.isascii()


def _ends_in_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    last = parts[-1]
    if last and last.isdigit():
        return True
    return _ipv4_number(last) is not None and last[:2].lower() == "0x"


def _ipv4_number(part: str) -> int | None:
    if part == "":
        return None
    radix = 10
    if part[:2].lower() == "0x":
        radix, part = 16, part[2:]
    elif len(part) > 1 and part[0] == "0":
        radix, part = 8, part[1:]
    if part == "":
        return 0
    try:
        return int(part, radix) if part.isalnum() and part.isascii() else None
    except ValueError:
        return None


def _ipv4(domain: str) -> str:
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        return BAD
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        return BAD
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        return BAD
    address = values[-1]
    for i, n in enumerate(values[:-1]):
        address += n * 256 ** (3 - i)
    return ".".join(str((address >> shift) & 255) for shift in (24, 16, 8, 0))


def _ipv6(text: str) -> str:
    if not text or "%" in text or not text.isascii():
        return BAD
    import ipaddress

    try:
        return ipaddress.IPv6Address(text).compressed
    except ValueError:
        return BAD
