"""Judgements off the hook's path: the model judge in a process of its own.

The guard decides *when* the model judge is asked (``[judge.when]``: a rule finding at or
above ``on_finding``, every ``every_n_steps`` calls, the finish) and hands the request to a
:class:`Judging` seam. The real one, :class:`SubprocessJudging`, runs
``python -I <keel>/_launch.py judge ROOT ...`` (``keel.judge.live``): that process builds the
window from the session's journal, asks the model through keel's model client (budgets, cache,
``model.request``/``model.response`` events), journals a ``judgement`` event and prints one
JSON line. A slow, hung or crashing model client never runs inside the process that answers
the hook, and its imports (pydantic, an SDK) never load there.

Two ways to run it:

- **background** (``keel hookd``, ``keel run``): ``schedule`` starts the process on a thread
  and returns at once; a deliverable verdict waits in memory until the guard takes it
  with the session's next call. One judgement runs per session at a time; a request made
  while one runs waits, the newest replacing an older one. ``settle`` (``keel run``): ``take``
  waits for a judgement still running (up to ``[judge] timeout_seconds``), so a run's verdicts
  arrive at the same step every time (and ``keel replay`` finds them where they were).
- **inline** (a hook process without the daemon): ``schedule`` runs the process at once but
  only within the time left before the hook's deadline; killed at it, the judgement is
  *skipped*, and the guard journals that.

Not deliverable verdicts (clear, below ``min_confidence``, a category turned off) and failed
calls are journaled by the judge process and go no further. What ``take`` returns besides the
verdicts are notes for the guard to journal: a judgement skipped or a judge process that
failed before it could journal anything itself.

Imported by the guard only when ``[judge] model`` is set.
"""

from __future__ import annotations

import json
import os
import time

from keel.core.frozen import Frozen
from keel.core.isolated import launcher_argv
from keel.core.judged import Judged

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Mapping
    from typing import Any, Protocol

    Runner = Callable[[list[str], Mapping[str, str], float], tuple[int, str, str]]
    """``(argv, environment, timeout) -> (exit code, stdout, stderr)``; TimeoutError at it."""

    class Judging(Protocol):
        """Where the guard sends judgements and collects their verdicts."""

        background: bool
        """True when ``schedule`` returns at once (else it runs the judgement itself)."""

        def schedule(self, job: JudgeJob, *, deadline_at: float | None = None) -> None:
            """Ask for a judgement of ``job``'s session (``deadline_at``: when inline stops)."""
            ...

        def take(
            self, session_id: str, *, wait_until: float | None = None
        ) -> tuple[tuple[Judged, ...], tuple[dict[str, Any], ...]]:
            """The verdicts landed for ``session_id``, and notes to journal; both once only.

            ``wait_until`` (a ``time.monotonic()`` instant): wait for a judgement still
            running until then.
            """
            ...


MARGIN = 0.3
"""Seconds an inline judgement leaves before the hook's deadline (to commit what it found)."""
MIN_INLINE = 0.5
"""An inline judgement with less time than this left is skipped without starting."""


_LEVELS = ("hint", "correct", "replan", "stop")


def due(
    when: Any, *, step: int, finding: str | None = None, finishing: bool = False
) -> tuple[str, ...]:
    """What in ``[judge.when]`` schedules a judgement now (empty: nothing does).

    Args:
        when: the triggers (``JudgeWhen``).
        step: the tool calls so far.
        finding: the highest ladder level a rule found at this step, if any.
        finishing: the agent is claiming it is done.
    """
    fired: list[str] = []
    on = when.on_finding
    if finding is not None and on != "off" and _LEVELS.index(finding) >= _LEVELS.index(on):
        fired.append("finding")
    if when.every_n_steps and step > 0 and step % when.every_n_steps == 0:
        fired.append("every_n_steps")
    if finishing and when.on_finish:
        fired.append("finish")
    return tuple(fired)


