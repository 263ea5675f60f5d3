"""keel exec's parts on their own: environment filter, view, proxy parsing, registry, argv."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from exec_helpers import SECRET, Box

from keel.cli.exec import parse
from keel.core.daemon import process_start
from keel.core.errors import ViewError
from keel.policy import Policy
from keel.sandbox import exec_argv, kill_contained
from keel.sandbox.exec._environ import contained_env, kept
from keel.sandbox.exec._pidns import pid_max_for, supported
from keel.sandbox.exec._proxy import _parse, _split_host_port
from keel.sandbox.exec._view import build_view, filter_git_config


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "AWS_ACCESS_KEY_ID",
        "DB_PASSWORD",
        "npm_config__authToken",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_KEY_0",
        "GIT_SSH_COMMAND",
        "NODE_OPTIONS",
        "BASH_ENV",
        "BASH_FUNC_ls%%",
        "PYTHONSTARTUP",
        "PERL5OPT",
        "SSH_AUTH_SOCK",
        "KEEL_STATE_DIR",
        "https_proxy",
        "no_proxy",
    ],
)
def test_dropped_variables(name: str) -> None:
    assert not kept(name, "value")


@pytest.mark.parametrize("name", ["PATH", "LANG", "TERM", "GIT_AUTHOR_NAME", "PYTHONPATH", "CI"])
def test_kept_variables(name: str) -> None:
    assert kept(name, "value")


def test_url_with_a_password_is_dropped_whatever_its_name() -> None:
    assert not kept("DATABASE_URL", f"postgres://app:{SECRET}@db:5432/app")
    assert kept("INDEX_URL", "https://pypi.org/simple/")


def test_contained_env_sets_home_tmpdir_and_proxy() -> None:
    env = contained_env(
        {"PATH": "/bin", "HTTP_PROXY": "http://evil"},
        home="/h",
        tmpdir="/t",
        proxy_url="http://127.0.0.1:3128",
    )
    assert env["HOME"] == "/h" and env["TMPDIR"] == "/t" and env["PATH"] == "/bin"
    assert env["HTTP_PROXY"] == env["npm_config_https_proxy"] == "http://127.0.0.1:3128"
    assert env["NO_PROXY"] == ""
    assert "HTTP_PROXY" not in contained_env({}, home="/h", tmpdir="/t", proxy_url=None)


def test_git_config_filter_drops_credentials_only() -> None:
    text = (
        b"[user]\n\tname = A\n[credential]\n\thelper = store\n"
        b"[http]\n\textraheader = AUTHORIZATION: basic abc\n"
        b'[url "https://u:p@host/"]\n\tinsteadOf = https://host/\n'
    )
    out = filter_git_config(text)
    assert b"name = A" in out
    for word in (b"helper", b"extraheader", b"u:p@"):
        assert word not in out


def _view(box: Box, **kwargs: object) -> object:
    args: dict[str, object] = {
        "home": str(box.home),
        "path": f"{box.home}/.tool/bin:/usr/bin",
        "writable": (),
        "home_read_only": (),
        "state_dir": str(box.base / "state"),
    }
    args.update(kwargs)
    return build_view(str(box.ws), **args)  # type: ignore[arg-type]


def test_view_binds_toolchains_and_masks_secrets_inside(box: Box) -> None:
    (box.home / ".tool" / "bin").mkdir(parents=True)
    (box.home / ".cargo").mkdir()
    (box.home / ".cargo" / "credentials.toml").write_text(SECRET)
    view = _view(box, path=f"{box.home}/.tool/bin:{box.home}/.cargo/bin:/usr/bin")
    assert f"{box.home}/.tool" in view.read_only  # type: ignore[attr-defined]
    assert f"{box.home}/.cargo/credentials.toml" in view.masks  # type: ignore[attr-defined]
    assert not any(".ssh" in p for p in view.read_only)  # type: ignore[attr-defined]


@pytest.mark.parametrize("entry", ["~/.ssh", ".aws", "~/.config", "~/.ssh/id_rsa", "/etc/passwd"])
def test_view_refuses_configured_secrets(box: Box, entry: str) -> None:
    with pytest.raises(ViewError):
        _view(box, home_read_only=(entry,))


def test_view_refuses_a_workspace_holding_home_or_state(box: Box) -> None:
    with pytest.raises(ViewError, match="home"):
        build_view(
            str(box.base), home=str(box.home), path="", writable=(), home_read_only=(),
            state_dir="/nonexistent",
        )  # fmt: skip
    with pytest.raises(ViewError, match="state"):
        _view(box, state_dir=str(box.ws / "state"))


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org", ("CONNECT", "pypi.org", 443)),
        (b"CONNECT [::1]:8080 HTTP/1.1", ("CONNECT", "::1", 8080)),
        (b"GET http://Example.org/x?y HTTP/1.1\r\nHost: example.org", ("GET", "example.org", 80)),
        (b"GET http://u:p@h:81/ HTTP/1.1", ("GET", "h", 81)),
    ],
)
def test_proxy_parses_connect_and_absolute_requests(
    head: bytes, expected: tuple[str, str, int]
) -> None:
    parsed = _parse(head)
    assert not isinstance(parsed, str)
    assert parsed[:3] == expected


def test_proxy_forwards_origin_form_without_proxy_headers() -> None:
    parsed = _parse(
        b"GET http://h:81/a/b?c HTTP/1.1\r\nHost: h:81\r\nProxy-Authorization: x\r\n"
        b"Connection: keep-alive"
    )
    assert not isinstance(parsed, str)
    forward = parsed[3]
    assert forward.startswith(b"GET /a/b?c HTTP/1.1\r\n")
    assert b"Proxy-Authorization" not in forward and b"keep-alive" not in forward
    assert forward.endswith(b"Connection: close\r\n\r\n")


@pytest.mark.parametrize(
    "head", [b"GET /relative HTTP/1.1", b"GET https://h/ HTTP/1.1", b"CONNECT h HTTP/1.1", b"x"]
)
def test_proxy_refuses_what_it_does_not_relay(head: bytes) -> None:
    assert isinstance(_parse(head), str)


def test_host_port_split() -> None:
    assert _split_host_port("h:99999", None) == ("", None)
    assert _split_host_port("H", 80) == ("h", 80)


def test_policy_host_check_honours_ports(workdir: Path) -> None:
    (workdir / "keel.toml").write_text(
        '[policy]\npreset = "strict"\nnetwork_allow = ["127.0.0.1:8123", "*.example.org"]\n'
    )
    policy = Policy.for_root(workdir)
    assert policy.check_host("127.0.0.1", 8123).decision == "allow"
    assert policy.check_host("127.0.0.1", 8124).decision == "deny"
    assert policy.check_host("127.0.0.1").decision == "deny"
    assert policy.check_host("a.example.org", 443).decision == "allow"
    assert policy.check_host("example.com", 443).decision == "deny"


@pytest.mark.parametrize(
    ("release", "per_namespace"),
    [("6.14.0", True), ("6.18.44-fc-v1045", True), ("6.14.0-rc1+", True), ("7.0.1", True),
     ("6.13.12-200.fc41.x86_64", False), ("5.15.0-91-generic", False), ("6", False), ("x", False)],
)  # fmt: skip
def test_the_pid_namespace_cap_is_tried_only_where_pid_max_is_per_namespace(
    release: str, per_namespace: bool
) -> None:
    assert supported(release) is per_namespace


def test_the_pid_namespace_cap_lets_the_command_run_its_processes() -> None:
    assert pid_max_for(4096) == 4098  # pid 1 is bwrap's init; pids start at 1
    assert pid_max_for(16) == 301  # the kernel's floor


def test_cli_parse() -> None:
    assert parse(["--workspace", "/w", "--timeout=5", "--", "ls", "-l"]) == (
        {"workspace": "/w", "timeout": "5"},
        ["ls", "-l"],
    )
    assert parse(["ls", "--workspace", "x"]) == ({}, ["ls", "--workspace", "x"])
    assert parse(["--bogus"]) == "unknown option '--bogus'"
    assert parse(["--timeout"]) == "--timeout needs a value"


def test_exec_argv_runs_the_command_contained(bwrap_box: Box) -> None:
    argv = exec_argv(bwrap_box.ws, ["/bin/sh", "-c", "pwd; echo $HOME"], timeout=30)
    assert argv[1:3] == ["-I", "-S"] and argv[4:6] == ["exec", "--workspace"]
    done = subprocess.run(argv, env=bwrap_box.env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(bwrap_box.ws), str(bwrap_box.home)]


def test_kill_contained_ignores_forged_and_stale_records(workdir: Path) -> None:
    folder = workdir / ".keel" / "exec"
    folder.mkdir(parents=True)
    victim = subprocess.Popen(["sleep", "30"])
    time.sleep(0.05)  # start times are in clock ticks: the fake keel exec must be younger
    fake_exec = subprocess.Popen(["sleep", "30"])
    try:
        forged = {
            "pid": fake_exec.pid,
            "start": process_start(fake_exec.pid),
            "processes": [[victim.pid, process_start(victim.pid)]],
        }
        (folder / "forged.json").write_text(json.dumps(forged))
        (folder / "stale.json").write_text(json.dumps({"pid": 999_999_998, "start": 1}))
        assert kill_contained(workdir) == 1
        assert fake_exec.wait(timeout=10) == -15  # the recorded keel exec gets SIGTERM
        assert victim.poll() is None  # an older process is never taken for its sandbox
        assert [p.name for p in folder.iterdir()] == ["forged.json"]
    finally:
        victim.kill()
        fake_exec.kill()
        victim.wait()
        fake_exec.wait()


_GLOBS = ("*.pem", ".env", ".env.*", "id_rsa*", "*.p12", "a*b", "x?y", "[ab]c", "*mid*")
_NAMES = (
    ".env", ".env.local", ".env.", ".envrc", "env", "key.pem", ".pem", "pem", "id_rsa",
    "id_rsa.pub", "xid_rsa", "a.p12", "ab", "axxb", "ba", "xzy", "xy", "ac", "bc", "cc",
    "amidst", "mid", "", "*", "a*b",
)  # fmt: skip


def test_name_globs_match_as_fnmatch_does_without_re() -> None:
    """The walk's secret-name test (no ``re`` for ``*`` at either end) agrees with fnmatch."""
    from fnmatch import fnmatchcase

    from keel.core.presets import SECRET_EXCEPTIONS, WORKSPACE_SECRETS
    from keel.sandbox.exec._control import NameGlobs, is_workspace_secret

    globs = NameGlobs(_GLOBS)
    for name in _NAMES:
        assert globs.match(name) == any(fnmatchcase(name, g) for g in _GLOBS), name
    secret = [g.removeprefix("**/") for g in WORKSPACE_SECRETS]
    exceptions = [g.removeprefix("**/") for g in SECRET_EXCEPTIONS]
    policy_names = NameGlobs(tuple(secret))
    assert policy_names.other is None  # the policy's own globs never compile a regex
    for name in (*_NAMES, "ID_RSA", "Server.PEM", ".ENV.example", "x.pub", ".env.sample"):
        low = name.lower()
        expected = any(fnmatchcase(low, g) for g in secret) and not any(
            fnmatchcase(low, g) for g in exceptions
        )
        assert is_workspace_secret(name) == expected, name


