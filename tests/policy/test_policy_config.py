"""keel.toml: command patterns, constraints, overrides, the snapshot cache, bad configs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from keel.config import KeelConfig, parse_config
from keel.core.errors import ConfigError, UsageError
from keel.policy import Policy

HEAVY = ("pydantic", "typer", "rich", "yaml", "tree_sitter", "tomllib")
CONSTRAINTS = """
[[constraints]]
id = "no-docs"
text = "Documentation is owned by the docs team."
protect = ["docs/**"]
forbid = ["alembic upgrade", "npm publish*"]

[[constraints]]
text = "Never touch the database migrations."
protect = ["db/schema.sql"]
"""


def test_constraint_protect_denies_writes_and_commands(tmp_path: Path) -> None:
    policy = Policy.from_config(parse_config(CONSTRAINTS), tmp_path)
    for decision in (
        policy.check_path("docs/index.md", "write"),
        policy.check_command("echo x > docs/index.md"),
        policy.check_command("sed -i s/a/b/ docs/index.md"),
        policy.check_command("rm docs/old.md"),
    ):
        assert (decision.decision, decision.rule) == ("deny", "constraint.no-docs"), decision
        assert "docs team" in decision.reason
    assert policy.check_path("db/schema.sql", "edit").rule == "constraint.1"
    assert policy.check_path("docs/index.md", "read").decision == "allow"


def test_constraint_forbid_denies_commands(tmp_path: Path) -> None:
    policy = Policy.from_config(parse_config(CONSTRAINTS), tmp_path)
    for line in ("alembic upgrade head", "npm publish --tag next", "cd . && alembic upgrade head",
                 "timeout 9 alembic upgrade", "bash -c 'alembic upgrade'"):  # fmt: skip
        decision = policy.check_command(line)
        assert (decision.decision, decision.rule) == ("deny", "constraint.no-docs"), (
            line,
            decision,
        )
    assert policy.check_command("alembic history").rule == "default.ask"


def test_migrations_are_protected_by_default_and_by_constraint(tmp_path: Path) -> None:
    dev = Policy.for_preset("developer", tmp_path)
    assert dev.check_command("echo x > migrations/1.py").rule == "path.protected"
    config = parse_config('[[constraints]]\nid = "mig"\ntext = "no"\nprotect = ["migrations/**"]\n')
    policy = Policy.from_config(config, tmp_path)
    assert policy.check_command("echo x > migrations/1.py").rule == "constraint.mig"


def test_config_patterns_extend_the_preset(tmp_path: Path) -> None:
    text = """
