"""Helpers shared by the policy tests.

- a workspace with control files, a secret and symlinks to all of them, and the real
  ``keel hook`` driven as Claude Code would (the stand-in client runs what it allows);
- texts the command judge gives, and patches (one copy for every file that expects them);
- the arguments of a command line as ``keel.policy._rules`` reads them (``$X``: a word known
  only at run time);
- ``Tree``: a workspace with real symlinks, a directory beside it and a home of its own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from _support import hook as call_hook
from _support import make_workspace
from keel.policy import Policy
from keel.policy._core import Engine
from keel.policy._rules import normalise
from keel.policy._shell import Cmd, parse
from keel.policy._snapshot import default_snapshot

# -- a workspace of links, and the real hook -------------------------------------------

PRESETS = ("developer", "strict")
COMBOS = [(p, c) for p in PRESETS for c in (False, True)]
SECRET = "KEY=s3cret-issue-14"
GIT_CONFIG = "[core]\n\tbare = false\n"


def linked_workspace(parent: Path) -> Path:
    """A workspace named ``ws`` with control files, a secret and symlinks to all of them."""
    parent.chmod(0o755)
    files = {
        "src/app.py": "x = 1\n",
        ".git/config": GIT_CONFIG,
        ".git/HEAD": "ref: refs/heads/main\n",
        ".env": SECRET + "\n",
    }
    ws = make_workspace(parent / "ws", keel_toml='[policy]\npreset = "developer"\n', files=files)
    (ws / ".git" / "hooks").mkdir()
    links = {
        "cfg": ".git/config",
        "hooks": ".git/hooks",
        "gitdir": ".git",
        "notes.txt": ".env",
        "abs_cfg": str(ws / ".git" / "config"),
        "abs_notes.txt": str(ws / ".env"),
        "src/up": "..",  # a directory link back to the root: src/up/.git is .git
    }
    for name, target in links.items():
        (ws / name).symlink_to(target)
    return ws


def policy_for(ws: Path, preset: str, contained: bool) -> Policy:
    return Policy.for_preset(preset, ws, contained=contained)


def hook(ws: Path, tool: str, tool_input: dict[str, Any], cwd: Path | None = None) -> dict:
    """The real ``keel hook`` (Claude Code's dialect, no daemon) for one PreToolUse call."""
    payload = {"tool_name": tool, "tool_input": tool_input}
    proc = call_hook(
        "PreToolUse",
        payload,
        workspace=ws,
        cwd=cwd,
        via="keel",
        pass_workspace=True,
        session="survivors",
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        return {"permissionDecision": "deny", "permissionDecisionReason": proc.stderr}
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return {"permissionDecision": "allow"}  # silence: the client's own permissions apply
    return json.loads(proc.stdout)["hookSpecificOutput"]


def allowed(reply: dict) -> bool:
    return reply.get("permissionDecision") == "allow"


def run_as_client(reply: dict, command: str, cwd: Path) -> None:
    """Run what Claude Code would run for an allowed Bash call: the rewritten command, if any."""
    if not allowed(reply):
        return
    line = reply.get("updatedInput", {}).get("command", command)
    subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, timeout=120, check=False)


# -- texts the command judge gives ------------------------------------------------------

KEEL_TOML_CONTROL = (
    "'keel.toml' is protected at any depth ('**/keel.toml'): "
    "keel's policy: it decides what the agent may do"
)
NOT_ALLOWED = "'{}' is not allowed by the developer preset or keel.toml"
PUSH_CONFIG = (
    "git push runs with git configuration set on the command line; a refspec it adds can force-push"
)
CONTROL_HINT = (
    "keel's, git's, the agents' and the tools' configuration is changed by people, not agents"
)
PATCH_CONTROL = "--- a/keel.toml\n+++ b/keel.toml\n@@ -1 +1 @@\n-a\n+b\n"
PATCH_OK = "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


# -- the words of a command line --------------------------------------------------------


def argv(line: str) -> list[str | None]:
    return [None if w == "$X" else w for w in line.split()]


def one(line: str) -> Cmd:
    """The last simple command of ``line`` as the parser gives it."""
    cmds = parse(line, cwd="/w", home="/home/u").cmds
    assert cmds, line
    return cmds[-1]


def split(line: str) -> tuple[str, list[str | None]]:
    words = argv(line)
    return normalise(words[0] or ""), words[1:]


# -- a tree of real links ---------------------------------------------------------------


class Tree:
    """A workspace ``ws`` with real symlinks, a directory ``out`` beside it and a home."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.ws = base / "ws"
        self.out = base / "out"
        self.home = base / "home"
        for d in (self.ws / "src", self.ws / ".git", self.out, self.home / ".ssh"):
            d.mkdir(parents=True)
        (self.ws / "src" / "a.py").write_text("x = 1\n")
        (self.ws / ".git" / "config").write_text("[core]\n")
        (self.ws / ".env").write_text("KEY=1\n")
        (self.ws / "plain.txt").write_text("hello\n")
        (self.out / "f.txt").write_text("out\n")
        (self.home / ".ssh" / "id_rsa").write_text("KEY\n")
        links = {
            self.ws / "link_out": self.out,  # a directory outside
            self.ws / "link_in": self.ws / "src",  # a directory inside
            self.ws / "cfg": self.ws / ".git" / "config",  # a control file
            self.ws / "notes.txt": self.ws / ".env",  # a secret
            self.ws / "secret.key": self.ws / "plain.txt",  # a plain file named like a key
            self.out / "key_link": self.home / ".ssh" / "id_rsa",  # outside, to a secret
            self.out / "etc": Path("/etc"),  # in /tmp, to outside /tmp
        }
        for link, target in links.items():
            link.symlink_to(target)

    def engine(self, preset: str = "developer", *, contained: bool = False, **over: Any) -> Engine:
        """An engine over ``ws`` for ``preset``, with snapshot keys replaced by ``over``."""
        return Engine(default_snapshot(preset) | over, str(self.ws), contained=contained)
