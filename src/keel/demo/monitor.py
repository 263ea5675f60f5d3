"""Demo section: an agent in a loop is caught, guided (hint, then correct), then stopped.

A scripted agent keeps running the same search whose result never changes. The monitor hints
at the third call, corrects after the fourth identical result, denies the repeats, asks for a
new plan and finally stops the session. Then the Stop-hook check: finishing is blocked until
the ``[gates]`` command has passed after the last edit. Every diagnostic and guidance lands in
the journal.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from keel.config import config_for
from keel.core.calls import ToolCall, ToolResult
from keel.core.errors import DemoFailed
from keel.core.root import CONFIG_NAME
from keel.journal import journal_path, open_journal
from keel.monitor import Monitor

SESSION = "demo-monitor"
LOOP_OUTPUT = "config/settings.yaml:3:  host: ${DB_HOST}\n"


def run(console: Console, base: Path) -> None:
    """Run the section under ``base``; raises ``DemoFailed`` if keel does not react."""
    root = base / "monitor-demo"
    root.mkdir(parents=True, exist_ok=True)
    (root / CONFIG_NAME).write_text('[gates]\nrequired = ["pytest -q"]\n', encoding="utf-8")
    config = config_for(root)
    with open_journal(root) as journal:
        monitor = Monitor(config, journal=journal, session_id=SESSION, agent="demo")
        levels = _loop(console, monitor)
        _finish(
            console, Monitor(config, journal=journal, session_id=f"{SESSION}-gates", agent="demo")
        )
        counts = {kind: 0 for kind in ("diagnostic", "guidance")}
        for event in journal.events(kinds=list(counts)):
            counts[event.kind] += 1
    console.print(
        f"Journal: {counts['diagnostic']} diagnostic and {counts['guidance']} guidance events "
        f"in {journal_path(root)}"
    )
    order = [lvl for i, lvl in enumerate(levels) if lvl and (i == 0 or levels[i - 1] != lvl)]
    if [lvl for lvl in order if lvl in ("hint", "correct", "stop")] != ["hint", "correct", "stop"]:
        raise DemoFailed(f"the monitor did not escalate hint → correct → stop: {order}")


def _loop(console: Console, monitor: Monitor) -> list[str | None]:
    table = Table("step", "agent calls", "keel", "what keel told the agent", show_lines=False)
    levels: list[str | None] = []
    last_denied: str | None = None
    for step in range(1, 16):
        call = ToolCall(
            "Bash",
            "exec",
            command='grep -rn "host" config/',
            tool_use_id=f"c{step}",
            session_id=SESSION,
        )
        before = monitor.before_call(call)
        after = None
        if before is None or before.level == "hint":
            result = ToolResult("Bash", "exec", True, LOOP_OUTPUT, None, 0, f"c{step}", SESSION)
            after = monitor.after_call(result)
        shown = (
            after if after is not None and (before is None or after.rank > before.rank) else before
        )
        verdict = "allow" if before is None or before.level == "hint" else f"deny ({before.level})"
        if shown is not None and shown is after:
            verdict += f", then {shown.level}"
        elif shown is not None and shown.level == "hint":
            verdict += " + hint"
        text = _short(shown.message) if shown else ""
        denied = before.level if before is not None and before.level != "hint" else None
        if denied is not None and denied == last_denied:
            text = "[dim]denied again, for the same reason[/dim]"
        last_denied = denied
        levels.append(shown.level if shown else None)
        table.add_row(str(step), call.command or "", verdict, text)
        if before is not None and before.level == "stop":
            break
    console.print(table)
    return levels


def _finish(console: Console, monitor: Monitor) -> None:
    console.print("[bold]Stop hook:[/bold] may the agent finish?")
    edit = ToolCall("Edit", "edit", paths=("src/app.py",), tool_use_id="e1")
    monitor.before_call(edit)
    monitor.after_call(ToolResult("Edit", "edit", True, "updated", tool_use_id="e1"))
    ok, why = monitor.may_finish()
    console.print(f"  after an edit, no test run: {'yes' if ok else 'no'}: {_short(why, 220)}")
    if ok:
        raise DemoFailed("finishing was allowed without the gate")
    gate = ToolCall("Bash", "exec", command="pytest -q", tool_use_id="g1")
    monitor.before_call(gate)
    monitor.after_call(ToolResult("Bash", "exec", True, "12 passed in 0.31s", None, 0, "g1"))
    ok, why = monitor.may_finish()
    console.print(f"  after `pytest -q` passed: {'yes' if ok else 'no'}: {_short(why, 220)}")
    if not ok:
        raise DemoFailed("finishing was blocked although the gate passed")


def _short(text: str, limit: int = 150) -> str:
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")
