"""git's own command line: the options before its subcommand, and the subcommand.

A leaf: it imports nothing else of the policy (``_rules`` and ``_tools`` both read git's
command line through it). Standard library only: this is on the hook path.
"""

from __future__ import annotations

GIT_GLOBAL_FLAGS = frozenset(
    {
        "--no-pager",
        "-P",
        "--paginate",
        "--no-replace-objects",
        "--literal-pathspecs",
        "--no-optional-locks",
    }
)
"""git's options before the subcommand that take no value and change nothing a rule checks."""
GIT_GLOBAL_VALUES = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env",
     "--shallow-file", "--attr-source"}
)  # fmt: skip
"""git's options before the subcommand that take the next word as their value (git.c reads
them exactly, never abbreviated; ``--exec-path`` and ``--list-cmds`` take theirs only after
``=``; ``--attr-source`` is newer than git 2.39, which refuses it)."""


def git_subcommand(args: list[str | None]) -> tuple[str | None, list[str | None]]:
    """The git subcommand and its arguments, skipping global options."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in GIT_GLOBAL_VALUES:
            i += 2
            continue
        if a is not None and a.startswith("-"):
            i += 1
            continue
        return a, args[i + 1 :]
    return None, []
