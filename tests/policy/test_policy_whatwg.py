"""The WHATWG host parser: tricky URLs and the host a browser, node or an agent's fetch reaches.

``url_hosts`` gives the WHATWG host first and, when an RFC 3986 reader (curl, git) would reach
another, that one too; ``""`` (``BAD``) is a URL keel cannot read, which the policy denies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.policy import Policy
from keel.policy._url import BAD, host_parse, url_hosts, whatwg_host

# (url, WHATWG host) -- the hosts the WHATWG URL standard's parser gives (url.spec.whatwg.org)
CORPUS = [
    ("https://github.com/x", "github.com"),
    ("https://GitHub.COM/x", "github.com"),
    ("https://github.com./x", "github.com."),
    ("http://127.0.0.1:1\\@github.com/", "127.0.0.1"),
    ("http://github.com\\@evil.test/", "github.com"),
    ("http://github.com@127.0.0.1/", "127.0.0.1"),
    ("http://user:pass@github.com:8080/", "github.com"),
    ("http://a@b@evil.test/", "evil.test"),
    ("https://evil.test#@github.com/", "evil.test"),
    ("https://evil.test?@github.com/", "evil.test"),
    ("https://evil.test/@github.com/", "evil.test"),
    ("http://2130706433/", "127.0.0.1"),
    ("http://0x7f000001/", "127.0.0.1"),
    ("http://0x7f.1/", "127.0.0.1"),
    ("http://0177.0.0.1/", "127.0.0.1"),
    ("http://0177.0.0.01/", "127.0.0.1"),
    ("http://127.1/", "127.0.0.1"),
    ("http://127.0.1/", "127.0.0.1"),
    ("http://127.0.0.1./", "127.0.0.1"),
    ("http://0/", "0.0.0.0"),
    ("http://0x/", "0.0.0.0"),
    ("http://4294967295/", "255.255.255.255"),
    ("http://[::1]/", "::1"),
    ("http://[::1]:8080/", "::1"),
    ("http://[0:0:0:0:0:0:0:1]/", "::1"),
    ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
    ("http://[2001:db8::1]/", "2001:db8::1"),
    ("ht\ttp://git\nhub.com/", "github.com"),
    ("  https://github.com/  ", "github.com"),
    ("\x00https://github.com/", "github.com"),
    ("http:github.com", "github.com"),
    ("http:/github.com", "github.com"),
    ("http:\\\\github.com\\x", "github.com"),
    ("https:////github.com", "github.com"),
    ("https://%67ithub.com/", "github.com"),
    ("https://github%2Ecom/", "github.com"),
    ("https://ｇｉｔｈｕｂ．ｃｏｍ/", "github.com"),
    ("https://ＧＩＴＨＵＢ.com/", "github.com"),
    ("https://bücher.de/", "xn--bcher-kva.de"),
    ("https://xn--bcher-kva.de/", "xn--bcher-kva.de"),
    ("https://１２７.０.０.１/", "127.0.0.1"),
    ("wss://github.com/socket", "github.com"),
    ("ftp://files.example.test/x", "files.example.test"),
]
# URLs a WHATWG parser refuses (or keel cannot read exactly): denied as network.bad_url
REFUSED = [
    "https://github.com:99999/",
    "https://github.com:80a/",
    "https://1.2.3.4.5/",
    "https://256.1.1.1/",
    "https://1.2.3.09/",
    "https://0x100000000/",
    "http://[::1%eth0]/",
    "http://[::1/",
    "http://[zz::1]/",
    "https://a b.com/",
    "https://a<b.com/",
    "https://git^hub.com/",
    "https://%zz.com/",
    "https://%ff.com/",
    "https:",
    "https://",
    "https://user@/",
    "https://straße.de/",
    "https://xn--/",
    "https://a%2fb.test/",
]


@pytest.mark.parametrize(("url", "host"), CORPUS)
def test_whatwg_host(url: str, host: str) -> None:
    assert whatwg_host(url) == host
    hosts = url_hosts(url)
    assert hosts is not None and hosts[0] == host


@pytest.mark.parametrize("url", REFUSED)
def test_unreadable_urls_are_bad(url: str) -> None:
    hosts = url_hosts(url)
    assert hosts is not None and BAD in hosts, hosts


def test_an_rfc_reader_that_disagrees_adds_its_host() -> None:
    assert url_hosts("http://127.0.0.1:1\\@github.com/") == ("127.0.0.1", "github.com")
    assert url_hosts("https://evil.test\\@pypi.org/") == ("evil.test", "pypi.org")
    assert url_hosts("https://github.com/x") == ("github.com",)
    assert url_hosts("ssh://git@github.com:22/x/y") == ("github.com",)
    assert url_hosts("git+https://github.com/x/y") == ("github.com",)
    assert url_hosts("main:feature") is None
    assert url_hosts("file:///etc/passwd") is None
    assert url_hosts("C:\\boot.ini") is None


def test_host_parse_is_the_host_parser_alone() -> None:
    assert host_parse("0x7F.1") == "127.0.0.1"
    assert host_parse("[::1]") == "::1"
    assert host_parse("GitHub.com") == "github.com"
    assert host_parse("a b") == BAD


@pytest.fixture
def dev(tmp_path: Path) -> Policy:
    return Policy.for_preset("developer", tmp_path)


def test_the_policy_reads_urls_as_the_clients_do(dev: Policy) -> None:
    assert dev.check_url("https://ｇｉｔｈｕｂ．ｃｏｍ/x").decision == "allow"
    assert dev.check_url("https://%67ithub.com/").decision == "allow"
    assert dev.check_url("https://github.com./").decision == "allow"
    for url in ("http://127.0.0.1:1\\@github.com/", "http://github.com@2130706433/",
                "https://evil.test#@github.com/", "https://github.com.evil.test/"):  # fmt: skip
        assert dev.check_url(url).rule == "network.not_allowed", url
    for url in REFUSED[:8]:
        assert dev.check_url(url).rule == "network.bad_url", url


def test_hosts_from_proxies_are_canonical(dev: Policy) -> None:
    assert dev.check_host("GitHub.com.").decision == "allow"
    assert dev.check_host("github.com", 443).decision == "allow"
    assert dev.check_host("2130706433").decision == "deny"
    assert dev.check_host("::1").decision == "deny"
    assert dev.check_host("gith ub.com").rule == "network.bad_url"
