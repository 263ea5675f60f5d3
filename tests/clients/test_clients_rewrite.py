"""How each pinned client treats a hook that rewrites a shell call, measured by effect.

keel contains an allowed shell command by rewriting the call in PreToolUse/BeforeTool to
``keel exec -- bash -c '<original>'``. A client that ignores the rewrite runs the original
command uncontained, so these tests pin each client's rewrite contract with a hook that is not
keel (``fakes/reply_hook.py`` prints a fixed reply) and a stand-in wrapper
(``fakes/fake_exec.py``). The original command creates ``original.txt``, the rewritten one
``rewritten.txt``: which file exists says which command ran. A PostToolUse/AfterTool hook logs
the command the client reports as run, so keel can tell an ignored rewrite afterwards.

Findings and the table built from these tests: tests/clients/REWRITE.md.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from client_harness import Run, Turn, make_base, new_project, run_client

pytestmark = [pytest.mark.clients, pytest.mark.slow]

FAKES = Path(__file__).resolve().parent / "fakes"
REPLY_HOOK = FAKES / "reply_hook.py"
FAKE_EXEC = FAKES / "fake_exec.py"

ORIGINAL = "echo original > original.txt"
INNER = "echo rewritten > rewritten.txt; echo REWRITTEN-OUTPUT"
WRAPPED = shlex.join([sys.executable, "-S", str(FAKE_EXEC), "--", "bash", "-c", INNER])
"""The rewrite in keel's shape: a wrapper program in front of ``bash -c '<command>'``."""

SETTINGS = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json"}
SETTINGS["gemini"] = ".gemini/settings.json"
PRE = {"claude": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}
POST = {"claude": "PostToolUse", "codex": "PostToolUse", "gemini": "AfterTool"}
MATCHER = {"claude": "Bash", "codex": ".*", "gemini": ".*"}
AGENTS = ["claude", "codex", "gemini"]
SLOW = 1.0
"""Seconds a deliberately slow hook waits before it answers (hooks start in parallel)."""


@dataclass(frozen=True)
class Hook:
    """One registered hook command: its event, a label for the log, its fixed reply."""

    event: str
    label: str
    reply: dict[str, Any] | None = None
    delay: float | None = None


@dataclass
class RewriteRun:
    run: Run
    calls: list[dict[str, Any]]

    @property
    def project(self) -> Path:
        return self.run.project

    def exists(self, name: str) -> bool:
        return (self.project / name).exists()

    def ran(self) -> set[str]:
        """Which of the scripted commands ran, by the files they created."""
        names = {"original.txt", "rewritten.txt", "a.txt", "b.txt"}
        return {n.removesuffix(".txt") for n in names if self.exists(n)}

    def post_inputs(self) -> list[dict[str, Any]]:
        """``tool_input`` of every PostToolUse/AfterTool call: what the client says ran."""
        return [c["stdin"]["tool_input"] for c in self.calls if c["label"] == "post"]

    def post_commands(self) -> list[str]:
        return [i["command"] for i in self.post_inputs()]

    def diagnose(self) -> str:
        return f"{self.run.diagnose()}\nhook calls: {json.dumps(self.calls)[-3000:]}"


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def shell(agent: str, command: str, **extra: Any) -> Turn:
    match agent:
        case "claude":
            return Turn(tool="Bash", input={"command": command, "description": "run it", **extra})
        case "codex":
            return Turn(tool="exec_command", input={"cmd": command, **extra})
        case _:
            return Turn(
                tool="run_shell_command",
                input={"command": command, "description": "run it", **extra},
            )


def claude_style(
    updated: dict[str, Any] | None, *, decision: str | None = "allow", event: bool = True
) -> dict[str, Any]:
    """A PreToolUse reply in Claude Code's shape (Codex reads the same JSON)."""
    out: dict[str, Any] = {"hookEventName": "PreToolUse"} if event else {}
    if decision is not None:
        out["permissionDecision"] = decision
    if updated is not None:
        out["updatedInput"] = updated
    return {"hookSpecificOutput": out}


