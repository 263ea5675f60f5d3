"""A plan's final writes are checkpointed as an agent's calls are: a ``before`` checkpoint once
the policy allows the write, an ``after`` one when it is done, both in the plan's session, so
``keel diff --session plan-...`` and ``keel rollback --session plan-...`` reach them; no
checkpoint, no write.
"""

from __future__ import annotations

import json
from pathlib import Path

from plan_engine_helpers import AllowAll, _c, engine, ev, fin, records

from _support import keel, make_workspace

PATCH = """--- a/app.py
+++ b/app.py
@@ -1 +1 @@
-x = 1
+x = 2
"""


def _plan() -> dict[str, object]:
    return {
        "goal": "write a report and fix app.py",
        "steps": [
            ev("w", "fs.writable", ["report.txt"], "ok"),
            ev("a", "fs.writable", ["app.py"], "app"),
            fin("f", "file.write", ["report.txt", "plan was here\n"], _c("and", "{{ok}}")),
            fin("p", "patch.apply", [PATCH], _c("and", "{{app}}")),
        ],
    }


def test_a_plans_final_writes_can_be_diffed_and_rolled_back_by_session(workdir: Path) -> None:
    root = make_workspace(
        workdir / "ws", files={"app.py": "x = 1\n", "report.txt": "old\n"}, git=True
    )
    (workdir / "plan.json").write_text(json.dumps(_plan()))
    before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    ran = keel("plan", "run", str(workdir / "plan.json"), "--json", "--unsafe-no-sandbox",
               cwd=root)  # fmt: skip
    report = json.loads(ran.stdout)
    assert (ran.returncode, report["state"]) == (0, "completed"), ran.stderr
    session = report["session_id"]
    assert session.startswith("plan-")
    assert (root / "report.txt").read_text() == "plan was here\n"
    listed = json.loads(keel("checkpoint", "list", "--session", session, "--json", cwd=root,
                             check=True).stdout)["checkpoints"]  # fmt: skip
    assert [(c["kind"], c["tool_use_id"]) for c in listed] == [
        ("before", "f"), ("after", "f"), ("before", "p"), ("after", "p"),
    ]  # fmt: skip
    diff = keel("diff", "--session", session, "--stat", cwd=root)
    assert diff.returncode == 0, diff.stderr
    assert "modified     app.py" in diff.stdout and "modified     report.txt" in diff.stdout
    back = keel("rollback", "--session", session, cwd=root)
    assert back.returncode == 0, back.stderr
    assert "2 restored" in back.stdout
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == before


def test_a_write_is_refused_when_no_checkpoint_can_be_taken(workdir: Path) -> None:
    root = make_workspace(workdir / "ws", files={"report.txt": "old\n"})
    (root / ".keel").mkdir()
    (root / ".keel" / "checkpoints").write_text("not a repository")  # the store cannot be made
    steps = [
        ev("w", "fs.writable", ["report.txt"], "ok"),
        fin("f", "file.write", ["report.txt", "new\n"], _c("and", "{{ok}}")),
    ]
    built, sink = engine(steps, root, policy=AllowAll(), lazy_checkpoints=True)
    report = built.run()
    action = records(report)["f"]
    assert action["status"] == "refused" and report.state == "failed"
    assert "could not take a checkpoint before this action" in action["reason"]
    assert action["reason"].endswith("[internal_error]")
    assert (root / "report.txt").read_text() == "old\n"
    assert not any(e.kind == "checkpoint" for e in sink.events)
