"""The report of an evaluation: per arm, with intervals, and arms compared on the same tasks.

Per arm, over its runs:

- **success**: the share of runs whose check exited 0;
- **steps**, **tokens**, **cost**, **wall time**: means per run (and totals);
- **premature writes refused**: refusals of ``agent.premature_commitment``, per run;
- **broken assumptions caught before any write**: the share of the runs of trap tasks (those
  with an ``assumption``) in which a plan condition came out false before the first write;
- **guidance by level**: the monitor's guidance events, counted;
- the runs' outcomes (finished, failed...) and the runs the harness could not carry out.

Each mean has a 95% bootstrap interval over tasks (:mod:`keel.eval._stats`, seeded).

**Paired comparison**: each arm against the first (the baseline), on the tasks both ran: per
task, the arm's mean over its repeats minus the baseline's; the difference is the mean over
tasks, with its interval from the same resamples, and for success the tasks where the arm did
better, worse or the same.

The report is built from the records sorted by (task in suite order, arm, repeat), so the
order runs finished in (a pool, Ray) never changes it; only wall times differ between two
evaluations of a deterministic model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from keel.eval._arms import Arm
from keel.eval._measure import LEVELS
from keel.eval._runner import RunRecord
from keel.eval._stats import Interval, interval, mean, resamples, rounded

Group = list[RunRecord]
"""The runs of one task in one arm."""


@dataclass(frozen=True, slots=True)
class Metric:
    """A figure per run (a mean or a rate), its interval, and its total."""

    value: float | None
    ci: Interval
    total: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"value": rounded(self.value), "ci": self.ci.to_dict(), "total": rounded(self.total)}


@dataclass(frozen=True, slots=True)
class ArmReport:
    """One arm's figures."""

    arm: Arm
    model: str
    runs: int
    errors: int
    success: Metric
    steps: Metric
    tokens: Metric
    cost_usd: Metric
    wall_seconds: Metric
    premature_refused: Metric
    assumptions_caught: Metric
    """The rate over trap runs; ``total``: trap runs that caught it."""
    trap_runs: int
    guidance: dict[str, int]
    outcomes: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "arm": self.arm.name,
            "settings": dict(self.arm.settings),
            "model": self.model,
            "runs": self.runs,
            "errors": self.errors,
            "success": self.success.to_dict(),
            "steps": self.steps.to_dict(),
            "tokens": self.tokens.to_dict(),
            "cost_usd": self.cost_usd.to_dict(),
            "wall_seconds": self.wall_seconds.to_dict(),
            "premature_refused": self.premature_refused.to_dict(),
            "assumptions_caught": {**self.assumptions_caught.to_dict(),
                                   "trap_runs": self.trap_runs},
            "guidance": dict(self.guidance),
            "outcomes": dict(self.outcomes),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Difference:
    """A paired difference (arm minus baseline), averaged over tasks."""

    value: float | None
    ci: Interval
    better: int = 0
    worse: int = 0
    same: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "difference": rounded(self.value),
            "ci": self.ci.to_dict(),
            "better": self.better,
            "worse": self.worse,
            "same": self.same,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """One arm against the baseline on the tasks both ran."""

    baseline: str
    arm: str
    tasks: int
    success: Difference
    steps: Difference
    premature_refused: Difference

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "baseline": self.baseline,
            "arm": self.arm,
            "tasks": self.tasks,
            "success": self.success.to_dict(),
            "steps": self.steps.to_dict(),
            "premature_refused": self.premature_refused.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Report:
    """The whole report."""

    suite: str
    model: str
    repeat: int
    tasks: tuple[str, ...]
    traps: tuple[str, ...]
    arms: tuple[ArmReport, ...]
    comparisons: tuple[Comparison, ...]
    per_task: dict[str, dict[str, tuple[int, int]]]
    """task -> arm -> (successes, runs)."""
    bootstrap: int
    seed: int
    records: tuple[RunRecord, ...]

    @property
    def runs(self) -> int:
        """Runs in all."""
        return len(self.records)

    def to_dict(self) -> dict[str, Any]:
        """The ``report.json`` document."""
        return {
            "suite": self.suite,
            "model": self.model,
            "repeat": self.repeat,
            "tasks": list(self.tasks),
            "trap_tasks": list(self.traps),
            "runs": self.runs,
            "bootstrap": {"resamples": self.bootstrap, "seed": self.seed, "level": 0.95,
                          "unit": "task"},
            "arms": [a.to_dict() for a in self.arms],
            "comparisons": [c.to_dict() for c in self.comparisons],
            "per_task": {t: {a: {"successes": s, "runs": n} for a, (s, n) in arms.items()}
                         for t, arms in self.per_task.items()},
            "records": [r.to_dict() for r in self.records],
        }  # fmt: skip


