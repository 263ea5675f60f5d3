"""Data probes: pure functions over values earlier probes returned (they touch nothing)."""

from __future__ import annotations

from typing import Any

from keel.probes._fs import ProbeContext
from keel.probes._result import Failure

_MISSING = object()


def get_nested_value(
    ctx: ProbeContext, obj: Any, path: str | list[Any], default: Any = None
) -> Any:
    """The value at a dotted ``path`` (``database.host``, ``items.0.name``), else ``default``."""
    parts: list[Any] = path.split(".") if isinstance(path, str) else list(path)
    current: Any = obj
    for depth, part in enumerate(parts):
        current = _step(current, part)
        if current is _MISSING:
            where = ".".join(str(p) for p in parts[: depth + 1])
            ctx.note(f"{where!r} is not present; the default {default!r} is used")
            return default
    return current


def _step(current: Any, part: Any) -> Any:
    if isinstance(current, dict):
        return current.get(str(part), _MISSING)
    if isinstance(current, list):
        try:
            index = int(part)
        except (TypeError, ValueError):
            return _MISSING
        return current[index] if -len(current) <= index < len(current) else _MISSING
    return _MISSING


def keys(ctx: ProbeContext, obj: Any) -> list[str]:
    """The keys of an object."""
    if not isinstance(obj, dict):
        raise Failure("data.not_object", f"expected an object, got {type_of(ctx, obj)}")
    return [str(k) for k in obj]


def type_of(ctx: ProbeContext, obj: Any) -> str:
    """The JSON type name: object, array, string, number, boolean or null."""
    del ctx
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "boolean"
    if isinstance(obj, int | float):
        return "number"
    if isinstance(obj, str):
        return "string"
    if isinstance(obj, list):
        return "array"
    return "object"


def length(ctx: ProbeContext, obj: Any) -> int:
    """The length of a string, array or object."""
    if isinstance(obj, str | list | dict):
        return len(obj)
    raise Failure("data.no_length", f"a {type_of(ctx, obj)} has no length")


def value(ctx: ProbeContext, obj: Any) -> Any:
    """The value itself: binds a constant (or a template) to a variable."""
    del ctx
    return obj
