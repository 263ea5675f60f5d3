"""``keel run`` against a fake Chat Completions server, through the real openai SDK."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent_helpers import (
    REPORT,
    data_of,
    headers_plan,
    replace_patch,
    run_json,
    sales_workspace,
    session_events,
)
from fake_chat import FakeChat, last_user, tool_texts

from _support import keel

TASK = "report.py must print the total of the sales column of data/sales.csv"


def test_premature_apply_patch_is_refused_and_nothing_changes(workdir: Path) -> None:
    root = sales_workspace(workdir, gates=False)
    before = (root / "report.py").read_bytes()
    patch = replace_patch("report.py", '"sales"', '"revenue"', REPORT)
    with FakeChat(
        [[("apply_patch", {"patch": patch})], [("finish", {"summary": "gave up"})]]
    ) as fake:
        code, result, _ = run_json(root, fake.url, TASK)
    assert (root / "report.py").read_bytes() == before
    refusal = tool_texts(fake.requests[1])[0]
    assert "agent.premature_commitment" in refusal and "run_plan" in refusal
    assert "nothing was changed" in refusal
    decisions = session_events(root, result["session_id"], "decision")
    rules = [getattr(e.payload, "rule", None) for e in decisions]
    assert "agent.premature_commitment" in rules
    assert code == 0 and result["files_changed"] == []


def test_failed_condition_then_corrected_plan_patch_gate_and_fix(workdir: Path) -> None:
    root = sales_workspace(workdir)
    wrong = replace_patch("report.py", '"sales"', '"Revenue"', REPORT)
    fixed = REPORT.replace('"sales"', '"Revenue"')
    fix = replace_patch("report.py", '"Revenue"', '"revenue"', fixed)
    turns = [
        [("run_plan", {"plan": headers_plan("sales")})],
        [("run_plan", {"plan": headers_plan("revenue")})],
        [("apply_patch", {"patch": wrong})],
        [("finish", {"summary": "report uses the revenue column"})],
        [("apply_patch", {"patch": fix})],
        [("finish", {"summary": "report uses the revenue column"})],
    ]
    with FakeChat(turns) as fake:
        code, result, err = run_json(root, fake.url, TASK)
    assert code == 0, (result, err)
    # the evidence reached the next request: in the plan's result and in the state message
    assert '\'sales\' is not among ["region", "revenue"]' in tool_texts(fake.requests[1])[0]
    assert "Phase: plan." in last_user(fake.requests[1])
    assert "'sales' is not among" in last_user(fake.requests[1])
    assert "Phase: implement." in last_user(fake.requests[2])
    refused = tool_texts(fake.requests[4])[-1]
    assert "finish refused" in refused and "report.py printed ''" in refused
    assert "Phase: implement." in last_user(fake.requests[4])
    assert len(fake.requests) == 6
    assert '"revenue"' in (root / "report.py").read_text()
    assert result["outcome"] == "finished"
    assert result["gates"] == [{"command": "python3 check.py", "passed": True, "exit_code": 0}]
    assert result["files_changed"] == ["report.py"]
    moves = [(p["from"], p["to"]) for p in result["phases"]]
    assert moves == [
        ("understand", "plan"),
        ("plan", "implement"),
        ("implement", "verify"),
        ("verify", "implement"),
        ("implement", "verify"),
        ("verify", "done"),
    ]
    journaled = [data_of(e) for e in session_events(root, result["session_id"], "plan")]
    assert [(d["from"], d["to"]) for d in journaled if d.get("event") == "agent.phase"] == moves
    # the pinned constraints are in the same place of every request
    for body in fake.requests:
        assert "Never change the data files." in body["messages"][1]["content"]


def test_ask_user_non_interactive_exits_3_then_resume_finishes(workdir: Path) -> None:
    root = sales_workspace(workdir, gates=False)
    turns = [
        [("ask_user", {"question": "Which column holds the sales?"})],
        [("finish", {"summary": "told"})],
    ]
    with FakeChat(turns) as fake:
        code, result, _ = run_json(root, fake.url, TASK)
        assert code == 3
        assert result["outcome"] == "needs_input"
        assert result["question"] == "Which column holds the sales?"
        assert len(fake.requests) == 1
        done = keel(
            "run",
            "--resume",
            result["session_id"],
            "--answer",
            "revenue",
            "--base-url",
            fake.url,
            "--json",
            "--non-interactive",
            workspace=root,
        )
    assert done.returncode == 0, done.stderr
    assert len(fake.requests) == 2
    assert tool_texts(fake.requests[1]) == ["The user answered: revenue\n"]
    answers = [data_of(e) for e in session_events(root, result["session_id"], "prompt")]
    assert {"event": "agent.answer", "answer": "revenue"} in answers


def test_identical_call_loop_is_cut_by_guidance(workdir: Path) -> None:
    root = sales_workspace(workdir, gates=False)
    same = [("read_file", {"path": "data/sales.csv"})]
    with FakeChat([same] * 30) as fake:
        code, result, _ = run_json(root, fake.url, TASK)
    assert code == 1
    assert result["outcome"] == "stopped"
    assert len(fake.requests) < 30
    denied = [t for body in fake.requests for t in tool_texts(body) if "[monitor." in t]
    assert denied, "the monitor never denied the repeated call"
    assert any(
        "guidance" in last_user(body).lower() and "monitor" not in last_user(body)
        for body in fake.requests
    )


def test_replay_identical_with_the_server_down_then_diverges_on_a_changed_file(
    workdir: Path,
) -> None:
    root = sales_workspace(workdir)
    patch = replace_patch("report.py", '"sales"', '"revenue"', REPORT)
    turns = [
        [("read_file", {"path": "report.py"})],
        [("run_plan", {"plan": headers_plan("revenue")})],
        [("apply_patch", {"patch": patch})],
        [("finish", {"summary": "done"})],
    ]
    fake = FakeChat(turns).__enter__()
    code, result, err = run_json(root, fake.url, TASK)
    fake.stop()
    assert code == 0, (result, err)
    session = result["session_id"]
    same = keel("replay", session, workspace=root)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.strip() == "identical: 4 model calls, 4 tool calls"
    assert len(fake.requests) == 4  # nothing more reached the (stopped) server
    changed = workdir.parent / (workdir.name + "-changed")
    shutil.copytree(root, changed, ignore=shutil.ignore_patterns(".keel"))
    changed.chmod(0o755)
    try:
        (changed / "report.py").write_text(REPORT)  # as the run found it
        (changed / "data" / "sales.csv").write_text("region,amount\nnorth,10\nsouth,5\n")
        diverged = keel("replay", session, "--on", str(changed), "--json", workspace=root)
    finally:
        shutil.rmtree(changed, ignore_errors=True)
    assert diverged.returncode == 1, diverged.stderr

    verdict = json.loads(diverged.stdout)["divergence"]
    assert verdict["step"] == 2 and verdict["phase"] == "plan"
    assert verdict["what"] == "tool result" and verdict["pointer"] == "/output"
    assert '["region", "revenue"]' in verdict["recorded"]
    assert '["region", "amount"]' in verdict["new"]
    assert (root / "data" / "sales.csv").read_text().startswith("region,revenue")
