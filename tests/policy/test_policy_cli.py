"""``keel policy check`` and ``explain`` as real processes, through the fast path and typer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from _support import keel, make_workspace
from keel.cli.policy import register

KEYS = {"decision", "rule", "reason", "suggestion"}


def one_object(stdout: str) -> dict[str, object]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, stdout
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    assert set(value) == KEYS
    return value


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (make_workspace(tmp_path) / "src").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("args", "decision", "rule"),
    [
        (("--", "rm", "-rf", "/"), "deny", "risk.rm_recursive"),
        (("rm -rf /",), "deny", "risk.rm_recursive"),
        (("--", "ls", "-la"), "allow", "preset.developer.allow"),
        (("git log --oneline | head -3",), "allow", "preset.developer.allow"),
        (("--", "echo", "a b; rm -rf /"), "allow", "preset.developer.allow"),
        (("--", "frobnicate"), "ask", "default.ask"),
        (("--preset", "strict", "--", "pytest"), "deny", "default.deny"),
        (("--read", "/etc/shadow"), "deny", "risk.secret_read"),
        (("--write", ".git/config"), "deny", "path.control"),
        (("--write", "src/a.py"), "allow", "path.in_scope"),
        (("--url", "https://pypi.org/simple/"), "allow", "network.allowed"),
        (("--url", "https://evil.test/x"), "deny", "network.not_allowed"),
    ],
)
def test_check_json_prints_exactly_one_object(
    ws: Path, args: tuple[str, ...], decision: str, rule: str
) -> None:
    result = keel("policy", "check", "--json", *args, cwd=ws)
    assert result.returncode == 0, result.stderr
    value = one_object(result.stdout)
    assert (value["decision"], value["rule"]) == (decision, rule)
    assert isinstance(value["reason"], str) and value["reason"]
    assert value["suggestion"] is None or isinstance(value["suggestion"], str)


def test_check_text_is_readable(ws: Path) -> None:
    result = keel("policy", "check", "--", "git", "push", "--force", cwd=ws)
    assert result.returncode == 0
    assert result.stdout.startswith("deny  risk.git_force_push")
    assert "reason:" in result.stdout and "suggestion:" in result.stdout


def test_workspace_options(ws: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    for args in (
        ("--workspace", str(ws), "policy", "check", "--json", "--write", str(ws / "src" / "a.py")),
        ("policy", "check", "--workspace", str(ws), "--json", "--write", str(ws / "src" / "a.py")),
        ("-w", str(ws), "policy", "check", "--json", "--write", str(ws / "src" / "a.py")),
    ):
        result = keel(*args, cwd=elsewhere)
        assert one_object(result.stdout)["decision"] == "allow", (args, result)
    result = keel("policy", "check", "--json", "--write", str(ws / "src" / "a.py"), cwd=elsewhere)
    assert one_object(result.stdout)["rule"] == "path.outside_workspace"


def test_usage_errors_exit_2(ws: Path) -> None:
    result = keel("policy", "check", "--preset", "nope", "--", "ls", cwd=ws)
    assert result.returncode == 2
    assert "unknown preset 'nope'" in result.stderr and result.stdout == ""
    result = keel("policy", "check", "--json", "--preset", "nope", "ls", cwd=ws)
    assert result.returncode == 2
    assert json.loads(result.stderr)["error"]["code"] == "usage.preset"
    assert keel("policy", "check", cwd=ws).returncode == 2
    assert keel("policy", "check", "--read", "a", "--url", "https://x.test", cwd=ws).returncode == 2
    assert keel("policy", "check", "--read", cwd=ws).returncode == 2


def test_bad_config_file_exits_2_naming_file_line_and_key(ws: Path) -> None:
    bad = ws / "bad.toml"
    bad.write_text('[policy]\npreset = "developer"\nnetwork_alow = ["x"]\n')
    result = keel("policy", "check", "--config", str(bad), "--json", "--", "ls", cwd=ws)
    assert result.returncode == 2
    assert result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert (error["code"], error["file"], error["line"], error["key"]) == (
        "config.schema",
        str(bad),
        3,
        "policy.network_alow",
    )
    result = keel("policy", "check", "--config", str(bad), "--", "ls", cwd=ws)
    assert result.returncode == 2
    assert f"{bad}:3" in result.stderr and "network_alow" in result.stderr
    broken = ws / "broken.toml"
    broken.write_text("[policy\n")
    assert keel("policy", "check", "--config", str(broken), "ls", cwd=ws).returncode == 2
    assert (
        keel("policy", "check", "--config", str(ws / "missing.toml"), "ls", cwd=ws).returncode == 2
    )
    (ws / "keel.toml").write_text("[limits]\nmax_input_bytes = 10\n")
    result = keel("policy", "check", "ls", cwd=ws)
    assert result.returncode == 2 and "max_input_bytes" in result.stderr


def test_config_file_is_used(ws: Path) -> None:
    good = ws / "good.toml"
    good.write_text('[policy]\nallow = ["frobnicate"]\n[limits]\nmax_input_bytes = 2048\n')
    result = keel("policy", "check", "--config", str(good), "--json", "frobnicate", cwd=ws)
    assert one_object(result.stdout)["rule"] == "config.allow"
    result = keel("policy", "check", "--config", str(good), "--json", "echo " + "a" * 3000, cwd=ws)
    assert one_object(result.stdout)["rule"] == "input.too_large"


def test_bad_bytes_are_denied(ws: Path) -> None:
    result = keel("policy", "check", "--json", b"ls \xff\xfe", cwd=ws)
    assert result.returncode == 0
    value = one_object(result.stdout)
    assert (value["decision"], value["rule"]) == ("deny", "input.encoding")


def test_help_falls_back_to_typer(ws: Path) -> None:
    result = keel("policy", "check", "--help", cwd=ws)
    assert result.returncode == 0
    assert "--read" in result.stdout


def test_explain(ws: Path) -> None:
    (ws / "keel.toml").write_text('[policy]\npreset = "strict"\nnetwork_allow = ["x.test"]\n')
    result = keel("policy", "explain", "--json", cwd=ws)
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["preset"] == "strict" and info["network_allow"] == ["x.test"]
    result = keel("policy", "explain", "--preset", "developer", cwd=ws)
    assert result.returncode == 0
    assert result.stdout.startswith("preset: developer")
    assert keel("policy", "explain", "--preset", "nope", cwd=ws).returncode == 2


def test_typer_path_matches_the_fast_path(ws: Path) -> None:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = {"workspace": ws}

    register(app)
    runner = CliRunner()
    for args in (
        ["--", "rm", "-rf", "/"],
        ["ls -la"],
        ["--read", "/etc/shadow"],
        ["--url", "https://pypi.org"],
    ):
        typer_result = runner.invoke(app, ["policy", "check", "--json", *args])
        assert typer_result.exit_code == 0, typer_result.output
        fast = keel("policy", "check", "--json", *args, cwd=ws)
        assert one_object(typer_result.stdout) == one_object(fast.stdout)
    result = runner.invoke(app, ["policy", "check", "--preset", "nope", "ls"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["policy", "check"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["policy", "explain", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["preset"] == "developer"


def test_typer_app_as_a_process(ws: Path) -> None:
    code = "import sys; from keel.cli.main import app; app(args=sys.argv[1:], prog_name='keel')"
    result = subprocess.run(
        [sys.executable, "-c", code, "policy", "check", "--json", "--", "git", "reset", "--hard"],
        capture_output=True, text=True, cwd=ws, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert one_object(result.stdout)["rule"] == "risk.git_reset_hard"


def test_unknown_options_and_inner_double_dash(ws: Path) -> None:
    result = keel("policy", "check", "--frob", "ls", cwd=ws)
    assert result.returncode == 2 and "--frob" in result.stderr
    result = keel("policy", "check", "--json", "--", "git", "diff", "--", "src/a.py", cwd=ws)
    assert one_object(result.stdout)["decision"] == "allow"
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["policy", "check", "--frob", "ls"])
    assert result.exit_code == 2
    result = runner.invoke(
        app, ["policy", "check", "--json", "--workspace", str(ws), "--", "git", "diff", "--", "x"]
    )
    assert result.exit_code == 0 and one_object(result.stdout)["decision"] == "allow"
