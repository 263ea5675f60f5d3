"""What a probe returns: a value, or a structured error; never an exception.

Standard library only: the sandboxed runner imports this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from keel.core.errors import Signal


@dataclass(frozen=True, slots=True)
class ProbeIssue:
    """A structured probe error: a stable code, a message and, where known, a place."""

    code: str
    message: str
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "code": self.code,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeIssue:
        """Rebuild from :meth:`to_dict` output."""
        line, column = data.get("line"), data.get("column")
        return cls(
            code=str(data.get("code", "probe.error")),
            message=str(data.get("message", "")),
            line=line if isinstance(line, int) else None,
            column=column if isinstance(column, int) else None,
        )

    def describe(self) -> str:
        """``message (line L, column C) [code]``."""
        where = ", ".join(
            f"{name} {value}"
            for name, value in (("line", self.line), ("column", self.column))
            if value
        )
        return f"{self.message}{f' ({where})' if where else ''} [{self.code}]"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """The outcome of one probe: ``ok`` with a JSON value, or an ``error``; plus notes."""

    ok: bool
    value: Any = None
    error: ProbeIssue | None = None
    notes: tuple[str, ...] = field(default=())
    """Findings that do not make the probe fail: a BOM, NUL bytes, ragged rows, a default used."""
    duration_ms: float | None = None
    backend: str | None = None
    """Where the probe ran: a sandbox name, ``host`` or ``in-process``."""

    @classmethod
    def success(cls, value: Any, notes: tuple[str, ...] = ()) -> ProbeResult:
        """A probe that ran and found ``value``."""
        return cls(True, value, None, notes)

    @classmethod
    def failure(
        cls,
        code: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        notes: tuple[str, ...] = (),
    ) -> ProbeResult:
        """A probe that ran into a structured error."""
        return cls(False, None, ProbeIssue(code, message, line, column), notes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the runner's output line)."""
        return {
            "ok": self.ok,
            "value": self.value,
            "error": self.error.to_dict() if self.error else None,
            "notes": list(self.notes),
            "duration_ms": self.duration_ms,
            "backend": self.backend,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ProbeResult:
        """Rebuild from :meth:`to_dict` output; a malformed dict is a structured error."""
        if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
            return cls.failure("probe.bad_output", "the probe runner returned a malformed result")
        error = data.get("error")
        notes = data.get("notes") or []
        duration = data.get("duration_ms")
        return cls(
            ok=data["ok"],
            value=data.get("value"),
            error=ProbeIssue.from_dict(error) if isinstance(error, dict) else None,
            notes=tuple(str(n) for n in notes) if isinstance(notes, list) else (),
            duration_ms=float(duration) if isinstance(duration, int | float) else None,
            backend=data.get("backend") if isinstance(data.get("backend"), str) else None,
        )


class Failure(Signal):
    """Raised inside a probe function; the executor turns it into a failed ``ProbeResult``.

    A probe's answer, not keel failing (that is ``ProbeError``): ``code`` is the issue's
    (``fs.*``, ``git.*``, ``http.*``, ``json.*``...), ``issue`` the whole of it.
    """

    def __init__(
        self, code: str, message: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        super().__init__(message, code=code, line=line, column=column)
        self.issue = ProbeIssue(code, message, line, column)
