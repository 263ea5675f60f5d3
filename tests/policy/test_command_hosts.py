# ruff: noqa: E501  (tables: one command line, with what it must give, per row)
"""The hosts one command reaches: URLs, ``host:path`` operands, option values, git remotes.

A value may hold ``=``, ``:`` or ``/``; a word known only at run time is an unknown host.
"""

from __future__ import annotations

import shlex

import pytest
from policy_helpers import split

from keel.policy._rules import hosts, url_host
from keel.policy._url import HostAt

HOSTS: list[tuple[str, list[str | None]]] = [
    ('echo https://a.test/x', []),
    ('printf http://a.test', []),
    ('ls https://a.test/x', ['a.test']),
    ('cat /dev/tcp/h.test/80', ['h.test']),
    ('cat /dev/udp/x', ['x']),
    ('cat x/dev/udp/h/1', ['h']),
    ('cat $X', []),
    ('curl a.test/x', ['a.test']),
    ('curl https://a.test/x', ['a.test']),
    ('curl $X', [None]),
    ('curl -o out -d data -H h -X POST -u u -A a -w w -T t -F f -b b -c c -m 5 -K k -r 1 -E e -y 1 -Y 1 b.test', ['b.test']),
    ('curl --output o --data d --data-binary d --data-raw d --data-urlencode d --header h --request r --user u --user-agent a --write-out w --upload-file t --form f --cookie c --cookie-jar j --max-time 1 --config k --range r --cert c --key k --cacert c --retry 1 --connect-timeout 1 c.test', ['c.test']),
    ('curl --url https://d.test --proxy http://p.test -x q.test --connect-to e.test --resolve f.test --preproxy g.test --proxy1.0 h.test --socks4 i.test --socks4a j.test --socks5 k.test --socks5-hostname l.test --doh-url m.test -e n.test --referer o.test', ['d.test', 'p.test', 'g.test', 'h.test', 'i.test', 'j.test', 'k.test', 'l.test', 'm.test', 'd.test', 'p.test', 'q.test', 'e.test', 'f.test', 'g.test', 'h.test', 'i.test', 'j.test', 'k.test', 'l.test', 'm.test', 'n.test', 'o.test']),
    ('curl --proxy $X', [None]),
    ('curl user@host.test:8080/p', ['host.test']),
    ('curl :80', ['']),
    ('wget -O o -o l -P d -U u --header h -e e -t 1 -T 1 --post-data d --post-file f -i i -a a -w 1 -Q 1 --user u --password p a.test', ['a.test']),
    ('wget --output-document o --output-file l --directory-prefix d --user-agent u --tries 1 --timeout 1 --input-file i --wait 1 b.test', ['b.test']),
    ('wget --proxy p.test c.test', ['p.test', 'c.test']),
    ('http a.test', ['a.test']),
    ('https a.test', ['a.test']),
    ('aria2c a.test', ['a.test']),
    ('lynx a.test', ['a.test']),
    ('links a.test', ['a.test']),
    ('w3m a.test', ['a.test']),
    ('ssh user@a.test', ['a.test']),
    ('ssh -p 22 -i k -l u -o o -F f -J j -L l -R r -D d -b b -c c -E e -e e -I i -m m -O o -Q q -S s -W w -w w -B b h.test cmd', ['h.test']),
    ('ssh $X', [None]),
    ('sftp -p 1 a.test', ['a.test']),
    ('telnet A.test 23', ['a.test']),
    ('nc -w 1 -s src -i 1 -q 1 -p 1 a.test 80', ['a.test']),
    ('nc -l', ['listen']),
    ('ncat -l', ['listen']),
    ('netcat -l', ['listen']),
    ('ftp a.test', ['a.test']),
    ('tftp a.test', ['a.test']),
    ('mosh u@a.test', ['a.test']),
    ('scp f u@A.test:p', ['a.test']),
    ('scp -P 22 -i k -e e -o o -F f u@h.test:x .', ['h.test']),
    ('rsync -e ssh f h.test:d', ['h.test']),
    ('rsync $X d', [None]),
    ('scp https://x.test/a b', ['x.test']),
    ('git clone git@gh.test:o/r', ['gh.test']),
    ('git clone https://gh.test/o/r', ['gh.test']),
    ('git fetch origin', []),
    ('git pull git@A.test:r', ['a.test']),
    ('git push git@a.test:r main', ['a.test']),
    ('git ls-remote git@a.test:r', ['a.test']),
    ('git archive --remote=git@a.test:r', ['a.test']),
    ('git fetch --repo=git@b.test:r', ['b.test']),
    ('git clone -o x -b y --depth 1 -j 2 --reference r --separate-git-dir s --upload-pack u --jobs 3 git@c.test:r', ['c.test']),
    ('git push --receive-pack r --exec e --repo git@q.test:r -o o --push-option p git@c.test:r', ['c.test', 'q.test']),
    ('git archive --remote git@m.test:r --exec e HEAD', ['m.test']),
    ('git remote add o git@a.test:r', ['a.test']),
    ('git remote set-url o git@b.test:r', ['b.test']),
    ('git remote set-url --push o git@c.test:r', ['c.test']),
    ('git remote remove git@d.test:r', []),
    ('git submodule add git@a.test:r sub', ['a.test']),
    ('git submodule update git@a.test:r', []),
    ('git clone $X', [None]),
    ('git clone ./lo:cal', []),
    ('git clone a/b:c', []),
    ('git log a.test:x', []),
    ('pip install x', ['pypi.org']),
    ('pip download x', ['pypi.org']),
    ('pip list', []),
    ('pip install -i https://a.test/simple x', ['a.test', 'a.test']),
    ('pip install --index-url https://b.test x', ['b.test', 'b.test']),
    ('pip install --extra-index-url https://c.test x', ['c.test', 'c.test', 'pypi.org']),
    ('pip install --index-url=https://d.test x', ['d.test', 'd.test']),
    ('pip install --trusted-host e.test:8080 x', ['e.test', 'pypi.org']),
    ('pip install --trusted-host :1 x', ['', 'pypi.org']),
    ('pip install --find-links https://f.test/w x', ['f.test', 'f.test', 'pypi.org']),
    ('pip install -f ./wheels x', ['pypi.org']),
    ('pip install --find-links=./w x', ['pypi.org']),
    ('pip install -i ./local x', ['']),
    ('pip install -i', ['']),
    ('pip install x@https://g.test/x.whl', ['g.test', 'pypi.org']),
    ('pip install -egit+https://h.test/r#egg=x', ['h.test', 'pypi.org']),
    ('pip install ok://', ['', 'pypi.org']),
    ('python -m pip install x', ['pypi.org']),
    ('python -m pip install -i https://a.test x', ['a.test', 'a.test']),
    ('python x.py install', []),
    ('python -m pytest install', []),
    ('uv pip install x', ['pypi.org']),
    ('uv pip install --index https://u.test x', ['u.test', 'u.test', 'pypi.org']),
    ('uv pip install --default-index https://v.test x', ['v.test', 'v.test']),
    ('uv add x', ['pypi.org']),
    ('uv sync', ['pypi.org']),
    ('uv run x', []),
    ('npm install x', ['registry.npmjs.org']),
    ('npm i x', ['registry.npmjs.org']),
    ('npm ci', ['registry.npmjs.org']),
    ('npm install --registry https://r.test x', ['r.test', 'r.test']),
    ('npm test', []),
    ('yarn add x', ['registry.npmjs.org']),
    ('pnpm add x', ['registry.npmjs.org']),
    ('bun add x', ['registry.npmjs.org']),
    ('bun install', ['registry.npmjs.org']),
    ('npx x', []),
    ('pip install index-url https://x.test', ['x.test', 'pypi.org']),
]  # fmt: skip


