"""Paths: canonicalised against the root, protected globs, scope, secrets, bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from keel.config import parse_config
from keel.core.calls import ToolCall
from keel.policy import Policy, patch_paths


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    return ws


@pytest.fixture
def dev(root: Path) -> Policy:
    return Policy.for_preset("developer", root)


def test_inside_paths_are_allowed(dev: Policy, root: Path) -> None:
    for op in ("read", "write", "edit"):
        assert dev.check_path("src/a.py", op).decision == "allow"
        assert dev.check_path(str(root / "src" / "new.py"), op).decision == "allow"
    assert dev.check_path("src/../src/a.py", "write").decision == "allow"


@pytest.mark.parametrize(
    "path",
    ["../x", "../../etc/passwd", "/etc/passwd", "src/../../x", "..\\..\\x", "%2e%2e/x",
     "%252e%252e%252fx", "..%c0%afx", "..%u2215x", "%uff0e%uff0e/x", "..;/..;/x", "C:\\boot.ini",
     "\\\\server\\share", "/", "~", "~/x", "$HOME/.bashrc", "${HOME}/x", "0x2e0x2e/x"],
)  # fmt: skip
def test_outside_paths_are_denied(dev: Policy, path: str) -> None:
    for op in ("read", "write"):
        decision = dev.check_path(path, op)
        assert decision.decision == "deny", (op, decision)
        assert decision.rule in ("path.outside_workspace", "risk.secret_read"), decision


def test_symlink_inside_pointing_outside_is_denied(dev: Policy, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (root / "link").symlink_to(outside)
    (root / "filelink").symlink_to(outside / "secret.txt")
    for path in ("link/secret.txt", "link/new.txt", "filelink", "link"):
        for op in ("read", "write"):
            decision = dev.check_path(path, op)
            assert (decision.decision, decision.rule) == ("deny", "path.outside_workspace"), (
                decision
            )
    assert dev.check_command("cat link/secret.txt").decision == "deny"
    assert dev.check_command("echo x > link/new.txt").decision == "deny"


def test_symlink_inside_pointing_inside_is_fine(dev: Policy, root: Path) -> None:
    (root / "alias").symlink_to(root / "src")
    assert dev.check_path("alias/a.py", "write").decision == "allow"


def test_home_forms_are_expanded(dev: Policy) -> None:
    home = os.path.expanduser("~")
    for path in ("~/.bashrc", "$HOME/.bashrc", "${HOME}/.bashrc", f"{home}/.bashrc"):
        assert dev.check_path(path, "write").rule == "path.outside_workspace"
    for path in ("~/.ssh/id_rsa", "$HOME/.aws/credentials", "~/.kube/config", "~/.netrc"):
        assert dev.check_path(path, "read").rule == "risk.secret_read"
    assert dev.check_command("cat $HOME/.ssh/id_ed25519").rule == "risk.secret_read"


def test_encoded_paths_are_decoded(dev: Policy) -> None:
    assert dev.check_path("%2egit/config", "write").rule == "path.control"
    assert dev.check_path(".gi%74/config", "write").rule == "path.control"
    assert dev.check_path("%252e%252e%252fetc%252fpasswd", "read").rule == "path.outside_workspace"


@pytest.mark.parametrize(
    "path",
    [".git/config", ".git", ".env", ".env.local", "sub/.env", "app/migrations/0001.py",
     "migrations/1.py", ".keel/journal.db", "keel.toml", ".github/workflows/ci.yml", "certs/x.pem",
     ".GIT/config", "src/../.git/HEAD", "./.git/hooks/pre-commit"],
)  # fmt: skip
def test_protected_globs_deny_writes(dev: Policy, path: str) -> None:
    decision = dev.check_path(path, "write")
    assert decision.decision == "deny", decision
    assert decision.rule in ("path.protected", "path.control"), decision


def test_protected_files_can_be_read_but_secrets_cannot(dev: Policy) -> None:
    assert dev.check_path("keel.toml", "read").decision == "allow"
    assert dev.check_path(".git/config", "read").decision == "allow"
    assert dev.check_path(".env", "read").rule == "risk.secret_read"
    assert dev.check_path(".env.example", "read").decision == "allow"


def test_bad_path_input_is_denied(dev: Policy) -> None:
    assert dev.check_path("a\x00b", "write").rule == "input.nul"
    assert dev.check_path("a%00b", "write").rule == "path.nul"
    assert dev.check_path("a\nb", "write").rule == "path.control_char"
    assert dev.check_path("", "read").rule == "path.empty"
    assert dev.check_path("a\udcff", "read").rule == "input.encoding"
    assert dev.check_path("a" * 2_000_000, "read").rule == "input.too_large"


def test_devices_are_allowed(dev: Policy) -> None:
    assert dev.check_path("/dev/null", "write").decision == "allow"
    assert dev.check_command("pytest > /dev/null 2>&1").decision == "allow"
    assert dev.check_path("/dev/sda", "write").decision == "deny"


def test_scope_include_and_exclude(root: Path) -> None:
    config = parse_config(
        '[scope]\ninclude = ["src/**", "tests/**"]\nexclude = ["src/vendor/**"]\n'
    )
    policy = Policy.from_config(config, root)
    assert policy.check_path("src/a.py", "write").decision == "allow"
    assert policy.check_path("tests/t.py", "edit").decision == "allow"
    assert policy.check_path("docs/x.md", "write").rule == "path.out_of_scope"
    assert policy.check_path("src/vendor/lib.py", "write").rule == "path.out_of_scope"
    assert policy.check_path("docs/x.md", "read").decision == "allow"
    assert policy.check_command("echo x > docs/x.md").rule == "path.out_of_scope"
    assert policy.in_scope("src/a.py")
    assert not policy.in_scope("docs/x.md")
    assert not policy.in_scope("../src/a.py")
    assert not policy.in_scope("src/vendor/lib.py")


def test_read_outside_globs(root: Path) -> None:
    config = parse_config('[policy]\nread_outside = ["/usr/share/**"]\n')
    policy = Policy.from_config(config, root)
    assert policy.check_path("/usr/share/dict/words", "read").decision == "allow"
    assert policy.check_path("/usr/share/dict/words", "write").decision == "deny"
    assert policy.check_path("/usr/local/x", "read").decision == "deny"


def test_written_paths(dev: Policy, root: Path) -> None:
    line = (
        "echo a > out.txt; cat x | tee log1 log2 >> log3; sed -i 's/a/b/' src/a.py; cp a b; "
        "mv c d; rm e; touch f; chmod 644 g; ln -s h i; echo ok 2>/dev/null"
    )
    got = {p.relative_to(root).as_posix() for p in dev.written_paths(line)}
    assert got == {"out.txt", "log1", "log2", "log3", "src/a.py", "b", "c", "d", "e", "f", "g", "i"}
    assert dev.written_paths("ls -la") == []


def test_check_call_dispatches_on_kind(dev: Policy) -> None:
    assert dev.check_call(ToolCall("Bash", "exec", command="pytest -q")).decision == "allow"
    assert (
        dev.check_call(ToolCall("Read", "read", paths=("/etc/shadow",))).rule == "risk.secret_read"
    )
    assert dev.check_call(ToolCall("Write", "write", paths=("src/x.py",))).decision == "allow"
    assert dev.check_call(ToolCall("Edit", "edit", paths=(".git/config",))).rule == "path.control"
    assert (
        dev.check_call(ToolCall("Fetch", "network", url="https://pypi.org/x")).decision == "allow"
    )
    assert dev.check_call(ToolCall("Fetch", "network", url="https://evil.test/")).decision == "deny"
    assert dev.check_call(ToolCall("mcp__gh__x", "mcp")).decision == "ask"
    assert dev.check_call(ToolCall("Write", "write")).decision == "ask"
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n"
        "*** Add File: .git/hooks/x\n+hi\n*** End Patch\n"
    )
    decision = dev.check_call(ToolCall("apply_patch", "edit", patch=patch))
    assert decision.rule == "path.control"


def test_patch_paths() -> None:
    diff = "diff --git a/src/x.py b/src/y.py\n--- a/src/x.py\n+++ b/src/y.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert patch_paths(diff) == ["src/x.py", "src/y.py"]
    assert patch_paths("--- /dev/null\n+++ b/new.py\n") == ["new.py"]
