"""Final actions: run only on a true condition with defined arguments, writes asked of the
policy (and the emergency stop), commands in the exec sandbox, patches checked path by path,
the commitment lint that refuses a plan's writes, and the state a run ends in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plan_engine_helpers import (
    CONFIG,
    AllowAll,
    _c,
    cond,
    engine,
    ev,
    fin,
    plan_events,
    records,
    run,
)

from keel.core.events import DecisionPayload
from keel.probes import BindError, bind, check_types


@pytest.mark.parametrize(
    ("condition", "reason", "facts"),
    [
        (_c("and", "{{ex}}", "{{no}}"), "the condition is false", ["ex is true", "no is false"]),
        (_c("and", "{{ex}}", "{{bad}}", "{{bad2}}"), "no evidence for bad, bad2", ["ex is true"]),
        (_c("gt", "{{ex}}", "a"), "no evidence for the condition", ["cannot compare true gt a"]),
    ],
)
def test_a_final_action_runs_only_on_a_true_condition(
    root: Path, condition: dict[str, Any], reason: str, facts: list[str]
) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ev("e2", "fs.exists", ["none.txt"], "no"),
        ev("e3", "parse.json", ["bad.json"], "bad"),
        ev("e4", "parse.json", ["bad.json"], "bad2"),
        fin("f", "output.result", ["ran"], condition),
    ]
    report, sink = run(steps, root)
    assert records(report)["f"] == {"step_id": "f", "function": "output.result",
                                    "status": "skipped", "args": {}, "output": None,
                                    "reason": reason, "decision": None}  # fmt: skip
    assert list(report.facts[-len(facts) :]) == facts
    assert report.state == "failed"
    assert not any(e.get("event") == "final_action" for e in plan_events(sink))


def test_a_final_action_with_undefined_arguments_is_skipped(root: Path) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        ev("e2", "parse.json", ["bad.json"], "bad"),
        ev("e3", "parse.json", ["c.json"], "doc"),
        fin("f", "output.result", ["{{bad}} {{doc.zz}} {{bad}}"], _c("and", "{{ex}}")),
    ]
    report, _ = run(steps, root)
    action = records(report)["f"]
    assert (action["status"], action["reason"]) == ("skipped", "bad, doc.zz undefined")
    assert report.facts[-1] == "ex is true"


def test_a_done_action_is_recorded_and_journaled_with_its_facts(root: Path) -> None:
    steps = [
        ev("e1", "fs.exists", ["a.txt"], "ex"),
        fin("f", "output.result", ["found {{ex}}"], _c("and", "{{ex}}")),
    ]
    report, sink = run(steps, root)
    expected = {"step_id": "f", "function": "output.result", "status": "done",
                "args": {"message": "found true"}, "output": "found true", "reason": None,
                "decision": None}  # fmt: skip
    assert records(report)["f"] == expected
    assert report.facts == ("a.txt exists", "ex is true")
    assert {"event": "final_action", **expected} in plan_events(sink)


def _write_steps(path: str, content: Any = "new\n") -> list[dict[str, Any]]:
    return [
        ev("w", "fs.writable", [path], "ok"),
        ev("v", "data.value", [content], "text"),
        fin("f", "file.write", [path, "{{text}}"], _c("and", "{{ok}}")),
    ]


def test_a_write_asks_the_policy_and_journals_the_decision(root: Path) -> None:
    built, sink = engine(_write_steps("out.txt"), root, policy=AllowAll())
    report = built.run()
    action = records(report)["f"]
    assert action["status"] == "done" and action["output"] == "wrote 4 bytes to out.txt"
    assert (root / "out.txt").read_text() == "new\n"
    decisions = [e for e in sink.events if e.kind == "decision"]
    assert [e.payload for e in decisions] == [
        DecisionPayload("allow", "test.allow", "allowed by the test", None, subject="out.txt")
    ]
    assert {(e.session_id, e.trace_id, e.parent_span_id) for e in sink.events} == {
        ("plan-test", built.trace_id, built.root_span)
    }
    assert {"event": "final_action", **action} in plan_events(sink)
    assert report.state == "completed"


def test_a_write_the_policy_denies_is_refused_with_the_policy_reason(root: Path) -> None:
    from keel.policy import Policy

    report, sink = run(_write_steps(".env"), root, policy=Policy.from_config(CONFIG, root))
    action = records(report)["f"]
    assert action["status"] == "refused" and not (root / ".env").exists()
    decision = action["decision"]
    assert action["reason"] == f"policy: {decision['reason']} [{decision['rule']}]"
    (event,) = [e for e in sink.events if e.kind == "decision"]
    assert event.payload == DecisionPayload(
        decision["decision"], decision["rule"], decision["reason"], decision["suggestion"],
        subject=".env",
    )  # fmt: skip
    assert report.state == "failed"


def test_the_emergency_stop_refuses_a_write(root: Path) -> None:
    from keel.core.stop import set_stop

    set_stop(root, "incident")
    report, _ = run(_write_steps("out.txt"), root, policy=AllowAll())
    action = records(report)["f"]
    assert action["status"] == "refused" and "emergency stop" in action["reason"]
    assert not (root / "out.txt").exists()


def test_without_a_policy_a_write_is_refused(root: Path) -> None:
    report, sink = run(_write_steps("out.txt"), root)
    action = records(report)["f"]
    assert (action["status"], action["reason"]) == ("refused", "no policy is available")
    assert not (root / "out.txt").exists()
    assert not [e for e in sink.events if e.kind == "decision"]
    assert report.state == "failed"


class FakeSandbox:
    """Stands in for the exec sandbox: records the command, says it printed ``hi``."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def run(self, argv: list[str], *, workspace: Path, mode: str, timeout: float) -> Any:
        from types import SimpleNamespace

        self.calls.append((argv, workspace, mode, timeout))
        return SimpleNamespace(stdout=b"hi\n", stderr=b"", exit_code=0, timed_out=False)


