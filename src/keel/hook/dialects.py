"""What each client understands back: stdout JSON, stderr and the exit code.

- **Claude Code**: ``hookSpecificOutput.permissionDecision`` (``allow``/``ask``/``deny``) with
  ``permissionDecisionReason`` before a tool; ``{"decision": "block", "reason"}`` after a tool
  (the reason reaches the model next to the real output) and on ``Stop`` (the model continues
  with the reason); ``hookSpecificOutput.additionalContext`` on ``SessionStart``,
  ``UserPromptSubmit`` and ``PostToolUse``.
- **Codex CLI**: the same JSON, but it rejects unknown fields, answers a bare ``allow`` with
  an error and ignores ``ask``; so keel sends ``deny``, an ``ask`` becomes a deny whose
  reason says a person must approve, and ``allow`` goes out only with ``updatedInput``. A
  ``PostToolUse`` block *replaces* the tool output, so guidance short of ``replan`` goes
  out as ``additionalContext``.
- **Gemini CLI**: ``{"decision": "deny", "reason"}`` on ``BeforeTool`` (the Claude-style
  permissionDecision is silently ignored: the command would run), ``AfterTool`` (replaces the
  output) and ``AfterAgent`` (a retry with the reason as the prompt);
  ``hookSpecificOutput.additionalContext`` on ``SessionStart``, ``BeforeAgent``, ``AfterTool``.

A shell command keel allows is rewritten to run inside ``keel exec`` (``contained``), in each
client's own rewrite contract, measured with the pinned clients (tests/clients/REWRITE.md):
Claude's ``updatedInput`` with ``permissionDecision`` and ``hookEventName``, Codex's
``updatedInput.command`` with ``allow``, Gemini's ``hookSpecificOutput.tool_input``.

A search the policy allows that reads contents below a directory gets keel's exclude globs for
secret files (``excluding``) in the same contracts: Claude's Grep ``glob`` (its ``!`` pieces
come last, and ripgrep gives the later glob precedence), Gemini's ``read_many_files``
``exclude``. Codex has no such tool.

Every client treats exit code 2 with the reason on stderr as "block": that is the channel for
failing closed, because it works even when keel could not build its JSON answer.

Standard library only: this runs on every hook call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, assert_never

from keel.core.decision import Decision, Guidance
from keel.core.errors import PayloadError
from keel.hook.protocol import Agent, HookInput


@dataclass(frozen=True, slots=True)
class HookReply:
    """What the hook process writes and how it exits."""

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""


def deny_text(decision: Decision, tool: str | None) -> str:
    """The reason the model reads when keel refuses a call."""
    what = f"this {tool} call" if tool else "this call"
    verb = "needs a person's approval for" if decision.decision == "ask" else "denied"
    text = f"keel {verb} {what} [{decision.rule}]: {decision.reason}"
    if decision.suggestion:
        stop = "" if text.endswith((".", "!", "?")) else "."
        text += f"{stop} Instead: {decision.suggestion}"
    return text


def guidance_text(guidance: Guidance) -> str:
    """The guidance the model reads after a tool ran."""
    return f"keel guidance ({guidance.level}, {guidance.detector}): {guidance.message}"


def _json(value: dict[str, Any]) -> HookReply:
    return HookReply(0, json.dumps(value, ensure_ascii=False))


def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _exit2(reason: str) -> HookReply:
    return HookReply(2, "", reason.rstrip() + "\n")


class Dialect:
    """Claude Code's dialect; the base for the others."""

    agent: Agent = "claude"
    silence = HookReply()
    can_ask = True

    def pre_tool(self, inp: HookInput, decision: Decision) -> HookReply:
        """The answer before a tool runs: nothing for allow, a deny or ask with the reason.

        An allow stays silent rather than granting permission, so the client's own permission
        rules still apply on top of keel's: keel only ever takes permissions away.
        """
        match decision.decision:
            case "allow":
                return self.silence
            case "ask" if self.can_ask:
                return self._permission(inp, "ask", deny_text(decision, inp.tool_name))
            case "ask" | "deny":
                return self._permission(inp, "deny", deny_text(decision, inp.tool_name))
            case _:
                assert_never(decision.decision)

    def _permission(self, inp: HookInput, verdict: str, reason: str) -> HookReply:
        return _json(
            {
                "hookSpecificOutput": {
                    "hookEventName": inp.event,
                    "permissionDecision": verdict,
                    "permissionDecisionReason": reason,
                }
            }
        )

    def contained(self, inp: HookInput, decision: Decision, command: str) -> HookReply:
        """Run the shell call as ``command`` (its ``keel exec`` line) instead.

        Claude Code replaces the whole tool input with ``updatedInput`` (so every other
        argument is kept), applies it only with ``hookEventName``, and needs the allow:
        without it, its own permission check judges the wrapper. An ask shows the wrapped
        command for the person to approve.
        """
        verdict = "allow" if decision.allowed else "ask"
        reason = "keel: runs contained (keel exec)"
        if not decision.allowed:
            reason = deny_text(decision, inp.tool_name) + " (it will run contained)"
        return _json(
            {
                "hookSpecificOutput": {
                    "hookEventName": inp.event,
                    "permissionDecision": verdict,
                    "permissionDecisionReason": reason,
                    "updatedInput": {**inp.tool_input, "command": command},
                }
            }
        )

    def excluding(self, inp: HookInput, decision: Decision, excludes: tuple[str, ...]) -> HookReply:
        """Run the search with ``excludes`` (basename globs of secret files) left out.

        Claude Code's Grep runs ripgrep with one ``--glob`` per piece of its ``glob`` (split
        on white space), after the pattern and in order, and ripgrep gives the later glob
        precedence: ``!GLOB`` pieces appended after the model's own exclude whatever those
        select. ``updatedInput`` replaces the whole input, so every argument is sent back.
        No ``permissionDecision`` goes with an allow: the rewritten call is still a Grep of
        the same path, and Claude's own permission check judges it as it would have (keel
        only ever takes permissions away). An ask asks, with the rewrite.

        Raises:
            PayloadError: a tool this client cannot be given excludes for.
        """
        if inp.tool_name != "Grep":
            raise PayloadError(
                f"keel cannot add excludes to {inp.tool_name}", code="payload.no_excludes"
            )
        own = inp.tool_input.get("glob")
        pieces = [own] if isinstance(own, str) and own.strip() else []
        pieces += [f"!{glob}" for glob in excludes]
        out: dict[str, Any] = {"hookEventName": inp.event}
        if not decision.allowed:
            out["permissionDecision"] = "ask"
            out["permissionDecisionReason"] = deny_text(decision, inp.tool_name)
        out["updatedInput"] = {**inp.tool_input, "glob": " ".join(pieces)}
        return _json({"hookSpecificOutput": out})

    def post_tool(self, inp: HookInput, guidance: Guidance | None) -> HookReply:
        """Guidance after a tool ran: context for a hint, a block reason above that."""
        if guidance is None:
            return self.silence
        text = guidance_text(guidance)
        if guidance.level == "hint":
            return _json(_context(inp.event, text))
        return _json({"decision": "block", "reason": text})

    def stop(self, inp: HookInput, block_reason: str | None) -> HookReply:
        """Allow finishing, or block it with the reason the model continues from."""
        if block_reason is None:
            return self.silence
        return _json({"decision": "block", "reason": block_reason})

    def context(self, inp: HookInput, text: str) -> HookReply:
        """Re-inject pinned constraints and guidance where the event can carry context."""
        if not text or inp.phase not in ("session_start", "prompt"):
            return self.silence
        return _json(_context(inp.event, text))

    def blocked(self, inp: HookInput | None, reason: str) -> HookReply:
        """Fail closed: exit 2 with the reason on stderr, which every client treats as block.

        A stop event the client is already continuing from is let through, so a broken keel
        cannot trap the agent in a loop of blocked finishes.
        """
        if inp is not None and inp.phase == "stop" and inp.stop_hook_active:
            return HookReply(0, self.silence.stdout, reason.rstrip() + "\n")
        return _exit2(reason)