class _Leftovers:
    """A run's leftovers as ``clear_marked`` sees them, pass by pass (a test double of /proc).

    Pass 1 kills pids 7 and 8; pass 2 finds nothing to kill or reap, but both are still
    exiting; pass 3 reaps 7 (8 has become another process's zombie: gone for us).
    """

    def __init__(self) -> None:
        self.passes = 0
        self.here = {7, 8}

    def sweep_once(self, into: set[int]) -> tuple[int, int]:
        self.passes += 1
        if self.passes == 1:
            into.update({7, 8})
            return 2, 0
        if self.passes == 3:
            self.here.clear()
            return 0, 1
        return 0, 0


def test_clearing_a_runs_leftovers_waits_until_those_it_killed_are_gone() -> None:
    from keel.sandbox.os._process import clear_marked

    leftovers = _Leftovers()
    cleared = clear_marked("t", 64102, 5.0, sweep_once=leftovers.sweep_once,
                           present=leftovers.here.__contains__)  # fmt: skip
    # a pass with nothing to do while killed processes are still exiting is not the end
    assert (cleared, leftovers.passes) == (True, 4)


def test_clearing_gives_up_at_its_deadline_and_says_so() -> None:
    from keel.sandbox.os._process import clear_marked

    passes: list[int] = []

    def never_dies(into: set[int]) -> tuple[int, int]:
        passes.append(1)
        into.add(9)
        return 0, 0

    assert clear_marked("t", 64102, 0.05, sweep_once=never_dies, present=lambda _pid: True) is False
    assert len(passes) >= 2


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _until_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while _state(pid) != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_zombie_of_another_parent_is_gone_and_our_own_is_still_here() -> None:
    from keel.sandbox.os._process import still_here

    assert still_here(os.getpid())
    assert not still_here(2**22 + 1)  # above the largest pid_max: no such process
    read, write = os.pipe()
    parent = os.fork()
    if parent == 0:  # a child that leaves its own child unreaped
        grandchild = os.fork()
        if grandchild == 0:
            os._exit(0)
        os.write(write, str(grandchild).encode())
        time.sleep(60)
        os._exit(0)
    os.close(write)
    grandchild = int(os.read(read, 32))
    os.close(read)
    try:
        _until_zombie(grandchild)
        assert not still_here(grandchild)  # its parent reaps it, not us
    finally:
        os.kill(parent, 9)
        os.waitpid(parent, 0)
    child = os.fork()
    if child == 0:
        os._exit(0)
    _until_zombie(child)
    assert still_here(child)  # our zombie: still ours to reap
    os.waitpid(child, 0)
    assert not still_here(child)
