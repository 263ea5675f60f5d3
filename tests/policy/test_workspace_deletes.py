"""A recursive delete of the workspace is denied in every spelling (issue 14).

``rm -R`` (capital) is recursive like its other spellings; the root named by its absolute path,
through its parent, as ``"$PWD"``, ``~+`` or through a link back to it. Decisions through the
in-process ``Policy`` for both presets in both modes; the hook path by effect: the stand-in
client runs what the real ``keel hook`` allows, and the workspace must still be there.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from policy_helpers import COMBOS, allowed, hook, linked_workspace, policy_for, run_as_client


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linked_workspace(tmp_path_factory.mktemp("deletes"))


@pytest.fixture
def fresh_ws(workdir: Path) -> Path:
    return linked_workspace(workdir)


ROOT_DELETES = [
    "rm -R .",
    "rm -R ./",
    "rm -Rf .",
    "rm -fR .",
    "rm -R -f .",
    "rm --recursive --force .",
    "rm -rf {ws}",
    "rm -rf {ws}/",
    "rm -rf {ws}/.",
    "rm -rf {ws}/src/..",
    "rm -R {ws}",
    "rm -Rf {ws}",
    "rm -rf ../ws",
    "rm -R ../ws",
    "rm -rf ../ws/",
    "rm -rf src/..",
    'rm -rf "$PWD"',
    "rm -rf $PWD",
    "rm -rf ${{PWD}}",
    'rm -rf "$PWD/"',
    'rm -R "$PWD"',
    "rm -rf ~+",
    "cd src && rm -rf ..",
    "cd src && rm -rf ../../ws",
    'cd src && rm -Rf "$PWD/.."',
    "rm -rf src/up",  # a link to the root: rm removes only the link, still denied to be safe
    "rm -rf src/up/",  # with the slash, rm follows the link and empties the root
    "rm -Rf -- {ws}",
    "rm -rf {parent}",
    "rm -R ..",
]


def _line(template: str, ws: Path) -> str:
    return template.format(ws=ws, parent=ws.parent)


@pytest.mark.parametrize("template", ROOT_DELETES)
@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_a_recursive_delete_of_the_workspace_is_denied(
    ws: Path, template: str, preset: str, contained: bool
) -> None:
    line = _line(template, ws)
    decision = policy_for(ws, preset, contained).check_command(line)
    assert (decision.decision, decision.rule) == ("deny", "risk.rm_recursive"), (line, decision)


@pytest.mark.parametrize(("preset", "contained"), COMBOS)
def test_rm_capital_r_is_recursive_like_its_other_spellings(
    ws: Path, preset: str, contained: bool
) -> None:
    policy = policy_for(ws, preset, contained)
    for target in ("src", "."):
        decisions = {
            flags: policy.check_command(f"rm {flags} {target}").decision
            for flags in ("-r", "-R", "--recursive", "-rf", "-Rf", "-fR", "-f -R", "-R -f")
        }
        assert len(set(decisions.values())) == 1, (target, decisions)


@pytest.mark.parametrize(
    ("template", "where"),
    [
        ("rm -R .", "."),
        ("rm -Rf {ws}", "."),
        ("rm -rf ../ws", "."),
        ('rm -rf "$PWD"', "."),
        ("rm -rf ..", "src"),
    ],
)
def test_the_hook_keeps_the_workspace_when_asked_to_delete_it(
    fresh_ws: Path, template: str, where: str
) -> None:
    line = _line(template, fresh_ws)
    cwd = fresh_ws / where
    reply = hook(fresh_ws, "Bash", {"command": line}, cwd=cwd)
    run_as_client(reply, line, cwd)
    assert (fresh_ws / "src" / "app.py").read_text() == "x = 1\n", reply
    assert "risk.rm_recursive" in reply.get("permissionDecisionReason", ""), reply


def test_the_stand_in_client_does_run_what_the_hook_allows(fresh_ws: Path) -> None:
    """The effect checks above can fail: an allowed delete of one file does delete it."""
    (fresh_ws / "src" / "junk.txt").write_text("junk\n")
    line = "rm -f src/junk.txt"
    reply = hook(fresh_ws, "Bash", {"command": line})
    assert allowed(reply), reply
    run_as_client(reply, line, fresh_ws)
    assert not (fresh_ws / "src" / "junk.txt").exists()
    assert shlex.split(reply.get("updatedInput", {}).get("command", line))
