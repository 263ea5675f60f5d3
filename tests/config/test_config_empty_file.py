"""An emptied keel.toml (a truncated save) is refused, never read as the developer defaults.

Issue 24, item 1: a strict preset with a scope and a deny list, then ``: > keel.toml``, turned
``echo``, a Write outside the scope and ``python3 -c`` from deny to allow, and ``keel doctor``
still said every client was guarded. Shown here by effect: the hooks deny (in process and
through ``keel hookd``, which had the strict config cached), ``keel exec`` runs nothing, and
doctor's report is not ok.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from _support import hook, keel, make_workspace, verdict
from keel.config import parse_config
from keel.core.errors import ConfigError

STRICT = """
[policy]
preset = "strict"
deny = ["python3", "echo"]

[scope]
include = ["src/**"]
"""

CALLS = {
    "echo": {"tool_name": "Bash", "tool_input": {"command": "echo hi"}},
    "write outside the scope": {
        "tool_name": "Write",
        "tool_input": {"file_path": "README.md", "content": "x"},
    },
    "python3 -c": {"tool_name": "Bash", "tool_input": {"command": "python3 -c 'print(1)'"}},
}


@pytest.mark.parametrize("text", ["", "\n  \n", "# all commented out\n# [policy]\n"])
def test_a_file_that_sets_nothing_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "/w/keel.toml")
    assert err.value.code == "config.empty" and err.value.file == "/w/keel.toml"
    assert "truncated" in err.value.message


def _truncate(path: Path) -> None:
    with open(path, "w"):
        pass
    later = time.time_ns() - 10_000_000_000  # old enough that a cache could keep it
    os.utime(path, ns=(later, later))


@pytest.mark.parametrize("hookd", [False, True], ids=["in-process", "hookd"])
def test_hooks_deny_everything_after_keel_toml_is_emptied(workdir: Path, hookd: bool) -> None:
    ws = make_workspace(workdir / "ws", keel_toml=STRICT, files={"src/a.py": ""}, git=True)
    for name, call in CALLS.items():  # the strict config denies them all, and caches itself
        assert verdict(hook("PreToolUse", call, workspace=ws, via="launcher", hookd=hookd)) == (
            "deny"
        ), name
    _truncate(ws / "keel.toml")
    for name, call in CALLS.items():
        done = hook("PreToolUse", call, workspace=ws, via="launcher", hookd=hookd)
        assert verdict(done) == "deny", (name, done.stdout, done.stderr)
        assert "config.empty" in done.stdout + done.stderr, name
    if hookd:
        keel("hookd", "stop", workspace=ws)


def test_keel_exec_runs_nothing_and_doctor_is_not_ok(workdir: Path) -> None:
    ws = make_workspace(workdir / "ws", keel_toml=STRICT, git=True)
    _truncate(ws / "keel.toml")
    done = keel("exec", "--", "sh", "-c", "touch marker", workspace=ws)
    assert done.returncode != 0 and "sets nothing" in done.stderr
    assert not (ws / "marker").exists()
    keel("init", "--agent", "claude", workspace=ws)  # doctor needs a client to judge
    report = keel("doctor", "--json", workspace=ws)
    data = json.loads(report.stdout)
    assert report.returncode != 0 and data["ok"] is False
    config = next(c for c in data["workspace"] if c["name"] == "config")
    assert config["status"] == "fail" and "sets nothing" in config["detail"]
