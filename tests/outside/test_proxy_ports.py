"""Issue 22, family 5 ("proxy ports"): an allowlist entry without a port reaches 80 and 443 only.

Once ``CONNECT github.com:22`` went upstream because ``github.com`` was on the list: a bare
entry allowed every port of the host, through ``keel exec``'s proxy and in the text policy
(which is all there is when commands run uncontained). Each test here is an attacker's try at
another port of an allowed host, with ``localhost`` as the bare entry (the one name the proxy
lets resolve to loopback) and a canary listening on ``127.0.0.1``, port 0: the canary must see
no connection, and the refusal must name the entry that would allow it. Ports 80 and 443
themselves cannot be bound here, so that half of the rule is checked on ``Policy.check_host``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from exec_helpers import canary  # a TCP listener on 127.0.0.1:0 that counts connections

from _support import hook, keel, make_workspace
from keel.config import parse_config
from keel.policy import Policy
from keel.sandbox.exec._proxy import Proxy, policy_check


def _workspace(workdir: Path, allow: str, extra: str = "") -> Path:
    toml = f'[policy]\npreset = "developer"\nnetwork_allow = ["{allow}"]\n{extra}'
    return make_workspace(workdir / "ws", keel_toml=toml)


def _require_bwrap() -> None:
    from keel.sandbox import exec_backend

    name, reason = exec_backend("bwrap")
    if name != "bwrap":
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(f"required in CI: keel exec with bwrap: {reason}")
        pytest.skip(f"keel exec with bwrap is unavailable here: {reason}")


# -- the rule itself ------------------------------------------------------------------------


def test_a_bare_entry_allows_ports_80_and_443_and_a_named_port_exactly(workdir: Path) -> None:
    allow = '"localhost", "*.example.test", "127.0.0.1:8080", "[::1]:9000"'
    config = parse_config(f'[policy]\npreset = "strict"\nnetwork_allow = [{allow}]\n')
    policy = Policy.from_config(config, workdir)

    def verdict(host: str, port: int) -> tuple[str, str]:
        got = policy.check_host(host, port)
        return got.decision, got.rule

    for host in ("localhost", "LocalHost.", "a.example.test"):
        assert verdict(host, 80) == verdict(host, 443) == ("allow", "network.allowed")
        for port in (22, 8080, 6379):
            assert verdict(host, port) == ("deny", "network.port_not_allowed"), (host, port)
    assert verdict("127.0.0.1", 8080) == ("allow", "network.allowed")
    assert verdict("127.0.0.1", 80) == ("deny", "network.port_not_allowed")
    assert verdict("::1", 9000) == ("allow", "network.allowed")
    assert verdict("::1", 443) == ("deny", "network.port_not_allowed")
    assert verdict("evil.test", 443) == ("deny", "network.not_allowed")

    wildcard = policy.check_host("a.example.test", 22)
    assert wildcard.reason == "only ports 80 and 443 of '*.example.test' are allowed"
    assert wildcard.suggestion == 'add "a.example.test:22" to [policy] network_allow in keel.toml'
    ipv6 = policy.check_host("::1", 9001)
    assert ipv6.reason == "only port 9000 of '::1' is allowed"
    assert ipv6.suggestion == 'add "[::1]:9001" to [policy] network_allow in keel.toml'


def test_a_url_without_a_port_is_judged_on_its_schemes_port(workdir: Path) -> None:
    """The text policy's URLs: ``ssh://`` is 22 and ``git://`` 9418, not a web port."""
    config = parse_config('[policy]\npreset = "strict"\nnetwork_allow = ["github.com"]\n')
    policy = Policy.from_config(config, workdir)
    assert policy.check_url("https://github.com/o/r").decision == "allow"
    assert policy.check_url("http://github.com/o/r").decision == "allow"
    for url, port in [
        ("ssh://git@github.com/o/r", 22),
        ("git://github.com/o/r", 9418),
        ("https://github.com:8443/o/r", 8443),
    ]:
        got = policy.check_url(url)
        assert (got.decision, got.rule) == ("deny", "network.port_not_allowed"), url
        assert f'"github.com:{port}"' in (got.suggestion or ""), got
    # in a command line, a scheme whose port keel does not know is not read as a web port
    got = policy.check_command("curl -s redis://github.com/")
    assert (got.decision, got.rule) == ("deny", "network.port_not_allowed"), got
    assert "cannot read which port" in got.reason


# -- keel exec's proxy ----------------------------------------------------------------------


