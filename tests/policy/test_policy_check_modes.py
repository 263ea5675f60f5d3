"""``keel policy check --contained/--uncontained``: the text policy alone by default."""

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
    assert not isinstance(request, str) and request is not None and not request.contained
    assert parse_check_args(["--contained=yes", "ls"]) == "unknown option '--contained'"


def test_modes_through_the_console_script(tmp_path: Path) -> None:
    default = check(tmp_path, "--", "python", "-c", "print(1)")
    assert (default["decision"], default["rule"]) == ("ask", "default.ask")
    assert check(tmp_path, "--uncontained", "--", "python", "-c", "print(1)") == default
    boxed = check(tmp_path, "--contained", "--", "python", "-c", "print(1)")
    assert boxed["decision"] == "allow" and "(contained)" in boxed["reason"]
    assert check(tmp_path, "--contained", "--", "cat /etc/os-release")["decision"] == "allow"
    assert check(tmp_path, "--", "cat /etc/os-release")["decision"] == "deny"
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
    plain = runner.invoke(app, [*base, "--", "npm install"])
    assert json.loads(plain.output)["decision"] == "ask"
    helped = runner.invoke(app, ["policy", "check", "--help"])
    assert "--contained" in helped.output and "--uncontained" in helped.output
