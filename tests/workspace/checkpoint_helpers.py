"""A seeded workspace, an agent's tool call and a git-command counter for the checkpoint tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _support import make_workspace
from keel.core.events import CheckpointPayload, Event
from keel.workspace import Checkpoint, Checkpoints

PAST = time.time() - 3600


def seed(root: Path) -> None:
    """The files every checkpoint test starts from (``root`` exists)."""
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hello')\n")
    (root / "README.md").write_text("# project\n")
    (root / "notes.txt").write_text("keep\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)


def ws(workdir: Path) -> Path:
    """``workdir/ws``, seeded."""
    root = make_workspace(workdir / "ws")
    seed(root)
    return root


def agent_call(cps: Checkpoints, session: str, tool: str, change: Callable[[], object]) -> None:
    """What the guard does around one agent tool call."""
    cps.create(session_id=session, tool_use_id=tool)
    change()
    cps.after_call(session, tool)


class Counting:
    """Records the git commands a Checkpoints instance runs."""

    def __init__(self, cps: Checkpoints) -> None:
        self.commands: list[str] = []
        real = cps.git.proc

        def proc(args: Any, **kw: Any) -> Any:
            self.commands.append(args[0])
            return real(args, **kw)

        cps.git.proc = proc  # type: ignore[method-assign]


def age(root: Path, *, files: bool = True) -> None:
    """Move times under ``root`` (not .keel) an hour back: out of the watch's racy window."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".keel", ".git")]
        os.utime(dirpath, (PAST, PAST))
        if files:
            for name in filenames:
                os.utime(os.path.join(dirpath, name), (PAST, PAST), follow_symlinks=False)


def settled(cps: Checkpoints) -> None:
    """Two checkpoints with aged directories: the next one can use the quick check."""
    age(cps.root)
    cps.create()
    age(cps.root, files=False)  # creating .keel/ moved the root; files stay as indexed
    cps.create()


def payload(event: Event) -> CheckpointPayload:
    """The checkpoint payload of a journaled event."""
    assert isinstance(event.payload, CheckpointPayload)
    return event.payload


def message(cps: Checkpoints, cp: Checkpoint) -> str:
    """The body of a checkpoint's commit message."""
    raw = cps.git.run("cat-file", "commit", cp.id).decode()
    return raw.partition("\n\n")[2]


def mk(kind: str, session: str | None = None, tool: str | None = None, n: int = 0) -> Checkpoint:
    """A checkpoint value that is in no store (id ``n``)."""
    return Checkpoint(f"{n:040x}", "t" * 40, kind, 0.0, session, tool)  # type: ignore[arg-type]
