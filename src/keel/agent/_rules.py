"""Simple requests answered by rules, before any model call.

A task that is exactly one of these (case, spacing and a final full stop aside) never reaches
a model:

- "run the tests": the ``[gates] required`` commands, contained;
- "show the diff": what the last ``keel run`` changed (``keel diff --session``);
- "undo the last run": roll back the last ``keel run`` (``keel rollback --session``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.agent._session import START_LABEL, RunResult, agent_config, new_session_id
from keel.core.errors import KeelError

if TYPE_CHECKING:
    from keel.workspace import Checkpoints

RUN_TESTS = frozenset({"run the tests", "run tests", "run the test suite", "run the gates"})
SHOW_DIFF = frozenset({"show the diff", "show diff", "show me the diff"})
UNDO = frozenset({"undo the last run", "undo last run", "undo the last change", "undo"})


def normal(task: str) -> str:
    """``task`` lower-cased, spaces collapsed, a trailing full stop or mark dropped."""
    return " ".join(task.lower().split()).rstrip(".!?")


def rule_for(task: str) -> Callable[[Path], RunResult] | None:
    """The rule that answers ``task``, or None when a model must."""
    text = normal(task)
    if text in RUN_TESTS:
        return run_tests
    if text in SHOW_DIFF:
        return show_diff
    if text in UNDO:
        return undo_last
    return None


def answer_by_rule(root: Path, task: str) -> RunResult | None:
    """The result of the rule that answers ``task``; None when there is none."""
    rule = rule_for(task)
    return rule(root) if rule is not None else None


def run_tests(root: Path) -> RunResult:
    """Run the ``[gates] required`` commands, contained, journaled as gates."""
    from keel.agent._execute import run_command, shown
    from keel.core.events import Event, GatePayload
    from keel.guard import containment
    from keel.journal import open_journal

    config = agent_config(root)
    session = new_session_id()
    commands = list(config.gates.required)
    if not commands:
        return _result(
            session,
            "failed",
            "no [gates] required in keel.toml: keel does not know which commands run the tests",
        )
    contained, _ = containment(config)
    gates: list[dict[str, Any]] = []
    output = ""
    with open_journal(root) as journal:
        for command in commands:
            done = run_command(
                root, command, timeout=config.agent.tool_timeout_seconds, contained=contained
            )
            payload = GatePayload(command, done.ok, done.exit_code, shown(done.output, 500))
            journal.append(Event("gate", session, payload, agent="keel"))
            gates.append({"command": command, "passed": done.ok, "exit_code": done.exit_code})
            output += f"$ {command}\n{done.output}"
    passed = all(g["passed"] for g in gates)
    result = _result(
        session,
        "finished" if passed else "failed",
        "the tests pass" if passed else "a test command failed",
        output,
    )
    result.gates = gates
    return result


def _last_run(root: Path) -> tuple[Checkpoints, str] | None:
    from keel.workspace.service import open_checkpoints

    cps = open_checkpoints(root)
    starts = [c for c in cps.history() if c.label == START_LABEL and c.session_id]
    return (cps, starts[-1].session_id or "") if starts else None


def show_diff(root: Path) -> RunResult:
    """What the last ``keel run`` changed."""
    found = _last_run(root)
    session = new_session_id()
    if found is None:
        return _result(session, "failed", "there is no keel run to show")
    cps, last = found
    diff = cps.diff(cps.resolve(session_id=last))
    result = _result(session, "finished", f"the changes of {last}", diff.patch or "(no changes)\n")
    result.files_changed = [c.path for c in diff.changes]
    return result


def undo_last(root: Path) -> RunResult:
    """Roll the last ``keel run`` back."""
    found = _last_run(root)
    session = new_session_id()
    if found is None:
        return _result(session, "failed", "there is no keel run to undo")
    cps, last = found
    try:
        done = cps.rollback(cps.resolve(session_id=last))
    except KeelError as exc:
        return _result(session, "failed", f"cannot undo {last}: {exc.message} [{exc.code}]")
    result = _result(session, "finished", f"rolled back {last}")
    result.files_changed = [*done.restored, *done.deleted]
    return result


def _result(session: str, outcome: str, reason: str, output: str = "") -> RunResult:
    result = RunResult(session, outcome, reason, answered_by="rule")  # pyright: ignore[reportArgumentType]
    result.output = output
    return result
