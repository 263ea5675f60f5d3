"""``{{var}}`` and ``{{var.path}}`` templates in plan arguments, questions and conditions.

A string that is exactly one template takes the variable's value with its type (an object stays
an object); a template inside other text is rendered as text (JSON for lists and objects).
``.path`` walks object keys and list indexes. Variables that are not bound make the value
:data:`UNDEFINED`, which callers treat as "no evidence", never as a value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)((?:\.[^\s.{}]+)*)\s*\}\}")
_OPEN = re.compile(r"\{\{")


class _Undefined:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Any = _Undefined()


@dataclass(frozen=True, slots=True)
class Ref:
    """One template reference: the variable and the path inside it."""

    var: str
    path: tuple[str, ...]

    @property
    def text(self) -> str:
        """``var.path`` as written."""
        return ".".join((self.var, *self.path))


def refs_in(value: Any) -> Iterator[Ref]:
    """Every template reference in a value (strings, lists and objects, recursively)."""
    if isinstance(value, str):
        for match in TEMPLATE.finditer(value):
            path = tuple(p for p in match.group(2).split(".") if p)
            yield Ref(match.group(1), path)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from refs_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from refs_in(item)


def bad_templates(text: str) -> list[str]:
    """The ``{{`` fragments in ``text`` that are not well-formed templates."""
    good = {m.start() for m in TEMPLATE.finditer(text)}
    return [text[m.start() : m.start() + 30] for m in _OPEN.finditer(text) if m.start() not in good]


def whole_ref(value: Any) -> Ref | None:
    """The reference when ``value`` is a string that is exactly one template."""
    if isinstance(value, str):
        match = TEMPLATE.fullmatch(value.strip())
        if match:
            return Ref(match.group(1), tuple(p for p in match.group(2).split(".") if p))
    return None


_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\.[^\s.{}$]+)*)")
_WRAPPERS = (("${", "}"), ("$", ""), ("{", "}"))


def bare_ref(value: Any) -> Ref | None:
    """The reference ``value`` would be if it were written as a template, else ``None``.

    Matches a variable named without ``{{ }}``: ``name``, ``name.path``, ``$name``,
    ``${name}`` and ``{name}``. A proper template (``{{name}}``) is not bare. Whether the
    name is one of the plan's variables is the caller's question.
    """
    if not isinstance(value, str) or whole_ref(value) is not None:
        return None
    text = value.strip()
    for head, tail in _WRAPPERS:
        if text.startswith(head) and text.endswith(tail) and len(text) > len(head) + len(tail):
            text = text[len(head) : len(text) - len(tail)].strip()
            break
    match = _NAME.fullmatch(text)
    if match is None:
        return None
    return Ref(match.group(1), tuple(p for p in match.group(2).split(".") if p))


def lookup(ref: Ref, variables: Mapping[str, Any]) -> Any:
    """The value a reference names, or ``UNDEFINED``."""
    if ref.var not in variables:
        return UNDEFINED
    current = variables[ref.var]
    for part in ref.path:
        if isinstance(current, dict):
            current = current.get(part, UNDEFINED)
        elif isinstance(current, list) and part.lstrip("-").isdigit():
            index = int(part)
            size = len(current)
            current = current[index] if -size <= index < size else UNDEFINED
        else:
            return UNDEFINED
        if current is UNDEFINED:
            return UNDEFINED
    return current


def as_text(value: Any) -> str:
    """How a value reads inside a longer string."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def render(value: Any, lookup_ref: Callable[[Ref], Any]) -> tuple[Any, list[Ref]]:
    """``value`` with its templates filled in, and the references that were undefined."""
    missing: list[Ref] = []

    def fill(item: Any) -> Any:
        if isinstance(item, str):
            ref = whole_ref(item)
            if ref is not None:
                found = lookup_ref(ref)
                if found is UNDEFINED:
                    missing.append(ref)
                return found

            def one(match: re.Match[str]) -> str:
                ref = Ref(match.group(1), tuple(p for p in match.group(2).split(".") if p))
                found = lookup_ref(ref)
                if found is UNDEFINED:
                    missing.append(ref)
                    return match.group(0)
                return as_text(found)

            return TEMPLATE.sub(one, item)
        if isinstance(item, list | tuple):
            return [fill(i) for i in item]
        if isinstance(item, dict):
            return {k: fill(v) for k, v in item.items()}
        return item

    return fill(value), missing
