"""``keel policy check --contained/--uncontained``; by default as the workspace's hooks judge.

These workspaces have no keel.toml saying ``[sandbox] contain = "off"``, so where a sandbox
works the default is the contained judgement (tests/cli/test_cli_policy_check_as_hooks.py
compares it with the hooks' own verdicts).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from _support import keel
from keel.cli.policy import register
from keel.cli.policy_fast import parse_check_args


def check(ws: Path, *args: str) -> dict[str, str]:
    result = keel("policy", "check", "--json", "-w", str(ws), *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_parse_mode_flags() -> None:
    request = parse_check_args(["--contained", "--", "ls"])
    assert not isinstance(request, str) and request is not None and request.contained
    request = parse_check_args(["--contained", "--uncontained", "ls"])
    assert not isinstance(request, str) and request is not None and not request.contained
    request = parse_check_args(["ls"])
    assert not isinstance(request, str) and request is not None and request.contained is None
    assert parse_check_args(["--contained=yes", "ls"]) == "unknown option '--contained'"


def _contained_here() -> bool:
    from keel.core.schema import KeelConfig
    from keel.guard import containment

    return containment(KeelConfig())[0]


def test_modes_through_the_console_script(tmp_path: Path) -> None:
    plain = check(tmp_path, "--uncontained", "--", "python", "-c", "print(1)")
    assert (plain["decision"], plain["rule"]) == ("ask", "default.ask")
    boxed = check(tmp_path, "--contained", "--", "python", "-c", "print(1)")
    assert boxed["decision"] == "allow" and "(contained)" in boxed["reason"]
    default = check(tmp_path, "--", "python", "-c", "print(1)")
    assert default == (boxed if _contained_here() else plain)
    assert check(tmp_path, "--contained", "--", "cat /etc/os-release")["decision"] == "allow"
    assert check(tmp_path, "--uncontained", "--", "cat /etc/os-release")["decision"] == "deny"
    # --read is the Read tool: it runs in the client, never in the sandbox
    assert check(tmp_path, "--contained", "--read", "/etc/os-release")["decision"] == "deny"
    assert check(tmp_path, "--contained", "--write", "sub/.claude/x")["rule"] == "path.control"


def test_modes_through_typer(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    base = ["policy", "check", "--json", "--workspace", str(tmp_path)]
    boxed = runner.invoke(app, [*base, "--contained", "--", "npm install"])
    assert boxed.exit_code == 0, boxed.output
    assert json.loads(boxed.output)["decision"] == "allow"
    plain = runner.invoke(app, [*base, "--uncontained", "--", "npm install"])
    assert json.loads(plain.output)["decision"] == "ask"
    default = runner.invoke(app, [*base, "--", "npm install"])
    assert json.loads(default.output)["decision"] == ("allow" if _contained_here() else "ask")
    helped = runner.invoke(app, ["policy", "check", "--help"])
    assert "--contained" in helped.output and "--uncontained" in helped.output
