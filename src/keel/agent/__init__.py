"""keel's own agent (``keel run``): phases, strict tools, evidence before commitment, replay.

:func:`start_run` runs a task through the loop in :mod:`keel.agent._loop` (every tool call
through ``Guard.decide``), :func:`resume_run` continues a run that asked the user,
:func:`answer_by_rule` answers simple requests without a model, and :func:`replay` runs a
recorded session again with no model and names the first divergence. ``TOOLS`` are the tools
the model is offered, each with the JSON Schema of its arguments (``keel run --list-tools``).
"""

from keel.agent._loop import Progress, View
from keel.agent._repomap import RepoMap, build_map
from keel.agent._rules import answer_by_rule
from keel.agent._session import RunOptions, RunResult
from keel.agent._session import resume as resume_run
from keel.agent._session import start as start_run
from keel.agent._tools import TOOLS
from keel.agent._view import LineView, LiveView, replay_text, summary
from keel.agent.replay import Divergence, ReplayResult, replay

__all__ = [
    "TOOLS",
    "Divergence",
    "LineView",
    "LiveView",
    "Progress",
    "ReplayResult",
    "RepoMap",
    "RunOptions",
    "RunResult",
    "View",
    "answer_by_rule",
    "build_map",
    "replay",
    "replay_text",
    "resume_run",
    "start_run",
    "summary",
]