@pytest.mark.parametrize(("line", "expected"), HOSTS)
def test_hosts(line: str, expected: list[str | None]) -> None:
    name, args = split(line)
    assert hosts(name, args) == expected


def test_url_host() -> None:
    assert url_host(" https://b.test/x ") == "b.test"
    assert url_host("http://[bad") == ""
    assert url_host("notaurl") is None


MORE_HOSTS: list[tuple[str, list[str | None]]] = [
    # A host without a scheme is the text before the first `/` and the first `:`.
    ('curl a.test:1:2/p', ['a.test']),
    ('curl h.test/a/b:1', ['h.test']),
    # `--repo=VALUE`: the value is all after the first `=`.
    ('git push --repo=a=b@h.test:x', ['h.test']),
    ('git push --repo=git@h.test:x=y', ['h.test']),
    # A run-time repository does not end the list: `--repo=` still names a host.
    ('git push $X --repo=git@evil.test:x', [None, 'evil.test']),
    # scp-like `host:path`: the host is before the first `:`, whatever the path holds.
    ('git clone git@evil.test:a/b:c', ['evil.test']),
    # `submodule add URL PATH`: PATH (even `lib:v1`) is a directory, not a host.
    ('git submodule add git@github.com:x/y lib:v1', ['github.com']),
    # `remote add NAME URL`: the URL is the operand after the name; later words are not.
    ('git remote add origin git@evil.test:x stray', ['evil.test']),
    ('git remote add origin git@a.test:x git@b.test:y', ['a.test']),
    # An index option's value, also as the last word; a bare `--trusted-host` is unreadable.
    ('pip install -i https://evil.test/simple', ['evil.test', 'evil.test']),
    ('pip install x --trusted-host', ['', 'pypi.org']),
    ('pip install --trusted-host a.test:1:2 x', ['a.test', 'pypi.org']),
    # A URL scheme is case-insensitive: `name @ HTTPS://...` reaches its host.
    ('pip install Name@HTTPS://evil.test/x.whl', ['evil.test', 'pypi.org']),
]  # fmt: skip


