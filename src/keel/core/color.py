"""When and how keel colours what it prints: decisions and diffs (standard library only).

One rule for every command, the typer ones and ``keel policy check``'s fast path alike:
colour only on a terminal; ``NO_COLOR`` (any non-empty value) and ``TERM=dumb`` turn it
off, ``FORCE_COLOR`` (any non-empty value) turns it on off a terminal. Piped output is plain
text with no escape codes, so scripts and ``--json`` readers never see them.
"""

import os
import sys

TYPE_CHECKING = False  # typing costs milliseconds on ``keel policy check``'s fast path
if TYPE_CHECKING:
    from typing import TextIO

SGR = {"green": "32", "yellow": "33", "red": "31", "cyan": "36", "bold": "1", "dim": "2"}
"""The styles keel uses, as ANSI SGR parameters."""
DECISION_COLORS = {"allow": "green", "ask": "yellow", "deny": "red"}
"""The colour of each decision wherever one is printed."""


def color_off() -> bool:
    """The user turned colour off (``NO_COLOR``, or ``TERM=dumb``): no bold either."""
    return bool(os.environ.get("NO_COLOR")) or os.environ.get("TERM") == "dumb"


def color_enabled(stream: "TextIO | None" = None) -> bool:
    """Whether to colour what goes to ``stream`` (default stdout); see the module docstring."""
    env = os.environ
    if color_off():
        return False
    if env.get("FORCE_COLOR"):
        return True
    target = stream if stream is not None else sys.stdout
    try:
        return target.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or not a real stream
        return False


def paint(text: str, style: "str | None", enabled: bool) -> str:
    """``text`` in ``style`` (a name in ``SGR``) when ``enabled``, else ``text`` itself."""
    if not enabled or not style or not text:
        return text
    return f"\x1b[{SGR[style]}m{text}\x1b[0m"


def paint_decision(decision: str, text: str, enabled: bool) -> str:
    """``text`` in the colour of ``decision`` (allow green, ask yellow, deny red)."""
    return paint(text, DECISION_COLORS.get(decision.lower()), enabled)


def paint_diff(patch: str, enabled: bool) -> str:
    """A unified diff with added lines green, removed red, hunk headers cyan, file headers bold."""
    if not enabled:
        return patch
    out: list[str] = []
    in_hunk = False
    for line in patch.splitlines(keepends=True):
        body, end = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        style: str | None = None
        if body.startswith("diff --git "):
            in_hunk, style = False, "bold"
        elif body.startswith("@@"):
            in_hunk, style = True, "cyan"
        elif not in_hunk:
            style = "bold"
        elif body.startswith("+"):
            style = "green"
        elif body.startswith("-"):
            style = "red"
        out.append(paint(body, style, True) + end)
    return "".join(out)
