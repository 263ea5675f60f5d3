"""Evidence-conditioned plans: validate, probe in the sandbox, branch on evidence, then commit.

The plan language is the seed article's JSON (``evidence_collection``, ``conditional``,
``ask``, ``final_action``; ``{{var}}`` templates); :func:`validate_plan` reports every problem
with its JSON path before anything runs; :func:`run_plan` runs a valid plan and returns a
:class:`PlanReport` whose ``facts`` are the verified sentences a later step may rely on.
"""

from keel.plan._actions import ACTIONS, ActionSpec, resolve_action
from keel.plan._conditions import Evaluation, evaluate, guards
from keel.plan._engine import ActionPolicy, EventSink, PlanEngine, Prompt
from keel.plan._facts import probe_fact
from keel.plan._model import (
    Action,
    AskStep,
    Condition,
    ConditionalStep,
    EvidenceStep,
    FinalActionStep,
    Plan,
    Step,
    plan_schema,
)
from keel.plan._report import (
    ActionRecord,
    BranchRecord,
    PlanReport,
    ProbeRecord,
    QuestionRecord,
    RunState,
    render_text,
)
from keel.plan._run import (
    check_plan,
    default_policy,
    limits_of,
    read_plan_file,
    run_plan,
    sandboxed_runner,
)
from keel.plan._runners import InProcessRunner, ProbeRunner, SandboxedRunner
from keel.plan._validate import (
    Issue,
    PlanLimits,
    ValidationResult,
    outside_workspace,
    read_plan_text,
    validate_plan,
)

__all__ = [
    "ACTIONS",
    "Action",
    "ActionPolicy",
    "ActionRecord",
    "ActionSpec",
    "AskStep",
    "BranchRecord",
    "Condition",
    "ConditionalStep",
    "Evaluation",
    "EventSink",
    "EvidenceStep",
    "FinalActionStep",
    "InProcessRunner",
    "Issue",
    "Plan",
    "PlanEngine",
    "PlanLimits",
    "PlanReport",
    "ProbeRecord",
    "ProbeRunner",
    "Prompt",
    "QuestionRecord",
    "RunState",
    "SandboxedRunner",
    "Step",
    "ValidationResult",
    "check_plan",
    "default_policy",
    "evaluate",
    "guards",
    "limits_of",
    "outside_workspace",
    "plan_schema",
    "probe_fact",
    "read_plan_file",
    "read_plan_text",
    "render_text",
    "resolve_action",
    "run_plan",
    "sandboxed_runner",
    "validate_plan",
]
