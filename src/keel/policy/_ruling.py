"""``Ruling``: the policy engine's verdict, and the rules for picking the strictest of several.

A ``Ruling`` is ``(decision, rule, reason, suggestion)``: a named tuple, so the fast
``keel policy check`` path builds one without dataclass machinery. ``keel.policy.Policy``
turns it into a :class:`keel.core.decision.Decision` (whose ``Verdict`` is the decision word alone).

``RuleBase`` holds what every group of rules needs: the preset's levels for what the engine
does not know or cannot parse, and the input checks.
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import NamedTuple

    class Ruling(NamedTuple):
        """One verdict: ``allow``/``ask``/``deny``, the rule id, the reason, a suggestion."""

        decision: str
        rule: str
        reason: str
        suggestion: str | None

else:
    Ruling = collections.namedtuple("Ruling", ("decision", "rule", "reason", "suggestion"))

RANK = {"allow": 0, "ask": 1, "deny": 2}
_PRIORITY = {"constraint": 0, "input": 0, "risk": 1, "path": 2, "network": 2, "parse": 3}
_SUGGESTIONS = {
    "input": "send smaller, plain UTF-8 text",
    "path": "work on files inside the workspace, named literally",
    "network": "use hosts on [policy] network_allow, or ask the user",
    "parse": "write the command out literally, one simple command at a time",
    "risk": "find a safer way, or ask the user",
    "constraint": "the constraint is in keel.toml; find another way",
    "internal_error": "report this as a keel bug; the action was blocked to be safe",
}


def allow(rule: str, reason: str) -> Ruling:
    """An allow."""
    return Ruling("allow", rule, reason, None)


def deny(rule: str, reason: str, suggestion: str | None = None) -> Ruling:
    """A deny."""
    return Ruling("deny", rule, reason, suggestion)


NO_VERDICT = Ruling("deny", "internal_error", "no verdict", None)
"""What an empty list of verdicts comes to where one is required."""


def _priority(v: Ruling) -> int:
    if v[0] == "allow":
        return 0 if v[1].startswith(("preset.", "config.")) else 1
    return _PRIORITY.get(v[1].split(".", 1)[0], 4)


def with_suggestion(v: Ruling) -> Ruling:
    """``v``, with a generic suggestion for an ask or deny that has none."""
    if v[0] == "allow" or v[3]:
        return v
    hint = _SUGGESTIONS.get(v[1].split(".", 1)[0], "ask the user, or change keel.toml")
    return Ruling(v[0], v[1], v[2], hint)


def worst(verdicts: list[Ruling]) -> Ruling | None:
    """The strictest verdict (deny > ask > allow).

    Ties go to the most specific rule (constraint, risk, path or network, parse, command
    pattern; for allows the command pattern), then to the first.
    """
    best: Ruling | None = None
    for v in verdicts:
        if best is None or (RANK[v[0]], -_priority(v)) > (RANK[best[0]], -_priority(best)):
            best = v
    return best


class RuleBase:
    """The levels and input checks every group of rules shares."""

    unknown: str
    """The preset's verdict for what no rule allows (``ask`` or ``deny``)."""
    unparseable: str
    """The preset's verdict for what the parser cannot resolve."""
    max_input: int
    contained: bool
    """Every command allowed runs inside ``keel exec``."""
    runs_code: bool
    """Contained, and the preset lets project code run (developer): code the text cannot
    show runs in the sandbox like any other project code."""

    def level(self, which: str, rule: str, reason: str, suggestion: str | None) -> Ruling:
        """A verdict at the preset's ``unknown`` or ``unparseable`` level (ask or deny)."""
        return Ruling(
            self.unknown if which == "unknown" else self.unparseable, rule, reason, suggestion
        )

    def bad_input(self, text: object, what: str) -> Ruling | None:
        """A deny for input that cannot be judged (not text, NUL, not UTF-8, too large)."""
        if not isinstance(text, str):
            return deny("input.type", f"the {what} is not text")
        if "\x00" in text:
            return deny("input.nul", f"the {what} contains a NUL byte", "remove the NUL byte")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            return deny("input.encoding", f"the {what} is not valid UTF-8", "send UTF-8 text")
        if size > self.max_input:
            return deny(
                "input.too_large",
                f"the {what} is {size} bytes, over [limits] max_input_bytes ({self.max_input})",
                "split it into smaller steps",
            )
        return None