def build_report(
    records: Sequence[RunRecord],
    *,
    suite: str,
    model: str,
    arms: Sequence[Arm],
    tasks: Sequence[str],
    traps: Sequence[str],
    repeat: int,
    bootstrap: int = 1000,
    seed: int = 0,
) -> Report:
    """The report of ``records`` (any order) for ``arms`` over ``tasks`` (suite order)."""
    order = {t: i for i, t in enumerate(tasks)}
    arm_order = {a.name: i for i, a in enumerate(arms)}
    ordered = tuple(sorted(records, key=lambda r: (order[r.task], arm_order[r.arm], r.repeat)))
    draws = resamples(bootstrap, len(tasks), seed)
    grouped = {a.name: [[r for r in ordered if r.arm == a.name and r.task == t] for t in tasks]
               for a in arms}  # fmt: skip
    trap_set = set(traps)
    reports = tuple(
        _arm(a, model, grouped[a.name], draws, [t in trap_set for t in tasks]) for a in arms
    )
    comparisons = tuple(
        _compare(arms[0].name, a.name, grouped[arms[0].name], grouped[a.name], draws)
        for a in arms[1:]
    )
    per_task = {
        t: {a.name: (sum(r.success for r in grouped[a.name][i]), len(grouped[a.name][i]))
            for a in arms}
        for i, t in enumerate(tasks)
    }  # fmt: skip
    return Report(suite, model, repeat, tuple(tasks), tuple(traps), reports, comparisons,
                  per_task, bootstrap, seed, ordered)  # fmt: skip


def _flat(groups: Sequence[Group]) -> Group:
    return [r for g in groups for r in g]


def _mean_of(field: Callable[[RunRecord], float | None]) -> Callable[[list[Group]], float | None]:
    def statistic(groups: list[Group]) -> float | None:
        values = [field(r) for r in _flat(groups)]
        if any(v is None for v in values):
            return None
        return mean([v for v in values if v is not None])

    return statistic


def _metric(
    groups: list[Group], draws: list[list[int]], field: Callable[[RunRecord], float | None]
) -> Metric:
    statistic = _mean_of(field)
    values = [field(r) for r in _flat(groups)]
    total = None if any(v is None for v in values) else sum(v or 0.0 for v in values)
    return Metric(statistic(groups), interval(groups, draws, statistic), total)


def _arm(
    arm: Arm, model: str, groups: list[Group], draws: list[list[int]], trap: list[bool]
) -> ArmReport:
    runs = _flat(groups)
    trap_groups = [g if is_trap else [] for g, is_trap in zip(groups, trap, strict=True)]
    trap_runs = _flat(trap_groups)
    caught = _mean_of(lambda r: float(r.assumption_caught))
    guidance = Counter({level: 0 for level in LEVELS})
    for record in runs:
        guidance.update(record.guidance)
    return ArmReport(
        arm=arm,
        model=arm.model or model,
        runs=len(runs),
        errors=sum(1 for r in runs if r.error),
        success=_metric(groups, draws, lambda r: float(r.success)),
        steps=_metric(groups, draws, lambda r: r.steps),
        tokens=_metric(groups, draws, lambda r: r.tokens),
        cost_usd=_metric(groups, draws, lambda r: r.cost_usd),
        wall_seconds=_metric(groups, draws, lambda r: r.wall_seconds),
        premature_refused=_metric(groups, draws, lambda r: r.premature_refused),
        assumptions_caught=Metric(
            caught(trap_groups) if trap_runs else None,
            interval(trap_groups, draws, lambda gs: caught(gs) if _flat(gs) else None),
            sum(r.assumption_caught for r in trap_runs),
        ),
        trap_runs=len(trap_runs),
        guidance=dict(guidance),
        outcomes=dict(sorted(Counter(r.outcome for r in runs).items())),
    )


def _compare(
    baseline: str, name: str, base: list[Group], other: list[Group], draws: list[list[int]]
) -> Comparison:
    both = [i for i, (a, b) in enumerate(zip(base, other, strict=True)) if a and b]

    def differences(field: Callable[[RunRecord], float]) -> list[float]:
        diffs = [0.0] * len(base)
        for i in both:
            diffs[i] = (mean([field(r) for r in other[i]]) or 0.0) - (
                mean([field(r) for r in base[i]]) or 0.0
            )
        return diffs

    def paired(field: Callable[[RunRecord], float]) -> Difference:
        diffs = differences(field)
        kept = [i for i in range(len(base)) if i in both]
        statistic = lambda ds: mean(ds)  # noqa: E731 - over the drawn tasks both ran
        drawn = [[i for i in draw if i in both] for draw in draws]
        return Difference(
            mean([diffs[i] for i in kept]),
            interval(diffs, [d for d in drawn if d], statistic),
            sum(1 for i in kept if diffs[i] > 0),
            sum(1 for i in kept if diffs[i] < 0),
            sum(1 for i in kept if diffs[i] == 0),
        )

    return Comparison(
        baseline,
        name,
        len(both),
        paired(lambda r: float(r.success)),
        paired(lambda r: float(r.steps)),
        paired(lambda r: float(r.premature_refused)),
    )