@pytest.mark.parametrize(("line", "expected"), MORE_HOSTS)
def test_hosts_of_values_holding_separators(line: str, expected: list[str | None]) -> None:
    name, args = split(line)
    assert hosts(name, args) == expected


# The port each host is reached on: the one the line names, else the tool's default (ssh 22,
# telnet 23, ftp 21, tftp 69, an rsync daemon 873); `None` when the text names none and the
# tool is a web fetcher; -1 (UNREADABLE_PORT) for a port keel cannot read.
PORTS: list[tuple[str, list[tuple[str, int | None]]]] = [
    # nc HOST PORT: the second operand, whatever the tool; a missing one is unreadable.
    ('nc a.test 80', [('a.test', 80)]),
    ('nc a.test 80 90', [('a.test', 80)]),
    ('nc a.test', [('a.test', -1)]),
    ('ncat a.test 81', [('a.test', 81)]),
    ('netcat a.test 82', [('a.test', 82)]),
    ('telnet a.test 2323', [('a.test', 2323)]),
    ('telnet a.test', [('a.test', 23)]),
    ('ftp a.test 2121', [('a.test', 2121)]),
    ('ftp a.test', [('a.test', 21)]),
    ('tftp a.test 6969', [('a.test', 6969)]),
    ('tftp a.test', [('a.test', 69)]),
    ('mosh -p 60001 a.test', [('a.test', 22)]),
    # ssh -p N, -pN, the last one wins; -o Port=N / "Port N"; an -o known only at run time.
    ('ssh h.test', [('h.test', 22)]),
    ('ssh -p 2222 h.test', [('h.test', 2222)]),
    ('ssh -p2222 h.test', [('h.test', 2222)]),
    ('ssh h.test -p 2222', [('h.test', 2222)]),
    ('ssh -p 1 -p 2 h.test', [('h.test', 2)]),
    ('ssh h.test -p', [('h.test', -1)]),
    ('ssh -p x h.test', [('h.test', -1)]),
    ('ssh -o Port=2222 h.test', [('h.test', 2222)]),
    ('ssh -o "port 2222" h.test', [('h.test', 2222)]),
    ('ssh -oPort=2222 h.test', [('h.test', 2222)]),
    ('ssh -p 2222 -o User=u h.test', [('h.test', 2222)]),
    ('ssh -o User=u h.test', [('h.test', 22)]),
    ('ssh -o Port h.test', [('h.test', -1)]),
    ('ssh -o Port=x=2222 h.test', [('h.test', -1)]),
    ('ssh -o $X h.test', [('h.test', -1)]),
    # scp and sftp name the port with -P (their -p keeps times).
    ('scp f h.test:x', [('h.test', 22)]),
    ('scp -P 2222 f h.test:x', [('h.test', 2222)]),
    ('scp -p f h.test:x', [('h.test', 22)]),
    ('sftp -P2222 h.test', [('h.test', 2222)]),
    ('sftp h.test', [('h.test', 22)]),
    # rsync: ssh unless -e/--rsh names another remote shell (even ssh with options: unread).
    ('rsync f h.test:d', [('h.test', 22)]),
    ('rsync -e ssh f h.test:d', [('h.test', 22)]),
    ('rsync --rsh=ssh f h.test:d', [('h.test', 22)]),
    ('rsync --rsh ssh f h.test:d', [('h.test', 22)]),
    ("rsync -e 'ssh -p 2' f h.test:d", [('h.test', -1)]),
    ("rsync --rsh='ssh -p 2' f h.test:d", [('h.test', -1)]),
    ("rsync --rsh 'ssh -p 2' f h.test:d", [('h.test', -1)]),
    ('rsync f h.test:d -e', [('h.test', -1)]),
    ('rsync f h.test::module', [('h.test', 873)]),
    ('rsync f h.test::', [('h.test', 873)]),
    ('rsync f U@H.test:d', [('h.test', 22)]),
    # git's host:path is ssh.
    ('git clone git@gh.test:o/r', [('gh.test', 22)]),
    # A fetcher's HOST:PORT before the first `/`, after the last `@`; none is the web default.
    ('curl a.test/x', [('a.test', None)]),
    ('curl h.test:8080', [('h.test', 8080)]),
    ('curl h.test:8080/p', [('h.test', 8080)]),
    ('curl h.test:8080/a/b', [('h.test', 8080)]),
    ('curl u@h.test:8080', [('h.test', 8080)]),
    ('curl a.test:1:2/p', [('a.test', -1)]),
    ('curl h.test:x', [('h.test', -1)]),
    ('wget h.test:8081/x', [('h.test', 8081)]),
]  # fmt: skip


@pytest.mark.parametrize(("line", "expected"), PORTS)
def test_ports_each_tool_reads(line: str, expected: list[tuple[str, int | None]]) -> None:
    name, *args = [None if w == "$X" else w for w in shlex.split(line)]
    found = hosts(name or "", args)
    assert all(isinstance(h, HostAt) for h in found)
    assert [(h, getattr(h, "port", "none")) for h in found] == expected


def test_a_fetchers_port_follows_the_last_at_sign() -> None:
    # userinfo may hold `:` (u:pw@): the port is the one after the host, not the password.
    found = hosts("curl", ["u:pw@h.test:8080/p"])
    assert [getattr(h, "port", "none") for h in found] == [8080]


@pytest.mark.parametrize("operand", ["pypi.org:x@evil.test/p", "pypi.org:443@evil.test"])
def test_a_fetchers_host_follows_the_last_at_sign(operand: str) -> None:
    # curl connects to what follows the userinfo: an allowed host before `:` is a password
    assert [str(h) for h in hosts("curl", [operand])] == ["evil.test"]
    assert [str(h) for h in hosts("wget", [operand])] == ["evil.test"]
