"""``keel demo``: keel's main jobs on a generated sample repository, offline, no API key.

Each section is a module here with ``run(console, base)``; a section builds what it needs
under its own fresh directory and raises if keel misbehaves, so the demo doubles as a smoke test.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import import_module
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

SECTIONS: tuple[tuple[str, str], ...] = (
    ("core", "Policy, emergency stop and the audit journal"),
    ("contain", "Containment: what keel allows runs in a sandbox, in place in the workspace"),
    ("workspace", "Checkpoints, diff, rollback and atomic patches"),
    ("plans", "Evidence-conditioned plans: probes in a sandbox, commitment only on evidence"),
    ("draft", "A plan drafted by a model: validator feedback, one more draft, then it runs"),
    ("hooks", "Claude Code hooks: keel init --agent claude, then keel answers the hook calls"),
    ("monitor", "Monitor: a loop caught, guided, then stopped; gates before finishing"),
)


def run_demo(console: Console, sections: list[str] | None = None, keep: bool = False) -> None:
    """Run the demo sections in order (all by default)."""
    chosen = [s for s in SECTIONS if not sections or s[0] in sections]
    top = Path(tempfile.mkdtemp(prefix="keel-demo-", dir="/tmp"))
    top.chmod(0o755)
    try:
        for name, title in chosen:
            console.print(Rule(f"[bold]{title}"))
            base = top / name
            base.mkdir(mode=0o755)
            import_module(f"keel.demo.{name}").run(console, base)
            console.print()
        console.print(f"[green]demo finished: {len(chosen)} section(s) ran as expected[/]")
    finally:
        if keep:
            console.print(f"demo files kept in {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)