def gemini_style(tool_input: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A BeforeTool reply in Gemini CLI's shape: ``extra`` goes into hookSpecificOutput."""
    top = {k: extra.pop(k) for k in list(extra) if k == "decision"}
    return {**top, "hookSpecificOutput": {**extra, "tool_input": tool_input}}


def rewrite_run(
    agent: str,
    base: Path,
    hooks: list[Hook],
    turn: Turn,
    *,
    permissions: dict[str, Any] | None = None,
    extra_args: list[str] | None = None,
    claude_allowed_tools: str | None = "Bash,Read,Edit,Write",
) -> RewriteRun:
    """Register ``hooks`` (each in its own matcher group) plus a logging post hook, run once."""
    project = new_project(base, "", {"sub/keep.txt": "", "other/keep.txt": ""})
    log = base / "hook-calls.jsonl"
    table: dict[str, list[dict[str, Any]]] = {}
    for i, hook in enumerate([*hooks, Hook(POST[agent], "post")]):
        reply = ""
        if hook.reply is not None:
            path = base / f"reply-{i}.json"
            path.write_text(json.dumps(hook.reply))
            reply = str(path)
        argv = [sys.executable, "-S", str(REPLY_HOOK), str(log), hook.label, reply]
        if hook.delay is not None:
            argv.append(str(hook.delay))
        entry: dict[str, Any] = {"type": "command", "command": shlex.join(argv)}
        entry = (
            {"name": hook.label, **entry, "timeout": 30_000}
            if agent == "gemini"
            else {**entry, "timeout": 30}
        )
        table.setdefault(hook.event, []).append({"matcher": MATCHER[agent], "hooks": [entry]})
    settings: dict[str, Any] = {"hooks": table}
    if permissions is not None:
        settings["permissions"] = permissions
    path = project / SETTINGS[agent]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings))
    run = run_client(
        agent,
        project,
        [turn],
        install=False,
        extra_args=extra_args,
        claude_allowed_tools=claude_allowed_tools,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return RewriteRun(run, calls)


# -- what the model is told --------------------------------------------------------------------


def claude_history(run: Run) -> tuple[dict[str, Any], str]:
    """The tool_use input and the tool_result text in the request after the tool call."""
    messages = run.model.requests[1]["messages"]
    use = next(
        b
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    )
    result = next(
        b
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )
    return use["input"], json.dumps(result["content"])


def codex_history(run: Run) -> tuple[dict[str, Any], str]:
    items = run.model.requests[1]["input"]
    call = next(i for i in items if i.get("type") == "function_call")
    output = next(i for i in items if i.get("type") == "function_call_output")
    return json.loads(call["arguments"]), json.dumps(output["output"])


def gemini_history(run: Run) -> tuple[dict[str, Any], str]:
    parts = [p for c in run.model.requests[1]["contents"] for p in c.get("parts", [])]
    call = next(p["functionCall"] for p in parts if "functionCall" in p)
    response = next(p["functionResponse"] for p in parts if "functionResponse" in p)
    return call["args"], json.dumps(response["response"])


# -- Claude Code -------------------------------------------------------------------------------


def test_claude_rewrite_with_allow_runs_the_rewritten_command(base: Path) -> None:
    r = rewrite_run(
        "claude",
        base,
        [Hook("PreToolUse", "pre", claude_style({"command": WRAPPED}))],
        shell("claude", ORIGINAL),
    )
    assert r.ran() == {"rewritten"}, r.diagnose()
    assert r.post_commands() == [WRAPPED]
    called, result = claude_history(r.run)
    assert called["command"] == ORIGINAL  # the history keeps the model's own call
    assert "REWRITTEN-OUTPUT" in result  # ... and the rewritten command's output


@pytest.mark.parametrize("allowed", [True, False], ids=["allowedTools", "no_allowedTools"])
def test_claude_rewrite_without_permission_decision(base: Path, allowed: bool) -> None:
    """Applied, but Claude's own permission check then judges the rewritten command."""
    r = rewrite_run(
        "claude",
        base,
        [Hook("PreToolUse", "pre", claude_style({"command": WRAPPED}, decision=None))],
        shell("claude", ORIGINAL),
        claude_allowed_tools="Bash" if allowed else None,
    )
    if allowed:
        assert r.ran() == {"rewritten"}, r.diagnose()
        assert r.post_commands() == [WRAPPED]
    else:
        # the wrapper is not a command Claude can check: refused in -p, the original never runs
        assert r.ran() == set(), r.diagnose()
        _, result = claude_history(r.run)
        assert "REWRITTEN-OUTPUT" not in result


def test_claude_rewrite_without_hook_event_name_is_ignored(base: Path) -> None:
    reply = claude_style({"command": WRAPPED}, event=False)
    r = rewrite_run("claude", base, [Hook("PreToolUse", "pre", reply)], shell("claude", ORIGINAL))
    assert r.ran() == {"original"}, r.diagnose()
    assert r.post_commands() == [ORIGINAL]  # PostToolUse shows that the rewrite was lost


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
def test_claude_updated_input_replaces_the_whole_tool_input(base: Path, keep: bool) -> None:
    """``updatedInput`` is the new input, not a patch: keys it leaves out (timeout) are gone."""
    model_input = {"command": ORIGINAL, "description": "run it", "timeout": 60000}
    updated = {**model_input, "command": WRAPPED} if keep else {"command": WRAPPED}
    r = rewrite_run(
        "claude",
        base,
        [Hook("PreToolUse", "pre", claude_style(updated))],
        Turn(tool="Bash", input=model_input),
    )
    assert r.ran() == {"rewritten"}, r.diagnose()
    assert r.post_inputs() == [updated]


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "wrapped"])
def test_claude_deny_rules_judge_the_rewritten_command(base: Path, wrapped: bool) -> None:
    """A settings deny rule beats the hook's allow and sees the rewrite, not inside a wrapper."""
    inner = "touch rewritten.txt"
    command = (
        shlex.join([sys.executable, "-S", str(FAKE_EXEC), "--", "bash", "-c", inner])
        if wrapped
        else inner
    )
    r = rewrite_run(
        "claude",
        base,
        [Hook("PreToolUse", "pre", claude_style({"command": command}))],
        shell("claude", ORIGINAL),
        permissions={"deny": ["Bash(touch:*)"]},
    )
    assert r.ran() == ({"rewritten"} if wrapped else set()), r.diagnose()


