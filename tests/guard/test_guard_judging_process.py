"""``SubprocessJudging``: the judge process's command line, its answers, inline and background.

The process runner is the seam (a double here; ``tests/judge/test_judge_live_hooks.py`` runs the
real process): what the judge prints becomes a landed verdict or a note to journal; a timeout
or too little time is a skipped judgement; in background one judgement runs per session and the
newest request waits for it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from keel.core.judged import Judged
from keel.guard.judging import MIN_INLINE, JudgeJob, SubprocessJudging

VERDICT = Judged("gaming", 0.9, (2,), "Restore the test.", 2, "sha256:w").to_dict()


class Runner:
    """Answers each run with the next scripted reply; records argv, environment and timeout."""

    def __init__(self, *replies: Any, gate: threading.Event | None = None) -> None:
        self.replies = list(replies)
        self.runs: list[tuple[list[str], dict[str, str], float]] = []
        self.gate = gate

    def __call__(
        self, argv: list[str], environ: Mapping[str, str], timeout: float
    ) -> tuple[int, str, str]:
        self.runs.append((argv, dict(environ), timeout))
        if self.gate is not None:
            self.gate.wait(30)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply


def answer(
    judged: dict[str, Any] | None = VERDICT, *, journaled: bool = True
) -> tuple[int, str, str]:
    body = {"status": "deliverable" if judged else "clear", "journaled": journaled,
            "judged": judged, "message": "could not journal"}  # fmt: skip
    return 0, "some noise\n" + json.dumps(body) + "\n", ""


def job(step: int = 2, **kw: Any) -> JudgeJob:
    kw.setdefault("environ", {"OPENAI_API_KEY": "k"})
    return JudgeJob("s1", "claude", step, ("finding", "every_n_steps"), **kw)


def test_the_command_line_names_the_session_step_triggers_and_model() -> None:
    runner = Runner(answer())
    judging = SubprocessJudging("/w", background=False, model="replay:s@/r", python="/py",
                                runner=runner)  # fmt: skip
    judging.schedule(job(finishing=True, timeout=9.0))
    ((argv, env, timeout),) = runner.runs
    assert argv[:2] == ["/py", "-I"] and argv[2].endswith("_launch.py")
    assert argv[3:] == ["judge", "/w", "--session", "s1", "--agent", "claude", "--step", "2",
                        "--trigger", "finding", "--trigger", "every_n_steps", "--finish",
                        "--model", "replay:s@/r"]  # fmt: skip
    assert env == {"OPENAI_API_KEY": "k"} and timeout == 9.0


def test_inline_a_deliverable_verdict_lands_once() -> None:
    judging = SubprocessJudging("/w", background=False, runner=Runner(answer()))
    judging.schedule(job())
    judged, notes = judging.take("s1")
    assert [j.to_dict() for j in judged] == [VERDICT] and notes == ()
    assert judging.take("s1") == ((), ())
    assert judging.take("other") == ((), ())


def test_inline_a_clear_verdict_lands_nothing_and_needs_no_note() -> None:
    judging = SubprocessJudging("/w", background=False, runner=Runner(answer(None)))
    judging.schedule(job())
    assert judging.take("s1") == ((), ())


def test_a_process_that_could_not_journal_leaves_a_note() -> None:
    runner = Runner(answer(None, journaled=False))
    judging = SubprocessJudging("/w", background=False, runner=runner)
    judging.schedule(job())
    (), (note,) = judging.take("s1")
    assert note == {"status": "error", "step": 2, "triggers": ["finding", "every_n_steps"],
                    "error": "judge.process", "message": "could not journal"}  # fmt: skip


def test_a_process_without_an_answer_leaves_a_note_with_its_last_words() -> None:
    runner = Runner((1, "", "Traceback\nImportError: no pydantic\n"), (0, "{not json\n", ""))
    judging = SubprocessJudging("/w", background=False, runner=runner)
    judging.schedule(job())
    judging.schedule(job(3))
    (), notes = judging.take("s1")
    assert [n["message"] for n in notes] == [
        "the judge process ended with 1: ImportError: no pydantic",
        "the judge process ended with 0: no output",
    ]


def test_a_malformed_verdict_is_a_note_not_a_landing() -> None:
    bad = dict(VERDICT, category="laziness")
    judging = SubprocessJudging("/w", background=False, runner=Runner(answer(bad)))
    judging.schedule(job())
    (), (note,) = judging.take("s1")
    assert note["message"] == "the judge process answered a malformed verdict"


def test_inline_a_timeout_is_a_skipped_judgement() -> None:
    runner = Runner(TimeoutError("slow"), OSError("no python"))
    judging = SubprocessJudging("/w", background=False, runner=runner)
    judging.schedule(job(timeout=4.0))
    judging.schedule(job(3))
    (), (skipped, failed) = judging.take("s1")
    assert skipped["status"] == "skipped" and "within 4.0 s" in skipped["reason"]
    assert failed["status"] == "error" and "could not start: no python" in failed["message"]


def test_inline_the_deadline_bounds_the_run_and_too_little_time_skips_it() -> None:
    runner = Runner(answer())
    judging = SubprocessJudging("/w", background=False, runner=runner)
    now = time.monotonic()
    judging.schedule(job(timeout=60.0), deadline_at=now + 5.0)
    assert 4.0 < runner.runs[0][2] <= 5.0 - 0.3  # the margin left to commit
    judging.schedule(job(3), deadline_at=time.monotonic() + MIN_INLINE)
    assert len(runner.runs) == 1
    judged, (note,) = judging.take("s1")
    assert len(judged) == 1 and note["status"] == "skipped" and "deadline" in note["reason"]


def test_background_returns_at_once_and_take_can_wait_for_the_verdict() -> None:
    gate = threading.Event()
    judging = SubprocessJudging("/w", background=True, runner=Runner(answer(), gate=gate))
    judging.schedule(job())
    assert judging.active and judging.take("s1") == ((), ())  # still running
    gate.set()
    judged, _ = judging.take("s1", wait_until=time.monotonic() + 30)
    assert len(judged) == 1 and not judging.active


def test_background_one_judgement_per_session_and_the_newest_waits() -> None:
    gate = threading.Event()
    runner = Runner(answer(), answer(dict(VERDICT, step=4)), gate=gate)
    judging = SubprocessJudging("/w", background=True, settle=True, runner=runner)
    judging.schedule(job(2))
    judging.schedule(job(3))  # replaced by the next one while the first runs
    judging.schedule(job(4))
    gate.set()
    judged, _ = judging.take("s1")  # settle: waits for both
    assert [j.step for j in judged] == [2, 4]
    assert [argv[argv.index("--step") + 1] for argv, _, _ in runner.runs] == ["2", "4"]
    assert not judging.active


def test_background_take_stops_waiting_at_its_instant() -> None:
    gate = threading.Event()
    judging = SubprocessJudging("/w", background=True, runner=Runner(answer(), gate=gate))
    judging.schedule(job())
    assert judging.take("s1", wait_until=time.monotonic() + 0.05) == ((), ())
    gate.set()
    assert len(judging.take("s1", wait_until=time.monotonic() + 30)[0]) == 1