class CodexDialect(Dialect):
    """Codex CLI: Claude's JSON without ``allow``/``ask``, and a strict schema."""

    agent: Agent = "codex"
    can_ask = False

    def excluding(self, inp: HookInput, decision: Decision, excludes: tuple[str, ...]) -> HookReply:
        """Codex has no search tool of its own (0.171.0: ``view_image`` reads one file).

        Raises:
            PayloadError: always.
        """
        raise PayloadError(
            f"keel cannot add excludes to Codex's {inp.tool_name}", code="payload.no_excludes"
        )

    def contained(self, inp: HookInput, decision: Decision, command: str) -> HookReply:
        """Codex takes only ``command`` from ``updatedInput``, and only with the allow."""
        if not decision.allowed:
            return self.pre_tool(inp, decision)
        return _json(
            {
                "hookSpecificOutput": {
                    "hookEventName": inp.event,
                    "permissionDecision": "allow",
                    "updatedInput": {"command": command},
                }
            }
        )

    def post_tool(self, inp: HookInput, guidance: Guidance | None) -> HookReply:
        """Context up to ``correct``; a block (which replaces the output) from ``replan``."""
        if guidance is None:
            return self.silence
        text = guidance_text(guidance)
        if guidance.level in ("hint", "correct"):
            return _json(_context(inp.event, text))
        return _json({"decision": "block", "reason": text})


