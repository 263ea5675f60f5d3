"""``--json``: every command that reports something prints one JSON object on stdout.

The walk runs each reporting command through the console entry, in this process, on one
workspace with a journal, checkpoints, a plan and a patch, and checks that stdout is exactly
one JSON object with the command's stable keys. A test also checks that every command with
an option called --json is in the walk, so a new reporting command cannot be left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperCommand, TyperGroup

from _support import make_workspace
from keel.cli._entry import main as keel_main
from keel.cli.main import app
from keel.core.events import DecisionPayload, Event
from keel.journal import open_journal
from keel.workspace import Checkpoints

PLAN = {
    "goal": "look for the config",
    "steps": [
        {
            "id": "s1",
            "type": "evidence_collection",
            "action": {"function": "filesystem.check_exists", "args": ["config.yaml"]},
            "output_to": "has_config",
        },
        {
            "id": "s2",
            "type": "final_action",
            "action": {"function": "output.result", "args": ["config.yaml: {{has_config}}"]},
        },
    ],
}
PATCH = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 2\n+x = 3\n"

REPORTS: dict[str, tuple[list[str], set[str]]] = {
    # name: (arguments before --json, keys the object always has)
    "init": (
        ["init", "--agent", "claude", "--scope", "src/**"],
        {"root", "agent", "config", "wrote_config", "scope", "hooks", "state_dir"},
    ),
    "status": (["status"], {"root", "config", "preset", "stop", "journal", "checkpoints"}),
    "doctor": (["doctor"], {"root", "ok", "workspace", "clients"}),
    "log": (["log"], {"sessions"}),
    "log events": (["log", "--session", "3f2a", "--decision", "deny"], {"session", "events"}),
    "show": (["show", "3f2a"], {"session", "events"}),
    "verify": (["verify"], {"ok", "events", "problems"}),
    "diff": (["diff", "--session", "3f2a"], {"checkpoint", "changes", "outside_scope", "patch"}),
    "checkpoint create": (["checkpoint", "create"], {"id", "short", "kind", "ts"}),
    "checkpoint list": (["checkpoint", "list"], {"checkpoints"}),
    "rollback": (
        ["rollback", "--session", "3f2a", "--dry-run"],
        {"dry_run", "target", "undo", "after", "restored", "deleted", "overwritten", "kept"},
    ),
    "patch apply": (["patch", "apply", "{patch}", "--check"], {"format", "files"}),
    "policy check": (["policy", "check", "--write", "app.py"], {"decision", "rule", "reason"}),
    "policy explain": (["policy", "explain"], {"preset", "root", "commands", "paths"}),
    "allow-host": (["allow-host", "example.com"], {"file", "entry", "added", "created"}),
    "plan validate": (["plan", "validate", "{plan}"], {"valid", "issues", "exit_code"}),
    "plan run": (
        ["plan", "run", "{plan}", "--unsafe-no-sandbox"],
        {"state", "facts", "actions", "exit_code"},
    ),
    "plan functions": (["plan", "functions"], {"probes", "actions"}),
    "sandbox check": (["sandbox", "check"], {"backends", "chosen", "safe"}),
    "monitor scan": (["monitor", "scan", "{journal}"], {"file", "format", "runs", "diagnostics"}),
    "hookd status": (["hookd", "status"], {"root", "running"}),
    "hookd stop": (["hookd", "stop"], {"root"}),
    "stop": (["stop", "--reason", "drill"], {"root", "stop", "killed"}),
    "resume session": (["resume", "--session", "3f2a"], {"root", "session"}),
    "resume": (["resume"], {"root", "cleared", "monitor_stopped"}),
}
NOT_IN_THE_WALK = {
    # each drives a model: their own tests give them a scripted one and read their --json
    "plan draft": "tests/models",
    "judge eval": "tests/judge (a scripted judge over examples/judge)",
    "run": "tests/agent",
    "replay": "tests/agent (replays a recorded `keel run`)",
    "eval": "tests/eval (the shipped suite with scripted models; --replay of its results)",
    "journal migrate": "tests/journal/test_journal_postgres.py (needs a PostgreSQL server)",
}

NOT_REPORTS = {
    "export": "its output is the data itself: JSON Lines or OTLP/JSON",
    "plan schema": "its output is the JSON Schema itself",
    "completion": "prints a shell script",
    "demo": "a narrated walk-through for people",
    "exec": "the contained command's own output and exit code",
    "sandbox run": "the command's own output and exit code",
    "wrap": "the wrapped client's own terminal",
    "hook": "the client's hook protocol on stdout",
    "hookd run": "a server, in the foreground",
    "install": "the installer's own output (pip, pipx or uv); --dry-run prints its command",
    "mcp": "a server: MCP on stdio, or the URL it serves on (tests/mcp)",
    "ui": "a server: the URL of its page, in the foreground (tests/ui)",
}


def _commands(group: TyperGroup, path: tuple[str, ...] = ()) -> Iterator[tuple[str, TyperCommand]]:
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            yield from _commands(command, (*path, name))
        elif isinstance(command, TyperCommand):
            yield " ".join((*path, name)), command


@pytest.fixture
def workspace(workdir: Path) -> Path:
    """A fresh workspace for each command (each test has its own journal key)."""
    files = {"app.py": "x = 1\n", "plan.json": json.dumps(PLAN), "fix.diff": PATCH}
    root = make_workspace(workdir, files=files)
    (root / ".git").mkdir()  # a repository to find_root, no git history
    cps = Checkpoints(root)
    cps.create(session_id="3f2a9c-session", tool_use_id="t1")
    (root / "app.py").write_text("x = 2\n")
    cps.after_call("3f2a9c-session", "t1")
    with open_journal(root) as journal:
        journal.append(Event("decision", "3f2a9c-session", DecisionPayload("deny", "r", "no")))
    return root


def test_every_command_with_json_is_walked() -> None:
    with_json = {
        name
        for name, command in _commands(typer.main.get_command(app))  # pyright: ignore[reportArgumentType]
        if any("--json" in p.opts for p in command.params)
    }
    walked = {
        name
        for name in with_json
        for args, _ in REPORTS.values()
        if args[: len(name.split())] == name.split()
    }
    assert with_json - walked == set(NOT_IN_THE_WALK)
    for name in ("status", "log", "show", "diff", "rollback", "verify", "doctor", "monitor scan"):
        assert name in with_json


def test_every_command_reports_in_json_or_says_why_not() -> None:
    every = {name for name, _ in _commands(typer.main.get_command(app))}  # pyright: ignore[reportArgumentType]
    with_json = {
        name
        for name, command in _commands(typer.main.get_command(app))  # pyright: ignore[reportArgumentType]
        if any("--json" in p.opts for p in command.params)
    }
    assert every - with_json == set(NOT_REPORTS)


@pytest.mark.parametrize("name", REPORTS)
def test_json_output_is_one_object_with_stable_keys(
    name: str, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, keys = REPORTS[name]
    places = {
        "{plan}": str(workspace / "plan.json"),
        "{patch}": str(workspace / "fix.diff"),
        "{journal}": str(workspace / ".keel" / "journal.db"),
    }
    argv = ["--workspace", str(workspace), *(places.get(a, a) for a in args), "--json"]
    code = keel_main(argv)
    out, err = capsys.readouterr()
    doc = json.loads(out)  # the whole of stdout: one document, nothing else
    assert isinstance(doc, dict), out
    assert keys <= set(doc), (sorted(doc), err)
    assert "error" not in doc
    assert code in (0, 1), err  # doctor may find no client guarded: still a report


def test_json_errors_are_one_object_on_stderr(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["show", "nope"], ["diff", "--session", "zz"], ["log", "--since", "soon"]):
        code = keel_main(["--workspace", str(workspace), *argv, "--json"])
        out, err = capsys.readouterr()
        assert code in (1, 2) and out == ""
        error = json.loads(err)["error"]
        assert {"code", "message"} <= set(error)


def test_init_json_says_what_was_written_and_what_was_not_imported(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "keel.toml").unlink(missing_ok=True)
    claude = workspace / ".claude"
    claude.mkdir()
    rules = {"permissions": {"allow": ["Bash(npm test:*)", "Read(//etc/**)"]}}
    (claude / "settings.json").write_text(json.dumps(rules))
    code = keel_main(["--workspace", str(workspace), "init", "--agent", "claude", "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert code == 0, err
    assert doc["wrote_config"] is True and doc["hooks"] == [str(claude / "settings.local.json")]
    assert doc["form"] == "per-user"
    translated = doc["rules"]["translated"]
    assert [(r["tier"], r["pattern"]) for r in translated] == [("allow", "npm test")]
    assert [r["rule"] for r in doc["rules"]["skipped"]] == ["Read(//etc/**)"]
    assert '"npm test",  # Bash(npm test:*)' in (workspace / "keel.toml").read_text()
    again = keel_main(
        ["--workspace", str(workspace), "init", "--agent", "claude", "--remove", "--json"]
    )
    removed = json.loads(capsys.readouterr().out)
    assert again == 0 and removed["removed"] == [str(claude / "settings.local.json")]
