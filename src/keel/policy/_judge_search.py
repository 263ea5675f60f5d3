"""The clients' own file tools: every argument that selects files, and what a search returns.

Claude Code's Read, Glob and Grep (ripgrep with ``--hidden``) and Gemini CLI's ``read_file``,
``read_many_files``, ``glob``, ``grep_search`` and ``list_directory`` run in the client
process, outside any sandbox, and a hook sees only their arguments. So, for a ``read`` call:

- every path is judged as today (``check_path``), and the adapter adds the literal directory a
  walking glob starts from (``../x/*``, ``/etc/*``) to the paths;
- every glob that selects files is judged: one that targets a secret directly (``.env``,
  ``**/.env*``, ``*.pem``, ``id_rsa``, ``.e?v``, a brace list holding one) is denied with
  ``risk.secret_read``;
- a search that reads contents below a directory never returns a secret file's. Where the
  tool takes excludes (``ToolCall.search`` ``ripgrep``, ``glob_read``), the hook adds
  ``secret_excludes()`` to its input (``keel.hook.dialects``) and the allow says so
  (``path.read_excluding_secrets``). Where it cannot (``grep``), the directory is looked at
  here and the search is denied while it would read a secret file.
- a tool that may follow symbolic links (``glob_read``, and ``grep``'s last-resort walk) is
  denied while a link it would read resolves to a secret.

The secret names are ``WORKSPACE_SECRETS`` minus ``SECRET_EXCEPTIONS`` of the presets: one copy
of the rule. Standard library only: this runs on the hook path.
"""

from __future__ import annotations

import os
import re

from keel.core import presets as presets
from keel.policy._paths import glob_to_regex
from keel.policy._ruling import NO_VERDICT, Ruling, allow, deny, worst

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from keel.core.calls import ToolCall
    from keel.policy._core import Engine

MAX_ALTERNATIVES = 64
"""Brace alternatives one glob may expand to; a glob with more is denied, not judged."""
TREE_LIMIT = 100_000
"""Entries keel looks at below a search's directory; a larger tree is denied, not searched."""
PRUNED = frozenset({".git", ".hg", ".svn", "node_modules", "bower_components"})
"""Directories not looked into: every search strategy of Gemini CLI skips them (git grep
skips them when they are ignored, as they are in practice)."""
ORDINARY = (
    "app.py",
    "README.md",
    "index.ts",
    "main.go",
    "Makefile",
    "notes.txt",
    ".gitignore",
    ".editorconfig",
    ".eslintrc.json",
    ".prettierrc",
)
"""Names of ordinary files: a glob that selects one of them is a broad search (the excludes
or the directory check keep secrets out of it), not one that targets a secret."""
SHOWN = 3
"""Secret files named in a deny reason."""
_LITERAL = re.compile(r"[A-Za-z0-9._+@%=~#&-]*")
"""Characters written as themselves in every glob dialect the clients use."""
_CLASS_SAFE = re.compile(r"[A-Za-z0-9._+@%=~#&]*")
"""Characters that may stand inside a ``[!...]`` class (no ``-``, ``]``, ``^``, ``!``)."""


# -- the excludes ------------------------------------------------------------------------------


def _basename_glob(glob: str) -> str:
    if not glob.startswith("**/") or "/" in glob[3:]:
        raise ValueError(f"secret glob {glob!r} is not of the form **/NAME")
    return glob[3:]


def _shape(glob: str) -> tuple[str, bool, str] | None:
    """``(prefix, has a star, suffix)`` of ``NAME``, ``PREFIX*`` or ``*SUFFIX``; else None."""
    if glob.count("*") > 1:
        return None
    head, star, tail = glob.partition("*")
    if not (_LITERAL.fullmatch(head) and _LITERAL.fullmatch(tail)):
        return None
    return head, bool(star), tail


