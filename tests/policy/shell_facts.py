"""How the shell-parse tests show what ``keel.policy._shell.parse`` sees.

``facts(line)`` gives one text per simple command that would run (argv, ``?`` for a word known
only at run time; its directory, assignments, redirects, stdin, what it is piped from, what ran
in its substitutions, the wrappers around it, whether its failure is the line's) and the issues
(kind, detail) the policy turns into rules.
"""

from __future__ import annotations

from keel.policy._shell import Cmd, parse

CWD, HOME = "/w", "/h"


def _word(w: str | None) -> str:
    if w is None:
        return "?"
    return repr(w) if w == "" or any(c in w for c in " ?|\n") else w


def fact(c: Cmd) -> str:
    """One command as ``argv | field=value | ...``, listing only what differs from a default."""
    # The declared types hold: the judges call set() on piped_from and iterate argv/assigns.
    assert isinstance(c.argv, list) and isinstance(c.assigns, list)
    assert isinstance(c.piped_from, tuple) and isinstance(c.sub_names, tuple)
    flags = (c.stdin_dynamic, c.dynamic_tail, c.is_wrapper, c.fails_line)
    assert all(isinstance(f, bool) for f in flags)
    parts = [" ".join(_word(a) for a in c.argv) if c.argv else "-"]
    if c.cwd != CWD:
        parts.append(f"cwd={c.cwd}")
    if c.assigns:
        parts.append("set=" + ",".join(f"{k}={_word(v)}" for k, v in c.assigns))
    if c.redirects:
        parts.append("redir=" + ",".join(f"{o}{_word(d)}" for o, d in c.redirects))
    if c.heredoc is not None:
        parts.append(f"in={c.heredoc!r}")
    if c.stdin_dynamic:
        parts.append("in=?")
    if c.piped_from:
        parts.append("from=" + ",".join(c.piped_from))
    if c.sub_names:
        parts.append("subs=" + ",".join(c.sub_names))
    if c.wrappers:
        parts.append("via=" + ",".join(c.wrappers))
    if c.dynamic_tail:
        parts.append("tail=?")
    if c.is_wrapper:
        parts.append("wrapper")
    if c.fails_line:
        parts.append("fails")
    return " | ".join(parts)


def facts(
    line: str, *, cwd: str | None = CWD, cdpath: bool = False
) -> tuple[list[str], list[tuple[str, str]]]:
    parsed = parse(line, cwd=cwd, home=HOME, cdpath=cdpath, probe=False)  # /w, /h: not there
    return [fact(c) for c in parsed.cmds], parsed.issues


Case = tuple[str, list[str], list[tuple[str, str]]]


def where(line: str) -> list[tuple[list[str | None], str | None]]:
    """Each simple command the parse sees, with the directory it runs in."""
    return [(c.argv, c.cwd) for c in parse(line, cwd=CWD, home=HOME, probe=False).cmds]
