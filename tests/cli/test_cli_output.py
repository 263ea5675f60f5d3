"""Output: coloured decisions and diffs only where colour belongs; a spinner for long work.

Colour and the spinner are judged by what reaches a real terminal (a pty) and a real pipe:
escape codes on a terminal or with FORCE_COLOR, none in a pipe or with NO_COLOR.
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from _support import KEEL, keel_env
from keel.cli._common import progress
from keel.workspace import Checkpoints

ESC = "\x1b["
RED_DENY = "\x1b[31mdeny\x1b[0m"
GREEN_ALLOW = "\x1b[32mallow\x1b[0m"
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


@dataclass(frozen=True)
class Ran:
    rc: int
    out: str
    err: str


def _env(**extra: str) -> dict[str, str]:
    """``keel_env`` with a colour terminal and no colour setting but the test's ``extra``."""
    env = {k: v for k, v in keel_env().items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return {**env, "TERM": "xterm", **extra}


def keel(args: list[str], cwd: Path, *, tty: str = "", **env: str) -> Ran:
    """``keel ARGS``; ``tty`` names the streams ("out", "err", "both") that are a terminal."""
    master, slave = pty.openpty() if tty else (-1, -1)
    out = slave if tty in ("out", "both") else subprocess.PIPE
    err = slave if tty in ("err", "both") else subprocess.PIPE
    proc = subprocess.Popen(
        [KEEL, *args], cwd=cwd, env=_env(**env), stdin=subprocess.DEVNULL,
        stdout=out, stderr=err,
    )  # fmt: skip
    seen = bytearray()
    reader = None
    if tty:
        os.close(slave)
        reader = threading.Thread(target=_drain, args=(master, seen))
        reader.start()
    piped_out, piped_err = proc.communicate(timeout=300)
    if reader is not None:
        reader.join(timeout=60)
        os.close(master)
    on_tty = seen.decode("utf-8", "replace")
    return Ran(
        proc.returncode,
        on_tty if tty in ("out", "both") else piped_out.decode(),
        on_tty if tty == "err" else (piped_err or b"").decode(),
    )


def _drain(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every writer closed the terminal
            return
        if not chunk:
            return
        into.extend(chunk)


@pytest.fixture
def repo(workdir: Path) -> Path:
    (workdir / ".git").mkdir()
    (workdir / "app.py").write_text("x = 1\n")
    return workdir


# -- colour ----------------------------------------------------------------------------------


def test_policy_check_colours_the_decision_on_a_terminal(repo: Path) -> None:
    deny = ["policy", "check", "--", "rm", "-rf", "/"]
    assert RED_DENY in keel(deny, repo, tty="out").out
    assert RED_DENY in keel(deny, repo, FORCE_COLOR="1").out
    allow = keel(["policy", "check", "--", "ls"], repo, tty="out").out
    assert GREEN_ALLOW in allow


@pytest.mark.parametrize(
    ("tty", "env"),
    [("", {}), ("out", {"NO_COLOR": "1"}), ("", {"NO_COLOR": "1", "FORCE_COLOR": "1"})],
    ids=["pipe", "tty-no-color", "no-color-beats-force"],
)
def test_no_colour_in_a_pipe_or_with_no_color(repo: Path, tty: str, env: dict[str, str]) -> None:
    ran = keel(["policy", "check", "--", "rm", "-rf", "/"], repo, tty=tty, **env)
    assert ran.rc == 0 and ran.out.startswith("deny  risk.")
    assert ESC not in ran.out


def test_diff_is_coloured_on_a_terminal_only(repo: Path) -> None:
    Checkpoints(repo).create(label="start")
    (repo / "app.py").write_text("x = 2\n")
    coloured = keel(["diff"], repo, tty="out")
    assert "\x1b[32m+x = 2\x1b[0m" in coloured.out and "\x1b[31m-x = 1\x1b[0m" in coloured.out
    assert "\x1b[32m+x = 2\x1b[0m" in keel(["diff"], repo, FORCE_COLOR="1").out
    for ran in (keel(["diff"], repo), keel(["diff"], repo, tty="out", NO_COLOR="1")):
        assert "+x = 2" in ran.out and ESC not in ran.out


def test_log_colours_each_decision(repo: Path) -> None:
    from keel.core.events import DecisionPayload, Event
    from keel.journal import open_journal

    with open_journal(repo) as journal:
        for verdict in ("allow", "ask", "deny"):
            journal.append(Event("decision", "s1", DecisionPayload(verdict, "r", "because")))
    coloured = keel(["log", "--session", "s1"], repo, FORCE_COLOR="1").out.splitlines()
    assert [line[:5] for line in coloured] == ["\x1b[32m", "\x1b[33m", "\x1b[31m"]
    plain = keel(["log", "--session", "s1"], repo).out
    assert ESC not in plain and plain.count("\n") == 3


# -- progress --------------------------------------------------------------------------------


def test_progress_shows_updates_and_erases_itself() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    with progress("taking a checkpoint", delay=0, console=console) as shown:
        assert shown.shown
        shown.update("adding 20000 changed file(s)")
        with shown.paused():
            pass
    text = screen.getvalue()
    assert "taking a checkpoint" in text and "adding 20000 changed file(s)" in text


def test_progress_off_a_terminal_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("rolling back", delay=0) as shown:
        shown.update("restoring 3 file(s)")
    assert not shown.shown
    assert capsys.readouterr() == ("", "")


def test_checkpoint_and_rollback_show_progress_on_a_terminal_only(repo: Path) -> None:
    created = keel(["checkpoint", "create", "--json"], repo, tty="err", KEEL_PROGRESS_DELAY="0")
    assert created.rc == 0, created.err
    assert "taking a checkpoint" in created.err
    assert json.loads(created.out)["kind"] == "manual"  # stdout stays one JSON document
    (repo / "app.py").write_text("x = 3\n")
    rolled = keel(["rollback", "--last", "--force"], repo, tty="err", KEEL_PROGRESS_DELAY="0")
    assert rolled.rc == 0, rolled.err
    assert "rolling back to" in rolled.err
    piped = keel(["checkpoint", "create"], repo, KEEL_PROGRESS_DELAY="0")
    assert piped.rc == 0 and piped.err == ""


def test_checkpoints_report_their_stages(repo: Path) -> None:
    """What the spinner says comes from the work itself: Checkpoints.on_progress."""
    cps = Checkpoints(repo)
    stages: list[str] = []
    cps.on_progress = stages.append
    first = cps.create(label="start")
    (repo / "app.py").write_text("x = 4\n")
    cps.rollback(first, force=True)
    assert stages[:2] == ["scanning the workspace", "adding 1 changed file(s) to the checkpoint"]
    assert "working out who changed what" in stages and "restoring 1 file(s)" in stages


def test_plan_run_shows_progress_on_a_terminal(repo: Path) -> None:
    (repo / "plan.json").write_text(json.dumps(PLAN))
    ran = keel(
        ["plan", "run", "plan.json", "--unsafe-no-sandbox", "--json"],
        repo,
        tty="err",
        KEEL_PROGRESS_DELAY="0",
    )
    assert json.loads(ran.out)["state"] == "completed", ran.err
    assert "running plan plan.json" in ran.err


@pytest.mark.parametrize(
    "argv",
    [
        ["policy", "check", "--json", "--", "rm", "-rf", "/"],
        ["exec", "--", "sh", "-c", "echo contained; exit 7"],
    ],
    ids=["policy-check", "exec"],
)
def test_one_shot_commands_flush_everything_before_their_fast_exit(
    workdir: Path, argv: list[str]
) -> None:
    """``keel policy check`` and ``keel exec`` end without the interpreter's teardown: every
    byte is still written, the exit code is the command's, and a closed pipe is no crash."""
    env = keel_env()
    done = subprocess.run([KEEL, *argv], cwd=workdir, env=env, capture_output=True, check=False)
    if argv[0] == "policy":
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["decision"] == "deny"
    else:
        assert (done.returncode, done.stdout) == (7, b"contained\n"), done.stderr
    read_end, write_end = os.pipe()
    os.close(read_end)  # a reader that went away: every write fails with EPIPE
    try:
        closed = subprocess.run(
            [KEEL, *argv],
            cwd=workdir,
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    finally:
        os.close(write_end)
    # the reader is gone: a one-line error or the command's own SIGPIPE, never a traceback
    assert closed.returncode != 0 and b"Traceback" not in closed.stderr
