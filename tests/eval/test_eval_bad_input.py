"""Bad suites, arms and options: a structured error naming what is wrong, before any run.

Every case runs the real ``keel eval --json`` and reads its ``{"error": {...}}`` on stderr:
the code, and the context that names the file, the task, the arm or the key.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import EXAMPLES, SCRIPTS

from _support import keel

GOOD_TASK = 'task = "add greet() to greet.py"\ncheck = "python3 -c pass"\n'


def suite(root: Path, tasks: dict[str, dict[str, str]]) -> Path:
    """A suite at ``root``: task id -> {relative path: text} inside its folder."""
    for task, files in tasks.items():
        for rel, text in files.items():
            path = root / "tasks" / task / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return root


def error_of(workdir: Path, *args: str, exit_code: int) -> dict[str, Any]:
    done = keel("eval", *args, "--json", "--out", str(workdir / "out"), cwd=workdir)
    assert done.returncode == exit_code, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    assert not (workdir / "out").exists()  # nothing ran, nothing was written
    return json.loads(done.stderr)["error"]


GOOD = {"task.toml": GOOD_TASK, "repo/greet.py": "def hello():\n    pass\n"}
SUITES: dict[str, tuple[dict[str, dict[str, str]], dict[str, Any]]] = {
    "a task with no check": (
        {"t1": {**GOOD, "task.toml": 'task = "x"\n'}},
        {"task": "t1", "key": "check"},
    ),
    "an unknown key": (
        {"t1": {**GOOD, "task.toml": GOOD_TASK + "timeout = 3\n"}},
        {"task": "t1", "key": "timeout"},
    ),
    "a wrong type": (
        {"t1": {**GOOD, "task.toml": GOOD_TASK + 'max_steps = "many"\n'}},
        {"task": "t1", "key": "max_steps"},
    ),
    "not TOML": ({"t1": {**GOOD, "task.toml": "task = \n"}}, {"task": "t1"}),
    "no repository": ({"t1": {"task.toml": GOOD_TASK}}, {"task": "t1", "key": "repo"}),
    "both task files": (
        {"t1": {**GOOD, "task.json": json.dumps({"task": "x", "check": "true"})}},
        {"task": "t1"},
    ),
    "no task file": ({"t1": {"repo/a.py": "x = 1\n"}}, {"task": "t1"}),
    "a bad task id": ({"t 1": GOOD}, {"task": "t 1"}),
    "a git ref that does not exist": (
        {"t1": {"task.toml": GOOD_TASK + '[repo]\ngit = "nowhere.git"\nref = "main"\n'}},
        {"task": "t1", "key": "repo"},
    ),
}


@pytest.mark.parametrize("case", sorted(SUITES))
def test_a_bad_suite_names_the_task_and_the_key(workdir: Path, case: str) -> None:
    tasks, context = SUITES[case]
    root = suite(workdir / "suite", tasks)
    error = error_of(workdir, str(root), "--model", "script:s.json", exit_code=1)
    assert error["code"] == "eval.suite", error
    assert {k: error.get(k) for k in context} == context, error
    assert "file" in error or "suite" in error, error


def test_a_suite_without_tasks_is_refused(workdir: Path) -> None:
    (workdir / "empty").mkdir()
    error = error_of(workdir, str(workdir / "empty"), "--model", "local", exit_code=1)
    assert error["code"] == "eval.suite" and "tasks/" in error["message"]


ARMS: dict[str, tuple[list[str], dict[str, Any], str]] = {
    "an unknown key": (["x=colour=red"], {"arm": "x", "key": "colour"}, "unknown key"),
    "a bad flag": (["x=guidance=maybe"], {"arm": "x", "key": "guidance"}, "on | off"),
    "a bad preset": (["x=preset=lax"], {"arm": "x", "key": "preset"}, "strict"),
    "a bad number": (["x=max_steps=0"], {"arm": "x", "key": "max_steps"}, "whole number"),
    "a key twice": (["x=guidance=on,guidance=off"], {"arm": "x", "key": "guidance"}, "twice"),
    "no value": (["x=judge"], {"arm": "x", "key": "judge"}, "needs a value"),
    "a bad model": (["x=model=gpt"], {"arm": "x", "key": "model"}, "unknown model"),
    "a replay model": (["x=model=replay:run-1"], {"arm": "x", "key": "model"}, "--replay"),
    "a bad name": (["x y=guidance=off"], {"arm": "x y"}, "NAME"),
    "a name twice": (["x", "x=guidance=off"], {"arm": "x"}, "twice"),
}


@pytest.mark.parametrize("case", sorted(ARMS))
def test_a_bad_arm_names_the_arm_and_the_key(workdir: Path, case: str) -> None:
    arms, context, words = ARMS[case]
    given = [a for arm in arms for a in ("--arm", arm)]
    error = error_of(workdir, str(EXAMPLES), "--model", f"script:{SCRIPTS}", *given, exit_code=2)
    assert error["code"] == "eval.arm", error
    assert {k: error.get(k) for k in context} == context, error
    assert words in error["message"], error


def test_a_missing_script_names_the_task_and_the_file(workdir: Path) -> None:
    scripts = workdir / "scripts"
    shutil.copytree(SCRIPTS, scripts)
    (scripts / "wrong-key.json").unlink()
    error = error_of(workdir, str(EXAMPLES), "--model", f"script:{scripts}", exit_code=1)
    assert (error["code"], error["task"]) == ("eval.script", "wrong-key")
    assert error["file"] == str(scripts / "wrong-key.json")


def test_an_arm_over_a_repository_keel_toml_that_becomes_invalid(workdir: Path) -> None:
    bad = {**GOOD, "repo/keel.toml": '[agent]\nmax_steps = 5\ncolour = "red"\n'}
    root = suite(workdir / "suite", {"t1": bad})
    error = error_of(workdir, str(root), "--model", "local", "--arm", "a=guidance=off",
                     exit_code=1)  # fmt: skip
    assert (error["code"], error["task"], error["arm"]) == ("eval.config", "t1", "a"), error
    assert error["key"] == "agent.colour", error


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--arm", "a"], "eval.model"),  # no --model, and the arm names none
        (["--model", "replay:run-1"], "eval.model"),
        (["--model", "local", "--repeat", "0"], "eval.repeat"),
        (["--model", "local", "--jobs", "0"], "eval.usage"),
        (["--model", "local", "--task", "no-such-task"], "eval.suite"),
    ],
)
def test_bad_options(workdir: Path, args: list[str], code: str) -> None:
    exit_code = 1 if code == "eval.suite" else 2
    assert error_of(workdir, str(EXAMPLES), *args, exit_code=exit_code)["code"] == code


def test_no_suite_and_no_replay_is_a_usage_error(workdir: Path) -> None:
    assert error_of(workdir, "--model", "local", exit_code=2)["code"] == "eval.usage"


def test_results_are_never_mixed(workdir: Path) -> None:
    out = workdir / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("{}\n")
    done = keel("eval", str(EXAMPLES), "--model", "local", "--out", str(out), "--json",
                cwd=workdir)  # fmt: skip
    assert done.returncode == 2
    assert json.loads(done.stderr)["error"]["code"] == "eval.out"
    assert (out / "results.jsonl").read_text() == "{}\n"


def test_replay_of_something_that_is_not_results(workdir: Path) -> None:
    (workdir / "notes.jsonl").write_text('{"kind": "run"}\n')
    done = keel("eval", "--replay", str(workdir / "notes.jsonl"), "--json", cwd=workdir)
    assert done.returncode == 1
    error = json.loads(done.stderr)["error"]
    assert (error["code"], error["file"]) == ("eval.results", str(workdir / "notes.jsonl"))