def _ci(text: str) -> str:
    """``text`` as a glob matching it in any letter case (``.env`` -> ``.[eE][nN][vV]``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in text)


def _none_of(chars: set[str]) -> str:
    """A class matching one character that is none of ``chars``, in any letter case."""
    both = sorted({x for c in chars for x in (c.lower(), c.upper())})
    return "[!" + "".join(both) + "]"


def _covers(shape: tuple[str, bool, str], name: str) -> bool:
    head, star, tail = shape
    low = name.lower()
    if not star:
        return low == head.lower()
    return (
        len(low) >= len(head) + len(tail)
        and low.startswith(head.lower())
        and low.endswith(tail.lower())
    )


def _not_words(prefix: str, words: set[str]) -> list[str]:
    """Globs for ``prefix + X`` with ``X`` none of ``words`` (a trie's complement).

    For each prefix ``u`` of a word: ``u`` followed by a character no word continues ``u``
    with, ``u`` itself when it is not a word, and anything longer than a word no other word
    extends.
    """
    stems = sorted({w[:i] for w in words for i in range(len(w) + 1)})
    out: list[str] = []
    for stem in stems:
        nexts = {w[len(stem)] for w in words if len(w) > len(stem) and w.startswith(stem)}
        if nexts:
            out.append(_ci(prefix + stem) + _none_of(nexts) + "*")
        else:
            out.append(_ci(prefix + stem) + "?*")
        if stem not in words:
            out.append(_ci(prefix + stem))
    return out


def _not_ending(prefix: str, ending: str) -> list[str]:
    """Globs for ``prefix + X`` whose name does not end with ``ending``.

    ``id_rsa*`` but not ``*.pub``: by the last character that differs from ``ending``, and
    the names too short to differ.
    """
    out = [
        _ci(prefix) + "*" + _none_of({ending[-i]}) + _ci(ending[len(ending) - i + 1 :])
        for i in range(1, len(ending) + 1)
    ]
    for k in range(len(ending)):
        name = prefix + ending[len(ending) - k :]
        if not name.lower().endswith(ending.lower()):
            out.append(_ci(name))
    return out


def _carve(glob: str, exceptions: list[tuple[str, bool, str]]) -> list[str]:
    """Globs for the names ``glob`` matches and no exception spares.

    Exact where the shapes allow (literal names under a ``PREFIX*``, one ``*SUFFIX`` under
    a ``PREFIX*``); elsewhere the whole of ``glob``: excluding a little more is safe.
    """
    shape = _shape(glob)
    if shape is None:
        if not re.fullmatch(r"[A-Za-z0-9._+@%=~#&*?\[\]!-]+", glob):
            raise ValueError(f"secret glob {glob!r} cannot be written as an exclude")
        return [glob]
    head, star, tail = shape
    if not star:
        return [] if any(_covers(e, head) for e in exceptions) else [_ci(head)]
    if any(e[1] and head.lower().startswith(e[0].lower()) and tail.lower().endswith(e[2].lower())
           for e in exceptions):  # fmt: skip
        return []  # every name it matches is spared
    if tail:
        return [_ci(glob)]
    words = {
        e[0][len(head) :].lower()
        for e in exceptions
        if not e[1] and _covers(shape, e[0]) and _CLASS_SAFE.fullmatch(e[0])
    }
    if words:
        return _not_words(head, words)
    endings = [e[2] for e in exceptions if e[1] and not e[0] and _CLASS_SAFE.fullmatch(e[2])]
    if len(endings) == 1 and endings[0]:
        return _not_ending(head, endings[0])
    return [_ci(glob)]


_EXCLUDES: tuple[str, ...] | None = None


def secret_excludes() -> tuple[str, ...]:
    """Basename globs of every workspace secret file name, in any letter case.

    Built from ``WORKSPACE_SECRETS`` minus ``SECRET_EXCEPTIONS``; they use only ``*``, ``?``
    and classes, no braces, commas or spaces, so they mean the same to ripgrep (Claude
    Code's Grep ``glob``), picomatch and minimatch (Gemini's ``exclude``, as ``**/GLOB``).
    Names an exception spares (``.env.example``, ``id_rsa.pub``) are not excluded, so they
    are still searched; a name an exception spares only in combination (``.env.x.pub``) is.
    """
    global _EXCLUDES
    if _EXCLUDES is None:
        exceptions = [_shape(_basename_glob(g)) for g in presets.SECRET_EXCEPTIONS]
        known = [e for e in exceptions if e is not None]
        out: list[str] = []
        for glob in presets.WORKSPACE_SECRETS:
            for each in _carve(_basename_glob(glob), known):
                # ripgrep 14 never matches a glob that ends in a dot (``.env.``, ``a[.]``);
                # ``?`` there matches the name, and one more (``.envx``) is harmless
                each = each[:-1] + "?" if each.endswith(".") else each
                if each not in out:
                    out.append(each)
        _EXCLUDES = tuple(out)
    return _EXCLUDES


# -- secret names ------------------------------------------------------------------------------

_NAME_RX: tuple[re.Pattern[str], re.Pattern[str]] | None = None


def secret_name(name: str) -> bool:
    """True if a file called ``name`` (a basename) is a workspace secret."""
    global _NAME_RX
    if _NAME_RX is None:
        secret = "|".join(glob_to_regex(_basename_glob(g)) for g in presets.WORKSPACE_SECRETS)
        spared = "|".join(glob_to_regex(_basename_glob(g)) for g in presets.SECRET_EXCEPTIONS)
        flags = re.IGNORECASE | re.DOTALL
        _NAME_RX = (re.compile(secret, flags), re.compile(spared or "(?!)", flags))
    secret_rx, spared_rx = _NAME_RX
    return bool(secret_rx.fullmatch(name)) and not spared_rx.fullmatch(name)


_WITNESSES: list[str] = []


def _witnesses() -> list[str]:
    """Names of secret files, one or two per secret glob (``.env``, ``.env.x``, ``x.pem``)."""
    if not _WITNESSES:
        for glob in presets.WORKSPACE_SECRETS:
            for name in _instances(_basename_glob(glob)):
                if secret_name(name) and name not in _WITNESSES:
                    _WITNESSES.append(name)
    return _WITNESSES


# -- globs -------------------------------------------------------------------------------------


class TooManyAlternatives(ValueError):
    """A brace glob expands to more than ``MAX_ALTERNATIVES`` globs."""


def expand_braces(glob: str, limit: int = MAX_ALTERNATIVES) -> list[str]:
    """Every alternative of ``glob``'s ``{a,b}`` lists, nested ones too (unbalanced: literal).

    Raises:
        TooManyAlternatives: more than ``limit`` alternatives.
    """
    out: list[str] = []
    todo = [glob]
    while todo:
        text = todo.pop()
        found = _first_group(text)
        if found is None:
            out.append(text)
            if len(out) > limit:
                raise TooManyAlternatives(glob)
            continue
        start, end, parts = found
        todo.extend(text[:start] + part + text[end + 1 :] for part in reversed(parts))
        if len(todo) > limit:
            raise TooManyAlternatives(glob)
    return out


def _first_group(text: str) -> tuple[int, int, list[str]] | None:
    """``(index of {, index of its }, its top-level parts)`` of the first balanced group."""
    for start, char in enumerate(text):
        if char != "{" or (start and text[start - 1] == "\\"):
            continue
        depth, parts, begin = 0, [], start + 1
        for i in range(start, len(text)):
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return start, i, [*parts, text[begin:i]]
            elif c == "," and depth == 1:
                parts.append(text[begin:i])
                begin = i + 1
        return None
    return None


def _instances(glob: str) -> list[str]:
    """Names ``glob`` certainly matches.

    ``*`` as nothing and as ``x``, ``?`` as ``x``, a class as a character it takes.
    """
    out: list[str] = []
    for star in ("", "x"):
        text, i = "", 0
        while i < len(glob):
            c = glob[i]
            if c == "*":
                text += star
            elif c == "?":
                text += "x"
            elif c == "[":
                end = glob.find("]", i + 2)
                if end < 0:
                    text += c
                else:
                    text += _member(glob[i + 1 : end])
                    i = end
            elif c == "\\" and i + 1 < len(glob):
                i += 1
                text += glob[i]
            else:
                text += c
            i += 1
        text = re.sub(r"/+", "/", text).strip("/")
        if text.startswith("./"):
            text = text[2:]
        if text not in out:
            out.append(text)
    return out


def _member(body: str) -> str:
    if body[:1] in ("!", "^"):
        return next((c for c in "xyz0_" if c not in body[1:]), "x")
    return body[:1]


def _name_regex(glob: str) -> re.Pattern[str]:
    return re.compile(glob_to_regex(glob), re.IGNORECASE | re.DOTALL)


def glob_secret(glob: str) -> str | None:
    """The secret file name ``glob`` targets directly, or None for a glob that does not.

    A glob targets a secret when a name it certainly matches is one (``.env*`` matches
    ``.env``, ``keys/*.pem`` matches ``keys/x.pem``), or when it matches a secret's name and
    no ordinary one (``.e?v``, ``*env``). A broad glob (``*``, ``**``, ``src/**``, ``*.py``) does
    not: the excludes or the directory check keep secrets out of what it selects.

    Raises:
        TooManyAlternatives: the glob's braces expand to too many globs.
    """
    for alt in expand_braces(glob):
        alt = alt.rstrip("/")
        base = alt.rsplit("/", 1)[-1]
        if base in ("", "**", "."):
            continue
        for name in _instances(alt):
            if secret_name(name.rsplit("/", 1)[-1]):
                return name
        rx = _name_regex(base)
        hit = next((w for w in _witnesses() if rx.fullmatch(w)), None)
        if hit is not None and not any(rx.fullmatch(o) for o in ORDINARY):
            return hit
    return None


def literal_dir(glob: str) -> str | None:
    """The directory a walking glob starts from, or None when that is the current one.

    Its segments before the first wildcard: ``../x/*.py`` -> ``../x``, ``/etc/*`` -> ``/etc``.
    """
    parts = glob.split("/")
    head: list[str] = []
    for part in parts[:-1]:
        if any(c in part for c in "*?[{"):
            break
        head.append(part)
    text = "/".join(head)
    if glob.startswith("/") and not text:
        return "/"
    return text if text not in ("", ".") else None


# -- judging a read call -----------------------------------------------------------------------


def judge_read(engine: Engine, call: ToolCall) -> Ruling:
    """Judge a ``read`` call: its paths, its globs and, for a search, what it would read."""
    if not call.paths and not call.globs:
        return engine.level("unparseable", "call.no_path", f"{call.tool} names no file", None)
    verdicts = [engine.check_path(p, "read", call.cwd) for p in call.paths]
    verdicts += [_judge_glob(engine, g) for g in call.globs]
    verdict = worst(verdicts) or NO_VERDICT
    if verdict[0] != "allow" or call.search is None:
        return verdict
    if call.search == "grep":
        return _judge_grep(engine, call)
    if call.search not in ("ripgrep", "glob_read"):
        return deny("internal_error", f"unknown search kind {call.search!r}")
    if call.search == "glob_read":
        found = _links(engine, call)
        if found is not None:
            return found
    where = call.paths[0] if call.paths else "the workspace"
    return allow(
        "path.read_excluding_secrets",
        f"{call.tool} reads inside the workspace ({where}); keel adds excludes for "
        f"{len(secret_excludes())} secret-file patterns (.env, .env.*, keys) to its input",
    )


def _judge_glob(engine: Engine, glob: str) -> Ruling:
    bad = engine.bad_input(glob, "glob")
    if bad is not None:
        return bad
    try:
        name = glob_secret(glob)
    except TooManyAlternatives:
        return deny(
            "path.glob_alternatives",
            f"the glob {glob[:200]!r} expands to over {MAX_ALTERNATIVES} alternatives",
            "use fewer brace alternatives, or several calls",
        )
    if name is None:
        return allow("path.glob", f"the glob {glob!r} targets no secret file")
    return deny(
        "risk.secret_read",
        f"the glob {glob!r} selects secret files such as {name!r}",
        "do not search for credentials; keel keeps secret files out of searches, "
        "so name the files you want (e.g. '*.py') or ask the user",
    )


def _judge_grep(engine: Engine, call: ToolCall) -> Ruling:
    """A search that cannot exclude files: refused while it would read a secret."""
    pattern = call.args.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("-"):
        return deny(
            "risk.option_pattern",
            f"the search pattern {pattern[:80]!r} starts with '-': {call.tool} may hand it to "
            "git grep or grep, which read it as an option (-f FILE reads a file)",
            "write the leading dash as a class, e.g. '[-]-flag'",
        )
    root = call.paths[0] if call.paths else None
    if root is None:
        return deny("internal_error", f"{call.tool} has no directory to search")
    found = _hazards(engine, root, call.globs, names=True)
    if isinstance(found, Ruling):
        return found
    return allow(
        "path.read_no_secrets",
        f"{call.tool} over {root} selects no secret file (it has no way to exclude them)",
    )


def _links(engine: Engine, call: ToolCall) -> Ruling | None:
    if not call.paths:
        return None
    found = _hazards(engine, call.paths[0], call.globs, names=False)
    return found if isinstance(found, Ruling) else None


def _hazards(engine: Engine, root: str, globs: tuple[str, ...], *, names: bool) -> Ruling | None:
    """A deny if the tree below ``root`` has a secret the search would read.

    That is a secret file (with ``names``: the search cannot exclude it), or a link that
    resolves to a secret (a tool that follows links reads it under the link's name). A link
    that resolves outside the workspace to anything else (a virtualenv's ``bin/python``) is
    not one: the clients refuse those themselves (Gemini resolves every path it reads).
    """
    if not os.path.isdir(root):
        return None
    select = _selector(globs)
    bad: list[str] = []
    count = 0
    for rel, path, is_link in _walk(root):
        count += 1
        if count > TREE_LIMIT:
            return deny(
                "path.tree_too_large",
                f"{root} has over {TREE_LIMIT} entries: too many for keel to check the search "
                "for secret files",
                "search a subdirectory, or name the files to search with a glob",
            )
        if not select(rel):
            continue
        if is_link:
            if engine.check_path(path, "read")[1] == "risk.secret_read":
                bad.append(f"{rel} (a link to a secret)")
        elif names and secret_name(rel.rsplit("/", 1)[-1]):
            bad.append(rel)
    if not bad:
        return None
    shown = ", ".join(bad[:SHOWN]) + (f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else "")
    return deny(
        "risk.secret_read",
        f"the search below {root} cannot keep out secret files, and would read {shown}",
        "search a directory without them, or name the files you want with a glob "
        "(e.g. '*.py'); do not read credentials",
    )


def _walk(root: str) -> Iterator[tuple[str, str, bool]]:
    """``(relative path, path, is a link)`` of every entry below ``root``.

    Links are not followed and ``PRUNED`` directories not entered.
    """
    stack = [(root, "")]
    while stack:
        top, rel = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            sub = f"{rel}{entry.name}"
            link = entry.is_symlink()
            yield sub, entry.path, link
            try:
                is_dir = not link and entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir and entry.name not in PRUNED:
                stack.append((entry.path, sub + "/"))


def _selector(globs: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a search with include ``globs`` may read a relative path, erring towards yes.

    Each client strategy reads a glob its own way (ripgrep: the name, or the path when the
    glob has a slash; git grep: ``*`` crosses ``/``; grep: the name; minimatch: the path);
    this takes the widest: ``*`` crosses ``/``, and the glob is tried on the name, on the
    path and on each directory above it. A negation or git pathspec magic selects all.
    """
    if not globs:
        return lambda rel: True
    regexes: list[re.Pattern[str]] = []
    for glob in globs:
        try:
            alts = expand_braces(glob)
        except TooManyAlternatives:
            return lambda rel: True
        for alt in alts:
            if alt.startswith(("!", ":")):
                return lambda rel: True
            regexes.append(_wide_regex(alt.lstrip("/").removeprefix("./").rstrip("/")))

    def select(rel: str) -> bool:
        parts = rel.split("/")
        candidates = [parts[-1], *("/".join(parts[:i]) for i in range(1, len(parts) + 1))]
        return any(rx.fullmatch(c) for rx in regexes for c in candidates)

    return select


def _wide_regex(glob: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            out += ".*"
        elif c == "?":
            out += "."
        elif c == "[" and glob.find("]", i + 2) > 0:
            end = glob.find("]", i + 2)
            body = glob[i + 1 : end].replace("\\", "\\\\")
            out += "[^" + body[1:] + "]" if body[:1] in ("!", "^") else f"[{body}]"
            i = end
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out, re.IGNORECASE | re.DOTALL)
