"""The judge: a model evaluator for what the monitor's rules cannot see.

Rules catch loops, repeated failures, scope and test weakening; the judge asks a model whether
a bounded :class:`Window` of a trajectory shows one of four problems (``CATEGORIES``):
``drift`` (no longer the task), ``gaming`` (making the check pass instead of solving the
problem), ``hijack`` (a tool result redirected the goal) and ``false_success`` (a claim of
success the trajectory does not show).

- :func:`window_of`: the task, pinned constraints, plan and last K steps (edits summarised),
  with a stable hash;
- :class:`Judge`: one call through :class:`keel.models.ModelClient` (budgets, refusals,
  retries, ``model.request``/``model.response`` journaling), a validated frozen
  :class:`Verdict`, a :class:`JudgeCache` by (window hash, prompt version, model spec), and
  below ``min_confidence`` a judgement that is not deliverable;
- :mod:`keel.judge.eval`: ``keel judge eval``: miss and false-alarm rates, timeliness, cost
  and latency over a labelled dataset, with bootstrap intervals and a threshold sweep;
- :mod:`keel.judge.scan`: ``keel monitor scan --judge``: the judge at the steps
  ``[judge.when]`` schedules in a recorded run;
- :mod:`keel.judge.live`: the judge process of a live session (hooks, ``keel run``), started
  by :class:`keel.guard.judging.SubprocessJudging` off the hook's path; its deliverable
  verdict (:class:`keel.core.judged.Judged`) reaches the monitor's ladder with the next call.
"""

from keel.judge._judge import (
    Judge,
    JudgeCache,
    Judgement,
    Status,
    due,
    judge_client,
    judge_for,
)
from keel.judge._verdict import (
    CATEGORIES,
    VERDICT_SCHEMA,
    Category,
    Verdict,
    VerdictKind,
    parse_verdict,
)
from keel.judge._window import Window, WindowStep, window_of

__all__ = [
    "CATEGORIES",
    "VERDICT_SCHEMA",
    "Category",
    "Judge",
    "JudgeCache",
    "Judgement",
    "Status",
    "Verdict",
    "VerdictKind",
    "Window",
    "WindowStep",
    "due",
    "judge_client",
    "judge_for",
    "parse_verdict",
    "window_of",
]