# -- Codex CLI ---------------------------------------------------------------------------------


def test_codex_rewrite_with_allow_runs_the_rewritten_command(base: Path) -> None:
    r = rewrite_run(
        "codex",
        base,
        [Hook("PreToolUse", "pre", claude_style({"command": WRAPPED}))],
        shell("codex", ORIGINAL),
    )
    assert r.ran() == {"rewritten"}, r.diagnose()
    assert r.calls[0]["stdin"]["tool_name"] == "Bash"
    assert r.calls[0]["stdin"]["tool_input"] == {"command": ORIGINAL}
    assert r.post_commands() == [WRAPPED]
    called, result = codex_history(r.run)
    assert called == {"cmd": ORIGINAL}
    assert "REWRITTEN-OUTPUT" in result


@pytest.mark.parametrize(
    "reply",
    [
        claude_style({"command": WRAPPED}, decision=None),
        claude_style({"command": WRAPPED}, event=False),
    ],
    ids=["no_permission_decision", "no_hook_event_name"],
)
def test_codex_ignored_rewrite_runs_the_original(base: Path, reply: dict[str, Any]) -> None:
    r = rewrite_run("codex", base, [Hook("PreToolUse", "pre", reply)], shell("codex", ORIGINAL))
    assert r.ran() == {"original"}, r.diagnose()
    assert r.post_commands() == [ORIGINAL]


def test_codex_rewrite_without_a_command_string_fails_the_call(base: Path) -> None:
    """``updatedInput`` needs ``command`` (the hook's key), not ``cmd`` (the model's)."""
    reply = claude_style({"cmd": WRAPPED})
    r = rewrite_run("codex", base, [Hook("PreToolUse", "pre", reply)], shell("codex", ORIGINAL))
    assert r.ran() == set(), r.diagnose()
    assert r.post_commands() == []
    _, result = codex_history(r.run)
    assert "without string field `command`" in result


def test_codex_rewrite_keeps_the_calls_other_arguments(base: Path) -> None:
    """Only ``command`` is taken from ``updatedInput``: the model's workdir stays."""
    reply = claude_style({"command": "pwd > where.txt", "workdir": "other"})
    r = rewrite_run(
        "codex",
        base,
        [Hook("PreToolUse", "pre", reply)],
        shell("codex", "pwd > original.txt", workdir="sub"),
    )
    assert r.exists("sub/where.txt"), r.diagnose()
    assert (r.project / "sub" / "where.txt").read_text().strip() == str(r.project / "sub")


