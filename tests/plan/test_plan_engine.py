from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from plan_helpers import by_id, csv_repo, example, run, sandbox

from keel.core.decision import Decision
from keel.journal import MemoryJournal
from keel.plan import InProcessRunner, ProbeRunner, SandboxedRunner, render_text, run_plan
from keel.plan._commit import write_file
from keel.probes import Failure, ProbeResult

# -- the config plan (seed article, unchanged) ------------------------------------------


def test_config_plan_file_present(workdir: Path) -> None:
    (workdir / "config.yaml").write_text("database:\n  host: db.example.com\n  port: 5432\n")
    report = run(example("config_plan"), workdir)
    assert report.state == "completed" and report.exit_code == 0
    steps = by_id(report)
    assert steps["step_2"].branch == "true"
    assert (
        steps["step_3"].status == "done"
        and steps["step_3"].output == "数据库主机为：db.example.com"
    )
    assert steps["step_1"].backend == report.sandbox != "in-process"
    assert "config.yaml exists" in report.facts
    assert "'database.host' is db.example.com" in report.facts


def test_config_plan_file_missing(workdir: Path) -> None:
    report = run(example("config_plan"), workdir)
    steps = by_id(report)
    assert steps["step_2"].branch == "false"
    assert steps["step_2c"].function == "ui.prompt_user" and steps["step_2c"].status == "done"
    assert steps["step_3"].status == "skipped" and "false" in steps["step_3"].reason
    assert "config.yaml does not exist" in report.facts
    assert report.state == "completed"


def test_config_plan_key_missing_uses_default(workdir: Path) -> None:
    (workdir / "config.yaml").write_text("database:\n  port: 5432\n")
    report = run(example("config_plan"), workdir)
    steps = by_id(report)
    assert steps["step_2b"].value == "localhost"
    assert steps["step_3"].output == "数据库主机为：localhost"
    assert any("default" in f and "localhost" in f for f in report.facts)


def test_config_plan_invalid_yaml_commits_nothing(workdir: Path) -> None:
    (workdir / "config.yaml").write_text("database: [unclosed\n")
    report = run(example("config_plan"), workdir)
    steps = by_id(report)
    assert steps["step_2a"].status == "error" and steps["step_2a"].error.code == "yaml.syntax"
    assert steps["step_2b"].status == "blocked" and "step_2a failed" in steps["step_2b"].reason
    assert steps["step_3"].status == "skipped"
    assert report.state == "failed" and report.exit_code == 1
    assert any("yaml.syntax" in f for f in report.facts)


def test_config_plan_hostile_config(workdir: Path) -> None:
    (workdir / "config.yaml").symlink_to("/etc/passwd")
    report = run(example("config_plan"), workdir)
    assert report.state == "invalid" and report.records == ()
    assert {i.code for i in report.issues} == {"plan.path_outside"}
    assert "root:" not in render_text(report)


# -- the CSV report plan ------------------------------------------------------------------


def test_csv_plan_column_present_appends_total(workdir: Path) -> None:
    csv_repo(workdir, "日期,销售额\n1,10\n2,32\n")
    (workdir / "report.txt").write_text("earlier\n")
    report = run(example("csv_report_plan"), workdir)
    steps = by_id(report)
    assert steps["step_3b"].branch == "true" and steps["step_3c"].value == "销售额"
    assert steps["step_4b"].status == "done"
    assert (workdir / "report.txt").read_text(encoding="utf-8") == "earlier\n销售额 总和：42\n"
    assert report.state == "completed"


def test_csv_plan_column_absent_asks(workdir: Path) -> None:
    csv_repo(workdir)
    report = run(example("csv_report_plan"), workdir)
    assert report.state == "needs_input" and report.exit_code == 3
    (question,) = report.questions
    assert question.status == "pending" and question.output_to == "column"
    assert question.choices == ["日期", "产品", "销量", "营收"]
    assert '"营收"' in question.question
    assert '\'销售额\' is not among ["日期", "产品", "销量", "营收"]' in report.facts
    assert not (workdir / "report.txt").exists()


def test_csv_plan_answered_appends_the_real_column(workdir: Path) -> None:
    csv_repo(workdir)
    report = run(example("csv_report_plan"), workdir, answers={"column": "营收"})
    steps = by_id(report)
    assert steps["step_3d"].status == "answered"
    assert steps["step_4a"].value == 400
    assert (workdir / "report.txt").read_text(encoding="utf-8") == "营收 总和：400\n"
    assert report.state == "completed" and report.exit_code == 0
    assert 'data/input.csv has columns ["日期", "产品", "销量", "营收"]' in report.facts
    assert "the user chose column = 营收" in report.facts


