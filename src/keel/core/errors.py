"""Every exception keel raises, in one tree.

Each error carries a stable ``code`` (a short dotted string) that the CLI, the
journal and the monitor act on instead of message text. Foreign exceptions
(sqlite3, subprocess, tomllib, pydantic) are translated where they enter keel,
with ``raise Ours(...) from exc``.

    KeelError                      code
    ├── UserError                  you did it: fix the input and try again
    │   ├── UsageError             usage.*       bad CLI arguments
    │   ├── ConfigError            config.*      keel.toml (file, line, key)
    │   ├── PlanError              plan.*        an invalid plan
    │   ├── PatchError             patch.*       a patch that does not apply
    │   ├── PayloadError           payload.*     malformed hook or event input
    │   └── BindError              probe.arg_*   arguments that do not fit a probe's
    │                                            parameters; ``kind`` is ``arg_*``
    ├── RunError                   keel or the machine failed
    │   ├── JournalError           journal.*
    │   ├── SandboxError           sandbox.*
    │   │   └── ExecRefused        sandbox.*     ``keel exec`` or ``keel wrap`` did not run
    │   │       │                  exec.*        the command; ``status`` is the exit code
    │   │       │                  wrap.*
    │   │       └── ViewError      sandbox.*     the view would expose a secret or a
    │   │                                        system tree (exit 125)
    │   ├── ProbeError             probe.*
    │   ├── WorkspaceError         workspace.*
    │   ├── DemoFailed             demo.failed   keel did not do what ``keel demo`` promised
    │   └── ModelError             model.*       a model call failed or was refused;
    │       │                                    ``retryable`` says whether to try again
    │       ├── BudgetExceeded     model.budget  over a ``[model]`` budget: never sent
    │       └── JudgeError         judge.*       the judge's model answered with no valid
    │                                            verdict (malformed, off-schema, bad evidence)
    └── Signal                     control flow, handled by the caller
        ├── StopRequested          stop.active   the emergency stop is set
        ├── AlreadyAnswered        journal.already_answered   that request id was
        │                                        committed before: its stored outcome
        └── Failure                fs.*, git.*,  a probe's failed answer (``keel.probes``,
                                   http.*, ...   next to ``ProbeIssue``): the executor
                                                 turns it into a failed ``ProbeResult``

``keel exec`` refuses with ``UsageError`` (exit 2), ``ConfigError`` (125), ``StopRequested``
(126) or ``ExecRefused`` (its ``status``): ``keel.sandbox.exec._context.exit_status`` maps them.

Standard library only, and nothing but ``__future__`` at import (``typing`` would cost about
9 ms): ``keel exec`` and the hook raise these.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "AlreadyAnswered",
    "BindError",
    "BudgetExceeded",
    "ConfigError",
    "DemoFailed",
    "ExecRefused",
    "JournalError",
    "JudgeError",
    "KeelError",
    "ModelError",
    "PatchError",
    "PayloadError",
    "PlanError",
    "ProbeError",
    "RunError",
    "SandboxError",
    "Signal",
    "StopRequested",
    "UsageError",
    "UserError",
    "ViewError",
    "WorkspaceError",
]


class KeelError(Exception):
    """Root of keel's errors: a stable ``code``, a message and structured context."""

    default_code = "keel.error"

    def __init__(self, message: str, *, code: str | None = None, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.context: dict[str, Any] = context

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready object: code, message and context."""
        return {"code": self.code, "message": self.message, **self.context}


class UserError(KeelError):
    """The input was wrong: a config, a plan, a patch, arguments."""

    default_code = "user.error"


class UsageError(UserError):
    """Bad command-line usage (exit code 2)."""

    default_code = "usage.invalid"


class ConfigError(UserError):
    """keel.toml is malformed or invalid; ``file``, ``line`` and ``key`` say where."""

    default_code = "config.invalid"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        code: str | None = None,
    ) -> None:
        where = ":".join(str(p) for p in (file, line) if p is not None)
        full = f"{where}: {message}" if where else message
        if key and key not in message:
            full = f"{full} (key {key!r})"
        super().__init__(full, code=code, file=file, line=line, key=key)
        self.file, self.line, self.key = file, line, key


class PlanError(UserError):
    """A plan failed validation."""

    default_code = "plan.invalid"


class PatchError(UserError):
    """A patch could not be parsed or applied; nothing was written."""

    default_code = "patch.invalid"


class PayloadError(UserError):
    """A hook payload or an event could not be read."""

    default_code = "payload.invalid"


class BindError(UserError):
    """Arguments that do not fit a probe's parameters (count, names or types).

    ``kind`` is what is wrong (``arg_count``, ``arg_name``, ``arg_type``; the code is
    ``probe.<kind>``, a plan reports ``plan.<kind>``); ``param`` the parameter's name or the
    number of parameters, when there is one to point at.
    """

    default_code = "probe.arg_count"

    def __init__(self, kind: str, message: str, param: str | int | None = None) -> None:
        super().__init__(message, code=f"probe.{kind}", param=param)
        self.kind = kind
        self.param = param


class RunError(KeelError):
    """keel, or the machine under it, failed while doing its work."""

    default_code = "run.error"


class JournalError(RunError):
    """The journal could not be opened, appended to or read."""

    default_code = "journal.error"


class SandboxError(RunError):
    """No sandbox could be set up, or the sandboxed process failed to start."""

    default_code = "sandbox.error"


class ExecRefused(SandboxError):
    """``keel exec`` or ``keel wrap`` did not run the command; ``status`` is the exit code.

    125 (it could not be contained) unless the refusal says otherwise: 127 the command was
    not found, ``128 + N`` a signal N came before it started. Bad arguments, a bad keel.toml
    and the emergency stop refuse with ``UsageError``, ``ConfigError`` and ``StopRequested``.
    """

    default_code = "sandbox.refused"
    default_status = 125

    def __init__(self, message: str, code: str | None = None, status: int | None = None) -> None:
        status = self.default_status if status is None else status
        super().__init__(message, code=code, status=status)
        self.status = status


class ViewError(ExecRefused):
    """The view a command asked for would expose a secret or a system tree (exit 125)."""

    default_code = "sandbox.view"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message, code)


class ProbeError(RunError):
    """A probe could not run (not: a probe that ran and found a problem)."""

    default_code = "probe.error"


class WorkspaceError(RunError):
    """A checkpoint, rollback or file operation failed."""

    default_code = "workspace.error"


class DemoFailed(RunError):
    """keel did not do what ``keel demo`` promised."""

    default_code = "demo.failed"


class ModelError(RunError):
    """A model call failed (connection, timeout, HTTP status, bad response) or was refused.

    ``retryable`` is true for failures worth another attempt (429, 5xx, connection errors,
    timeouts); ``status`` is the HTTP status when there was one; ``retry_after`` the seconds a
    server asked to wait. Messages never carry an API key or an Authorization header.
    """

    default_code = "model.error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, code=code, status=status, **context)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class BudgetExceeded(ModelError):
    """A model call would go over a ``[model]`` budget of the session; it was not sent."""

    default_code = "model.budget"


class JudgeError(ModelError):
    """The judge's model answered, but with no valid verdict (``keel.judge``).

    Codes: ``judge.malformed`` (not JSON, or not a verdict object), ``judge.schema`` (a field
    missing, of the wrong type or out of range), ``judge.evidence`` (evidence pointing at
    steps the judge was not shown). The answer was journaled; nothing is delivered.
    """

    default_code = "judge.malformed"


class Signal(KeelError):
    """Control flow: not a failure, handled by whoever asked."""

    default_code = "signal"


class StopRequested(Signal):
    """The emergency stop is set; every decision is deny."""

    default_code = "stop.active"


class AlreadyAnswered(Signal):
    """The journal already committed a transaction with this request id; nothing was written.

    ``outcome`` is the outcome stored with that first transaction: the answer to give again.
    """

    default_code = "journal.already_answered"

    def __init__(self, outcome: dict[str, Any], *, request_id: str | None = None) -> None:
        super().__init__(
            f"request {request_id!r} was already answered",
            request_id=request_id,
            outcome=outcome,
        )
        self.outcome = outcome
        self.request_id = request_id
