"""A client's own permission rules: read for `keel init`, translated or listed, never kept unread.

Also keel.toml's side: Claude Code's rule syntax in [policy] is translated where keel can
express it, and an error naming the keel form where it cannot; translated rules match.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _support import keel
from keel.config import parse_config
from keel.core.errors import ConfigError
from keel.hook.permissions import claude_rule, read_permissions


@pytest.mark.parametrize(
    ("rule", "pattern"),
    [
        ("Bash(npm test:*)", "npm test"),
        ("Bash(npm test *)", "npm test"),
        ("Bash(git status)", "git status $"),
        ("Bash(npm run test-*)", "npm run 'test-*'"),
        ("WebSearch", "WebSearch"),
        ("mcp__github__list_issues", "mcp__github__list_issues"),
        ("mcp__github", "mcp__github__*"),
    ],
)
def test_claude_rules_keel_can_express(rule: str, pattern: str) -> None:
    assert claude_rule(rule, "allow") == pattern


@pytest.mark.parametrize(
    ("rule", "names"),
    [
        ("Bash", "preset"),
        ("Bash(*)", "preset"),
        ("Bash(git * main)", "'*' inside it"),
        ("Bash(npm test && rm -rf x)", "compound"),
        ("Read(./src/**)", "reads inside the workspace"),
        ("Read", "no blanket rule"),
        ("WebFetch(domain:example.com)", 'network_allow = ["example.com"]'),
        ("Edit(./migrations/**)", "[scope] include"),
        ("Bash(npm test", "not Claude Code's rule syntax"),
    ],
)
def test_claude_rules_keel_cannot_express_name_the_keel_form(rule: str, names: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        claude_rule(rule, "allow")
    assert names in str(err.value)


def _claude_settings(root: Path, name: str, permissions: dict[str, list[str]]) -> None:
    path = root / ".claude" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"permissions": permissions, "model": "x"}))


def test_read_permissions_from_both_project_files_but_not_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "proj"
    project.mkdir()
    _claude_settings(project, "settings.json", {"allow": ["Bash(npm test:*)", "Read(./x)"]})
    _claude_settings(project, "settings.local.json", {"deny": ["Bash(curl:*)"], "ask": [7]})  # type: ignore[list-item]
    _claude_settings(home, "settings.json", {"allow": ["Bash(make:*)"]})
    found = read_permissions(project, "claude")
    assert [(r.tier, r.pattern, r.source) for r in found.imported] == [
        ("allow", "npm test", ".claude/settings.json"),
        ("deny", "curl", ".claude/settings.local.json"),
    ]
    assert [(s.tier, s.rule) for s in found.skipped] == [("allow", "Read(./x)"), ("ask", "7")]


def test_read_codex_execpolicy_rules(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex"
    (codex_home / "rules").mkdir(parents=True)
    (codex_home / "rules" / "default.rules").write_text(
        'prefix_rule(pattern=["git", ["push", "fetch"]], decision="forbidden")\n'
        'prefix_rule(pattern=["npm", "test"])\n'
        'prefix_rule(pattern=["rm", "-rf"], decision="prompt")\n'
        'prefix_rule(pattern=["ls*"], decision="allow")\n'
        "load('x')\n"
    )
    found = read_permissions(tmp_path, "codex", env={"CODEX_HOME": str(codex_home)})
    assert [(r.tier, r.pattern) for r in found.imported] == [
        ("deny", "git push"),
        ("deny", "git fetch"),
        ("allow", "npm test"),
        ("ask", "rm -rf"),
    ]
    reasons = [s.reason for s in found.skipped]
    assert any("glob" in r for r in reasons) and any("prefix_rule" in r for r in reasons)


def test_claude_rules_in_keel_toml_are_translated_or_refused() -> None:
    config = parse_config('[policy]\nallow = ["Bash(npm test:*)", "WebSearch"]\n')
    assert list(config.policy.allow) == ["npm test", "WebSearch"]
    for bad, what in [
        ("Read(./.env)", "per-path read deny"),
        ("Bash(npm test", "neither a command pattern nor"),
        ("Bash", "blanket"),
    ]:
        with pytest.raises(ConfigError, match=None) as err:
            parse_config(f'[policy]\ndeny = ["{bad}"]\n')
        assert what in err.value.message and "policy.deny" in err.value.message
    with pytest.raises(ConfigError, match="forbid"):
        parse_config('[[constraints]]\nid = "x"\ntext = "t"\nforbid = ["Write(./a)"]\n')


def _check(project: Path, *argv: str) -> str:
    """The text policy's verdict (contained, ``./deploy.sh`` would run without asking)."""
    done = keel("policy", "check", "--uncontained", "--", *argv, workspace=project)
    return done.stdout.split()[0]


def test_keel_init_imports_claude_rules_and_they_take_effect(workdir: Path) -> None:
    _claude_settings(
        workdir,
        "settings.json",
        {
            "allow": ["Bash(./deploy.sh staging)"],
            "ask": ["Bash(npm publish:*)"],
            "deny": ["Bash(git status)", "WebFetch(domain:evil.example)"],
        },
    )
    assert _check(workdir, "git", "status") == "allow"  # the developer preset, before
    assert _check(workdir, "./deploy.sh", "staging") == "ask"
    out = keel("init", "--agent", "claude", cwd=workdir)
    assert out.returncode == 0, out.stderr
    assert "imported 3 of Claude Code's permission rules" in out.stdout
    assert "not imported: 1 rule" in out.stdout and "WebFetch(domain:evil.example)" in out.stdout
    text = (workdir / "keel.toml").read_text()
    assert '"git status $",  # Bash(git status) in .claude/settings.json' in text
    assert _check(workdir, "./deploy.sh", "staging") == "allow"
    assert _check(workdir, "./deploy.sh", "staging", "--force") == "ask"  # exact, as in Claude
    assert _check(workdir, "npm", "publish", "--dry-run") == "ask"
    assert _check(workdir, "git", "status") == "deny"


def test_keel_init_lists_rules_when_it_keeps_keel_toml(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    _claude_settings(workdir, "settings.json", {"deny": ["Bash(curl:*)"]})
    out = keel("init", "--agent", "claude", cwd=workdir)
    assert out.returncode == 0, out.stderr
    assert "were not imported; add them to its [policy] yourself" in out.stdout
    assert "deny = [" in out.stdout and '"curl",  # Bash(curl:*)' in out.stdout
    assert (workdir / "keel.toml").read_text() == '[policy]\npreset = "developer"\n'
