"""Final actions without a model: output, prompt, write, append, patch, command.

``output.result`` and ``ui.prompt_user`` only report. Writes and commands are refused when the
commitment lint flagged the step, when no policy is available, or when ``Guard.decide`` (the
one decision path: the emergency stop, then the policy) does not allow them; every answer is
journaled as a ``decision``. Files are written inside the workspace without following
symlinks; commands run in the sandbox in ``exec`` mode, on a scratch copy or overlay whose
changes never reach the workspace.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.calls import ToolCall
from keel.core.decision import Decision
from keel.core.patchtext import patch_paths
from keel.core.schema import KeelConfig
from keel.plan._actions import ActionSpec
from keel.plan._report import ActionRecord
from keel.plan._template import as_text
from keel.plan._validate import Issue
from keel.probes import Failure, ProbeContext
from keel.probes._fs import contain

OUTPUT_CAP = 4000


@dataclass(slots=True)
class Committer:
    """Carries out one final action and says what happened."""

    workspace: Path
    decide: Callable[[ToolCall], Decision] | None
    """``Guard.decide`` of the plan's session; None refuses every action with an effect."""
    policy: Any
    """The policy ``apply_patch`` checks each path with (the guard's)."""
    exec_sandbox: Any
    config: KeelConfig
    on_decision: Callable[[Decision, str], None]

    def commit(
        self, step_id: str, spec: ActionSpec, args: dict[str, Any], findings: Sequence[Issue]
    ) -> ActionRecord:
        """Run the action, or refuse it with a reason."""
        name = spec.name
        if spec.effect != "none":
            if findings:
                reason = "commitment lint: " + "; ".join(f.message for f in findings)
                return ActionRecord(step_id, name, "refused", args, reason=reason)
            if self.decide is None:
                return ActionRecord(step_id, name, "refused", args, reason="no policy is available")
        match name:
            case "output.result" | "ui.prompt_user":
                return ActionRecord(
                    step_id, name, "done", args, output=as_text(args.get("message"))
                )
            case "file.write" | "file.append":
                return self._write(step_id, name, args)
            case "patch.apply":
                return self._patch(step_id, args)
            case "command.run":
                return self._command(step_id, args)
            case _:
                return ActionRecord(step_id, name, "refused", args, reason="not supported")

    def _ask_policy(
        self, step_id: str, name: str, args: dict[str, Any], call: ToolCall, subject: str
    ) -> ActionRecord | None:
        decision = _decided(self.decide, call)
        self.on_decision(decision, subject)
        if decision.allowed:
            return None
        return ActionRecord(
            step_id, name, "refused", args, reason=f"policy: {decision.reason} [{decision.rule}]",
            decision=decision.to_dict(),
        )  # fmt: skip

    def _write(self, step_id: str, name: str, args: dict[str, Any]) -> ActionRecord:
        path, content = str(args["path"]), str(args["content"])
        call = ToolCall(name, "write", paths=(path,))
        refused = self._ask_policy(step_id, name, args, call, path)
        if refused is not None:
            return refused
        try:
            written = write_file(self.workspace, path, content, append=name == "file.append")
        except Failure as failure:
            return ActionRecord(step_id, name, "failed", args, reason=failure.issue.describe())
        verb = "appended" if name == "file.append" else "wrote"
        return ActionRecord(step_id, name, "done", args, output=f"{verb} {written} bytes to {path}",
                            decision={"decision": "allow"})  # fmt: skip

    def _patch(self, step_id: str, args: dict[str, Any]) -> ActionRecord:
        text = str(args["patch"])
        for target in patch_paths(text):
            call = ToolCall("patch.apply", "edit", paths=(target,))
            refused = self._ask_policy(step_id, "patch.apply", args, call, target)
            if refused is not None:
                return refused
        from keel.core.errors import KeelError
        from keel.workspace.patch import apply_patch

        try:
            result = apply_patch(self.workspace, text, policy=self.policy)
        except KeelError as exc:
            return ActionRecord(
                step_id, "patch.apply", "failed", args, reason=f"{exc.message} [{exc.code}]"
            )
        return ActionRecord(step_id, "patch.apply", "done", args, output=str(result)[:OUTPUT_CAP])

    def _command(self, step_id: str, args: dict[str, Any]) -> ActionRecord:
        line = str(args["command"])
        call = ToolCall("command.run", "exec", command=line)
        refused = self._ask_policy(step_id, "command.run", args, call, line)
        if refused is not None:
            return refused
        if self.exec_sandbox is None:
            return ActionRecord(
                step_id, "command.run", "refused", args, reason="no sandbox to run commands in"
            )
        timeout = float(args.get("timeout") or self.config.probes.command_timeout_seconds)
        from keel.core.errors import SandboxError

        try:
            done = self.exec_sandbox.run(
                ["/bin/sh", "-c", line], workspace=self.workspace, mode="exec", timeout=timeout
            )
        except SandboxError as exc:
            return ActionRecord(
                step_id, "command.run", "failed", args, reason=f"{exc.message} [{exc.code}]"
            )
        output = (done.stdout + done.stderr)[-OUTPUT_CAP:].decode("utf-8", "replace")
        if done.timed_out:
            return ActionRecord(
                step_id,
                "command.run",
                "failed",
                args,
                output=output,
                reason=f"timed out after {timeout:g} s",
            )
        status = "done" if done.exit_code == 0 else "failed"
        reason = None if status == "done" else f"exit code {done.exit_code}"
        return ActionRecord(step_id, "command.run", status, args, output=output, reason=reason)


def _decided(decide: Callable[[ToolCall], Decision] | None, call: ToolCall) -> Decision:
    if decide is None:
        return Decision.deny("internal_error", "no policy is available")
    try:
        return decide(call)
    except Exception as exc:  # Guard.decide never raises; a stand-in might: fail closed
        return Decision.deny("internal_error", f"the policy failed: {type(exc).__name__}")


def write_file(workspace: Path, path: str, content: str, *, append: bool) -> int:
    """Write or append text inside the workspace; never through a symlink, never to a non-file."""
    ctx = ProbeContext(Path(os.path.realpath(workspace)))
    real = contain(ctx, path, follow=False)
    parent = real.parent
    if not parent.is_dir():
        raise Failure("fs.not_found", f"the directory of {path!r} does not exist")
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    flags |= os.O_APPEND if append else os.O_TRUNC
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise Failure("fs.not_regular", f"{path!r} is not a regular file")
    data = content.encode("utf-8")
    try:
        fd = os.open(real, flags, 0o644)
    except OSError as exc:
        raise Failure("fs.write", f"cannot open {path!r}: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Failure("fs.not_regular", f"{path!r} is not a regular file")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise Failure("fs.write", f"cannot write {path!r}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    return len(data)
