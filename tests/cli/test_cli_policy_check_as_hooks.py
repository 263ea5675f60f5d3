"""``keel policy check`` answers as the workspace's hooks do, unless told otherwise.

The hooks judge a shell command as contained when they contain what they allow (a working
sandbox, ``[sandbox] contain`` not "off"); ``keel policy check`` used to judge by the text
policy alone unless given ``--contained``, so it asked about calls the hooks allowed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _support import hook, keel, make_workspace, skip_or_fail, verdict
from keel.core.schema import KeelConfig
from keel.guard import containment

COMMANDS = ["pip install requests", "python3 -m pytest -q", "ls -la", "rm -rf /"]


def _check(ws: Path, *args: str) -> str:
    done = keel("policy", "check", "--json", *args, workspace=ws)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["decision"]


def _hook(ws: Path, command: str) -> str:
    call = {"tool_name": "Bash", "tool_input": {"command": command}}
    return verdict(hook("PreToolUse", call, workspace=ws, via="launcher"))


@pytest.mark.parametrize("contain", ["auto", "off"])
def test_policy_check_gives_the_hooks_verdict(workdir: Path, contain: str) -> None:
    toml = f'[policy]\npreset = "developer"\n\n[sandbox]\ncontain = "{contain}"\n'
    ws = make_workspace(workdir / "ws", keel_toml=toml, git=True)
    if contain == "auto" and not containment(KeelConfig())[0]:
        skip_or_fail("no sandbox here: the hooks judge uncontained, as tested with contain=off")
    for command in COMMANDS:
        assert _check(ws, "--", *command.split()) == _hook(ws, command), (contain, command)
    # the two judgements differ where containment matters, so the default is not a tautology
    contained = _check(ws, "--contained", "--", "pip", "install", "requests")
    uncontained = _check(ws, "--uncontained", "--", "pip", "install", "requests")
    assert (contained, uncontained) == ("allow", "ask")
    expected = contained if contain == "auto" else uncontained
    assert _check(ws, "--", "pip", "install", "requests") == expected