def _ask_proxy(proxy_port: int, request: str) -> tuple[str, str]:
    """Send one request to the proxy on 127.0.0.1; its answer's status line and body."""
    with socket.create_connection(("127.0.0.1", proxy_port), timeout=30) as s:
        s.sendall(request.encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.decode().partition("\r\n\r\n")
    return head.splitlines()[0], body


def test_the_proxy_refuses_another_port_of_a_bare_host_and_names_the_entry(
    workdir: Path,
) -> None:
    ws = _workspace(workdir, "localhost")
    proxy = Proxy(policy_check(str(ws)))
    with canary() as ssh:
        port = proxy.listen_tcp()
        try:
            target = f"localhost:{ssh.port}"
            refused = _ask_proxy(port, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")
            forwarded = _ask_proxy(port, f"GET http://{target}/ HTTP/1.1\r\nHost: x\r\n\r\n")
            unlisted = _ask_proxy(port, "CONNECT evil.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        finally:
            proxy.close()
        assert ssh.hits == 0
    body = (
        f"keel: {target} refused: only ports 80 and 443 of 'localhost' are allowed; "
        f'add "{target}" to [policy] network_allow in keel.toml, or run `keel allow-host '
        f"{target}` [network.port_not_allowed]\n"
    )
    assert refused == ("HTTP/1.1 403 Forbidden", body)
    assert forwarded == ("HTTP/1.1 403 Forbidden", body)
    # a host not on the list at all: its own reason, and what would allow it
    assert unlisted == (
        "HTTP/1.1 403 Forbidden",
        "keel: evil.test:443 refused: evil.test is not on the network allowlist; add "
        '"evil.test" to [policy] network_allow in keel.toml, or run `keel allow-host '
        "evil.test` [network.not_allowed]\n",
    )
    assert [(d.host, d.port, d.allowed, d.rule) for d in proxy.decisions] == [
        ("localhost", ssh.port, False, "network.port_not_allowed"),
        ("localhost", ssh.port, False, "network.port_not_allowed"),
        ("evil.test", 443, False, "network.not_allowed"),
    ]


_CONTAINED = """
import os, socket, sys, urllib.error, urllib.parse, urllib.request
target = sys.argv[1]
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
with socket.create_connection((proxy.hostname, proxy.port), timeout=30) as s:
    s.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
print("CONNECT", data.decode().replace("\\r\\n", " | "))
via = urllib.request.ProxyHandler({"http": os.environ["HTTP_PROXY"]})
opener = urllib.request.build_opener(via)
try:
    print("GET", opener.open(f"http://{target}/", timeout=30).status)
except urllib.error.HTTPError as exc:
    print("GET", exc.code, exc.read().decode().strip())
except OSError as exc:
    print("GET failed", exc)
"""


def _contained(ws: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return keel("exec", "--workspace", str(ws), "--backend", "bwrap", "--", *command, cwd=ws)


def test_a_contained_command_reaches_another_port_only_once_it_is_named(workdir: Path) -> None:
    _require_bwrap()
    with canary() as ssh:
        target = f"localhost:{ssh.port}"
        ws = _workspace(workdir, "localhost")
        refused = _contained(ws, "/usr/bin/python3", "-c", _CONTAINED, target)
        curl = ""
        if shutil.which("curl"):
            line = f'curl -sS -m 30 -p -x "$HTTPS_PROXY" http://{target}/ 2>&1; echo "exit $?"'
            curl = _contained(ws, "/bin/sh", "-c", line).stdout
        assert ssh.hits == 0, (refused.stdout, refused.stderr, curl)

        _workspace(workdir, target)  # the entry the refusal names
        allowed = _contained(ws, "/usr/bin/python3", "-c", _CONTAINED, target)
        assert ssh.reached(), (allowed.stdout, allowed.stderr)
    assert refused.returncode == 0, refused.stderr
    assert "CONNECT HTTP/1.1 403 Forbidden" in refused.stdout
    named = (
        f'add "{target}" to [policy] network_allow in keel.toml, or run `keel allow-host '
        f"{target}` [network.port_not_allowed]"
    )
    assert named in refused.stdout
    assert f"GET 403 keel: {target} refused: only ports 80 and 443" in refused.stdout
    if curl:
        assert "403" in curl and "exit 0" not in curl, curl
    assert "CONNECT HTTP/1.1 200 Connection established" in allowed.stdout
    log = (ws / ".keel" / "exec" / "proxy.log").read_text().splitlines()
    decisions = [(d["port"], d["allowed"], d["rule"]) for d in map(json.loads, log)]
    assert (ssh.port, False, "network.port_not_allowed") in decisions
    assert (ssh.port, True, "network.allowed") in decisions


# -- the text policy, when commands run uncontained ----------------------------------------


def _hook(ws: Path, command: str) -> dict[str, str]:
    """The real ``keel hook`` (Claude Code's dialect) for one Bash call."""
    payload = {"tool_name": "Bash", "tool_input": {"command": command}}
    proc = hook("PreToolUse", payload, workspace=ws, session="proxy-ports", via="keel",
                pass_workspace=True)  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        return {"permissionDecision": "deny", "permissionDecisionReason": proc.stderr}
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return {"permissionDecision": "allow"}  # silence: the client's own permissions apply
    return json.loads(proc.stdout)["hookSpecificOutput"]


@pytest.mark.parametrize(
    "template",
    [
        "curl -s -m 30 http://localhost:{port}/",
        "curl -s -m 30 localhost:{port}/",
        "echo x > /dev/tcp/localhost/{port}",
    ],
)
def test_uncontained_the_text_policy_keeps_the_same_port_rule(workdir: Path, template: str) -> None:
    """With containment off, what the hook allows runs as is; the canary is the judge."""
    ws = workdir / "ws"
    ws.mkdir()
    with canary() as ssh:
        command = template.format(port=ssh.port)
        for entry in ("localhost", f"localhost:{ssh.port}"):
            (ws / "keel.toml").write_text(
                f'[policy]\npreset = "developer"\nallow = ["curl"]\nnetwork_allow = ["{entry}"]\n'
                '[sandbox]\ncontain = "off"\n[monitor]\nenabled = false\n'  # the policy alone
            )
            reply = _hook(ws, command)
            _run_as_client(reply, command, ws)
            if entry == "localhost":
                assert ssh.hits == 0, reply
                named = f'add "localhost:{ssh.port}"'
                assert named in reply.get("permissionDecisionReason", ""), reply
        # the harness sees a connection: the same line, its port named, reaches the canary
        assert ssh.reached(), reply


def _run_as_client(reply: dict[str, str], command: str, cwd: Path) -> None:
    """What Claude Code does with the hook's answer: run the command only when allowed."""
    if reply.get("permissionDecision") == "allow":
        subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, timeout=120)
