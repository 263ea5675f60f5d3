"""A task whose repository is a git ref: the run starts from that commit's tree, nothing else."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from eval_helpers import results_lines

from _support import keel

SCRIPT = [
    {"tool_calls": [{"name": "run_plan", "arguments": {"plan": {
        "goal": "greet.py defines hello",
        "steps": [
            {"id": "e1", "type": "evidence_collection", "description": "look",
             "action": {"function": "python.symbols", "args": ["greet.py"]},
             "output_to": "found"},
            {"id": "c1", "type": "conditional", "description": "hello is there",
             "condition": {"op": "in", "vars": ["hello", "{{found.functions}}"]},
             "true_branch": [], "false_branch": []},
        ]}}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {
        "path": "greet.py", "content": "def hello():\n    return 'hi'\n\n\ndef greet(n):\n"
        "    return f'Hello, {n}!'\n"}}]},
    {"tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]},
]  # fmt: skip


def git(cwd: Path, *args: str) -> None:
    identity = ["-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


def test_a_task_runs_on_the_tree_of_its_git_ref(workdir: Path) -> None:
    origin = workdir / "origin"
    origin.mkdir()
    git(origin, "init", "-q")
    (origin / "greet.py").write_text("def hello():\n    return 'hi'\n")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "v1")
    git(origin, "tag", "v1")
    # after the tag: neither this commit nor the uncommitted file may reach the run
    (origin / "greet.py").write_text("def goodbye():\n    pass\n")
    git(origin, "commit", "-q", "-am", "v2")
    (origin / "extra.py").write_text("x = 1\n")

    task = workdir / "suite" / "tasks" / "greet"
    task.mkdir(parents=True)
    check = 'python3 -c \'import greet; assert greet.greet("A") == "Hello, A!"\''
    (task / "task.toml").write_text(
        f'task = "add greet(n) to greet.py"\ncheck = {json.dumps(check)}\n'
        '[repo]\ngit = "../../../origin"\nref = "v1"\n'
    )
    (workdir / "greet.json").write_text(json.dumps(SCRIPT))
    out = workdir / "out"
    done = keel("eval", str(workdir / "suite"), "--model", f"script:{workdir / 'greet.json'}",
                "--out", str(out), "--json", cwd=workdir)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (arm,) = json.loads(done.stdout)["arms"]
    assert arm["success"]["total"] == 1 and arm["steps"]["total"] == 3
    header, run = results_lines(out)
    assert header["tasks"][0]["source"] == "git ../../../origin@v1"
    workspace = out / run["workspace"]
    assert sorted(p.name for p in workspace.iterdir() if not p.name.startswith(".")) == ["greet.py"]
    # the plan found hello: the tree of v1, not v2's goodbye
    assert run["failed_conditions"] == 0 and run["first_write_step"] == 2