[policy]
allow = ["docker compose ps", "pip install -e *", "terraform plan*"]
ask = ["pytest --update-snapshots"]
deny = ["make deploy*", "npm run *"]
network_allow = ["*.internal.example"]
"""
    policy = Policy.from_config(parse_config(text), tmp_path)
    assert policy.check_command("docker compose ps -a").rule == "config.allow"
    assert policy.check_command("docker compose up").rule == "default.ask"
    assert policy.check_command("pip install -e .").decision == "allow"
    assert policy.check_command("pytest --update-snapshots").rule == "config.ask"
    assert policy.check_command("pytest -q").decision == "allow"
    assert policy.check_command("make deploy-prod").rule == "config.deny"
    assert policy.check_command("npm run build").rule == "config.deny"
    assert policy.check_command('npm run "$X"').rule == "config.deny"
    assert policy.check_url("https://pkg.internal.example/x").decision == "allow"
    assert policy.check_url("https://internal.example.evil.test/").decision == "deny"
    # config allow cannot override a risk rule
    risky = Policy.from_config(parse_config('[policy]\nallow = ["rm"]\n'), tmp_path)
    assert risky.check_command("rm -rf /").rule == "risk.rm_recursive"
    assert risky.check_command("rm build.log").decision == "allow"


def test_unknown_and_unparseable_overrides(tmp_path: Path) -> None:
    text = '[policy]\nunknown = "deny"\nunparseable = "deny"\n'
    policy = Policy.from_config(parse_config(text), tmp_path)
    assert policy.check_command("frobnicate").rule == "default.deny"
    assert policy.check_command("$x").decision == "deny"
    strict_ask = Policy.from_config(
        parse_config('[policy]\npreset = "strict"\nunknown = "ask"\n'), tmp_path
    )
    assert strict_ask.check_command("frobnicate").decision == "ask"


def test_protected_override(tmp_path: Path) -> None:
    policy = Policy.from_config(parse_config('[policy]\nprotected = ["secrets/**"]\n'), tmp_path)
    assert policy.check_path("secrets/a", "write").rule == "path.protected"
    assert policy.check_path("migrations/1.py", "write").decision == "allow"


def test_input_limit_comes_from_config(tmp_path: Path) -> None:
    policy = Policy.from_config(parse_config("[limits]\nmax_input_bytes = 2048\n"), tmp_path)
    assert policy.check_command("echo " + "a" * 3000).rule == "input.too_large"
    assert policy.check_command("echo ok").decision == "allow"


def test_explain_shows_the_effective_policy(tmp_path: Path) -> None:
    policy = Policy.from_config(
        parse_config(CONSTRAINTS + '[policy]\nnetwork_allow = ["x.test"]\n'), tmp_path
    )
    info = policy.explain()
    assert info["preset"] == "developer"
    assert "x.test" in info["network_allow"] and "pypi.org" in info["network_allow"]
    assert info["constraints"][0]["rule"] == "constraint.no-docs"
    assert ".git/**" in info["paths"]["protected"]
    assert "pytest" in info["commands"]["preset"]["allow"]


def _write_old(path: Path, text: str) -> None:
    """Write ``text`` with an mtime in the past, so the config cache may keep it at once."""
    path.write_text(text)
    past = time.time_ns() - 60_000_000_000
    os.utime(path, ns=(past, past))


def test_the_one_config_cache_is_used_and_refreshed(tmp_path: Path) -> None:
    _write_old(tmp_path / "keel.toml", '[policy]\npreset = "strict"\n')
    assert Policy.for_root(tmp_path).preset == "strict"
    caches = sorted((tmp_path / ".keel" / "cache").iterdir())
    assert [p.suffix for p in caches] == [".marshal"]  # one loader, one cache
    code = (
        "import sys; from keel.policy import Policy; "
        f"p = Policy.for_root({str(tmp_path)!r}); "
        "print(p.preset, *(m in sys.modules for m in ('tomllib', 'pydantic', 'typer')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["strict", "False", "False", "False"]
    _write_old(tmp_path / "keel.toml", '[policy]\npreset = "readonly"\n')
    assert Policy.for_root(tmp_path).preset == "readonly"
    assert Policy.for_root(tmp_path, preset="developer").preset == "developer"


def test_no_config_needs_no_parser(tmp_path: Path) -> None:
    Policy.for_root(tmp_path)  # fills the cache of the embedded defaults
    code = (
        "import sys; from keel.policy import Policy; "
        f"p = Policy.for_root({str(tmp_path)!r}); "
        "print(p.check_command('pytest -q').decision, "
        f"[m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "allow []"


def test_policy_modules_do_not_import_heavy_packages() -> None:
    code = (
        "import sys, keel.policy, keel.policy._core, keel.cli.policy_fast, keel.policy._snapshot; "
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unwritable_cache_is_harmless(tmp_path: Path) -> None:
    (tmp_path / "keel.toml").write_text('[policy]\npreset = "strict"\n')
    (tmp_path / ".keel").write_text("not a directory")
    assert Policy.for_root(tmp_path).preset == "strict"


def test_bad_config_names_file_line_and_key(tmp_path: Path) -> None:
    (tmp_path / "keel.toml").write_text('[policy]\npreset = "developer"\nalow = ["x"]\n')
    with pytest.raises(ConfigError) as info:
        Policy.for_root(tmp_path)
    assert info.value.line == 3
    assert info.value.key == "policy.alow"
    assert str(tmp_path / "keel.toml") in info.value.message
    with pytest.raises(ConfigError):
        Policy.for_root(tmp_path, config_file=tmp_path / "missing.toml")
    with pytest.raises(UsageError):
        Policy.for_root(tmp_path, preset="nope")


def test_from_config_defaults(tmp_path: Path) -> None:
    policy = Policy.from_config(KeelConfig(), tmp_path)
    assert policy.preset == "developer"
    assert policy.root == Path(os.path.abspath(tmp_path))
