"""Conditions, evaluated in this process: true, false or *unknown* (missing evidence), with
the sentences the evidence report shows; the variables a condition proves defined (guards) and
every variable it reads.
"""

from __future__ import annotations

from typing import Any

import pytest
from plan_engine_helpers import _c

from keel.plan._conditions import Evaluation, condition_refs, evaluate, guards
from keel.plan._model import Condition
from keel.plan._template import lookup

ENV: dict[str, Any] = {
    "ok": True,
    "no": False,
    "n": 7,
    "s": "abc",
    "lst": ["a", "b"],
    "obj": {"k": "v"},
    "nul": None,
    "big": "x" * 10_000 + "y",
}


def _eval(condition: dict[str, Any], env: dict[str, Any] | None = None) -> Evaluation:
    variables = ENV if env is None else env
    return evaluate(Condition.model_validate(condition), lambda ref: lookup(ref, variables))


# (condition, value, facts, missing)
EVALUATIONS: list[tuple[dict[str, Any], bool | None, list[str], set[str]]] = [
    # and / or / not: Kleene logic; a bare {{var}} reads as "var is ..."
    (_c("and", "{{ok}}", "{{ok}}"), True, ["ok is true", "ok is true"], set()),
    (_c("and", "{{ok}}", "{{no}}"), False, ["ok is true", "no is false"], set()),
    (_c("and", "{{ok}}", "{{gone}}"), None, ["ok is true"], {"gone"}),
    (_c("and", "{{gone}}", "{{no}}"), False, ["no is false"], {"gone"}),
    (_c("and", "{{obj.k}}"), True, ["obj.k is v"], set()),
    (_c("and", "{{obj.zz}}"), None, [], {"obj"}),
    (_c("and", True), True, [], set()),
    (_c("and", ""), False, [], set()),
    (_c("and", "x{{no}}"), True, [], set()),
    (_c("and", "x{{gone}}"), None, [], {"gone"}),
    (_c("and"), True, [], set()),
    (_c("or", "{{no}}", "{{ok}}"), True, ["no is false", "ok is true"], set()),
    (_c("or", "{{no}}", "{{no}}"), False, ["no is false", "no is false"], set()),
    (_c("or", "{{no}}", "{{gone}}"), None, ["no is false"], {"gone"}),
    (_c("or", "{{gone}}", "{{ok}}"), True, ["ok is true"], {"gone"}),
    (_c("or"), False, [], set()),
    (_c("not", "{{ok}}"), False, ["ok is true"], set()),
    (_c("not", "{{no}}"), True, ["no is false"], set()),
    (_c("not", "{{gone}}"), None, [], {"gone"}),
    (_c("not"), None, [], set()),
    (_c("and", _c("not", "{{no}}"), _c("or", "{{gone}}", "{{ok}}")), True,
     ["no is false", "ok is true"], {"gone"}),
    (_c("and", _c("not", "{{gone}}")), None, [], {"gone"}),
    # defined / exists: missing evidence is a plain false, never unknown
    (_c("defined", "{{nul}}"), True, ["nul is defined"], set()),
    (_c("exists", "{{nul}}"), False, ["nul is not present"], set()),
    (_c("exists", "{{obj.k}}"), True, ["obj.k is present"], set()),
    (_c("defined", "{{gone}}"), False, ["gone is not defined"], set()),
    (_c("exists", "{{gone}}"), False, ["gone is not present"], set()),
    (_c("defined", "{{ok}}", "{{gone}}"), False, ["ok is defined", "gone is not defined"], set()),
    (_c("defined", "{{gone}}", "{{ok}}"), False, ["gone is not defined", "ok is defined"], set()),
    (_c("defined", "{{ok}}", "{{n}}"), True, ["ok is defined", "n is defined"], set()),
    (_c("exists", "lit"), True, ["lit is present"], set()),
    (_c("exists", None), False, ["null is not present"], set()),
    # comparisons and their sentences
    (_c("equals", "{{n}}", 7), True, ["'7' equals '7'"], set()),
    (_c("equals", "{{s}}", "abd"), False, ["'abc' does not equal 'abd'"], set()),
    (_c("not_equals", "{{s}}", "abd"), True, ["'abc' does not equal 'abd'"], set()),
    (_c("not_equals", "{{s}}", "abc"), False, ["'abc' equals 'abc'"], set()),
    (_c("in", "b", "{{lst}}"), True, ["'b' is among [\"a\", \"b\"]"], set()),
    (_c("in", "z", "{{lst}}"), False, ["'z' is not among [\"a\", \"b\"]"], set()),
    (_c("in", "b", "{{s}}"), True, ["'b' is in 'abc'"], set()),
    (_c("in", "z", "{{s}}"), False, ["'z' is not in 'abc'"], set()),
    (_c("in", "k", "{{obj}}"), True, ["'k' is in '{\"k\": \"v\"}'"], set()),
    (_c("in", "z", "{{obj}}"), False, ["'z' is not in '{\"k\": \"v\"}'"], set()),
    (_c("contains", "{{s}}", "b"), True, ["abc does contain 'b'"], set()),
    (_c("contains", "{{s}}", "z"), False, ["abc does not contain 'z'"], set()),
    (_c("contains", "{{lst}}", "a"), True, ["[\"a\", \"b\"] does contain 'a'"], set()),
    (_c("contains", "{{lst}}", "z"), False, ["[\"a\", \"b\"] does not contain 'z'"], set()),
    (_c("contains", "{{obj}}", "k"), True, ["{\"k\": \"v\"} does contain 'k'"], set()),
    (_c("contains", "{{s}}", 5), None, ["cannot compare abc contains 5"], set()),
    (_c("contains", "{{n}}", 5), None, ["cannot compare 7 contains 5"], set()),
    (_c("in", 5, "{{s}}"), None, ["cannot compare 5 in abc"], set()),
    (_c("gt", "{{n}}", 5), True, ["7 gt 5 is true"], set()),
    (_c("gt", "{{n}}", 7), False, ["7 gt 7 is false"], set()),
    (_c("ge", "{{n}}", 7), True, ["7 ge 7 is true"], set()),
    (_c("ge", "{{n}}", 8), False, ["7 ge 8 is false"], set()),
    (_c("lt", "{{n}}", 7), False, ["7 lt 7 is false"], set()),
    (_c("lt", "{{n}}", 8), True, ["7 lt 8 is true"], set()),
    (_c("le", "{{n}}", 7), True, ["7 le 7 is true"], set()),
    (_c("le", "{{n}}", 6), False, ["7 le 6 is false"], set()),
    (_c("gt", "a", 1), None, ["cannot compare a gt 1"], set()),
    (_c("matches", "{{s}}", "^a.c$"), True, ["'abc' does match /^a.c$/"], set()),
    (_c("matches", "{{s}}", "z"), False, ["'abc' does not match /z/"], set()),
    (_c("matches", "{{n}}", "7"), None, ["cannot compare 7 matches 7"], set()),
    (_c("matches", "{{s}}", "("), None, ["cannot compare abc matches ("], set()),
    (_c("matches", "{{s}}", "a" * 501), None, [f"cannot compare abc matches {'a' * 501}"], set()),
    (_c("matches", "{{s}}", "abc|" + "z" * 496), True, [f"'abc' does match /abc|{'z' * 496}/"],
     set()),  # a pattern of exactly MAX_PATTERN (500) characters is still used
    (_c("matches", "{{big}}", "y"), False, ["'" + "x" * 10_000 + "y' does not match /y/"], set()),
    # missing operands make a comparison unknown; so does a wrong number of operands
    (_c("equals", "{{gone}}", 1), None, [], {"gone"}),
    (_c("equals", 1, "{{gone}}"), None, [], {"gone"}),
    (_c("equals", "x{{gone}}", "x{{gone}}"), None, [], {"gone"}),
    (_c("equals", 1), None, [], set()),
    (_c("equals", 1, 1, 1), None, [], set()),
    (_c("equals", _c("and", "{{ok}}"), True), True, ["ok is true", "'true' equals 'true'"], set()),
    (_c("equals", _c("and", "{{no}}"), False), True, ["no is false", "'false' equals 'false'"],
     set()),
    (_c("equals", _c("and", "{{gone}}"), True), None, [], {"gone"}),
]  # fmt: skip


