"""The workspace CLI: checkpoint create/list, diff, rollback and patch apply, via CliRunner."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from _support import make_workspace
from keel.cli.workspace import register
from keel.workspace import Checkpoints

Invoke = Callable[..., Any]


@pytest.fixture
def cli(workdir: Path) -> Invoke:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = {"workspace": workdir}

    register(app)
    runner = CliRunner()

    def invoke(*args: str, stdin: str | None = None) -> Any:
        return runner.invoke(app, list(args), input=stdin)

    return invoke


@pytest.fixture
def ws(workdir: Path) -> Path:
    return make_workspace(workdir, files={"app.py": "x = 1\n", "docs/a.md": "doc\n"})


def test_create_list_diff_rollback(cli: Invoke, ws: Path) -> None:
    result = cli("checkpoint", "create", "--label", "start")
    assert result.exit_code == 0, result.output
    assert "created" in result.output
    subprocess.run(["sh", "-c", "echo y = 2 >> app.py; echo new > new.txt"], cwd=ws, check=True)
    listed = cli("checkpoint", "list", "--json")
    [cp] = json.loads(listed.output)["checkpoints"]
    assert cp["label"] == "start" and cp["kind"] == "manual"
    diff = cli("diff")
    assert diff.exit_code == 0
    assert "+y = 2" in diff.output and "new.txt" in diff.output
    stat = cli("diff", cp["short"], "--stat")
    assert "added" in stat.output and "modified" in stat.output
    # a manual checkpoint and changes by nobody's agent: rollback refuses, --force resets
    kept = cli("rollback", "--last", "--json")
    assert kept.exit_code == 1, kept.output
    error = json.loads(kept.stderr)["error"]
    assert error["code"] == "workspace.nothing_to_roll_back"
    assert error["files"] == ["app.py", "new.txt"]
    forced = cli("rollback", cp["short"], "--force")
    assert forced.exit_code == 0, forced.output
    assert (ws / "app.py").read_text() == "x = 1\n"
    assert not (ws / "new.txt").exists()
    assert "undo with: keel rollback" in forced.output


def test_rollback_refusal_exit_code_and_message(cli: Invoke, ws: Path) -> None:
    cps = Checkpoints(ws)
    cps.create(session_id="s1", tool_use_id="t1")
    (ws / "app.py").write_text("agent\n")
    cps.after_call("s1", "t1")
    (ws / "app.py").write_text("user\n")
    result = cli("rollback", "--session", "s1")
    assert result.exit_code == 1
    assert "refusing to roll back" in result.output and "app.py" in result.output
    assert "workspace.user_changes" in result.output
    assert (ws / "app.py").read_text() == "user\n"


def test_rollback_needs_exactly_one_target(cli: Invoke, ws: Path) -> None:
    assert cli("rollback").exit_code == 2
    assert cli("rollback", "--last", "--session", "x").exit_code == 2


def test_unknown_checkpoint(cli: Invoke, ws: Path) -> None:
    result = cli("diff", "deadbeef")
    assert result.exit_code == 1
    assert "workspace.unknown_checkpoint" in result.output


def test_outside_scope(cli: Invoke, ws: Path) -> None:
    (ws / "keel.toml").write_text('[scope]\ninclude = ["docs/**"]\n')
    Checkpoints(ws).create(session_id="s", tool_use_id="t")
    (ws / "app.py").write_text("changed\n")
    (ws / "docs" / "a.md").write_text("changed\n")
    result = cli("diff", "--outside-scope")
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["app.py"]


def test_patch_apply_from_stdin_and_file(cli: Invoke, ws: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: app.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n"
    check = cli("patch", "apply", "-", "--check", stdin=patch)
    assert check.exit_code == 0 and "would apply" in check.output
    assert (ws / "app.py").read_text() == "x = 1\n"
    applied = cli("patch", "apply", "-", stdin=patch)
    assert applied.exit_code == 0, applied.output
    assert (ws / "app.py").read_text() == "x = 2\n"
    undo = applied.output.split("undo with: keel rollback ")[1].split()[0]
    assert cli("rollback", undo).exit_code == 0
    assert (ws / "app.py").read_text() == "x = 1\n"
    (ws / "bad.diff").write_text("--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-nope\n+x\n")
    bad = cli("patch", "apply", str(ws / "bad.diff"), "--json")
    assert bad.exit_code == 1
    assert json.loads(bad.output)["error"]["code"] == "patch.hunk_failed"
    assert cli("patch", "apply", str(ws / "missing.diff")).exit_code == 2


def test_patch_apply_is_journaled(cli: Invoke, ws: Path) -> None:
    from keel.journal import open_journal

    patch = "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch\n"
    assert cli("patch", "apply", "-", "--session", "sx", stdin=patch).exit_code == 0
    with open_journal(ws) as journal:
        kinds = [e.kind for e in journal.events("sx")]
    assert kinds == ["checkpoint", "patch", "checkpoint"]


def _agent_session(ws: Path, session: str) -> Checkpoints:
    """One call of ``session`` that changed app.py and added new.txt, its after recorded."""
    cps = Checkpoints(ws)
    cps.create(session_id=session, tool_use_id="t1")
    (ws / "app.py").write_text("agent\n")
    (ws / "new.txt").write_text("new\n")
    cps.after_call(session, "t1")
    return cps


def _files(ws: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(ws)): p.read_bytes()
        for p in sorted(ws.rglob("*"))
        if p.is_file() and ".keel" not in p.relative_to(ws).parts
    }


def test_rollback_dry_run_says_what_and_changes_nothing(cli: Invoke, ws: Path) -> None:
    from keel.journal import journal_path, open_journal

    cps = _agent_session(ws, "3f2a9c-session")
    before, history = _files(ws), cps.history()
    with open_journal(ws) as journal:
        events = len(list(journal.events()))
    text = cli("rollback", "--session", "3f2a", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "would restore" in text.output and "nothing was written" in text.output
    assert "  would restore  app.py" in text.output
    assert "  would remove   new.txt" in text.output
    doc = json.loads(cli("rollback", "--last", "--dry-run", "--json").output)
    assert doc["dry_run"] is True and doc["undo"] is None and doc["after"] is None
    assert (doc["restored"], doc["deleted"]) == (["app.py"], ["new.txt"])
    assert _files(ws) == before  # byte for byte
    assert [c.id for c in Checkpoints(ws).history()] == [c.id for c in history]
    with open_journal(ws) as journal:
        assert len(list(journal.events())) == events
    assert journal_path(ws).exists()
    # the real rollback does what the dry run said
    real = json.loads(cli("rollback", "--session", "3f2a", "--json").output)
    assert (real["restored"], real["deleted"]) == (doc["restored"], doc["deleted"])
    assert (ws / "app.py").read_text() == "x = 1\n" and not (ws / "new.txt").exists()


def test_rollback_dry_run_refuses_as_the_rollback_would(cli: Invoke, ws: Path) -> None:
    _agent_session(ws, "s1")
    (ws / "app.py").write_text("user\n")
    before = _files(ws)
    result = cli("rollback", "--session", "s1", "--dry-run")
    assert result.exit_code == 1 and "workspace.user_changes" in result.output
    assert _files(ws) == before


def test_diff_session_takes_a_prefix_like_show(cli: Invoke, ws: Path) -> None:
    _agent_session(ws, "3f2a9c-session")
    Checkpoints(ws).create(session_id="3f2b00-other", tool_use_id="t9")
    result = cli("diff", "--session", "3f2a", "--stat")
    assert result.exit_code == 0, result.output
    assert "app.py" in result.output and "new.txt" in result.output
    doc = json.loads(cli("diff", "--session", "3f2a9c", "--json").output)
    assert doc["checkpoint"]["session_id"] == "3f2a9c-session"
    ambiguous = cli("diff", "--session", "3f2", "--json")
    assert ambiguous.exit_code == 1
    assert json.loads(ambiguous.output)["error"]["code"] == "journal.session_ambiguous"
    unknown = cli("diff", "--session", "zz")
    assert unknown.exit_code == 1 and "journal.session_unknown" in unknown.output
    listed = json.loads(cli("checkpoint", "list", "--session", "3f2a", "--json").output)
    assert {c["session_id"] for c in listed["checkpoints"]} == {"3f2a9c-session"}
