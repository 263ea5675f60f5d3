"""``keel eval``: compare keel settings on a suite of tasks, locally or on Ray.

Does routing work through keel's plans and guidance help, on your tasks, with your model?
An evaluation runs ``keel run`` on every (task, arm, repeat) of a suite, each in its own copy
of the task's repository, contained as ``keel run`` always is, with its own journal, and
compares the arms:

- :func:`load_suite` (:mod:`keel.eval._suite`): a directory of tasks (a repository, the task
  text, a success check, labels such as the assumption a trap task gets wrong), checked and
  packed before anything runs;
- :func:`parse_arms` (:mod:`keel.eval._arms`): the settings each arm changes
  (``guidance=off``, ``judge=on``, ``require_plan=false``, ``preset=strict``,
  ``max_steps=N``, ``model=SPEC``), as keel.toml over the repository's own;
- :func:`plan` and :func:`evaluate` (:mod:`keel.eval._eval`): one :class:`RunSpec` per run,
  carried out by :func:`execute` (:mod:`keel.eval._runner`) in a local pool or as Ray tasks
  (:mod:`keel.eval._pool`), streamed to ``results.jsonl`` as JSON lines;
- :func:`build_report` (:mod:`keel.eval._report`): success, steps, tokens, cost, wall time,
  premature writes refused, broken assumptions caught before any write and guidance by level
  per arm, with seeded bootstrap intervals over tasks, and a paired comparison of the arms;
- :func:`replay_results` (:mod:`keel.eval._replay`): every recorded run replayed on today's
  code with no model (``keel replay``), the first divergences listed.
"""

from keel.eval._arms import ARM_KEYS, DEFAULT_ARM, Arm, ArmKey, parse_arm, parse_arms, to_toml
from keel.eval._eval import (
    REPORT_JSON,
    REPORT_MD,
    RESULTS_FILE,
    Evaluation,
    evaluate,
    model_for,
    plan,
    prepare_out,
    write_report,
)
from keel.eval._measure import LEVELS, Figures, measure
from keel.eval._pool import import_ray, run_local, run_ray
from keel.eval._replay import Replayed, load_results, replay_results, replay_text
from keel.eval._report import (
    ArmReport,
    Comparison,
    Difference,
    Metric,
    Report,
    build_report,
    render_markdown,
    render_text,
)
from keel.eval._runner import RunOutput, RunRecord, RunSpec, execute
from keel.eval._stats import Interval
from keel.eval._suite import Suite, Task, load_suite

__all__ = [
    "ARM_KEYS",
    "DEFAULT_ARM",
    "LEVELS",
    "REPORT_JSON",
    "REPORT_MD",
    "RESULTS_FILE",
    "Arm",
    "ArmKey",
    "ArmReport",
    "Comparison",
    "Difference",
    "Evaluation",
    "Figures",
    "Interval",
    "Metric",
    "Replayed",
    "Report",
    "RunOutput",
    "RunRecord",
    "RunSpec",
    "Suite",
    "Task",
    "build_report",
    "evaluate",
    "execute",
    "import_ray",
    "load_results",
    "load_suite",
    "measure",
    "model_for",
    "parse_arm",
    "parse_arms",
    "plan",
    "prepare_out",
    "render_markdown",
    "render_text",
    "replay_results",
    "replay_text",
    "run_local",
    "run_ray",
    "to_toml",
    "write_report",
]
