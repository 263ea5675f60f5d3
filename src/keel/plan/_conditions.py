"""Conditions: three-valued evaluation at run time, and what they guarantee, statically.

Evaluation is Kleene logic over ``True``/``False``/``None`` (unknown): an operand that names
missing evidence is unknown, ``and``/``or``/``not`` propagate unknown, and an unknown condition
never commits (a conditional takes its false branch; a final action does not run). Only
``defined`` and ``exists`` turn missing evidence into a plain ``False``.

:func:`guards` is the static side: the variables a condition being true proves are defined.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, assert_never

from keel.plan._model import Condition
from keel.plan._template import UNDEFINED, Ref, as_text, refs_in, render, whole_ref

Tri = bool | None
MAX_MATCH_INPUT = 10_000
MAX_PATTERN = 500


@dataclass(slots=True)
class Evaluation:
    """The outcome of one condition: the value, what it read, and sentences for the report."""

    value: Tri
    missing: set[str] = field(default_factory=set[str])
    facts: list[str] = field(default_factory=list[str])


def evaluate(condition: Condition, lookup: Callable[[Ref], Any]) -> Evaluation:
    """Evaluate ``condition`` with variables from ``lookup`` (``UNDEFINED`` when absent)."""
    out = Evaluation(None)
    out.value = _eval(condition, lookup, out)
    return out


def _operand(item: Any, lookup: Callable[[Ref], Any], out: Evaluation) -> Any:
    if isinstance(item, Condition):
        value = _eval(item, lookup, out)
        return UNDEFINED if value is None else value
    value, missing = render(item, lookup)
    out.missing.update(r.var for r in missing)
    return UNDEFINED if missing else value


def _truth(item: Any, lookup: Callable[[Ref], Any], out: Evaluation) -> Tri:
    if isinstance(item, Condition):
        return _eval(item, lookup, out)
    value = _operand(item, lookup, out)
    if value is UNDEFINED:
        return None
    ref = whole_ref(item)
    if ref is not None:
        out.facts.append(f"{ref.text} is {as_text(value)}")
    return bool(value)


def _eval(cond: Condition, lookup: Callable[[Ref], Any], out: Evaluation) -> Tri:
    items = cond.vars
    match cond.op:
        case "and":
            values = [_truth(i, lookup, out) for i in items]
            return False if False in values else None if None in values else True
        case "or":
            values = [_truth(i, lookup, out) for i in items]
            return True if True in values else None if None in values else False
        case "not":
            value = _truth(items[0], lookup, out) if items else None
            return None if value is None else not value
        case "defined" | "exists":
            return _defined(cond, lookup, out)
        case _:
            return _compare(cond, lookup, out)


def _defined(cond: Condition, lookup: Callable[[Ref], Any], out: Evaluation) -> Tri:
    result = True
    for item in cond.vars:
        ref = whole_ref(item)
        value = lookup(ref) if ref is not None else item
        ok = value is not UNDEFINED and (cond.op == "defined" or value is not None)
        name = ref.text if ref else as_text(item)
        out.facts.append(
            f"{name} is {'' if ok else 'not '}{'defined' if cond.op == 'defined' else 'present'}"
        )
        result = result and ok
    return result


def _compare(cond: Condition, lookup: Callable[[Ref], Any], out: Evaluation) -> Tri:
    if len(cond.vars) != 2:
        return None
    left = _operand(cond.vars[0], lookup, out)
    right = _operand(cond.vars[1], lookup, out)
    if left is UNDEFINED or right is UNDEFINED:
        return None
    try:
        value = _apply(cond.op, left, right)
    except (TypeError, ValueError, re.error):
        out.facts.append(f"cannot compare {as_text(left)} {cond.op} {as_text(right)}")
        return None
    out.facts.append(_sentence(cond.op, left, right, value))
    return value


def _apply(op: str, left: Any, right: Any) -> bool:
    match op:
        case "equals":
            return left == right
        case "not_equals":
            return left != right
        case "in":
            return _contains(right, left)
        case "contains":
            return _contains(left, right)
        case "gt":
            return left > right
        case "ge":
            return left >= right
        case "lt":
            return left < right
        case "le":
            return left <= right
        case "matches":
            if not isinstance(left, str) or not isinstance(right, str) or len(right) > MAX_PATTERN:
                raise TypeError("matches needs a string and a short pattern")
            return re.search(right, left[:MAX_MATCH_INPUT]) is not None
        case _:
            raise ValueError(op)


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        if not isinstance(item, str):
            raise TypeError("a string contains only strings")
        return item in container
    if isinstance(container, list | dict):
        return item in container
    raise TypeError("not a container")


def _sentence(op: str, left: Any, right: Any, value: bool) -> str:
    a, b = as_text(left), as_text(right)
    neg = "" if value else "not "
    match op:
        case "in":
            return (
                f"{a!r} is {neg}among {b}" if isinstance(right, list) else f"{a!r} is {neg}in {b!r}"
            )
        case "contains":
            return f"{a} does {'' if value else 'not '}contain {b!r}"
        case "equals" | "not_equals":
            same = value if op == "equals" else not value
            return f"{a!r} {'equals' if same else 'does not equal'} {b!r}"
        case "matches":
            return f"{a!r} does {'' if value else 'not '}match /{b}/"
        case _:
            return f"{a} {op} {b} is {str(value).lower()}"


def guards(condition: Condition | None, positive: bool = True) -> frozenset[str]:
    """Variables proven defined when ``condition`` is true (``positive``) or false."""
    if condition is None:
        return frozenset()
    items = condition.vars
    op = condition.op
    match op:
        case "and" | "or":
            parts = [_item_guards(i, positive) for i in items]
            union = op == ("and" if positive else "or")
            if not parts:
                return frozenset()
            if union:
                return frozenset().union(*parts)
            return frozenset.intersection(*parts)
        case "not":
            return _item_guards(items[0], not positive) if items else frozenset()
        case "defined" | "exists":
            if not positive:
                return frozenset()
            return frozenset(r.var for i in items if (r := whole_ref(i)) is not None)
        case "equals" | "not_equals" | "in" | "contains" | "gt" | "ge" | "lt" | "le" | "matches":
            return _all_refs(condition)
        case _:
            assert_never(op)


def _item_guards(item: Any, positive: bool) -> frozenset[str]:
    if isinstance(item, Condition):
        return guards(item, positive)
    ref = whole_ref(item)
    # a bare {{var}} is unknown (never true or false) when var is undefined
    return frozenset({ref.var}) if ref is not None else _all_refs(item)


def _all_refs(item: Any) -> frozenset[str]:
    if isinstance(item, Condition):
        found: set[str] = set()
        for sub in item.vars:
            found |= _all_refs(sub)
        return frozenset(found)
    return frozenset(r.var for r in refs_in(item))


def condition_refs(condition: Condition | None) -> set[str]:
    """Every variable a condition reads."""
    return set(_all_refs(condition)) if condition is not None else set()