def test_csv_plan_answer_outside_choices_is_rejected(workdir: Path) -> None:
    csv_repo(workdir)
    report = run(example("csv_report_plan"), workdir, answers={"column": "sales"})
    assert report.questions[0].status == "rejected"
    assert report.state == "needs_input"
    assert not (workdir / "report.txt").exists()


def test_csv_plan_interactive_prompt(workdir: Path) -> None:
    csv_repo(workdir)
    asked: list[Any] = []

    def prompt(question: str, choices: list[Any] | None) -> Any:
        asked.append((question, choices))
        return "销量"

    report = run(example("csv_report_plan"), workdir, prompt=prompt)
    assert asked and asked[0][1] == ["日期", "产品", "销量", "营收"]
    assert (workdir / "report.txt").read_text(encoding="utf-8") == "销量 总和：9\n"
    assert report.questions[0].source == "prompt"


def test_csv_plan_csv_missing(workdir: Path) -> None:
    report = run(example("csv_report_plan"), workdir)
    steps = by_id(report)
    assert steps["step_3"].branch == "false"
    assert steps["step_4"].branch == "false" and steps["step_4"].value is None
    assert report.state == "failed" and "data/input.csv does not exist" in report.facts


def test_csv_plan_report_not_writable(workdir: Path) -> None:
    csv_repo(workdir)
    (workdir / "report.txt").mkdir()
    report = run(example("csv_report_plan"), workdir, answers={"column": "营收"})
    steps = by_id(report)
    assert steps["step_2"].value is False
    assert steps["step_4b"].status == "skipped"
    assert report.state == "failed" and "report.txt is not writable" in report.facts


# -- final actions: lint, policy, commands -------------------------------------------------


def _write_plan(path: str, guarded: bool = True) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {
            "id": "w",
            "type": "evidence_collection",
            "output_to": "ok",
            "action": {"function": "fs.writable", "args": [path]},
        },
        {
            "id": "f",
            "type": "final_action",
            "action": {"function": "file.write", "args": [path, "new\n"]},
        },
    ]
    if guarded:
        steps[1]["condition"] = {"op": "and", "vars": ["{{ok}}"]}
    return {"goal": "write", "steps": steps}


def test_commitment_lint_refuses_unguarded_write(workdir: Path) -> None:
    report = run(_write_plan("out.txt", guarded=False), workdir)
    (action,) = report.actions
    assert action.status == "refused" and "commitment lint" in (action.reason or "")
    assert not (workdir / "out.txt").exists()
    assert report.state == "failed"


def test_policy_is_asked_and_journaled(workdir: Path) -> None:
    journal = MemoryJournal()
    report = run(_write_plan("out.txt"), workdir, journal=journal)
    assert report.actions[0].status == "done"
    assert (workdir / "out.txt").read_text() == "new\n"
    kinds = [e.kind for e in journal.events()]
    assert kinds[0] == "plan" and "probe" in kinds and "decision" in kinds and kinds[-1] == "plan"
    denied = MemoryJournal()
    report = run(_write_plan(".env"), workdir, journal=denied)
    assert report.actions[0].status == "refused" and "policy" in (report.actions[0].reason or "")
    decisions = [e for e in denied.events() if e.kind == "decision"]
    assert decisions and decisions[0].payload.decision != "allow"  # type: ignore[union-attr]
    assert not (workdir / ".env").exists()


def test_no_policy_refuses_writes(workdir: Path) -> None:
    report = run(_write_plan("out.txt"), workdir, policy=None)
    assert report.actions[0].status == "refused" and "no policy" in (report.actions[0].reason or "")


