"""Demo section: the seed article's two plans, run on a generated sample repository.

The plans are the seed's, step for step, with their text in English (``config_plan_en`` and
``csv_report_plan_en`` in ``keel.plan.examples``, next to the seed's own Chinese originals).
The config plan (``config.yaml`` / ``database.host``) runs three times: file present, file
missing, key missing so the default is used. The CSV report plan finds that the requested
column ``sales`` is absent, asks, takes the answer ``revenue`` and appends the total to
``report.txt``. Probes run in the sandbox (or, where none works, without isolation, said
loudly and journaled).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from keel.core.errors import DemoFailed, SandboxError
from keel.core.schema import KeelConfig
from keel.plan import PlanReport, SandboxedRunner, run_plan
from keel.plan.examples import load_example

CSV = (
    "date,product,units,revenue\n"
    "2024-01-01,keyboard,3,897\n"
    "2024-01-02,mouse,5,645.5\n"
    "2024-01-03,monitor,1,1299\n"
)
CONFIG_PLAN = "config_plan_en"
CSV_PLAN = "csv_report_plan_en"


def run(console: Console, base: Path) -> None:
    """Run both seed scenarios under ``base`` and print what keel found and did."""
    config = KeelConfig()
    sandbox, unsafe = _sandbox(config)
    if unsafe:
        console.print("[yellow]no sandbox works here: probes run WITHOUT isolation (journaled)[/]")
    console.print(f"probes run in: [bold]{sandbox.name}[/]")
    repo = _repo(base)
    journal = _journal(repo)
    policy = _policy(config, repo)

    def go(name: str, **kwargs: Any) -> PlanReport:
        return run_plan(
            load_example(name),  # type: ignore[arg-type]
            workspace=repo,
            config=config,
            runner=SandboxedRunner(sandbox),
            exec_sandbox=sandbox,
            policy=policy,
            journal=journal,
            unsafe=unsafe,
            **kwargs,
        )

    try:
        _config_scenarios(console, repo, go)
        _csv_scenario(console, repo, go)
    finally:
        if journal is not None:
            journal.close()


def _config_scenarios(console: Console, repo: Path, go: Any) -> None:
    config_file = repo / "config.yaml"
    cases = (
        (
            "config.yaml present",
            "database:\n  host: db.internal\n  port: 5432\n",
            "Database host: db.internal",
        ),
        ("config.yaml missing", None, "config.yaml not found. Create a template?"),
        (
            "database.host missing: the default is used",
            "database:\n  port: 5432\n",
            "Database host: localhost",
        ),
    )
    for title, text, expected in cases:
        if text is None:
            config_file.unlink(missing_ok=True)
        else:
            config_file.write_text(text, encoding="utf-8")
        report = go(CONFIG_PLAN)
        done = [a for a in report.actions if a.status == "done"]
        console.print(f"\n[bold]config plan[/] — {title}")
        _show(console, report)
        if report.state != "completed" or not done or done[0].output != expected:
            raise DemoFailed(f"config plan ({title}): expected {expected!r}, got {report.state}")


def _csv_scenario(console: Console, repo: Path, go: Any) -> None:
    console.print("\n[bold]CSV report plan[/] — the requested column 'sales' is not in the file")
    first = go(CSV_PLAN)
    _show(console, first)
    if first.state != "needs_input" or (repo / "report.txt").exists():
        raise DemoFailed(f"CSV plan: expected a question and no report, got {first.state}")
    question = first.questions[0]
    console.print(f"  question for the user: {question.question}", markup=False)
    console.print("  the user answers: [bold]revenue[/]")
    second = go(CSV_PLAN, answers={question.output_to: "revenue"})
    _show(console, second)
    report_text = (repo / "report.txt").read_text(encoding="utf-8")
    console.print(f"  report.txt now holds: [bold]{escape(report_text.strip())}[/]")
    if second.state != "completed" or report_text != "revenue total: 2841.5\n":
        raise DemoFailed(f"CSV plan: expected the total in report.txt, got {report_text!r}")


def _show(console: Console, report: PlanReport) -> None:
    for branch in report.branches:
        console.print(
            f"  [{branch.step_id}] -> {branch.branch} branch: {branch.reason}", markup=False
        )
    for action in report.actions:
        detail = action.output if action.status == "done" else action.reason
        console.print(
            f"  [{action.step_id}] {action.function}: {action.status} ({detail})", markup=False
        )
    console.print("  verified facts:")
    for fact in report.facts:
        console.print(f"    - {fact}", markup=False)
    console.print(f"  state: {report.state} (exit {report.exit_code})", markup=False)


def _sandbox(config: KeelConfig) -> tuple[Any, bool]:
    from keel.sandbox import get_sandbox

    try:
        return get_sandbox(config.sandbox), False
    except SandboxError:
        return get_sandbox(config.sandbox, unsafe=True), True


def _repo(base: Path) -> Path:
    repo = base / "plans-repo"
    (repo / "data").mkdir(parents=True, mode=0o755)
    repo.chmod(0o755)
    (repo / "data").chmod(0o755)
    (repo / "data" / "input.csv").write_text(CSV, encoding="utf-8")
    return repo


def _journal(repo: Path) -> Any:
    from keel.journal import open_journal

    return open_journal(repo)


def _policy(config: KeelConfig, repo: Path) -> Any:
    from keel.plan import default_policy

    return default_policy(config, repo)
