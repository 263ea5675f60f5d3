"""Demo section: a model drafts the plan, keel's validator sends it back once, then it runs.

The model is keel's scripted one (``script:FILE``, offline and replayable): its first draft
calls a probe that does not exist and tests a variable written without braces; keel's
validator finds both and sends its messages back verbatim; the second draft validates, is
run with its probes in the sandbox, and reports the database host. Every model call is in the
journal, with the templates it was built from and its request hash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from keel.core.errors import DemoFailed, SandboxError
from keel.core.events import DataPayload
from keel.core.schema import KeelConfig
from keel.journal import open_journal
from keel.models import client_for, open_model
from keel.plan import default_policy, run_plan, sandboxed_runner
from keel.plan.draft import DraftRound, draft_plan

TASK = "report the database host in config.yaml"
SESSION = "demo-draft"


def _draft(condition: str, probe: str) -> dict[str, Any]:
    return {
        "goal": "report the database host",
        "steps": [
            {"id": "look", "type": "evidence_collection",
             "action": {"function": probe, "args": ["config.yaml"]}, "output_to": "has_config"},
            {"id": "branch", "type": "conditional",
             "condition": {"op": "and", "vars": [condition]},
             "true_branch": [
                 {"id": "read", "type": "evidence_collection",
                  "action": {"function": "parse.yaml", "args": ["config.yaml"]},
                  "output_to": "config"},
                 {"id": "say", "type": "final_action",
                  "action": {"function": "output.result",
                             "args": ["database host: {{config.database.host}}"]}}],
             "false_branch": [
                 {"id": "none", "type": "final_action",
                  "action": {"function": "output.result", "args": ["config.yaml is missing"]}}]},
        ],
    }  # fmt: skip


SCRIPT = [
    {"json": _draft("has_config", "file.check_exists")},  # two mistakes a model makes
    {"tool_calls": [{"name": "submit_plan", "arguments": _draft("{{has_config}}", "fs.exists")}]},
]


def run(console: Console, base: Path) -> None:
    """Draft a plan with the scripted model, show the feedback round, run the accepted plan."""
    repo = base / "draft-repo"
    repo.mkdir(mode=0o755)
    (repo / "config.yaml").write_text("database:\n  host: db.internal\n", encoding="utf-8")
    script = base / "model-script.json"
    script.write_text(json.dumps(SCRIPT, indent=1), encoding="utf-8")
    config = KeelConfig()
    model = open_model(f"script:{script.name}", config.model, workspace=base)
    console.print(f"task: [bold]{TASK}[/]   model: {model.info.name} (scripted, offline)")
    with open_journal(repo) as journal:
        client = client_for(model, config.model, session_id=SESSION, journal=journal)
        result = draft_plan(TASK, client=client, config=config, workspace=repo,
                            on_round=lambda r: _show_round(console, r))  # fmt: skip
        first = result.rounds[0].issues
        codes = {i.code for i in first}
        if len(result.rounds) != 2 or not result.ok or "plan.unknown_function" not in codes:
            raise DemoFailed(f"draft: expected one round of feedback, got {result.to_dict()}")
        if not any(".condition" in i.path for i in first):
            raise DemoFailed("draft: the bare variable in the condition was not reported")
        sent_back = model.calls[1].messages[-1].content  # type: ignore[attr-defined]
        if not all(i.describe() in sent_back for i in first):
            raise DemoFailed("draft: the validator's messages did not go back verbatim")
        report = _run(result.plan, repo, config, journal)
        calls = [e for e in journal.events(session_id=SESSION) if e.kind == "model.request"]
    done = [a for a in report.actions if a.status == "done"]
    console.print(f"\nrun: {report.state} (exit {report.exit_code})", markup=False)
    for action in done:
        console.print(f"  [{action.step_id}] {action.function}: {action.output}", markup=False)
    if report.state != "completed" or [a.output for a in done] != ["database host: db.internal"]:
        raise DemoFailed(f"draft: the accepted plan did not run as expected: {report.state}")
    console.print(f"\njournal: {len(calls)} model call(s) in session {SESSION}")
    for event in calls:
        data = event.payload.data if isinstance(event.payload, DataPayload) else {}
        used = ", ".join(f"{t['id']}@{t['version']}" for t in data.get("templates", []))
        console.print(f"  {str(data.get('request_hash'))[:19]}  templates {used}", markup=False)


def _show_round(console: Console, done: DraftRound) -> None:
    verdict = "valid" if not done.issues else f"{len(done.issues)} problem(s), sent back:"
    console.print(f"\ndraft {done.number} (as {done.source}): {verdict}", markup=False)
    for issue in done.issues:
        console.print(f"  {issue.describe()}", markup=False)


def _run(plan: Any, repo: Path, config: KeelConfig, journal: Any) -> Any:
    try:
        runner, sandbox = sandboxed_runner(config)
        unsafe = False
    except SandboxError:
        runner, sandbox = sandboxed_runner(config, unsafe=True)
        unsafe = True
    return run_plan(
        plan, workspace=repo, config=config, runner=runner, exec_sandbox=sandbox,
        policy=default_policy(config, repo), journal=journal, unsafe=unsafe, session_id=SESSION,
    )  # fmt: skip