# -- text and Markdown ----------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _with_ci(metric: Metric | Difference, digits: int = 2, sign: bool = False) -> str:
    text = _fmt(metric.value, digits, sign)
    if metric.ci.low is None or metric.ci.high is None:
        return text
    return f"{text} [{_fmt(metric.ci.low, digits, sign)}, {_fmt(metric.ci.high, digits, sign)}]"


def _guidance(arm: ArmReport) -> str:
    return " ".join(f"{level} {arm.guidance.get(level, 0)}" for level in LEVELS)


def _cost(arm: ArmReport) -> str:
    return "unknown" if arm.cost_usd.total is None else f"${arm.cost_usd.total:.4f}"


def _headline(report: Report) -> list[str]:
    return [
        f"keel eval of {report.suite}: {len(report.tasks)} tasks ({len(report.traps)} traps) x "
        f"{len(report.arms)} arm(s) x {report.repeat} repeat(s) = {report.runs} runs; "
        f"model {report.model}",
        f"95% bootstrap intervals over tasks ({report.bootstrap} resamples, seed {report.seed})",
    ]


def _arm_rows(report: Report) -> list[list[str]]:
    rows = []
    for arm in report.arms:
        caught = arm.assumptions_caught
        rows.append([
            arm.arm.name,
            f"{arm.arm.text or '(as configured)'}",
            f"{int(arm.success.total or 0)}/{arm.runs} {_with_ci(arm.success)}",
            _with_ci(arm.steps, 1),
            _with_ci(arm.tokens, 0),
            _cost(arm),
            _with_ci(arm.wall_seconds, 1),
            f"{int(arm.premature_refused.total or 0)} ({_with_ci(arm.premature_refused)}/run)",
            f"{int(caught.total or 0)}/{arm.trap_runs} {_with_ci(caught)}",
            _guidance(arm),
            str(arm.errors),
        ])  # fmt: skip
    return rows


ARM_HEADER = [
    "arm",
    "settings",
    "success",
    "steps",
    "tokens",
    "cost",
    "wall s",
    "premature writes refused",
    "assumptions caught (traps)",
    "guidance",
    "errors",
]


def _comparison_lines(report: Report) -> list[str]:
    lines = []
    for c in report.comparisons:
        s = c.success
        lines.append(
            f"{c.arm} - {c.baseline} on {c.tasks} tasks: success {_with_ci(s, 2, True)} "
            f"(better on {s.better}, worse on {s.worse}, same on {s.same}); "
            f"steps {_with_ci(c.steps, 1, True)}; premature writes refused "
            f"{_with_ci(c.premature_refused, 2, True)}"
        )
    return lines


def _task_rows(report: Report) -> list[list[str]]:
    traps = set(report.traps)
    return [
        [task, "trap" if task in traps else "ordinary",
         *(f"{s}/{n}" for s, n in (arms[a.arm.name] for a in report.arms))]
        for task, arms in report.per_task.items()
    ]  # fmt: skip


def render_text(report: Report) -> str:
    """The report as ``keel eval`` prints it."""
    lines = [*_headline(report), ""]
    for row in _arm_rows(report):
        lines.append(f"arm {row[0]}: {row[1]}")
        lines += [
            f"  {name:<27} {value}" for name, value in zip(ARM_HEADER[2:], row[2:], strict=True)
        ]
    if report.comparisons:
        lines += ["", "paired, arm minus baseline (per task, then averaged):"]
        lines += [f"  {line}" for line in _comparison_lines(report)]
    width = max(len(t) for t in report.tasks)
    lines += ["", "successes per task: " + "  ".join(a.arm.name for a in report.arms)]
    for row in _task_rows(report):
        lines.append(f"  {row[0]:<{width}} {row[1]:<4}  " + "  ".join(row[2:]))
    return "\n".join(lines) + "\n"


def render_markdown(report: Report) -> str:
    """The report as ``report.md``."""
    lines = [f"# {_headline(report)[0]}", "", _headline(report)[1] + ".", ""]
    lines += _table(ARM_HEADER, _arm_rows(report))
    if report.comparisons:
        lines += ["", "## Paired comparison (arm minus baseline, per task)", ""]
        lines += [f"- {line}" for line in _comparison_lines(report)]
    lines += ["", "## Successes per task", ""]
    lines += _table(["task", "kind", *(a.arm.name for a in report.arms)], _task_rows(report))
    errors = [r for r in report.records if r.error]
    if errors:
        lines += ["", "## Runs the harness could not carry out", ""]
        lines += [f"- `{r.run_id}`: {r.error}" for r in errors]
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), line(["---"] * len(header)), *(line(r) for r in rows)]