def test_a_command_runs_in_the_exec_sandbox_with_the_configured_timeout(root: Path) -> None:
    box = FakeSandbox()
    steps = [
        ev("w", "cmd.which", ["cat"], "cat"),
        fin("r", "command.run", ["cat a.txt"], _c("exists", "{{cat}}")),
    ]
    report, sink = run(steps, root, policy=AllowAll(), exec_sandbox=box)
    action = records(report)["r"]
    assert (action["status"], action["output"]) == ("done", "hi\n")
    assert box.calls == [(["/bin/sh", "-c", "cat a.txt"], root, "exec", 33.0)]
    decisions = [e.payload for e in sink.events if isinstance(e.payload, DecisionPayload)]
    assert [(d.decision, d.subject) for d in decisions] == [("allow", "cat a.txt")]


class PathDenier(AllowAll):
    """Allows every call, but denies each path a patch touches (the patcher's own check)."""

    def check_path(self, path: str, op: Any) -> Any:
        from keel.core.decision import Decision

        return Decision.deny("test.deny", f"no patches to {path}")


def test_a_patch_is_checked_path_by_path_by_the_policy_too(root: Path) -> None:
    (root / "app.py").write_text("x = 1\n")
    patch = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    steps = [
        ev("w", "fs.writable", ["app.py"], "ok"),
        fin("p", "patch.apply", [patch], _c("and", "{{ok}}")),
    ]
    report, _ = run(steps, root, policy=PathDenier())
    action = records(report)["p"]
    assert action["status"] == "failed" and "no patches to app.py" in action["reason"]
    assert (root / "app.py").read_text() == "x = 1\n"
    allowed, _ = run(steps, root, policy=AllowAll())
    assert records(allowed)["p"]["status"] == "done"
    assert (root / "app.py").read_text() == "x = 2\n"


def test_arguments_of_the_wrong_type_at_run_time_fail_the_action(root: Path) -> None:
    from keel.plan._actions import resolve_action

    write = resolve_action("file.write")
    assert write is not None
    with pytest.raises(BindError) as caught:
        check_types(write.params, bind(write.params, ["out.txt", 5], write.name), write.name)
    report, _ = run(_write_steps("out.txt", 5), root, policy=AllowAll())
    action = records(report)["f"]
    assert (action["status"], action["reason"]) == ("failed", caught.value.message)
    assert not (root / "out.txt").exists()
    assert report.state == "failed"
    assert report.facts[-1] == "ok is true"