class JudgeJob(Frozen):
    """One judgement to ask for: the session, the step, why, and the caller's environment."""

    __slots__ = ("agent", "environ", "finishing", "session_id", "step", "timeout", "triggers")
    session_id: str
    agent: str
    step: int
    triggers: tuple[str, ...]
    """``finding``, ``every_n_steps``, ``finish``."""
    finishing: bool
    timeout: float
    """``[judge] timeout_seconds`` plus the judge process's start: the most it may take."""
    environ: Mapping[str, str]
    """The environment to run the judge in (the client's: its API keys and base URLs)."""

    def __init__(
        self,
        session_id: str,
        agent: str,
        step: int,
        triggers: tuple[str, ...],
        *,
        finishing: bool = False,
        timeout: float = 30.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """A job for ``session_id`` after ``step`` calls."""
        self._init(
            session_id=session_id,
            agent=agent,
            step=step,
            triggers=triggers,
            finishing=finishing,
            timeout=timeout,
            environ=dict(os.environ if environ is None else environ),
        )

    def argv(self, root: str, model: str | None, python: str | None) -> list[str]:
        """The judge process's command line."""
        args = ["judge", root, "--session", self.session_id, "--agent", self.agent,
                "--step", str(self.step)]  # fmt: skip
        for trigger in self.triggers:
            args += ["--trigger", trigger]
        if self.finishing:
            args.append("--finish")
        if model:
            args += ["--model", model]
        return launcher_argv(*args, python=python)


class SubprocessJudging:
    """The judge run as ``_launch.py judge`` (``keel.judge.live``), in background or inline."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        background: bool,
        settle: bool = False,
        model: str | None = None,
        python: str | None = None,
        runner: Runner | None = None,
    ) -> None:
        """Judging for the workspace ``root``.

        Args:
            root: the workspace.
            background: run judgements on a thread (the daemon, ``keel run``), else inline.
            settle: ``take`` waits for a running judgement (``keel run``'s determinism).
            model: a model spec instead of ``[judge] model`` (``keel replay``: ``replay:ID``).
            python: the interpreter (default: the running one).
            runner: runs the process (default: ``subprocess.run``; a test double may stand in).
        """
        self.root = os.fspath(root)
        self.background = background
        self.settle = settle
        self.model = model
        self.python = python
        self._run = runner or _run_process
        self._landed: dict[str, list[Judged]] = {}
        self._notes: dict[str, list[dict[str, Any]]] = {}
        self._running: dict[str, float] = {}
        """Sessions with a judgement running, and until when it may run."""
        self._queued: dict[str, JudgeJob] = {}
        self._cond: threading.Condition | None = None
        if background:
            import threading

            self._cond = threading.Condition()

    @property
    def active(self) -> bool:
        """True while a judgement runs or waits (the daemon does not idle out under it)."""
        return bool(self._running or self._queued)

    def schedule(self, job: JudgeJob, *, deadline_at: float | None = None) -> None:
        """Start a judgement (background) or run it within ``deadline_at`` (inline)."""
        if self._cond is None:
            self._inline(job, deadline_at)
            return
        import threading

        with self._cond:
            if job.session_id in self._running:
                self._queued[job.session_id] = job  # the newest request waits its turn
                return
            self._running[job.session_id] = time.monotonic() + job.timeout
        threading.Thread(
            target=self._background, args=(job,), name="keel-judge", daemon=True
        ).start()

    def take(
        self, session_id: str, *, wait_until: float | None = None
    ) -> tuple[tuple[Judged, ...], tuple[dict[str, Any], ...]]:
        """The verdicts and notes for ``session_id`` (see :class:`Judging`)."""
        cond = self._cond
        if cond is None:
            return self._pop(session_id)
        with cond:
            until = wait_until
            if until is None and self.settle:
                until = self._running.get(session_id)
            while until is not None and session_id in self._running:
                left = until - time.monotonic()
                if left <= 0:
                    break
                cond.wait(left)
            return self._pop(session_id)

    def _pop(self, session_id: str) -> tuple[tuple[Judged, ...], tuple[dict[str, Any], ...]]:
        return (
            tuple(self._landed.pop(session_id, ())),
            tuple(self._notes.pop(session_id, ())),
        )

    def _background(self, job: JudgeJob) -> None:
        cond = self._cond
        assert cond is not None
        current: JudgeJob | None = job
        while current is not None:
            judged, note = self._judge(current, current.timeout)
            with cond:
                self._keep(current.session_id, judged, note)
                current = self._queued.pop(current.session_id, None)
                if current is None:
                    del self._running[job.session_id]
                else:
                    self._running[job.session_id] = time.monotonic() + current.timeout
                cond.notify_all()

    def _inline(self, job: JudgeJob, deadline_at: float | None) -> None:
        left = job.timeout
        if deadline_at is not None:
            left = min(left, deadline_at - MARGIN - time.monotonic())
        if left < MIN_INLINE:
            why = "no time was left before the hook's deadline (keel hookd is not running)"
            self._keep(job.session_id, None, _skipped(job, why))
            return
        self._keep(job.session_id, *self._judge(job, left))

    def _keep(self, session_id: str, judged: Judged | None, note: dict[str, Any] | None) -> None:
        if judged is not None:
            self._landed.setdefault(session_id, []).append(judged)
        if note is not None:
            self._notes.setdefault(session_id, []).append(note)

    def _judge(self, job: JudgeJob, timeout: float) -> tuple[Judged | None, dict[str, Any] | None]:
        """Run the judge process: its deliverable verdict, or a note when it did not journal."""
        argv = job.argv(self.root, self.model, self.python)
        try:
            code, out, err = self._run(argv, job.environ, timeout)
        except TimeoutError:
            return None, _skipped(job, f"the judge did not answer within {timeout:.1f} s")
        except OSError as exc:
            return None, _failed(job, f"the judge process could not start: {exc}")
        try:
            answer = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            tail = (err.strip().splitlines() or ["no output"])[-1][:300]
            return None, _failed(job, f"the judge process ended with {code}: {tail}")
        note = None if answer.get("journaled") else _failed(job, str(answer.get("message")))
        data = answer.get("judged")
        if not isinstance(data, dict):
            return None, note
        try:
            return Judged.from_dict(data), note
        except (KeyError, TypeError, ValueError):
            return None, _failed(job, "the judge process answered a malformed verdict")


def _skipped(job: JudgeJob, why: str) -> dict[str, Any]:
    return {"status": "skipped", "step": job.step, "triggers": list(job.triggers), "reason": why}


def _failed(job: JudgeJob, why: str) -> dict[str, Any]:
    return {"status": "error", "step": job.step, "triggers": list(job.triggers),
            "error": "judge.process", "message": why}  # fmt: skip


def _run_process(
    argv: list[str], environ: Mapping[str, str], timeout: float
) -> tuple[int, str, str]:
    import subprocess

    try:
        done = subprocess.run(
            argv, env=dict(environ), capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:  # run() killed it
        raise TimeoutError(str(exc)) from None
    return done.returncode, done.stdout, done.stderr
