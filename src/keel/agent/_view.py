"""What a person sees of a run: a live view while it goes, and a summary at the end.

On a terminal the live view is a ``rich`` panel (phase, step, the last call with keel's
decision, guidance), redrawn in place; off a terminal each call is one plain line. The
summary says the outcome, the files changed (as ``keel diff --session``), the gates, tokens
and cost, and the session id with the command that undoes it all.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from keel.agent._loop import Progress, View

if TYPE_CHECKING:
    from keel.agent._session import RunResult
    from keel.agent.replay import ReplayResult


class LineView(View):
    """One plain line per call or phase change (off a terminal)."""

    def __init__(self, out: TextIO | None = None) -> None:
        """Write to ``out`` (stderr by default, so stdout keeps the summary)."""
        self.out = out or sys.stderr
        self._last = ""

    def update(self, progress: Progress) -> None:
        """Print what changed."""
        line = (
            f"step {progress.step} [{progress.phase}] {progress.last_call} -> {progress.decision}"
        )
        if progress.guidance:
            line += f" | guidance: {progress.guidance}"
        if line != self._last:
            self.out.write(line + "\n")
            self.out.flush()
            self._last = line


class LiveView(View):
    """A rich panel redrawn in place (on a terminal)."""

    def __init__(self) -> None:
        """Start the live display on stderr."""
        from rich.console import Console
        from rich.live import Live

        from keel.core.color import color_off

        # the rule of ``keel.cli._common.make_console`` (the agent sits below the command line)
        console = Console(
            stderr=True, color_system=None if color_off() else "auto", highlight=False
        )
        self._live = Live(console=console, auto_refresh=False, transient=False)
        self._live.start()

    def update(self, progress: Progress) -> None:
        """Redraw."""
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        table = Table.grid(padding=(0, 1))
        rows = (
            ("phase", progress.phase),
            ("step", str(progress.step)),
            ("last call", progress.last_call),
            ("keel", progress.decision),
            ("guidance", progress.guidance),
        )
        for name, value in rows:  # as plain text: "[rule]" and the model's words are not markup
            table.add_row(name, Text(value or "-"))
        self._live.update(Panel(table, title="keel run"), refresh=True)

    def close(self) -> None:
        """Stop the live display (its last frame stays)."""
        self._live.stop()


def summary(result: RunResult) -> str:
    """The end-of-run summary, as text."""
    lines = [result.output.rstrip("\n")] if result.output else []
    lines.append(f"outcome: {result.outcome} (exit {result.exit_code}): {result.reason}")
    if result.question:
        lines.append(f"question: {result.question}")
        lines.append(f"  answer with: keel run --resume {result.session_id} --answer TEXT")
    changed = ", ".join(result.files_changed) or "none"
    lines.append(f"files changed: {changed}  (keel diff --session {result.session_id})")
    gates = (
        ", ".join(f"{g['command']}: {'passed' if g['passed'] else 'failed'}" for g in result.gates)
        or "none run"
    )
    lines.append(f"gates: {gates}")
    cost = "unknown" if result.cost_usd is None else f"${result.cost_usd:.4f}"
    lines.append(
        f"model: {result.model_calls} call(s), {result.tokens} tokens, cost {cost}; "
        f"{result.steps} step(s), {result.tool_calls} tool call(s)"
    )
    lines.append(
        f"session: {result.session_id}  (undo it all: keel rollback --session {result.session_id})"
    )
    return "\n".join(lines) + "\n"


def replay_text(result: ReplayResult) -> str:
    """``keel replay``'s verdict, as text."""
    from keel.agent.replay import focus

    if result.divergence is None:
        return f"identical: {result.model_calls} model calls, {result.tool_calls} tool calls\n"
    d = result.divergence
    recorded, new = d.recorded, d.new
    if isinstance(recorded, str) and isinstance(new, str):
        recorded, new = focus(recorded, new)
    lines = [
        f"diverged at step {d.step}, phase {d.phase}: the {d.what} differs",
        f"  at:       {d.pointer or '/'}",
        f"  recorded: {_one(recorded)}",
        f"  new:      {_one(new)}",
        f"  (tools ran on {result.workspace})",
    ]
    return "\n".join(lines) + "\n"


def _one(value: Any) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("\n", "\\n")