class GeminiDialect(Dialect):
    """Gemini CLI: ``decision``/``reason`` at the top level, its own event names."""

    agent: Agent = "gemini"
    silence = HookReply(0, "{}")
    can_ask = False

    def _permission(self, inp: HookInput, verdict: str, reason: str) -> HookReply:
        return _json({"decision": "deny", "reason": reason})

    def contained(self, inp: HookInput, decision: Decision, command: str) -> HookReply:
        """Gemini replaces the call's arguments with ``tool_input``: all are sent back."""
        if not decision.allowed:
            return self.pre_tool(inp, decision)
        return _json({"hookSpecificOutput": {"tool_input": {**inp.tool_input, "command": command}}})

    def excluding(self, inp: HookInput, decision: Decision, excludes: tuple[str, ...]) -> HookReply:
        """``read_many_files`` with ``**/GLOB`` for each of ``excludes`` in its ``exclude``.

        Gemini globs with ``ignore`` set to its default excludes plus ``exclude`` (all of
        them, with ``useDefaultExcludes`` false too), so an added entry always applies.
        ``tool_input`` replaces the arguments: every one is sent back.

        Raises:
            PayloadError: a tool this client cannot be given excludes for.
        """
        if not decision.allowed:
            return self.pre_tool(inp, decision)
        if inp.tool_name != "read_many_files":
            raise PayloadError(
                f"keel cannot add excludes to {inp.tool_name}", code="payload.no_excludes"
            )
        own = inp.tool_input.get("exclude")
        kept = [e for e in own if isinstance(e, str)] if isinstance(own, list) else []
        exclude = [*kept, *(f"**/{glob}" for glob in excludes)]
        return _json({"hookSpecificOutput": {"tool_input": {**inp.tool_input, "exclude": exclude}}})

    def post_tool(self, inp: HookInput, guidance: Guidance | None) -> HookReply:
        """Context up to ``correct``; a deny (which replaces the output) from ``replan``."""
        if guidance is None:
            return self.silence
        text = guidance_text(guidance)
        if guidance.level in ("hint", "correct"):
            return _json(_context(inp.event, text))
        return _json({"decision": "deny", "reason": text})

    def stop(self, inp: HookInput, block_reason: str | None) -> HookReply:
        """``AfterAgent`` deny: Gemini retries with the reason as the next prompt."""
        if block_reason is None:
            return self.silence
        return _json({"decision": "deny", "reason": block_reason})


_DIALECTS: dict[str, Dialect] = {
    "claude": Dialect(),
    "codex": CodexDialect(),
    "gemini": GeminiDialect(),
}


def dialect_for(agent: str) -> Dialect:
    """The dialect of ``agent``; Claude's exit-2 channel for an unknown agent."""
    return _DIALECTS.get(agent, _DIALECTS["claude"])
