"""Demo section: a change made by a shell command, listed by ``keel diff``, undone by rollback.

Then a patch whose second file does not apply: nothing is written, and the error names the
hunk. The user's own git repository is checked byte for byte before and after.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from keel.core.errors import DemoFailed, PatchError
from keel.core.root import GIT_MARKER, STATE_DIR
from keel.journal import open_journal
from keel.workspace import Checkpoints
from keel.workspace.patch import apply_patch

SESSION = "demo-workspace"
AGENT_COMMAND = (
    "sed -i 's/return a + b/return a - b  # oops/' src/app.py && "
    "printf 'def helper():\\n    return 42\\n' > src/helper.py && rm README.md"
)
FAILING_PATCH = """*** Begin Patch
*** Update File: src/app.py
@@
 def add(a, b):
-    return a + b
+    return int(a) + int(b)
*** Update File: tests/test_app.py
@@
-    assert add(1, 2) == 4
+    assert add("1", 2) == 3
*** End Patch
"""
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "demo",
    "GIT_AUTHOR_EMAIL": "demo@example.com",
    "GIT_COMMITTER_NAME": "demo",
    "GIT_COMMITTER_EMAIL": "demo@example.com",
}


def run(console: Console, base: Path) -> None:
    """Show an agent's shell-command change listed, rolled back, and a failing patch."""
    repo = _sample_repo(base)
    before = _files(repo)
    user_git = _git_fingerprint(repo)
    journal = open_journal(repo)
    cps = Checkpoints(repo, journal)
    console.print(f"sample git repository {repo} (the user's own history is left alone)\n")

    console.print("[bold]1. the agent runs a shell command[/] (the guard checkpoints around it)")
    console.print(f"   $ {AGENT_COMMAND}")
    cps.create(session_id=SESSION, tool_use_id="toolu_demo_1")
    subprocess.run(["sh", "-c", AGENT_COMMAND], cwd=repo, check=True)
    cps.after_call(SESSION, "toolu_demo_1")

    console.print(f"\n[bold]2. keel diff --session {SESSION}[/]")
    diff = cps.diff(cps.resolve(session_id=SESSION))
    for change in diff.changes:
        console.print(f"   {change.status:<9} {change.path}")
    console.print(Syntax(diff.patch, "diff", theme="ansi_dark", background_color="default"))
    if {c.path for c in diff.changes} != {"src/app.py", "src/helper.py", "README.md"}:
        raise DemoFailed(f"keel diff listed {[c.path for c in diff.changes]}")

    console.print(f"[bold]3. keel rollback --session {SESSION}[/]")
    result = cps.rollback(cps.resolve(session_id=SESSION))
    console.print(f"   restored {', '.join(result.restored)}; removed {', '.join(result.deleted)}")
    if result.undo is not None:
        console.print(f"   (undo the rollback with: keel rollback {result.undo.short})")
    if _files(repo) != before:
        raise DemoFailed("the rollback did not restore the tree")
    console.print("   [green]the tree is byte-identical to before the agent's command[/]")

    console.print("\n[bold]4. keel patch apply[/]: a two-file patch whose second hunk is wrong")
    try:
        apply_patch(repo, FAILING_PATCH, journal=journal, session_id=SESSION)
    except PatchError as exc:
        console.print(f"   [red]refused[/] {escape(f'[{exc.code}] {exc.message}')}")
    else:
        raise DemoFailed("the failing patch applied")
    if _files(repo) != before:
        raise DemoFailed("the failing patch changed files")
    console.print("   [green]no file was written: src/app.py is unchanged too[/]")

    if _git_fingerprint(repo) != user_git:
        raise DemoFailed("the user's .git changed")
    console.print("\n[green]the user's .git (refs, index, stash, hooks) is byte-identical[/]")
    kinds = [e.kind for e in journal.events(SESSION)]
    journal.close()
    console.print(f"journal events for {SESSION}: {', '.join(kinds)}")


def _sample_repo(base: Path) -> Path:
    repo = base / "workspace-sample"
    for rel, text in {
        "src/app.py": "def add(a, b):\n    return a + b\n",
        "tests/test_app.py": (
            "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
        ),
        "README.md": "# sample\n",
    }.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {**os.environ, **_GIT_ENV}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return repo


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in (GIT_MARKER, STATE_DIR)
    }


def _git_fingerprint(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / ".git").rglob("*"))
        if p.is_file()
    }
