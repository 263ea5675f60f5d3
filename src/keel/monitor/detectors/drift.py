"""``plan_drift``: ``drift_window`` calls in a row whose files the plan does not mention → hint.

A plan is stated by an event of kind ``plan`` or a planning tool (``[monitor] planning_tools``);
``set_plan`` keeps its first steps and the distinctive words in them (file names, stems,
identifiers), and a call touching a file whose name shares a word with the plan is on plan.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from keel.monitor._calls import path_like
from keel.monitor._context import Detector, Finding

if TYPE_CHECKING:
    from keel.monitor._context import Context, Seen

_PLAN_CAP = 256
_GENERIC = frozenset(
    {
        "src", "lib", "app", "pkg", "test", "tests", "main", "index", "init", "__init__", "py",
        "js", "ts", "md", "txt", "json", "the", "and", "for", "with", "this", "that", "then",
        "file", "files", "code", "run", "use", "add", "fix", "make", "from", "into", "all",
    }
)  # fmt: skip
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*")
_SPLIT_ID = re.compile(r"[_.\-/]+")


class Drift(Detector):
    """Work on files the current plan does not mention."""

    name = "plan_drift"

    def before(self, ctx: Context, seen: Seen) -> list[Finding]:
        """A hint every ``drift_window`` off-plan calls in a row."""
        st, paths = ctx.state, seen.targets
        plan = _plan_words(ctx)
        if not plan or not paths:
            return []
        if any(_target_words(p) & plan for p in paths):
            st.drift = 0
            return []
        st.drift += 1
        if st.drift % ctx.settings.drift_window:
            return []
        steps = "; ".join(st.plan_steps[:3])
        text = (
            f"The last {st.drift} calls touched files the current plan does not mention "
            f"(latest: `{paths[0]}`; plan: {steps}). Instead: return to the plan's current step, "
            "or state a new plan if the work has moved."
        )
        return [Finding("plan_drift", "hint", text, {"calls": st.drift, "latest": list(paths[:5])})]

    def reset(self, ctx: Context) -> None:
        """Forget the off-plan count."""
        ctx.state.drift = 0


def set_plan(ctx: Context, steps: list[str]) -> None:
    """Keep a new plan's first steps and their words; the off-plan count starts over."""
    st = ctx.state
    st.plan_steps = [s[:200] for s in steps[:20]]
    words: dict[str, None] = {}
    for step in st.plan_steps:
        for word in _WORD.findall(step):
            for token in _words_of(word):
                words[token] = None
    st.plan_words = list(words)[:_PLAN_CAP]
    st.drift = 0


def plan_steps(data: dict[str, Any]) -> list[str]:
    """Plan steps from a plan event or a planning tool's arguments (open steps first)."""
    items: Any = data.get("todos", data.get("plan", data.get("steps", data.get("text"))))
    if isinstance(items, str):
        return [line.strip() for line in items.splitlines() if line.strip()]
    if not isinstance(items, list):
        return []
    steps: list[str] = []
    done: list[str] = []
    for item in items:
        if isinstance(item, str):
            steps.append(item)
        elif isinstance(item, dict):
            text = item.get("content", item.get("step", item.get("description", "")))
            status = item.get("status", "")
            (done if status == "completed" else steps).append(str(text))
    return steps or done


def _plan_words(ctx: Context) -> frozenset[str]:
    words = ctx.state.plan_words
    if ctx.plan_cache[0] is not words:  # holds the list, so its identity cannot be reused
        ctx.plan_cache = (words, frozenset(words))
    return ctx.plan_cache[1]


def _words_of(word: str) -> list[str]:
    word = word.lower().strip(".-/")
    out: list[str] = []
    if len(word) >= 3 and word not in _GENERIC:
        out.append(word)
    if path_like(word):
        base = word.rsplit("/", 1)[-1]
        out += [base, base.rsplit(".", 1)[0]]
    out += [p for p in _SPLIT_ID.split(word) if len(p) >= 3 and p not in _GENERIC]
    return out


def _target_words(path: str) -> set[str]:
    parts = [p for p in path.lower().replace("\\", "/").split("/") if p]
    if not parts:
        return set()
    base = parts[-1]
    stem = base.rsplit(".", 1)[0]
    words = {base, stem, *(p for p in _SPLIT_ID.split(stem) if len(p) >= 3)}
    if len(parts) > 1:
        words.add(parts[-2])
    return {w for w in words if w not in _GENERIC}
