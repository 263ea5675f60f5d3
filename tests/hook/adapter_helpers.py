"""A recording stand-in for keel.guard.Guard and access to the captured hook payloads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision, Guidance
from keel.hook.protocol import HookInput

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO.parent / "shared" / "reference" / "hook-captures"


@dataclass
class StubGuard:
    """Denies `rm -rf`, allows the rest; scripted guidance and gates; records everything."""

    decisions: dict[str, Decision] = field(default_factory=dict)
    guidance: Guidance | None = None
    finish: str | None = None
    """What ``gate_finish`` answers (a block reason), besides the failures it is given."""
    required_gates: tuple[str, ...] = ()
    root: str = "/w"
    rewrite: bool = False
    context: str = "Constraints you agreed to:\n- never touch secrets/"
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    closed: bool = False

    def decide(self, call: ToolCall, **_: Any) -> Decision:
        self.calls.append(call)
        if call.command and "rm -rf" in call.command:
            return Decision.deny("risk.rm_recursive", "recursive delete", "delete single files")
        return self.decisions.get(call.tool, Decision.allow("test.allow", "ok"))

    def observe(self, result: ToolResult, **_: Any) -> Guidance | None:
        self.results.append(result)
        return self.guidance

    def gate_finish(self, failures: Any = (), **_: Any) -> str | None:
        if failures:
            return "keel: do not finish yet: the [gates] must pass: " + "; ".join(failures)
        return self.finish

    def session_context(self) -> str:
        return self.context

    def note(self, kind: str, data: dict[str, Any], **_: Any) -> None:
        self.notes.append((kind, data))

    def close(self) -> None:
        self.closed = True


def factory_for(guard: StubGuard):
    def factory(root: Path, inp: HookInput, deadline_at: float) -> StubGuard:
        return guard

    return factory


def agent_of_case(case: str) -> str:
    if "gemini" in case:
        return "gemini"
    if "codex" in case:
        return "codex"
    return "claude"


def captured_calls() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(case, agent, event, stdin) for every line of every hooks.jsonl under CAPTURES."""
    found: list[tuple[str, str, str, dict[str, Any]]] = []
    for path in sorted(CAPTURES.glob("*/hooks.jsonl")):
        case = path.parent.name
        for n, line in enumerate(path.read_text().splitlines()):
            if line.strip():
                rec = json.loads(line)
                found.append((f"{case}#{n}", agent_of_case(case), rec["argv"][0], rec["stdin"]))
    return found
