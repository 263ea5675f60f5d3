"""A broken keel.toml is a one-line error naming it, for every command that reads it.

Never a traceback, never a silent fall back to the defaults, and on the decision paths
(``keel hook``, ``keel policy check``) never an allow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_bad_input_helpers import (
    HOOK_EVENTS,
    assert_error,
    assert_hook_blocked,
    hook_payload,
    keel,
    snapshot,
)

PATCH = "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hi\n+ho\n"
PLAN = {"goal": "look", "steps": [{"id": "a", "probe": "fs.exists", "args": {"path": "README"}}]}


def _write(text: bytes) -> Callable[[Path], object]:
    return lambda path: path.write_bytes(text)


BAD_CONFIGS: dict[str, tuple[Callable[[Path], object], str]] = {
    "bad-toml": (_write(b"[policy\npreset = 1\n"), "config.toml"),
    "unknown-key": (_write(b"[policy]\nbogus = 1\n"), "config.schema"),
    "wrong-type": (_write(b"[limits]\nmax_steps = 'many'\n"), "config.schema"),
    "bad-glob": (_write(b"[scope]\ninclude = ['[a']\n"), "config.schema"),
    "not-utf8": (_write(b"[policy]\npreset = '\xff\xfe'\n"), "config.encoding"),
    "directory": (lambda path: path.mkdir(), "config.read"),
    "fifo": (lambda path: os.mkfifo(path), "config.read"),
    "symlink-loop": (lambda path: path.symlink_to(path), "config.read"),
    "dangling-symlink": (lambda path: path.symlink_to(path.with_name("gone.toml")), "config.read"),
}

# (argv, exit code): plan and policy treat an unusable config as a usage error (2).
COMMANDS: dict[str, tuple[list[str], int]] = {
    "status": (["status"], 1),
    "patch-apply": (["patch", "apply", "{patch}"], 1),
    "patch-check": (["patch", "apply", "--check", "{patch}"], 1),
    "plan-validate": (["plan", "validate", "{plan}"], 2),
    "plan-run": (["plan", "run", "{plan}"], 2),
    "sandbox-check": (["sandbox", "check"], 1),
    "sandbox-run": (["sandbox", "run", "true"], 1),
    "monitor-scan": (["monitor", "scan", "{plan}"], 1),
    "policy-check": (["policy", "check", "ls"], 2),
    "policy-check-write": (["policy", "check", "--write", "README"], 2),
    "policy-explain": (["policy", "explain"], 2),
}


def _workspace(workdir: Path, config: str) -> Path:
    (workdir / ".git").mkdir()  # the root marker, since keel.toml may not count as one
    (workdir / "README").write_text("hi\n")
    (workdir / "p.diff").write_text(PATCH)
    (workdir / "plan.json").write_text(json.dumps(PLAN))
    BAD_CONFIGS[config][0](workdir / "keel.toml")
    return workdir


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("config", sorted(BAD_CONFIGS))
def test_bad_config_is_a_clear_error(workdir: Path, config: str, command: str) -> None:
    root = _workspace(workdir, config)
    argv, rc = COMMANDS[command]
    argv = [a.format(patch=root / "p.diff", plan=root / "plan.json") for a in argv]
    before = snapshot(root)
    run = keel(argv, root)
    line = assert_error(run, rc, BAD_CONFIGS[config][1])
    assert "keel.toml" in line
    assert snapshot(root) == before
    assert "allow" not in run.out


@pytest.mark.parametrize("config", sorted(BAD_CONFIGS))
def test_bad_config_policy_check_json_names_the_file(workdir: Path, config: str) -> None:
    root = _workspace(workdir, config)
    run = keel(["policy", "check", "--json", "rm -rf /"], root)
    assert run.rc == 2 and "Traceback" not in run.err
    error = json.loads(run.err)["error"]
    assert error["code"] == BAD_CONFIGS[config][1]
    assert error["file"] == str(root / "keel.toml")
    assert run.out == ""


@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
@pytest.mark.parametrize("config", sorted(BAD_CONFIGS))
def test_bad_config_blocks_every_hook(workdir: Path, config: str, agent: str) -> None:
    root = _workspace(workdir, config)
    run = keel(["hook", HOOK_EVENTS[agent], "--agent", agent], root, hook_payload(agent, root))
    assert_hook_blocked(run)
    assert BAD_CONFIGS[config][1] in run.err


@pytest.mark.parametrize("config", ["directory", "symlink-loop"])
def test_init_refuses_a_keel_toml_that_is_not_a_file(workdir: Path, config: str) -> None:
    root = _workspace(workdir, config)
    assert_error(keel(["init"], root), 1, "config.read")
    assert not (root / ".gitignore").exists()


def test_the_emergency_stop_works_whatever_the_config(workdir: Path) -> None:
    root = _workspace(workdir, "bad-toml")
    run = keel(["stop", "--reason", "config broken"], root)
    assert run.rc == 0, run.err
    assert (root / ".keel" / "STOP").is_file()
    assert keel(["resume"], root).rc == 0
