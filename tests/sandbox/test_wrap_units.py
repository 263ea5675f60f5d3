"""keel wrap's parts: client profiles, host entries, the state guard, the decision service."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from keel.core.errors import ExecRefused, UsageError
from keel.hook.wire import MAGIC, parse_request
from keel.sandbox.exec._exec import PROXY_PORT
from keel.sandbox.exec.contain import exit_status
from keel.sandbox.wrap._clients import client_profile, detect_client, install_roots, url_host_port
from keel.sandbox.wrap._decide import pin_environment
from keel.sandbox.wrap._state import ClientState
from keel.sandbox.wrap._wrap import Wrap, host_entry, wrap_spec


@pytest.mark.parametrize(
    ("text", "entry"),
    [
        ("api.example.com", ("api.example.com", None)),
        ("API.Example.com.:8443", ("api.example.com", 8443)),
        ("127.0.0.1:9", ("127.0.0.1", 9)),
        ("[::1]:8080", ("::1", 8080)),
        ("[::1]", ("::1", None)),
    ],
)
def test_host_entries(text: str, entry: tuple[str, int | None]) -> None:
    assert host_entry(text) == entry


@pytest.mark.parametrize("text", ["", "http://x/", "x:0", "x:65536", "x:y", "a b", "[::1]x", "-x"])
def test_bad_host_entries_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError) as info:
        host_entry(text)
    assert info.value.code == "usage.allow_host" and exit_status(info.value) == 2


def test_clients_are_recognised_by_name_and_package(tmp_path: Path) -> None:
    package = tmp_path / "node_modules" / "@openai" / "codex" / "bin"
    package.mkdir(parents=True)
    script = package / "codex.js"
    script.write_text("#!/usr/bin/env node\n")
    script.chmod(0o755)
    link = tmp_path / "node_modules" / ".bin" / "cx"
    link.parent.mkdir()
    link.symlink_to(script)
    env = {"PATH": f"{link.parent}:/usr/bin"}
    assert detect_client("cx", env) == "codex"
    assert detect_client("/opt/x/claude", env) == "claude"
    assert detect_client("gemini.js", env) == "gemini"
    assert detect_client("/bin/sh", env) == "other"
    assert install_roots("cx", env) == (str(tmp_path / "node_modules"),)


def test_the_model_host_comes_from_the_base_url_else_the_vendor(tmp_path: Path) -> None:
    home = str(tmp_path)
    local = client_profile("claude", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:7000/v1"}, home)
    assert local.hosts == ("127.0.0.1:7000",)
    assert client_profile("claude", {}, home).hosts == ("api.anthropic.com:443",)
    gemini = client_profile("gemini", {"GOOGLE_GEMINI_BASE_URL": "https://g.example"}, home)
    assert gemini.hosts == ("g.example:443",)
    assert client_profile("other", {}, home).hosts == ()


def test_claude_state_and_keys(tmp_path: Path) -> None:
    home = str(tmp_path)
    profile = client_profile("claude", {}, home)
    assert profile.state == (f"{home}/.claude", f"{home}/.claude.json")
    assert f"{home}/.claude/settings.json" in profile.settings
    assert profile.guarded == (f"{home}/.claude.json",)
    assert "ANTHROPIC_API_KEY" in profile.keys and "OPENAI_API_KEY" not in profile.keys
    custom = client_profile("claude", {"CLAUDE_CONFIG_DIR": "~/cc"}, home)
    assert custom.state == (f"{home}/cc",) and custom.guarded == (f"{home}/cc/.claude.json",)


def test_codex_providers_give_hosts_and_keys(tmp_path: Path) -> None:
    codex_home = tmp_path / "ch"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model_provider = "fake"\n[model_providers.fake]\nbase_url = "http://127.0.0.1:4000/v1"\n'
        'env_key = "FAKE_API_KEY"\n'
    )
    profile = client_profile("codex", {"CODEX_HOME": str(codex_home)}, str(tmp_path))
    assert profile.state == (str(codex_home),)
    assert profile.hosts == ("127.0.0.1:4000",)
    assert "FAKE_API_KEY" in profile.keys
    default = client_profile("codex", {}, str(tmp_path))
    assert "api.openai.com:443" in default.hosts


@pytest.mark.parametrize("url", ["127.0.0.1:80", "ftp://x", "http://", "http://x:99999"])
def test_a_base_url_without_a_host_refuses(url: str) -> None:
    with pytest.raises(ExecRefused) as info:
        url_host_port(url)
    assert info.value.code == "wrap.base_url"


def test_the_spec_joins_model_hosts_allow_hosts_and_keys(tmp_path: Path) -> None:
    env = {"ANTHROPIC_BASE_URL": "http://localhost:5000"}
    spec = wrap_spec(
        ["claude"], environ=env, home=str(tmp_path), allow_hosts=["x.dev"], pass_env=["MY_TOKEN"]
    )
    assert spec.allow == (("localhost", 5000), ("x.dev", None))
    assert spec.pass_env[-1] == "MY_TOKEN"
    with pytest.raises(UsageError):
        wrap_spec([], environ=env, home=str(tmp_path))


def test_relays_are_the_allowed_loopback_ports(tmp_path: Path) -> None:
    spec = wrap_spec(
        ["sh"],
        environ={},
        home=str(tmp_path),
        allow_hosts=["127.0.0.1:7000", "127.0.0.1", f"127.0.0.1:{PROXY_PORT}", "example.com:80"],
    )
    wrap = Wrap(spec, ["sh"], {"PATH": "/usr/bin"})
    relays = wrap.relays(["localhost:7100", "*.github.com", "127.0.0.1:7000"])
    assert relays == ["127.0.0.1:7000", "localhost:7100"]


def test_the_proxy_check_allows_the_wrap_hosts_then_asks_the_policy(tmp_path: Path) -> None:
    spec = wrap_spec(["sh"], environ={}, home=str(tmp_path), allow_hosts=["a.dev:443", "b.dev"])
    asked: list[tuple[str, int]] = []

    def policy(host: str, port: int) -> tuple[bool, str, str]:
        asked.append((host, port))
        return False, "network.not_allowed", "no"

    check = Wrap(spec, ["sh"], {}).check(policy)
    assert check("A.dev", 443)[0] and check("b.dev", 80)[0] and check("b.dev", 443)[0]
    assert not check("a.dev", 80)[0] and asked == [("a.dev", 80)]
    assert not check("b.dev", 22)[0] and asked[-1] == ("b.dev", 22)  # bare: web ports only


@pytest.mark.parametrize("rel", ["", ".ssh", "ws", "ws/sub", "state", ".local"])
def test_state_that_overlaps_a_secret_or_the_workspace_is_refused(tmp_path: Path, rel: str) -> None:
    from keel.sandbox.wrap._clients import ClientProfile

    home, ws, state = tmp_path, tmp_path / "ws", tmp_path / "state"
    for path in (ws / "sub", state, home / ".ssh"):
        path.mkdir(parents=True)
    profile = ClientProfile("codex", (str(home / rel) if rel else str(home),), (), (), ())
    with pytest.raises(ExecRefused) as info:
        ClientState(profile, str(home), str(ws), str(state / "keel"))
    assert info.value.code == "wrap.client_state"


def test_guarded_keys_are_put_back_and_the_rest_kept(tmp_path: Path) -> None:
    from keel.sandbox.wrap._clients import ClientProfile

    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    home.mkdir()
    state_file = home / ".claude.json"
    state_file.write_text(json.dumps({"a": 1, "mcpServers": {"ok": {}}, "projects": {"/p": {}}}))
    profile = ClientProfile(
        "claude", (str(home / ".claude"), str(state_file)), (), (), (), (str(state_file),)
    )
    state = ClientState(profile, str(home), str(ws), str(tmp_path / "keel-state"))
    state.close()
    changed = {"a": 2, "mcpServers": {"bad": {}}, "projects": {"/p": {"mcpServers": {"x": {}}}}}
    state_file.write_text(json.dumps(changed))
    assert state.after("T") == ([], [str(state_file)])
    assert json.loads(state_file.read_text()) == {
        "a": 2,
        "mcpServers": {"ok": {}},
        "projects": {"/p": {}},
    }
    assert json.loads((home / ".claude.json.keel-quarantined-T").read_text()) == changed
    assert state.after("U") == ([], [])  # nothing changed since


def test_a_settings_link_that_changed_is_put_back(tmp_path: Path) -> None:
    from keel.sandbox.wrap._clients import ClientProfile

    home = tmp_path / "home"
    claude = home / ".claude"
    claude.mkdir(parents=True)
    (claude / "settings.json").symlink_to("/dotfiles/settings.json")
    profile = ClientProfile("claude", (str(claude),), (str(claude / "settings.json"),), (), ())
    state = ClientState(profile, str(home), str(tmp_path / "ws"), str(tmp_path / "st"))
    state.close()
    (claude / "settings.json").unlink()
    (claude / "settings.json").write_text("{}")
    moved, _ = state.after("T")
    assert moved == [str(claude / "settings.json")]
    assert os.readlink(claude / "settings.json") == "/dotfiles/settings.json"
    assert (claude / "settings.json.keel-quarantined-T").read_text() == "{}"


def test_requests_get_the_hosts_state_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    env = [b"KEEL_STATE_DIR=/ws/evil", b"HOME=/ws", b"PATH=/usr/bin", b"KEEL_HOOKD=0"]
    fields = [
        MAGIC,
        b"0.1.0",
        b"/ws",
        b"/ws",
        b"r1",
        b"9.5",
        b"1",
        b"PreToolUse",
        b"4",
        *env,
        b"{}",
    ]
    host = {"KEEL_STATE_DIR": "/state", "HOME": "/home/u", "PATH": "/host/bin"}
    request = parse_request(pin_environment(fields, host))
    assert request is not None
    assert request.env == {"PATH": "/usr/bin", "KEEL_STATE_DIR": "/state", "HOME": "/home/u"}
    assert request.argv == ("PreToolUse",) and request.data == b"{}"
    assert pin_environment([b"junk"], host) == [b"junk"]


def test_a_guard_inside_keel_wrap_judges_as_contained_and_never_rewrites(tmp_path: Path) -> None:
    from keel.core.calls import ToolCall, ToolResult
    from keel.guard import Guard

    guard = Guard.open(tmp_path, session_id="w", inside_sandbox=True, checkpoints=False)
    try:
        assert guard.contain and guard.policy.contained and not guard.rewrite
        assert guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t")).allowed
        call = ToolCall("Bash", "exec", command="ls", tool_use_id="t")
        guard.observe(ToolResult("Bash", "exec", True, tool_use_id="t", call=call))
        assert guard.state.containment_broken is None  # running it as written is no bypass
    finally:
        guard.close()


@pytest.mark.parametrize("left", [b"", b"not json", b"[" * 100000])
def test_a_state_file_left_unreadable_goes_back_whole(tmp_path: Path, left: bytes) -> None:
    from keel.sandbox.wrap._clients import ClientProfile

    home = tmp_path / "home"
    home.mkdir()
    state_file = home / ".claude.json"
    state_file.write_text('{"mcpServers": {}}')
    state_dir = str(home / ".claude")
    profile = ClientProfile("claude", (state_dir, str(state_file)), (), (), (), (str(state_file),))
    state = ClientState(profile, str(home), str(tmp_path / "ws"), str(tmp_path / "st"))
    state.close()
    state_file.write_bytes(left)
    assert state.after("T") == ([], [str(state_file)])
    assert state_file.read_text() == '{"mcpServers": {}}'
