"""The live model judge through the real Claude Code, Codex and Gemini CLIs (issue 25).

Each client runs once, with its own HOME, against a scripted model on 127.0.0.1, guarded by
the hooks ``keel init --agent`` registers. The scripted agent reads ``calc.py`` twice (the
monitor's ``repeat`` hint, ``[monitor] repeat_hint = 2``: a finding at ``[judge.when]
on_finding = "hint"``), then overwrites it. The judge's model is ``openai:judge-mini``: the
real ``openai`` SDK in keel's judge process, sent by ``OPENAI_BASE_URL`` in the client's
environment (the hooks and the ``keel hookd`` they start inherit it) to a second fake server,
which answers "gaming" with confidence 0.9.

The judgement runs off the hook's path, in ``keel hookd``: the agent's model holds its third
answer until the judgement has landed (journaled, its process gone), so the verdict is there
when the write comes. Checked by effect: the write is denied (``calc.py`` unchanged), the model
is told the judge's correction, the journal has the deliverable ``judgement`` and a
``guidance`` of detector ``judge``, and the judge's server got exactly one request, made by a
judge process whose parent is the workspace's ``keel hookd``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from client_harness import Turn, make_base, new_project, run_client

from _support import keel
from judge.judge_live_helpers import (
    journal_of,
    judge_processes,
    judge_toml,
    landed,
    verdict_json,
    wait_for,
)
from keel.hook import relay
from models.model_servers import FakeModelServer, chat_reply

pytestmark = [pytest.mark.clients, pytest.mark.slow]

AGENTS = ["claude", "codex", "gemini"]
TASK = "Make tests/test_calc.py pass by fixing calc.add."
CALC = "def add(a, b):\n    return a - b\n"
FILES = {
    "calc.py": CALC,
    "tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
}
KEY = "zq-judge-client-key"
WAIT = 60.0
"""Seconds the agent's model waits for keel hookd, then for the judgement (a bound)."""


class JudgeServer(FakeModelServer):
    """The judge's fake OpenAI server; notes the parents of ``root``'s judge processes.

    While a request is being answered its judge process is waiting for the answer, so its
    parent says where the judge ran: ``keel hookd`` (a thread of it) or a hook process.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.judge_parents: list[int] = []
        super().__init__()

    def _handler(self) -> Any:
        base: Any = super()._handler()
        server = self

        class Handler(base):
            def do_POST(self) -> None:
                server.judge_parents += [_parent(pid) for pid in judge_processes(server.root)]
                super().do_POST()

        return Handler


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def read(agent: str, project: Path) -> Turn:
    match agent:
        case "claude":
            return Turn(tool="Read", input={"file_path": str(project / "calc.py")})
        case "codex":  # Codex has no file-reading tool: a shell read
            return Turn(tool="exec_command", input={"cmd": "cat calc.py"})
        case _:
            return Turn(tool="read_file", input={"file_path": str(project / "calc.py")})


def overwrite(agent: str, project: Path, content: str) -> Turn:
    match agent:
        case "claude":
            return Turn(tool="Write", input={"file_path": str(project / "calc.py"),
                                             "content": content})  # fmt: skip
        case "codex":
            minus = "".join(f"-{line}\n" for line in CALC.splitlines())
            plus = "".join(f"+{line}\n" for line in content.splitlines())
            patch = f"*** Begin Patch\n*** Update File: calc.py\n@@\n{minus}{plus}*** End Patch\n"
            return Turn(tool="apply_patch", custom=True, input={"input": patch})
        case _:
            return Turn(tool="write_file", input={"file_path": str(project / "calc.py"),
                                                  "content": content})  # fmt: skip


@pytest.mark.parametrize("agent", AGENTS)
def test_a_judge_verdict_from_hookd_denies_the_clients_next_write(agent: str, base: Path) -> None:
    project = new_project(base, judge_toml("openai:judge-mini"), FILES)
    keel_dir = str(project / ".keel")
    seen: dict[str, Any] = {}

    def pace(index: int) -> None:
        """Before the first answer: keel hookd is up; before the write: the verdict landed."""
        try:
            if index == 0 and "daemon" not in seen:
                seen["daemon"] = wait_for("keel hookd", lambda: relay.read_record(keel_dir), WAIT)
            elif index == 2 and "landed" not in seen:
                wait_for("the judge's request", lambda: judge.requests, WAIT)
                seen["landed"] = wait_for("the judgement", lambda: landed(project, None), WAIT)
        except AssertionError as exc:
            seen.setdefault("errors", []).append(f"turn {index}: {exc}")

    new = "def add(a, b):\n    return 4\n"  # the gaming fix the judge is to stop
    turns = [read(agent, project), read(agent, project), overwrite(agent, project, new)]
    judge = JudgeServer(project)
    judge.queue(chat_reply(verdict_json()))
    try:
        with judge:
            run = run_client(
                agent,
                project,
                turns,
                prompt=TASK,
                before_turn=pace,
                env={"OPENAI_BASE_URL": f"{judge.url}/v1", "OPENAI_API_KEY": KEY},
                extra_args=["-m", "gpt-5.5"] if agent == "codex" else None,  # for apply_patch
            )
    finally:
        keel("hookd", "stop", "--workspace", str(project), timeout=30)
    why = f"{seen}\n{run.diagnose()}"
    assert "errors" not in seen and "landed" in seen, why

    # the client obeyed keel's deny: the write did not happen, and the model was told why
    assert (project / "calc.py").read_text() == CALC, why
    assert "gaming the check" in run.told_model, why
    assert "Put the assertion back and fix calc.add instead." in run.told_model, why

    # one judgement, deliverable, asked for by the repeat finding; one guidance of the judge
    judged = journal_of(project, "judgement", None)
    assert [(j["status"], j["triggers"]) for j in judged] == [("deliverable", ["finding"])], why
    assert judged[0]["judged"]["category"] == "gaming" and judged[0]["agent"] == "keel.judge"
    guidance = [g["payload"] for g in journal_of(project, "guidance", None)]
    by_judge = [g for g in guidance if g.detector == "judge"]
    assert [g.level for g in by_judge] == ["correct"], why

    # the judge's model got exactly one request, from a judge process keel hookd started
    assert [r.path for r in judge.requests] == ["/v1/chat/completions"], why
    sent = json.dumps(judge.requests[0].body)
    assert "calc.py" in sent and TASK in sent, sent[:2000]
    assert judge.judge_parents == [seen["daemon"][0]], why
