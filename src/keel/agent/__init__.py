"""keel's own agent (``keel run``): phases, strict tools, evidence before commitment, replay.

:func:`start_run` runs a task through the loop in :mod:`keel.agent._loop` (every tool call
through ``Guard.decide``), :func:`resume_run` continues a run that asked the user,
:func:`answer_by_rule` answers simple requests without a model, and :func:`replay` runs a
recorded session again with no model and names the first divergence. ``TOOLS`` are the tools
the model is offered, each with the JSON Schema of its arguments (``keel run --list-tools``).

The tools themselves are reused by ``keel mcp`` (one copy of each rule): ``SCHEMAS`` and
``argument_problem`` check a call, ``to_call`` makes it canonical, ``carry_out`` carries out an
allowed file or command tool and ``ran_as`` is the call to report to ``Guard.observe``,
``plan_tool`` runs an evidence plan, ``denied_text``, ``with_guidance`` and ``clipped`` are what
the agent is told, and ``agent_config`` is keel.toml as the agent's guard reads it.
"""

from keel.agent._execute import Outcome as ToolOutcome
from keel.agent._execute import run_plan as plan_tool
from keel.agent._loop import (
    FILE_TOOLS,
    Progress,
    View,
    carry_out,
    clipped,
    denied_text,
    ran_as,
    with_guidance,
)
from keel.agent._repomap import RepoMap, build_map
from keel.agent._rules import answer_by_rule
from keel.agent._session import RunOptions, RunResult, agent_config
from keel.agent._session import resume as resume_run
from keel.agent._session import start as start_run
from keel.agent._tools import SCHEMAS, TOOLS, argument_problem, to_call
from keel.agent._view import LineView, LiveView, replay_text, summary
from keel.agent.replay import Divergence, ReplayResult, replay

__all__ = [
    "FILE_TOOLS",
    "SCHEMAS",
    "TOOLS",
    "Divergence",
    "LineView",
    "LiveView",
    "Progress",
    "ReplayResult",
    "RepoMap",
    "RunOptions",
    "RunResult",
    "ToolOutcome",
    "View",
    "agent_config",
    "answer_by_rule",
    "argument_problem",
    "build_map",
    "carry_out",
    "clipped",
    "denied_text",
    "plan_tool",
    "ran_as",
    "replay",
    "replay_text",
    "resume_run",
    "start_run",
    "summary",
    "to_call",
    "with_guidance",
]