def test_write_never_follows_a_symlink(workdir: Path, tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("safe")
    (workdir / "out.txt").symlink_to(target)
    report = run(_write_plan("out.txt"), workdir)
    assert report.state == "invalid"  # the validator resolves the link and refuses the plan
    (workdir / "inner.txt").write_text("inner")
    (workdir / "in.txt").symlink_to(workdir / "inner.txt")
    for name in ("out.txt", "in.txt"):  # and the writer itself never follows a link
        with pytest.raises(Failure):
            write_file(workdir, name, "x", append=True)
    assert target.read_text() == "safe" and (workdir / "inner.txt").read_text() == "inner"


def test_command_runs_on_a_scratch_copy(workdir: Path) -> None:
    (workdir / "keep.txt").write_text("original")
    plan = {
        "goal": "run",
        "steps": [
            {
                "id": "w",
                "type": "evidence_collection",
                "output_to": "sh",
                "action": {"function": "cmd.which", "args": ["cat"]},
            },
            {
                "id": "r",
                "type": "final_action",
                "condition": {"op": "exists", "vars": ["{{sh}}"]},
                "action": {"function": "command.run", "args": ["cat keep.txt"]},
            },
        ],
    }
    report = run(plan, workdir)
    (action,) = report.actions
    assert action.status == "done", action
    assert "original" in (action.output or "")
    assert (workdir / "keep.txt").read_text() == "original"


def test_command_denied_by_policy(workdir: Path) -> None:
    plan = {
        "goal": "run",
        "steps": [
            {
                "id": "w",
                "type": "evidence_collection",
                "output_to": "rm",
                "action": {"function": "cmd.which", "args": ["rm"]},
            },
            {
                "id": "r",
                "type": "final_action",
                "condition": {"op": "exists", "vars": ["{{rm}}"]},
                "action": {"function": "command.run", "args": ["rm -rf ~/"]},
            },
        ],
    }
    report = run(plan, workdir)
    assert report.actions[0].status == "refused"


# -- hostile arguments at run time, timeouts, invalid plans --------------------------------


def test_templated_escape_is_a_probe_error(workdir: Path) -> None:
    plan = {
        "goal": "escape",
        "steps": [
            {
                "id": "p",
                "type": "evidence_collection",
                "output_to": "path",
                "action": {"function": "data.value", "args": ["../../../etc/passwd"]},
            },
            {
                "id": "r",
                "type": "evidence_collection",
                "output_to": "text",
                "action": {"function": "fs.read_text", "args": ["{{path}}"]},
            },
            {
                "id": "o",
                "type": "final_action",
                "condition": {"op": "defined", "vars": ["{{text}}"]},
                "action": {"function": "output.result", "args": ["{{text}}"]},
            },
        ],
    }
    report = run(plan, workdir)
    steps = by_id(report)
    assert steps["r"].status == "error" and steps["r"].error.code == "path.outside_workspace"
    assert steps["o"].status == "skipped"


def test_a_hanging_probe_times_out(workdir: Path) -> None:
    venv = workdir / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("#!/bin/sh\nexec sleep 300\n")
    (venv / "python").chmod(0o755)
    for parent in (workdir / ".venv", venv):
        parent.chmod(0o755)
    plan = {
        "goal": "hang",
        "steps": [
            {
                "id": "i",
                "type": "evidence_collection",
                "output_to": "ok",
                "timeout": 3,
                "action": {"function": "python.importable", "args": ["json"]},
            },
            {
                "id": "o",
                "type": "final_action",
                "action": {"function": "output.result", "args": ["done"]},
            },
        ],
    }
    report = run(plan, workdir)
    step = by_id(report)["i"]
    assert step.status == "error" and step.error.code in ("python.timeout", "probe.timeout")


def test_invalid_plan_runs_nothing(workdir: Path) -> None:
    journal = MemoryJournal()
    plan = {
        "goal": "bad",
        "steps": [
            {
                "id": "a",
                "type": "final_action",
                "action": {"function": "file.write", "args": ["x.txt", "{{nope}}"]},
            },
        ],
    }
    report = run(plan, workdir, journal=journal)
    assert report.state == "invalid" and report.exit_code == 1 and report.records == ()
    assert report.issues and report.issues[0].code == "plan.undefined_variable"
    assert not (workdir / "x.txt").exists()
    assert [e.kind for e in journal.events()] == ["plan", "plan"]


# -- concurrency and the runner seam --------------------------------------------------------


class BarrierRunner:
    """Each probe waits until ``parties`` probes are running at once: it only passes in parallel."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=60)
        self.inner = InProcessRunner()

    @property
    def name(self) -> str:
        return "barrier"

    def run(self, request: dict[str, Any], *, workspace: Path, timeout: float) -> ProbeResult:
        self.barrier.wait()
        return self.inner.run(request, workspace=workspace, timeout=timeout)


def test_independent_probes_run_concurrently(workdir: Path) -> None:
    steps = [
        {
            "id": f"s{i}",
            "type": "evidence_collection",
            "output_to": f"v{i}",
            "action": {"function": "fs.exists", "args": [f"f{i}"]},
        }
        for i in range(8)
    ]
    steps.append(
        {
            "id": "out",
            "type": "final_action",
            "action": {"function": "output.result", "args": ["ok"]},
        }
    )
    runner: ProbeRunner = BarrierRunner(8)
    report = run_plan(
        {"goal": "parallel", "steps": steps}, workspace=workdir, runner=runner, config=_limits(9)
    )
    assert report.state == "completed"
    assert all(p.status == "ok" for p in report.probes)


def _limits(steps: int) -> Any:
    from keel.config import KeelConfig, LimitsConfig

    return KeelConfig(limits=LimitsConfig(plan_max_steps=steps))


def test_dependent_probe_waits_for_its_input(workdir: Path) -> None:
    (workdir / "c.json").write_text('{"a": {"b": 7}}')
    plan = {
        "goal": "chain",
        "steps": [
            {
                "id": "p",
                "type": "evidence_collection",
                "output_to": "doc",
                "action": {"function": "parse.json", "args": ["c.json"]},
            },
            {
                "id": "q",
                "type": "evidence_collection",
                "output_to": "b",
                "action": {"function": "data.get_nested_value", "args": ["{{doc}}", "a.b"]},
            },
            {
                "id": "o",
                "type": "final_action",
                "condition": {"op": "gt", "vars": ["{{b}}", 5]},
                "action": {"function": "output.result", "args": ["b={{b}} doc={{doc.a}}"]},
            },
        ],
    }
    report = run_plan(plan, workspace=workdir, runner=InProcessRunner())
    assert report.actions[0].output == 'b=7 doc={"b": 7}'
    assert "7 gt 5 is true" in report.facts


class Unsafe(InProcessRunner):
    @property
    def name(self) -> str:
        return "none-unsafe"


def test_no_sandbox_without_unsafe_is_refused(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keel.core.errors import SandboxError
    from keel.plan import _run

    def none(config: Any, *, unsafe: bool = False) -> Any:
        if not unsafe:
            raise SandboxError("no sandbox", code="sandbox.unavailable")
        return Unsafe(), None

    monkeypatch.setattr(_run, "sandboxed_runner", none)
    with pytest.raises(SandboxError):
        run_plan(example("config_plan"), workspace=workdir)
    report = run_plan(example("config_plan"), workspace=workdir, unsafe=True)
    assert report.unsafe and report.state == "completed"


def test_policy_errors_fail_closed(workdir: Path) -> None:
    class Broken:
        def check_path(self, path: str, op: Any) -> Decision:
            raise RuntimeError("boom")

        def check_command(self, line: str) -> Decision:
            raise RuntimeError("boom")

    report = run(_write_plan("out.txt"), workdir, policy=Broken())
    assert report.actions[0].status == "refused" and "internal_error" in (
        report.actions[0].reason or ""
    )
    assert not (workdir / "out.txt").exists()


def test_sandbox_sees_workspace_read_only(workdir: Path) -> None:
    box = sandbox()
    if box.name != "bwrap":
        pytest.skip("the mount layout is bwrap's")
    (workdir / "a.txt").write_text("x")
    report = run(
        {
            "goal": "ls",
            "steps": [
                {
                    "id": "l",
                    "type": "evidence_collection",
                    "output_to": "ls",
                    "action": {"function": "fs.list_dir", "args": ["."]},
                },
                {
                    "id": "o",
                    "type": "final_action",
                    "condition": {"op": "contains", "vars": ["{{ls}}", "a.txt"]},
                    "action": {"function": "output.result", "args": ["{{ls}}"]},
                },
            ],
        },
        workdir,
        box=box,
    )
    assert report.state == "completed" and os.listdir(workdir) == ["a.txt"]


BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_hostile_config_files_through_the_sandbox(workdir: Path) -> None:
    cases = {
        "bomb": ("a: &a [x, x, x, x, x, x, x, x, x]\n" + BOMB, "parse.too_large"),
        "deep": ("[" * 20_000 + "]" * 20_000, None),
        "latin": (b"database:\n  host: caf\xe9\n", "encoding.invalid"),
        "fifo": (None, "fs.not_regular"),
    }
    for name, (content, code) in cases.items():
        config = workdir / "config.yaml"
        if config.exists() or config.is_symlink():
            config.unlink()
        if content is None:
            os.mkfifo(config)
            config.chmod(0o644)
        elif isinstance(content, bytes):
            config.write_bytes(content)
        else:
            config.write_text(content)
        report = run(example("config_plan"), workdir)
        step = by_id(report)["step_2a"]
        assert step.status == "error", name
        assert code is None or step.error.code == code, (name, step.error)
        assert report.state == "failed", name


class CountingSandbox:
    """The real sandbox, counting how many times a runner is started in it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.starts = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def run_python(self, *args: Any, **kwargs: Any) -> Any:
        self.starts += 1
        return self.inner.run_python(*args, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.run(*args, **kwargs)


def test_ready_probes_share_one_sandbox_start(workdir: Path) -> None:
    box = CountingSandbox(sandbox())
    for i in range(8):
        (workdir / f"f{i}.csv").write_text(f"a{i},b\n1,2\n")
    steps: list[dict[str, Any]] = [
        {
            "id": f"s{i}",
            "type": "evidence_collection",
            "output_to": f"h{i}",
            "action": {"function": "parse.csv_headers", "args": [f"f{i}.csv"]},
        }
        for i in range(8)
    ]
    steps.append(
        {
            "id": "o",
            "type": "final_action",
            "action": {"function": "output.result", "args": ["{{h7}}"]},
        }
    )
    report = run_plan(
        {"goal": "batch", "steps": steps},
        workspace=workdir,
        runner=SandboxedRunner(box),
        config=_limits(9),
    )
    assert box.starts == 1
    assert [p.value for p in report.probes] == [[f"a{i}", "b"] for i in range(8)]
    assert report.actions[0].output == '["a7", "b"]'


def test_a_hanging_probe_does_not_hold_its_batch(workdir: Path) -> None:
    venv = workdir / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("#!/bin/sh\nexec sleep 300\n")
    for path in (workdir / ".venv", venv, venv / "python"):
        path.chmod(0o755)
    (workdir / "x").write_text("x")
    plan = {
        "goal": "hang",
        "steps": [
            {
                "id": "i",
                "type": "evidence_collection",
                "output_to": "ok",
                "timeout": 3,
                "action": {"function": "python.importable", "args": ["json"]},
            },
            {
                "id": "e",
                "type": "evidence_collection",
                "output_to": "x",
                "action": {"function": "fs.exists", "args": ["x"]},
            },
            {
                "id": "o",
                "type": "final_action",
                "action": {"function": "output.result", "args": ["{{x}}"]},
            },
        ],
    }
    report = run(plan, workdir)
    steps = by_id(report)
    assert steps["e"].value is True
    assert steps["i"].status == "error"
    assert steps["i"].error.code in ("python.timeout", "probe.timeout")
    assert report.state == "completed"


def test_emergency_stop_refuses_writes(workdir: Path) -> None:
    from keel.core.stop import set_stop

    set_stop(workdir, "incident")
    report = run(_write_plan("out.txt"), workdir)
    assert report.actions[0].status == "refused" and "emergency stop" in (
        report.actions[0].reason or ""
    )
    assert not (workdir / "out.txt").exists()


PATCH = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def _patch_plan(patch: str) -> dict[str, Any]:
    return {
        "goal": "patch",
        "steps": [
            {
                "id": "w",
                "type": "evidence_collection",
                "output_to": "ok",
                "action": {"function": "fs.writable", "args": ["app.py"]},
            },
            {
                "id": "p",
                "type": "final_action",
                "condition": {"op": "and", "vars": ["{{ok}}"]},
                "action": {"function": "patch.apply", "args": [patch]},
            },
        ],
    }


def test_patch_apply_final_action_is_atomic_and_policy_checked(workdir: Path) -> None:
    (workdir / "app.py").write_text("x = 1\n")
    report = run(_patch_plan(PATCH), workdir)
    assert report.actions[0].status == "done", report.actions[0]
    assert (workdir / "app.py").read_text() == "x = 2\n"
    stale = run(_patch_plan(PATCH), workdir)  # the context no longer matches
    assert stale.actions[0].status == "failed"
    assert (workdir / "app.py").read_text() == "x = 2\n"
    (workdir / ".env").write_text("A=1\n")
    secret = PATCH.replace("app.py", ".env").replace("x = 1", "A=1").replace("x = 2", "A=2")
    refused = run(_patch_plan(secret), workdir)
    assert refused.actions[0].status == "refused"
    assert (workdir / ".env").read_text() == "A=1\n"
