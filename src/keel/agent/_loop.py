"""The agent loop: ask the model, put each tool call through the guard, carry it out, repeat.

One step is one model call and the tool calls it asked for, in order. Each call becomes a
canonical ``ToolCall`` and goes through ``Guard.decide`` (the stop, the agent's phase rules,
the policy, the monitor, a checkpoint, the journal); an allowed call runs and its result goes
through ``Guard.observe``, whose guidance reaches the model in the next request: ``correct``
as the denial's reason, ``replan`` by forcing the run back to ``plan``, ``stop`` by ending
the run (exit 1). The run ends when the gates pass after ``finish`` (exit 0), when it needs
the user's answer and may not ask (exit 3), or on a stop, a limit or an error (exit 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from keel.agent import _execute as tools
from keel.agent._context import State, Turn, build_request, summary_line
from keel.agent._phases import Phases, Transition
from keel.agent._repomap import build_map
from keel.agent._tools import READ_TOOLS, TOOLS, WRITE_TOOLS, parse_arguments, to_call
from keel.core.calls import ToolCall, ToolResult
from keel.core.decision import Decision, Guidance
from keel.core.errors import BudgetExceeded, KeelError
from keel.core.events import DataPayload, Event, GatePayload
from keel.core.schema import KeelConfig
from keel.guard import Guard
from keel.models import Message, ModelClient, ModelToolCall, Sampling

Outcome = Literal["finished", "needs_input", "failed", "stopped", "over_budget"]
EXIT_CODES: dict[Outcome, int] = {
    "finished": 0,
    "needs_input": 3,
    "failed": 1,
    "stopped": 1,
    "over_budget": 1,
}
NOT_RUN = "not run: an earlier call of this step ended the run or asked the user\n"
ALLOWED: dict[str, str] = {
    "understand": "read_file, search, list_files, run (read-only commands), run_plan, ask_user, "
    "finish",
    "plan": "read_file, search, list_files, run (read-only commands), run_plan, ask_user, finish",
    "implement": "all tools",
    "verify": "none (keel is running the gates)",
}
FILE_TOOLS = READ_TOOLS | WRITE_TOOLS | {"run"}
"""The tools ``carry_out`` carries out: files and commands."""


@dataclass(slots=True)
class Gate:
    """One ``[gates] required`` command as it ran at a finish."""

    command: str
    passed: bool
    exit_code: int | None
    output: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"command": self.command, "passed": self.passed, "exit_code": self.exit_code}


@dataclass(slots=True)
class Ended:
    """Why the run ended."""

    outcome: Outcome
    reason: str
    question: str | None = None


@dataclass(slots=True)
class Progress:
    """What the live view shows, updated as the run goes."""

    step: int = 0
    phase: str = "understand"
    last_call: str = ""
    decision: str = ""
    guidance: str = ""


class View:
    """What the agent reports as it goes (the CLI's live view; silent by default)."""

    def update(self, progress: Progress) -> None:
        """The run moved on."""

    def close(self) -> None:
        """The run ended."""


@dataclass(slots=True)
class AgentState:
    """Everything a suspended run needs to go on (journaled when it asks the user)."""

    task: str
    step: int = 0
    turns: list[Turn] = field(default_factory=list[Turn])
    phase: str = "understand"
    evidence: str = ""
    guidance: list[str] = field(default_factory=list[str])
    pending: dict[str, Any] | None = None
    """The question waiting for an answer: its call id, tool-use id and place in the turn."""
    tool_calls: int = 0
    gates: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "task": self.task,
            "step": self.step,
            "turns": [t.to_dict() for t in self.turns],
            "phase": self.phase,
            "evidence": self.evidence,
            "guidance": self.guidance,
            "pending": self.pending,
            "tool_calls": self.tool_calls,
            "gates": self.gates,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentState:
        """Rebuild from :meth:`to_dict`."""
        return cls(
            str(data["task"]),
            int(data["step"]),
            [Turn.from_dict(t) for t in data.get("turns") or ()],
            str(data["phase"]),
            str(data.get("evidence") or ""),
            list(data.get("guidance") or ()),
            data.get("pending"),
            int(data.get("tool_calls") or 0),
            list(data.get("gates") or ()),
        )


class Agent:
    """One run of keel's agent over a workspace, through one guard and one model client."""

    def __init__(
        self,
        root: Path,
        config: KeelConfig,
        guard: Guard,
        client: ModelClient,
        phases: Phases,
        state: AgentState,
        *,
        max_steps: int,
        ask: Callable[[str], str | None] | None = None,
        answers: list[str] | None = None,
        command_prefix: tuple[str, ...] = (),
        view: View | None = None,
    ) -> None:
        """An agent; ``ask`` asks the user (None: non-interactive), ``answers`` are given ones."""
        self.root = root
        self.config = config
        self.guard = guard
        self.client = client
        self.phases = phases
        self.state = state
        self.max_steps = max_steps
        self.ask = ask
        self.answers = list(answers or ())
        self.command_prefix = command_prefix
        """Put before every command line (replay: ``unshare --net``)."""
        self.view = view or View()
        self.progress = Progress(state.step, phases.phase)
        self.timeout = config.agent.tool_timeout_seconds
        self.started = time.monotonic()
        self._ended: Ended | None = None
        self._then: list[tuple[Any, str]] = []
        """Phase changes a tool's result causes, made once the result is journaled."""

    @property
    def session_id(self) -> str:
        """The run's session."""
        return self.guard.session_id

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> Ended:
        """Run until the task is finished, the user is needed, or a limit or stop ends it."""
        while self._ended is None:
            if self.state.step >= self.max_steps:
                return self._end("failed", f"the run reached --max-steps ({self.max_steps})")
            if time.monotonic() - self.started > self.config.agent.max_wall_seconds:
                limit = self.config.agent.max_wall_seconds
                return self._end("failed", f"the run reached its wall-clock limit ({limit:g} s)")
            self._step()
        return self._ended

    def _step(self) -> None:
        request = build_request(
            task=self.state.task,
            constraints=self._constraints(),
            repo_map=self._repo_map(),
            turns=self.state.turns,
            state=self._state_now(),
            tools=TOOLS,
            sampling=self._sampling(),
            budget=self.config.agent.context_tokens,
        )
        try:
            response = self.client.complete(request)
        except BudgetExceeded as exc:
            self._end("over_budget", exc.message)
            return
        except KeelError as exc:
            self._end("failed", f"the model call failed: {exc.message} [{exc.code}]")
            return
        self.state.step += 1
        self.state.guidance = []
        self.progress.step = self.state.step
        turn = Turn(self.state.step, response.message())
        self.state.turns.append(turn)
        if not response.tool_calls:
            self.state.guidance.append("Call a tool; when the task is done, call finish.")
            return
        cut = False
        for index, call in enumerate(response.tool_calls):
            if cut or self._ended is not None:
                self._add(turn, call, {}, NOT_RUN)
                continue
            self._call(turn, index, call)
            cut = call.name == "ask_user"

    def _call(self, turn: Turn, index: int, model_call: ModelToolCall) -> None:
        args = parse_arguments(model_call.arguments)
        use_id = f"s{turn.step}.{index}"
        call = to_call(
            model_call.name,
            args,
            tool_use_id=use_id,
            session_id=self.session_id,
            cwd=str(self.root),
        )
        self.state.tool_calls += 1
        decision = self.guard.decide(call)
        self._show(model_call.name, args, decision)
        if not decision.allowed:
            self._add(turn, model_call, args, denied_text(decision))
            if decision.rule.startswith("monitor."):
                self.progress.guidance = decision.reason
                self.state.guidance.append(decision.reason)
            self._after_guidance(None)
            return
        outcome = self._execute(turn, index, model_call, args, use_id)
        if outcome is None:  # a question waits for its answer
            return
        result = ToolResult(
            call.tool,
            call.kind,
            outcome.ok,
            outcome.output,
            outcome.error,
            outcome.exit_code,
            use_id,
            self.session_id,
            "keel",
            self._as_ran(call),
        )
        guidance = self.guard.observe(result)
        for phase, why in self._then:
            self._move(phase, why)
        self._then.clear()
        text = with_guidance(self._limited(outcome.output), guidance)
        self._add(turn, model_call, args, text)
        self._after_guidance(guidance)

    def _execute(
        self, turn: Turn, index: int, call: ModelToolCall, args: dict[str, Any], use_id: str
    ) -> tools.Outcome | None:
        name = call.name
        if name in WRITE_TOOLS and self.phases.phase in ("understand", "plan"):
            # require_plan = false
            self._move("implement", f"{name} without a plan ([agent] require_plan = false)")
        if name in FILE_TOOLS:
            return carry_out(
                self.root, self.guard, name, args,
                use_id=use_id, timeout=self.timeout, prefix=self.command_prefix,
            )  # fmt: skip
        if name == "run_plan":
            return self._plan(args)
        if name == "ask_user":
            return self._question(turn, index, call, str(args["question"]), use_id)
        return self._finish(str(args.get("summary") or ""))

    def _as_ran(self, call: ToolCall) -> ToolCall:
        return ran_as(self.root, self.guard, call, self.timeout)

    # -- plans, questions and finishing ---------------------------------------------------------

    def _plan(self, args: dict[str, Any]) -> tools.Outcome:
        self._move("plan", "run_plan: checking the assumptions")
        done = tools.run_plan(self.root, args, self.config, self.guard.journal, self.session_id)
        if done.held:
            self.state.evidence = done.report
            self._then.append(("implement", "the plan's conditions held"))
            note = "The plan's conditions held: you are in implement; writing tools are allowed.\n"
        else:
            self.state.evidence = done.report or done.outcome.output
            note = (
                "The evidence contradicts an assumption (or the plan could not run): you "
                "stay in plan. Adapt to what the evidence shows and run a corrected plan.\n"
            )
        return tools.Outcome(done.outcome.ok, done.outcome.output + note, done.outcome.error)

    def _question(
        self, turn: Turn, index: int, call: ModelToolCall, question: str, use_id: str
    ) -> tools.Outcome | None:
        answer: str | None = None
        if self.answers:
            answer = self.answers.pop(0)
        elif self.ask is not None:
            answer = self.ask(question)
        if answer is not None:
            return tools.Outcome(True, answered(answer))
        self.state.pending = {
            "call_id": call.id,
            "use_id": use_id,
            "index": index,
            "tool": call.name,
            "question": question,
        }
        turn.results.append(Message.tool(call.id, ""))  # filled in by the answer
        turn.summary.append(summary_line(turn.step, call.name, {"question": question}, "(waits)"))
        self._end("needs_input", "the run needs the user's answer", question)
        return None

    def answer(self, text: str) -> None:
        """Give a suspended run the user's answer to its pending question."""
        pending = self.state.pending
        if pending is None:
            return
        turn = self.state.turns[-1]
        slot = next(
            i
            for i, m in enumerate(turn.results)
            if m.tool_call_id == pending["call_id"] and m.content == ""
        )
        turn.results[slot] = Message.tool(pending["call_id"], answered(text))
        turn.summary[slot] = summary_line(
            turn.step, "ask_user", {"question": pending["question"]}, answered(text)
        )
        self.state.pending = None
        self.guard.note("prompt", {"event": "agent.answer", "answer": text})
        call = to_call(
            "ask_user",
            {"question": pending["question"]},
            tool_use_id=pending["use_id"],
            session_id=self.session_id,
            cwd=str(self.root),
        )
        self.guard.observe(
            ToolResult(
                "ask_user",
                "other",
                True,
                answered(text),
                tool_use_id=pending["use_id"],
                session_id=self.session_id,
                call=call,
            )
        )

    def _finish(self, summary: str) -> tools.Outcome:
        self._move("verify", "finish: running the gates")
        gates = [self._gate(command) for command in self.config.gates.required]
        self.state.gates = [g.to_dict() for g in gates]
        failures = [f"`{g.command}` failed (exit {g.exit_code})" for g in gates if not g.passed]
        block = self.guard.gate_finish(failures)
        if not failures and block is None:
            self._then.append(("done", "the gates passed"))
            self._end("finished", summary or "finished")
            names = ", ".join(g.command for g in gates) or "no gates are required"
            return tools.Outcome(True, f"finished; gates passed: {names}\n")
        if block is None:  # the guard gave up blocking: the gates still fail
            self._end(
                "failed",
                "the gates still fail after [gates] max_blocks attempts: " + "; ".join(failures),
            )
            return tools.Outcome(False, "finish: the gates fail\n", "gates failed")
        self._then.append(("implement", "a gate failed" if failures else "keel refused to finish"))
        outputs = "".join(
            f"$ {g.command}\n{self._limited(g.output)}\n" for g in gates if not g.passed
        )
        text = f"finish refused: {block}\n{outputs}You are back in implement: fix it, then finish."
        self.state.evidence = text
        return tools.Outcome(False, text + "\n", "finish refused")

    def _gate(self, command: str) -> Gate:
        done = tools.run_command(
            self.root,
            command,
            timeout=self.timeout,
            contained=self.guard.contain,
            prefix=self.command_prefix,
        )
        gate = Gate(command, done.ok, done.exit_code, done.output)
        payload = GatePayload(command, done.ok, done.exit_code, tools.shown(done.output, 500))
        if self.guard.journal is not None:
            self.guard.journal.append(Event("gate", self.session_id, payload, agent="keel"))
        if self.guard.monitor is not None:
            self.guard.monitor.note_gate(command, done.ok)
        return gate

    # -- phases, guidance and the end -----------------------------------------------------------

    def _move(self, to: Any, why: str) -> Transition | None:
        change = self.phases.move(to, why, self.state.step)
        if change is None:
            return None
        self.state.phase = self.phases.phase
        self.progress.phase = self.phases.phase
        self.guard.note("plan", {"event": "agent.phase", **change.to_dict()})
        self.view.update(self.progress)
        return change

    def _after_guidance(self, guidance: Guidance | None) -> None:
        """Act on the monitor's standing guidance: a stop ends the run, a replan forces plan."""
        monitor = self.guard.monitor
        if monitor is None:
            return
        if monitor.state.stopped:
            self._end("stopped", f"keel's monitor stopped the run: {monitor.state.stopped}")
        elif monitor.state.replan and self.phases.phase in ("implement", "verify"):
            self._move("plan", f"the monitor asked for a new plan: {monitor.state.replan}")
            self.state.guidance.append(monitor.state.replan)
        if guidance is not None:
            self.progress.guidance = f"{guidance.level}: {guidance.message}"
            self.state.guidance.append(f"{guidance.level}: {guidance.message}")

    def _end(self, outcome: Outcome, reason: str, question: str | None = None) -> Ended:
        if self._ended is None:
            self._ended = Ended(outcome, reason, question)
        return self._ended

    # -- pieces ---------------------------------------------------------------------------------

    def _add(self, turn: Turn, call: ModelToolCall, args: dict[str, Any], text: str) -> None:
        turn.results.append(Message.tool(call.id, text))
        turn.summary.append(summary_line(turn.step, call.name, args, text))

    def _show(self, name: str, args: dict[str, Any], decision: Decision) -> None:
        self.progress.last_call = f"{name} {tools.shown(args, 80)}"
        self.progress.decision = f"{decision.decision} [{decision.rule}]"
        if not decision.allowed:
            self.progress.decision += f" {decision.reason}"
        self.view.update(self.progress)

    def _limited(self, text: str) -> str:
        return clipped(text, self.config.agent.tool_output_chars)

    def _constraints(self) -> str:
        return self.guard.session_context()

    def _repo_map(self) -> str:
        budget = self.config.agent.repo_map_tokens
        if budget <= 0:
            return ""
        return build_map(self.root, self.state.task, budget).text

    def _state_now(self) -> State:
        phase = self.phases.phase
        allowed = ALLOWED.get(phase, "")
        if phase in ("understand", "plan") and not self.phases.require_plan:
            allowed = "all tools ([agent] require_plan = false)"
        return State(
            phase,
            self.state.step + 1,
            self.max_steps,
            allowed,
            self.state.evidence,
            "\n".join(self.state.guidance),
        )

    def _sampling(self) -> Sampling:
        from keel.models import sampling_of

        return sampling_of(self.config.model)

    def suspend_record(self) -> dict[str, Any]:
        """The journal record of a run that waits for the user (``keel run --resume``)."""
        return {
            "event": "agent.suspended",
            "state": self.state.to_dict(),
            "require_plan": self.phases.require_plan,
            "history": [t.to_dict() for t in self.phases.history],
        }


def answered(text: str) -> str:
    """The tool result the model gets for the user's answer."""
    return f"The user answered: {text}\n"


def denied_text(decision: Decision) -> str:
    """What the agent is told when ``decision`` did not allow its call: rule, reason, suggestion."""
    text = f"keel denied this call [{decision.rule}]: {decision.reason}\n"
    if decision.suggestion:
        text += f"What to do: {decision.suggestion}\n"
    return text


def with_guidance(text: str, guidance: Guidance | None) -> str:
    """A tool's output with the monitor's guidance after it, as the agent gets it."""
    if guidance is None:
        return text
    return text + f"\nkeel guidance ({guidance.level}): {guidance.message}\n"


def clipped(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and its tail, the cut said."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3) :]
    return f"{head}\n… ({len(text) - len(head) - len(tail)} characters left out) …\n{tail}"


def carry_out(
    root: Path,
    guard: Guard,
    name: str,
    args: dict[str, Any],
    *,
    use_id: str,
    timeout: float,
    prefix: tuple[str, ...] = (),
) -> tools.Outcome:
    """Carry out a call of a ``FILE_TOOLS`` tool that ``guard`` allowed.

    ``keel run`` and ``keel mcp`` both call this after ``Guard.decide``: a command runs inside
    ``keel exec`` when the guard contains commands (``ran_as`` is the call to report to
    ``Guard.observe``), a patch is judged file by file by the guard's policy and journaled.
    """
    match name:
        case "read_file":
            return tools.read_file(root, args)
        case "search":
            return tools.search(root, args, timeout)
        case "list_files":
            return tools.list_files(root, args)
        case "run":
            command = str(args["command"])
            return tools.run_command(
                root, command, timeout=timeout, contained=guard.contain, prefix=prefix
            )
        case "write_file":
            return tools.write_file(root, args)
        case "apply_patch":
            return tools.apply_patch(
                root, args, guard.policy, guard.journal, guard.session_id, use_id
            )
        case _:
            raise ValueError(f"{name!r} is not one of {', '.join(sorted(FILE_TOOLS))}")


def ran_as(root: Path, guard: Guard, call: ToolCall, timeout: float) -> ToolCall:
    """``call`` as ``carry_out`` ran it: a contained command as its ``keel exec`` line.

    The guard takes a shell command reported as written, where it must be contained, for
    a client that ignored the rewrite, and denies every later one; keel contains the commands
    of its own tools itself (``tools.run_command``), so it reports the line it ran.
    """
    if call.kind != "exec" or not call.command or not guard.rewrite:
        return call
    from keel.sandbox.exec.line import encode

    line = encode(str(root), call.command, timeout=timeout)
    return call.replace(command=line)


def journal_event(guard: Guard, kind: Any, data: dict[str, Any]) -> None:
    """Append one free-form event of the run's session."""
    if guard.journal is not None:
        guard.journal.append(Event(kind, guard.session_id, DataPayload(data), agent="keel"))
