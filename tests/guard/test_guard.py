from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _support import keel
from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision
from keel.core.events import trace_id_for
from keel.core.stop import set_stop, stop_status
from keel.guard import Guard
from keel.init import init_workspace
from keel.journal import open_journal
from keel.lifecycle import emergency_resume, emergency_stop


def _guard(root: Path, **kw: bool) -> Guard:
    return Guard.open(root, session_id="s-1", agent="test", **kw)


def test_decision_and_call_are_journaled_as_parent_and_child(workdir: Path) -> None:
    init_workspace(workdir, "developer")
    guard = _guard(workdir, monitor=False, checkpoints=False)
    decision = guard.decide(ToolCall("Bash", "exec", command="git status", tool_use_id="t1"))
    assert decision.decision == "allow"
    guard.close()
    with open_journal(workdir) as journal:
        events = list(journal.events(session_id="s-1"))
    kinds = [e.kind for e in events]
    assert kinds == ["tool.call", "decision"]
    call, dec = events
    assert dec.parent_span_id == call.span_id
    assert call.trace_id == dec.trace_id == trace_id_for("s-1")
    assert dec.payload.decision == "allow" and dec.payload.subject == "git status"  # type: ignore[union-attr]


def test_internal_error_is_a_deny(workdir: Path) -> None:
    guard = _guard(workdir, monitor=False, checkpoints=False)

    class Exploding:
        def check_call(self, call: ToolCall) -> Decision:
            raise RuntimeError("boom")

    guard.policy = Exploding()  # type: ignore[assignment]
    decision = guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert decision.decision == "deny" and decision.rule == "internal_error"
    assert "boom" in decision.reason
    guard.close()


def test_journal_failure_is_a_deny(workdir: Path) -> None:
    guard = _guard(workdir, monitor=False, checkpoints=False)

    class BrokenJournal:
        def append_many(self, events: object, **_: object) -> object:
            raise OSError("disk full")

        def answered(self, request_id: str) -> None:
            return None

        def close(self) -> None:
            pass

    guard.journal = BrokenJournal()  # type: ignore[assignment]
    decision = guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert decision.decision == "deny" and decision.rule == "internal_error"
    assert "disk full" in decision.reason


def test_stop_denies_with_reason_and_resume_clears(workdir: Path) -> None:
    guard = _guard(workdir, monitor=False, checkpoints=False)
    emergency_stop(workdir, "lunch break")
    decision = guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert decision.decision == "deny" and decision.rule == "stop.active"
    assert "lunch break" in decision.reason
    assert emergency_resume(workdir)
    assert guard.decide(ToolCall("Bash", "exec", command="ls")).decision == "allow"
    guard.close()
    with open_journal(workdir) as journal:
        kinds = [e.kind for e in journal.events()]
    assert "stop" in kinds and "resume" in kinds


def test_garbage_stop_flag_still_stops(workdir: Path) -> None:
    (workdir / ".keel").mkdir()
    (workdir / ".keel" / "STOP").write_bytes(b"\xff\xfe not json")
    assert stop_status(workdir).active
    guard = _guard(workdir, monitor=False, checkpoints=False)
    assert guard.decide(ToolCall("Read", "read", paths=("README.md",))).decision == "deny"
    guard.close()


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from keel.core.calls import ToolCall
    from keel.guard import Guard
    guard = Guard.open(
        Path(sys.argv[1]), session_id="child", agent="child", monitor=False, checkpoints=False
    )
    d = guard.decide(ToolCall("Bash", "exec", command="ls"))
    print(d.decision, d.rule, d.reason, sep="|")
    """
)


def test_stop_set_here_denies_in_another_process(workdir: Path) -> None:
    def child() -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(workdir)], capture_output=True, text=True, check=True
        )
        return out.stdout.strip().split("|")

    assert child()[0] == "allow"
    set_stop(workdir, "incident 42")
    verdict, rule, reason = child()
    assert (verdict, rule) == ("deny", "stop.active") and "incident 42" in reason


def test_stop_via_cli_denies_policy_check_in_another_process(workdir: Path) -> None:
    assert keel("stop", "--reason", "audit", workspace=workdir).returncode == 0
    out = keel("policy", "check", "--json", "--", "ls", workspace=workdir)
    assert out.returncode == 0, out.stderr
    assert '"deny"' in out.stdout and "audit" in out.stdout
    status = keel("status", workspace=workdir)
    assert "audit" in status.stdout
    assert keel("resume", workspace=workdir).returncode == 0
    assert '"allow"' in keel("policy", "check", "--json", "--", "ls", workspace=workdir).stdout


def test_observe_journals_result_linked_to_call(workdir: Path) -> None:
    guard = _guard(workdir, monitor=False, checkpoints=False)
    guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t9"))
    guard.observe(ToolResult("Bash", "exec", ok=True, output="a\nb\n", tool_use_id="t9"))
    guard.close()
    with open_journal(workdir) as journal:
        events = list(journal.events(session_id="s-1"))
    call = events[0]
    result = events[-1]
    assert result.kind == "tool.result" and result.parent_span_id == call.span_id
    assert result.payload.output_hash.startswith("sha256:")  # type: ignore[union-attr]


@pytest.mark.parametrize("preset", ["developer", "strict", "readonly"])
def test_dangerous_commands_denied_under_every_preset(workdir: Path, preset: str) -> None:
    guard = Guard.open(workdir, session_id="p", preset=preset, monitor=False, checkpoints=False)
    for command in ("rm -rf /", "git push --force origin main", "cat ~/.ssh/id_rsa"):
        assert guard.decide(ToolCall("Bash", "exec", command=command)).decision == "deny", command
    guard.close()


def test_result_links_to_its_call_across_processes(workdir: Path) -> None:
    first = _guard(workdir, monitor=False, checkpoints=False)
    first.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="toolu_1"))
    first.close()
    second = _guard(workdir, monitor=False, checkpoints=False)  # as a PostToolUse process
    second.observe(ToolResult("Bash", "exec", ok=True, output="x", tool_use_id="toolu_1"))
    second.close()
    with open_journal(workdir) as journal:
        call, decision, result = list(journal.events(session_id="s-1"))
    assert decision.parent_span_id == call.span_id
    assert result.kind == "tool.result" and result.parent_span_id == call.span_id