def test_codex_apply_patch_accepts_a_rewritten_patch(base: Path) -> None:
    def patch(name: str) -> str:
        return f"*** Begin Patch\n*** Add File: {name}\n+hello\n*** End Patch\n"

    reply = claude_style({"command": patch("rewritten.txt")})
    r = rewrite_run(
        "codex",
        base,
        [Hook("PreToolUse", "pre", reply)],
        Turn(tool="apply_patch", custom=True, input={"input": patch("original.txt")}),
        extra_args=["-m", "gpt-5.5"],
    )
    assert r.ran() == {"rewritten"}, r.diagnose()
    assert r.calls[-1]["stdin"]["tool_name"] == "apply_patch"
    assert r.post_commands() == [patch("rewritten.txt")]


# -- Gemini CLI --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        gemini_style({"command": WRAPPED}),
        gemini_style({"command": WRAPPED}, decision="allow"),
        gemini_style({"command": WRAPPED}, hookEventName="BeforeTool"),
    ],
    ids=["bare", "decision_allow", "hook_event_name"],
)
def test_gemini_rewrite_runs_the_rewritten_command(base: Path, reply: dict[str, Any]) -> None:
    r = rewrite_run("gemini", base, [Hook("BeforeTool", "pre", reply)], shell("gemini", ORIGINAL))
    assert r.ran() == {"rewritten"}, r.diagnose()
    assert r.post_commands() == [WRAPPED]
    called, result = gemini_history(r.run)
    assert called["command"] == ORIGINAL
    assert "REWRITTEN-OUTPUT" in result
    assert "modified by a hook" in result  # Gemini tells the model that a hook changed the call


@pytest.mark.parametrize(
    "reply",
    [claude_style({"command": WRAPPED}), {"tool_input": {"command": WRAPPED}}],
    ids=["claude_style", "top_level_tool_input"],
)
def test_gemini_ignored_rewrite_runs_the_original(base: Path, reply: dict[str, Any]) -> None:
    r = rewrite_run("gemini", base, [Hook("BeforeTool", "pre", reply)], shell("gemini", ORIGINAL))
    assert r.ran() == {"original"}, r.diagnose()
    assert r.post_commands() == [ORIGINAL]


def test_gemini_tool_input_replaces_the_args(base: Path) -> None:
    """Not a merge: a rewrite without the model's dir_path runs in the project root."""
    reply = gemini_style({"command": "pwd > where.txt"})
    r = rewrite_run(
        "gemini",
        base,
        [Hook("BeforeTool", "pre", reply)],
        shell("gemini", "pwd > original.txt", dir_path="sub"),
    )
    assert r.exists("where.txt") and not r.exists("sub/where.txt"), r.diagnose()
    assert r.post_inputs() == [{"command": "pwd > where.txt"}]


# -- several hooks -----------------------------------------------------------------------------


def _rewrite(agent: str, command: str) -> dict[str, Any]:
    return (
        gemini_style({"command": command})
        if agent == "gemini"
        else claude_style({"command": command})
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_one_rewriting_hook_among_several_is_applied(base: Path, agent: str) -> None:
    """anthropics/claude-code#15897 (rewrite lost when several hooks ran) does not reproduce.

    The other hook answers nothing and finishes last.
    """
    hooks = [
        Hook(PRE[agent], "rewriter", _rewrite(agent, WRAPPED)),
        Hook(PRE[agent], "silent", None, delay=SLOW),
    ]
    r = rewrite_run(agent, base, hooks, shell(agent, ORIGINAL))
    assert r.ran() == {"rewritten"}, r.diagnose()
    assert r.post_commands() == [WRAPPED]


@pytest.mark.parametrize("slow", ["a", "b"])
@pytest.mark.parametrize("agent", AGENTS)
def test_two_rewriting_hooks_one_wins(base: Path, agent: str, slow: str) -> None:
    """Claude and Codex: the hook that finishes last wins (a race); Gemini: the last registered.

    Both hooks see the original call, so rewrites never compose: another rewriting hook can
    replace keel's wrapper, and the PostToolUse command shows it.
    """
    hooks = [
        Hook(PRE[agent], "a", _rewrite(agent, "echo a > a.txt"), SLOW if slow == "a" else None),
        Hook(PRE[agent], "b", _rewrite(agent, "echo b > b.txt"), SLOW if slow == "b" else None),
    ]
    r = rewrite_run(agent, base, hooks, shell(agent, ORIGINAL))
    winner = "b" if agent == "gemini" else slow
    assert r.ran() == {winner}, r.diagnose()
    assert r.post_commands() == [f"echo {winner} > {winner}.txt"]
    seen = [c["stdin"]["tool_input"]["command"] for c in r.calls if c["label"] in ("a", "b")]
    assert seen == [ORIGINAL, ORIGINAL]
