"""keel exec, by effect: no route out but the proxy, which enforces the policy's allowlist."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from exec_helpers import PYTHON, Box, PackageIndex, canary

from keel.sandbox import run_contained

_DIRECT = """
import socket, sys
for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM)):
    try:
        s = socket.socket(family, kind)
        s.settimeout(2)
        s.connect(("127.0.0.1", int(sys.argv[1])))
        s.send(b"x")
        print("CONNECTED", "tcp" if kind == socket.SOCK_STREAM else "udp")
    except OSError as exc:
        print("blocked", type(exc).__name__)
"""

_CONNECT = """
import os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
s = socket.create_connection((proxy.hostname, proxy.port), timeout=5)
s.sendall(f"CONNECT 127.0.0.1:{sys.argv[1]} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n".encode())
print(s.recv(200).decode().splitlines()[0])
"""

_URLLIB = """
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()[:40])
except Exception as exc:
    print("refused", exc)
"""


def _allow(box: Box, *hosts: str) -> None:
    entries = ", ".join(f'"{h}"' for h in hosts)
    box.config(f'[policy]\npreset = "developer"\nnetwork_allow = [{entries}]\n')


def test_a_listener_that_is_not_allowlisted_gets_no_connection(box: Box) -> None:
    with canary() as other, canary() as allowed:
        _allow(box, f"127.0.0.1:{allowed.port}")
        port = str(other.port)
        url = f"http://127.0.0.1:{port}/"
        outputs = [
            box.run("/usr/bin/python3", "-c", _DIRECT, port).stdout,
            box.run("/usr/bin/python3", "-c", _CONNECT, port).stdout,
            box.run("/usr/bin/python3", "-c", _URLLIB, url).stdout,
            box.run("/usr/bin/python3", "-c", _URLLIB, f"http://localhost:{port}/").stdout,
        ]
        if shutil.which("curl"):
            outputs.append(box.sh(f"curl -s -m 5 {url}; curl -s -m 5 -x '' {url}").stdout)
        assert other.hits == 0, outputs
    assert "CONNECTED tcp" not in outputs[0]  # UDP to its own loopback (bwrap) reaches nothing
    assert outputs[1].startswith("HTTP/1.1 403")
    assert outputs[2].startswith("refused")


def test_an_allowlisted_server_is_reached_through_the_proxy(box: Box) -> None:
    index = PackageIndex("kxdemo")
    try:
        _allow(box, f"127.0.0.1:{index.port}")
        url = f"http://127.0.0.1:{index.port}/simple/"
        done = box.run("/usr/bin/python3", "-c", _URLLIB, url)
    finally:
        index.close()
    assert "kxdemo" in done.stdout, done.stderr
    log = (box.ws / ".keel" / "exec" / "proxy.log").read_text().splitlines()
    decision = json.loads(log[-1])
    assert decision["allowed"] is True
    assert decision["port"] == index.port


def test_pip_installs_from_an_allowlisted_local_index(box: Box) -> None:
    index = PackageIndex("kxdemo")
    (box.ws / "vendor").mkdir()  # Landlock cannot let a command create root entries
    try:
        _allow(box, f"127.0.0.1:{index.port}")
        done = box.run(
            PYTHON,
            "-m",
            "pip",
            "install",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--target",
            "vendor",
            "--index-url",
            f"http://127.0.0.1:{index.port}/simple/",
            "kxdemo",
            env={"PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": "/dev/null"},
            timeout=240,
        )
    finally:
        index.close()
    assert done.returncode == 0, done.stderr
    assert (box.ws / "vendor" / "kxdemo.py").read_text() == "VALUE = 42\n"


def test_without_an_allowlist_there_is_no_proxy_and_no_network(box: Box) -> None:
    with canary() as other:
        box.config('[policy]\npreset = "strict"\n')
        done = box.sh(
            f"env | grep -i '^[a-z_]*proxy='; /usr/bin/python3 -c '{_DIRECT}' {other.port}"
        )
        assert other.hits == 0
    assert "proxy" not in done.stdout.lower()
    assert "CONNECTED tcp" not in done.stdout


def test_every_proxy_decision_is_returned(box: Box) -> None:
    with canary() as other:
        _allow(box, "127.0.0.1:1")
        result = run_contained(
            ["/usr/bin/python3", "-c", _URLLIB, f"http://127.0.0.1:{other.port}/x"],
            workspace=box.ws,
            backend=box.backend,
            environ=box.env,
        )
    assert [(c.host, c.port, c.allowed, c.rule) for c in result.connections] == [
        ("127.0.0.1", other.port, False, "network.port_not_allowed")
    ]
    assert result.exit_code == 0


@pytest.mark.skipif(sys.platform != "linux", reason="Linux only")
def test_abstract_unix_sockets_of_the_host_are_unreachable(box: Box, workdir: Path) -> None:
    import socket

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\0keel-exec-canary")
    server.listen(1)
    server.settimeout(0.5)
    try:
        done = box.run(
            "/usr/bin/python3",
            "-c",
            "import socket; s=socket.socket(socket.AF_UNIX); "
            "s.connect('\\0keel-exec-canary'); print('CONNECTED')",
        )
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert "CONNECTED" not in done.stdout
