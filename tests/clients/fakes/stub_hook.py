"""A hook entry point with keel's real adapter and a scripted guard, for dialect tests.

    python stub_hook.py hook EVENT --agent AGENT

The guard denies ``rm -rf`` and anything under ``secrets/``, asks about ``git push``, gives
guidance when a tool's output contains HINTME (hint) or REPLANME (replan), lets the session
finish only once ``.gate_ok`` exists when ``.gate_required`` does, and raises inside
``decide`` for a command containing FAULTME. Each call is appended to
``<root>/stub-calls.jsonl`` for the test to read.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.cli.hook import main
from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision, Guidance
from keel.hook.protocol import HookInput

PINNED = "PINNED-CONSTRAINT: never touch secrets/ (keel stub)"


@dataclass
class StubGuard:
    root: Path
    inp: HookInput
    deadline_at: float = 0.0
    required_gates: tuple[str, ...] = ()
    rewrite: bool = False

    def _log(self, what: str, data: dict[str, Any]) -> None:
        with open(self.root / "stub-calls.jsonl", "a") as fh:
            fh.write(json.dumps({"what": what, "event": self.inp.event, **data}) + "\n")

    def decide(self, call: ToolCall, **_: Any) -> Decision:
        self._log("decide", {"call": call.to_dict()})
        text = (call.command or "") + " ".join(call.paths) + (call.patch or "")
        if "FAULTME" in text:
            raise RuntimeError("injected fault")
        if "rm -rf" in text:
            return Decision.deny("risk.rm_recursive", "recursive delete", "delete files one by one")
        if "secrets/" in text:
            return Decision.deny("path.protected", "secrets/ is protected")
        if "git push" in text:
            return Decision.ask("policy.ask", "pushing needs a person")
        return Decision.allow("stub.allow", "fine")

    def observe(self, result: ToolResult, **_: Any) -> Guidance | None:
        self._log("observe", {"result": result.to_dict()})
        text = result.output + (result.error or "")
        if "REPLANME" in text:
            return Guidance("replan", "REPLAN-GUIDANCE: state a new plan", "stub")
        if "HINTME" in text:
            return Guidance("hint", "HINT-GUIDANCE: consider the tests", "stub")
        return None

    def gate_finish(self, failures: Any = (), **_: Any) -> str | None:
        ok = not (self.root / ".gate_required").exists() or (self.root / ".gate_ok").exists()
        self._log("may_finish", {"ok": ok})
        blocks = self.root / "stub-blocks"
        count = int(blocks.read_text()) if blocks.exists() else 0
        if ok or count >= 3:  # never trap the agent, as keel's guard bounds its blocks
            blocks.write_text("0")
            return None
        blocks.write_text(str(count + 1))
        return "keel: do not finish yet: GATE-REASON: `touch .gate_ok` has not run"

    def session_context(self) -> str:
        return PINNED

    def note(self, kind: str, data: dict[str, Any], **_: Any) -> None:
        self._log("note", {"kind": kind, "data": data})

    def close(self) -> None:
        pass


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[2:], guard_factory=StubGuard))
