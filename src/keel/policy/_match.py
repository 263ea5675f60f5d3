"""Command patterns: allow patterns are argv prefixes; ask, deny and forbid patterns are not.

A pattern is words, the first the command, each an ``fnmatch`` glob. An **allow** pattern must
match the start of argv word by word (``git branch $``: a last ``$`` anchors the end), so what it
allows is exactly what it says. An **ask**, **deny** or constraint **forbid** pattern matches
regardless of order: its options must each appear somewhere in argv (``-D`` also inside a
cluster such as ``-vD``; ``-rf`` as ``-r -f`` or ``-fr``), and its other words must appear among
argv's non-option words in that order (``*`` stands for any one). So ``git branch -v -D x``
matches ``git branch -D*`` and ``git commit -am x --amend`` matches ``git commit --amend*``.
A word only known at run time may be any one word, so each stands for one word the pattern
misses (``git branch $X feature`` matches ``git branch -D*``; ``git fetch "$URL"`` does not
match ``git branch -D*``).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    Pattern = tuple[str, ...]

GLOB_CHARS = frozenset("*?[")


def _word_hit(want: str, word: str) -> bool:
    return want == word or (not GLOB_CHARS.isdisjoint(want) and fnmatchcase(word, want))


def match_prefix(pattern: Pattern, argv: list[str | None], *, conservative: bool) -> bool:
    """``argv`` starts with ``pattern``; a dynamic word matches only when ``conservative``."""
    if pattern and pattern[-1] == "$":
        pattern = pattern[:-1]
        if len(argv) != len(pattern):
            return False
    if not pattern or len(argv) < len(pattern):
        return False
    for want, word in zip(pattern, argv, strict=False):
        if word is None:
            if conservative:
                continue
            return False
        if not _word_hit(want, word):
            return False
    return True


def _is_option(word: str) -> bool:
    return word.startswith("-") and word != "-"


class Loose:
    """An ask, deny or forbid pattern, compiled for matching in any order."""

    __slots__ = ("exact", "first", "literals", "options", "pattern", "plain")

    def __init__(self, pattern: Pattern) -> None:
        """Split ``pattern`` into its command, options and other words."""
        words = list(pattern[1:])
        self.pattern = pattern
        self.first = pattern[0] if pattern else ""
        self.exact = bool(words) and words[-1] == "$"
        if self.exact:
            words.pop()
        self.options = tuple(w for w in words if _is_option(w))
        self.plain = tuple(w for w in words if not _is_option(w) and w != "*")
        self.literals = frozenset(w for w in self.plain if GLOB_CHARS.isdisjoint(w))
        """Plain words without glob characters: argv must hold each (a quick test)."""


class Argv:
    """A command's arguments, split once for every pattern they are matched against."""

    __slots__ = ("dynamic", "options", "plain", "words")

    def __init__(self, args: list[str | None]) -> None:
        """Options, plain words (all after ``--``), and how many words are dynamic."""
        self.options: list[str] = []
        self.plain: list[str] = []
        self.dynamic = 0
        rest = False
        for a in args:
            if a is None:
                self.dynamic += 1
            elif rest or not _is_option(a):
                self.plain.append(a)
            elif a == "--":
                rest = True
            else:
                self.options.append(a)
        self.words = frozenset(self.plain)


def match_anywhere(pattern: Pattern, argv: list[str | None]) -> bool:
    """``argv`` has every option of ``pattern`` and its other words in order (see above)."""
    if not pattern or not argv:
        return False
    return matches(Loose(pattern), argv[0], Argv(argv[1:]))


def matches(loose: Loose, command: str | None, args: Argv) -> bool:
    """``matches_anywhere`` for a compiled pattern and split arguments.

    Each word of argv only known at run time may stand for one word the pattern misses.
    """
    if command is not None and not _word_hit(loose.first, command):
        return False
    if not args.dynamic and not loose.literals <= args.words:
        return False
    missing = sum(1 for w in loose.options if not _option_hit(w, args.options))
    if missing > args.dynamic:
        return False
    missing += len(loose.plain) - _in_order(list(loose.plain), args.plain)
    if loose.exact and not args.dynamic and len(args.plain) != len(loose.plain):
        return False
    return missing <= args.dynamic


def _option_hit(want: str, options: list[str]) -> bool:
    if any(_word_hit(want, o) for o in options):
        return True
    core = want[:-1] if want.endswith("*") else want
    letters = core[1:]
    if core.startswith("--") or not letters.isalpha() or len(letters) > 3:
        return False
    if want.endswith("*") and len(letters) != 1:
        return False
    have: set[str] = set()
    for o in options:
        if not o.startswith("--") and o[1:].isalnum():
            have.update(o[1:])
    return set(letters) <= have


def _in_order(wanted: list[str], plain: list[str]) -> int:
    """How many of ``wanted`` ``plain`` holds in order (greedily, from the left)."""
    j = 0
    for word in plain:
        if j < len(wanted) and _word_hit(wanted[j], word):
            j += 1
    return j
