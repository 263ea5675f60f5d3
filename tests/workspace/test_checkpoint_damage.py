"""A damaged checkpoint store, with real git: objects removed from ``.keel/checkpoints``.

``keel status`` names the checkpoints that lost something and what they lost before a
rollback needs them; ``keel diff`` and ``keel rollback`` refuse with ``workspace.corrupt``
naming the checkpoint and the missing file, never git's raw ``fatal:``, and write nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpoint_helpers import agent_call, ws

from _support import keel
from keel.core.errors import WorkspaceError
from keel.workspace import Checkpoints, checkpoint_health

TreeReader = Callable[[Path], dict[str, bytes | str]]


def _remove(cps: Checkpoints, oid: str) -> None:
    (cps.git_dir / "objects" / oid[:2] / oid[2:]).unlink()


def _blob(cps: Checkpoints, rev: str, path: str) -> str:
    return cps.git.run("rev-parse", f"{rev}:{path}").decode().strip()


@pytest.fixture
def damaged(workdir: Path) -> tuple[Path, Checkpoints, str, str]:
    """A workspace whose first checkpoint lost README.md's content: (root, store, id, blob).

    The agent call's ``before`` checkpoint has the same tree: it lost the same file.
    """
    root = ws(workdir)
    (root / ".git").mkdir()
    cps = Checkpoints(root)
    first = cps.create(label="start")
    agent_call(cps, "s", "t", lambda: (root / "README.md").write_text("# agent\n"))
    blob = _blob(cps, first.id, "README.md")
    _remove(cps, blob)
    return root, cps, first.id, blob


def test_status_says_ok_and_checks_every_object_of_an_intact_store(workdir: Path) -> None:
    root = ws(workdir)
    (root / ".git").mkdir()
    Checkpoints(root).create()
    out = keel("status", "--json", cwd=root, check=True)
    health = json.loads(out.stdout)["checkpoints"]
    assert (health["state"], health["ok"], health["objects"]) == ("ok", True, "complete")
    assert keel("status", cwd=root).stdout.splitlines()[-1] == "checkpoint ok"


def test_status_names_the_damaged_checkpoints_and_the_lost_file(
    damaged: tuple[Path, Checkpoints, str, str],
) -> None:
    root, cps, _, blob = damaged
    start, before, after = cps.history()
    out = keel("status", "--json", cwd=root, check=True)
    health = json.loads(out.stdout)["checkpoints"]
    assert (health["state"], health["ok"], health["objects"]) == ("damaged", False, "damaged")
    assert health["damage"] == {
        "damaged": [before.short, start.short],
        "missing": [{"oid": blob, "kind": "blob", "path": "README.md"}],
        "cut": None,
    }
    line = keel("status", cwd=root).stdout.splitlines()[-1]
    assert line.startswith(
        "checkpoint DAMAGED: 2 checkpoint(s) cannot be diffed or restored "
        f"({before.short}, {start.short}): the checkpoint store lost the saved copy of "
        f"README.md (blob {blob[:12]})"
    )
    assert after.short not in line
    (root / "notes.txt").write_text("mine\n")  # an intact checkpoint of that store still diffs
    diff = keel("diff", after.short, "--stat", cwd=root)
    assert diff.returncode == 0 and "notes.txt" in diff.stdout, diff.stderr


@pytest.mark.parametrize("command", [["diff"], ["rollback", "--force"], ["rollback", "--dry-run"]])
def test_diff_and_rollback_of_a_damaged_checkpoint_name_it_and_what_is_missing(
    damaged: tuple[Path, Checkpoints, str, str], command: list[str], tree: TreeReader
) -> None:
    root, cps, first, blob = damaged
    before = tree(root)
    count = len(cps.history())
    out = keel(*command, first[:12], cwd=root)
    assert out.returncode == 1
    assert out.stderr.startswith("keel: error: cannot ")
    assert f"checkpoint {first[:12]}: it is damaged" in out.stderr
    assert f"README.md (blob {blob[:12]})" in out.stderr
    assert out.stderr.rstrip().endswith("[workspace.corrupt]")
    assert "fatal" not in out.stderr.lower() and "fatal" not in out.stdout.lower()
    assert tree(root) == before and len(cps.history()) == count
    data = json.loads(keel(*command, first[:12], "--json", cwd=root).stderr)["error"]
    assert (data["code"], data["checkpoint"], data["missing"]) == (
        "workspace.corrupt", first[:12], [{"oid": blob, "kind": "blob", "path": "README.md"}],
    )  # fmt: skip


def test_a_missing_checkpoint_commit_cuts_the_history_and_is_named(workdir: Path) -> None:
    root = ws(workdir)
    (root / ".git").mkdir()
    cps = Checkpoints(root)
    first = cps.create(label="start")
    agent_call(cps, "s", "t", lambda: (root / "README.md").write_text("# agent\n"))
    middle = cps.history()[1]
    _remove(cps, middle.id)
    health = checkpoint_health(root)
    assert health.state == "damaged" and health.damage is not None
    assert health.damage.cut == middle.id
    assert f"the checkpoint commit {middle.short} is missing" in health.summary()
    for command in (["checkpoint", "list"], ["diff", first.short], ["rollback", "--last"]):
        out = keel(*command, cwd=root)
        assert out.returncode == 1, command
        assert "cannot read the checkpoint history: the checkpoint store is damaged" in out.stderr
        assert middle.short in out.stderr and "[workspace.corrupt]" in out.stderr
        assert "fatal" not in out.stderr.lower()


def test_a_missing_directory_is_named_with_every_checkpoint_that_held_it(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    first = cps.create()
    (root / "notes.txt").write_text("changed\n")
    second = cps.create()
    (root / "src" / "app.py").write_text("print('bye')\n")
    third = cps.create()
    tree = _blob(cps, first.id, "src")  # the same src/ in the first two
    _remove(cps, tree)
    damage = cps.damage()
    assert damage is not None and damage.damaged == (second.id, first.id)
    assert [m.to_dict() for m in damage.of(first.id)] == [
        {"oid": tree, "kind": "tree", "path": "src"}
    ]
    assert damage.of(third.id) == ()
    with pytest.raises(WorkspaceError) as info:
        cps.diff(second)
    assert info.value.code == "workspace.corrupt"
    assert f"lost the saved copy of src (tree {tree[:12]})" in info.value.message


def test_the_object_check_keeps_to_its_budget(workdir: Path) -> None:
    root = ws(workdir)
    Checkpoints(root).create()
    health = checkpoint_health(root, budget=0)
    assert (health.state, health.objects) == ("ok", "unchecked")
    assert health.summary() == "ok (objects not checked: over the 0 s budget)"


def test_a_git_failure_without_damage_carries_no_raw_git_label(workdir: Path) -> None:
    root = ws(workdir)
    cps = Checkpoints(root)
    cps.create()
    with pytest.raises(WorkspaceError) as info:
        cps.git.run("cat-file", "-p", "0" * 40)
    assert info.value.code == "workspace.git"
    assert "fatal" not in info.value.message.lower()
    assert info.value.message.startswith("git cat-file failed in the checkpoint repository: ")