def test_a_plan_the_lint_flagged_commits_no_write(root: Path) -> None:
    steps = [
        ev("e1", "fs.writable", ["out.txt"], "ok"),
        fin("f1", "file.write", ["a.txt", "x"]),
        fin("f2", "file.write", ["out.txt", "y"], _c("and", "{{ok}}")),
        fin("f3", "output.result", ["z"]),
    ]
    report, _ = run(steps, root, policy=AllowAll())
    found = records(report)
    assert found["f1"]["status"] == "refused"
    assert found["f1"]["reason"] == (
        "commitment lint: file.write writes 'a.txt' but no condition over this step checks "
        "fs.writable('a.txt')"
    )
    assert found["f2"] == {
        "step_id": "f2", "function": "file.write", "status": "refused",
        "args": {"path": "out.txt", "content": "y"}, "output": None,
        "reason": "the commitment lint flagged final action(s) f1 of this plan: it cannot "
                  "succeed as written, so none of its writes or commands run",
        "decision": None,
    }  # fmt: skip
    assert found["f3"]["status"] == "done"
    assert (report.state, report.refused) == ("failed", ("f1",))
    assert (root / "a.txt").read_text() == "hello" and not (root / "out.txt").exists()


def test_every_action_the_lint_flagged_is_named_in_the_refusal(root: Path) -> None:
    steps = [
        ev("e1", "fs.writable", ["out.txt"], "ok"),
        fin("f1", "file.write", ["a.txt", "x"]),
        fin("f2", "file.write", ["b.txt", "y"]),
        fin("f3", "file.write", ["out.txt", "z"], _c("and", "{{ok}}")),
    ]
    report, _ = run(steps, root, policy=AllowAll())
    assert records(report)["f3"]["reason"] == (
        "the commitment lint flagged final action(s) f1, f2 of this plan: it cannot "
        "succeed as written, so none of its writes or commands run"
    )
    assert report.refused == ("f1", "f2")
    assert not (root / "b.txt").exists() and not (root / "out.txt").exists()


def test_a_flagged_plan_fails_even_when_the_flagged_action_is_not_reached(root: Path) -> None:
    steps = [
        ev("e1", "fs.exists", ["none.txt"], "ex"),
        cond("c", _c("and", "{{ex}}"), [fin("f1", "file.write", ["a.txt", "x"])]),
        fin("f3", "output.result", ["z"]),
    ]
    report, _ = run(steps, root, policy=AllowAll())
    assert records(report)["f3"]["status"] == "done"
    assert (report.state, report.refused) == ("failed", ("f1",))


@pytest.mark.parametrize(
    ("finals", "state"),
    [
        ([fin("a", "output.result", ["x"])], "completed"),
        ([fin("a", "output.result", ["x"], _c("and", "{{no}}"))], "failed"),
        ([], "failed"),
        ([fin("a", "output.result", ["x"]), fin("b", "file.write", ["a.txt", "x"],
                                                _c("and", "{{ok}}"))], "failed"),
        ([fin("a", "output.result", ["x"], _c("and", "{{no}}")),
          fin("b", "output.result", ["y"])], "completed"),
        ([fin("a", "output.result", ["x"]), fin("b", "file.write", ["a.txt", "{{five}}"],
                                                _c("and", "{{ok}}"))], "failed"),
    ],
)  # fmt: skip
def test_the_state_of_a_run(root: Path, finals: list[dict[str, Any]], state: str) -> None:
    steps = [
        ev("e1", "fs.exists", ["none.txt"], "no"),
        ev("e2", "fs.writable", ["a.txt"], "ok"),
        ev("e3", "data.value", [5], "five"),
    ]
    report, _ = run(steps + finals, root)  # no policy: a write is refused (or fails: {{five}})
    assert report.state == state
    assert report.facts[:3] == ("none.txt does not exist", "a.txt is writable", "five = 5")
