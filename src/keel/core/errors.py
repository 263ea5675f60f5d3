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
    │   └── PayloadError           payload.*     malformed hook or event input
    ├── RunError                   keel or the machine failed
    │   ├── JournalError           journal.*
    │   ├── SandboxError           sandbox.*
    │   ├── ProbeError             probe.*
    │   ├── WorkspaceError         workspace.*
    │   └── ModelError             model.*       a model call failed or was refused;
    │       │                                    ``retryable`` says whether to try again
    │       └── BudgetExceeded     model.budget  over a ``[model]`` budget: never sent
    └── Signal                     control flow, handled by the caller
        ├── StopRequested          stop.active   the emergency stop is set
        └── AlreadyAnswered        journal.already_answered   that request id was
                                                 committed before: its stored outcome
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyAnswered",
    "BudgetExceeded",
    "ConfigError",
    "JournalError",
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


class RunError(KeelError):
    """keel, or the machine under it, failed while doing its work."""

    default_code = "run.error"


class JournalError(RunError):
    """The journal could not be opened, appended to or read."""

    default_code = "journal.error"


class SandboxError(RunError):
    """No sandbox could be set up, or the sandboxed process failed to start."""

    default_code = "sandbox.error"


class ProbeError(RunError):
    """A probe could not run (not: a probe that ran and found a problem)."""

    default_code = "probe.error"


class WorkspaceError(RunError):
    """A checkpoint, rollback or file operation failed."""

    default_code = "workspace.error"


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