@pytest.mark.parametrize(("condition", "value", "facts", "missing"), EVALUATIONS)
def test_a_condition_is_true_false_or_unknown_with_its_sentences(
    condition: dict[str, Any], value: bool | None, facts: list[str], missing: set[str]
) -> None:
    result = _eval(condition)
    assert (result.value, result.facts, result.missing) == (value, facts, missing)


# (condition, positive, variables proven defined)
GUARDS: list[tuple[dict[str, Any] | None, bool, set[str]]] = [
    (None, True, set()),
    (None, False, set()),
    (_c("and", "{{a}}", "{{b}}"), True, {"a", "b"}),
    (_c("and", "{{a}}", "{{b}}"), False, set()),
    (_c("and", "{{a}}", "{{a.x}}"), False, {"a"}),
    (_c("or", "{{a}}", "{{b}}"), True, set()),
    (_c("or", "{{a}}", "{{a}}"), True, {"a"}),
    (_c("or", "{{a}}", "{{b}}"), False, {"a", "b"}),
    (_c("and"), True, set()),
    (_c("or"), True, set()),
    (_c("and", "x{{a}}", "{{b}} and {{c}}"), True, {"a", "b", "c"}),
    (_c("not", _c("defined", "{{a}}")), True, set()),
    (_c("not", _c("defined", "{{a}}")), False, {"a"}),
    (_c("not", "{{a}}"), True, {"a"}),
    (_c("not"), True, set()),
    (_c("defined", "{{a}}", "lit", "x{{b}}", "{{c.d}}"), True, {"a", "c"}),
    (_c("exists", "{{a}}"), True, {"a"}),
    (_c("defined", "{{a}}"), False, set()),
    (_c("exists", "{{a}}"), False, set()),
    (_c("and", _c("defined", "{{a}}"), _c("exists", "{{b}}")), True, {"a", "b"}),
    (_c("or", _c("defined", "{{a}}"), _c("equals", "{{a}}", "{{b}}")), True, {"a"}),
    (_c("equals", _c("and", "{{x}}", "{{y}}"), "{{z.w}} {{v}}"), True, {"x", "y", "z", "v"}),
    (_c("equals", _c("and", _c("or", "{{x}}"), "{{y}}"), 1), False, {"x", "y"}),
]
COMPARISONS = ("equals", "not_equals", "in", "contains", "gt", "ge", "lt", "le", "matches")
GUARDS += [(_c(op, "{{a.b}}", "x{{c}}"), True, {"a", "c"}) for op in COMPARISONS]


@pytest.mark.parametrize(("condition", "positive", "proven"), GUARDS)
def test_guards_are_the_variables_a_condition_proves_defined(
    condition: dict[str, Any] | None, positive: bool, proven: set[str]
) -> None:
    parsed = Condition.model_validate(condition) if condition is not None else None
    assert guards(parsed, positive) == frozenset(proven)


def test_guards_by_default_are_what_a_true_condition_proves() -> None:
    condition = Condition.model_validate(_c("defined", "{{a}}"))
    assert guards(condition) == frozenset({"a"})


def test_condition_refs_are_every_variable_read() -> None:
    assert condition_refs(None) == set()
    nested = _c("or", _c("defined", "{{a.x}}"), _c("equals", "{{b}}", "p {{c}} q"), "{{d}}")
    assert condition_refs(Condition.model_validate(nested)) == {"a", "b", "c", "d"}
