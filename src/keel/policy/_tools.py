"""Options with which a tool runs another program.

"Inspection" tools run programs too: ``git grep -O``, ``tar --to-command``, ``sort
--compress-program``, ``make --eval``, ``less +!cmd``, ``rsync -e``, ``ssh -o ProxyCommand``,
``git -c core.pager=...``, ``sed -f``. ``hidden_programs`` names each such option in a command;
the engine asks about them (the text cannot show what they run). What a ``sed`` script itself
runs (its ``e`` command) is ``keel.policy._sed``'s to read.

Standard library only: this is on the hook path.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from keel.policy._git import GIT_GLOBAL_VALUES, git_subcommand

_SAFE_GIT_KEYS = (
    "user.*", "color.*", "advice.*", "core.quotepath", "core.autocrlf", "core.safecrlf",
    "core.abbrev", "core.longpaths", "core.precomposeunicode", "core.filemode",
    "init.defaultbranch", "log.*", "format.pretty", "pretty.*", "commit.gpgsign",
    "tag.gpgsign", "gc.auto", "i18n.*", "merge.conflictstyle", "rerere.enabled", "pull.rebase",
    "pull.ff", "protocol.version", "safe.directory", "maintenance.auto", "column.ui",
    "diff.renames", "diff.algorithm", "diff.noprefix", "status.*", "versionsort.suffix",
    "help.autocorrect", "fetch.prune", "blame.*",
)  # fmt: skip
"""``git -c`` keys that neither run a program nor change where git connects or what it pushes."""
_SSH_CODE_OPTIONS = (
    "proxycommand",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "match",
    "include",
    "remotecommand",
)
_TAR_CODE = (
    "--checkpoint-action",
    "--to-command",
    "--use-compress-program",
    "--rsh-command",
    "--rmt-command",
    "--info-script",
    "--new-volume-script",
)
_GIT_SUB_CODE: dict[str, tuple[str, ...]] = {
    "grep": ("-O", "--open-files-in-pager"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("--upload-pack", "-u", "--template", "-c", "--config"),
    "ls-remote": ("--upload-pack",),
    "archive": ("--exec",),
    "push": ("--receive-pack", "--exec"),
    "rebase": ("-x", "--exec"),
    "difftool": ("-x", "--extcmd", "-t", "--tool"),
    "mergetool": ("-t", "--tool"),
    "submodule": ("foreach",),
    "bisect": ("run",),
    "send-email": ("--sendmail-cmd", "--smtp-server"),
    "init": ("--template",),
}


def git_key_is_safe(setting: str) -> bool:
    """True if ``git -c KEY=VALUE`` (``setting``) is on the list of harmless keys."""
    key = setting.split("=", 1)[0].strip().lower()
    return any(fnmatchcase(key, pattern) for pattern in _SAFE_GIT_KEYS)


def git_settings(args: list[str | None]) -> list[str | None]:
    """The ``-c``/``--config-env`` settings given to git before its subcommand."""
    out: list[str | None] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-c", "--config-env"):
            out.append(args[i + 1] if i + 1 < len(args) else None)
            i += 2
            continue
        if a is not None and a.startswith(("-c", "--config-env=")) and a != "-c":
            out.append(a[2:] if a.startswith("-c") else a.split("=", 1)[1])
        elif a is None or not a.startswith("-"):
            return out
        elif a in GIT_GLOBAL_VALUES:
            i += 1
        i += 1
    return out


def hidden_programs(name: str, args: list[str | None]) -> list[str]:
    """Each option of ``name`` that makes it run a program the command line does not show."""
    words = [a for a in args if a is not None]
    match name:
        case "git":
            return _git(args)
        case "awk" | "gawk" | "mawk" | "nawk":
            found = _options(
                words, ("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec")
            )
            return [f"{name} {o} loads a program file" for o in found]
        case "sed":
            return [f"sed {o} runs a script file" for o in _options(words, ("-f", "--file"))]
        case "tar":
            found = _options(words, (*_TAR_CODE, "-I", "-F")) + _short(words, "IF")
            if words and not words[0].startswith("-"):  # old style: tar xIf PROGRAM FILE
                found += [f"-{c}" for c in "IF" if c in words[0]]
            return [f"tar {o} runs a program" for o in dict.fromkeys(found)]
        case "sort":
            return [f"sort {o} runs a program" for o in _options(words, ("--compress-program",))]
        case "make" | "gmake":
            return [f"make {o} adds make rules" for o in _options(words, ("--eval", "-E"))]
        case "less" | "more" | "most":
            return _pager(name, words)
        case "man":
            found = _options(words, ("-P", "--pager", "-H", "--html"))
            return [f"man {o} runs a program" for o in found]
        case "rsync":
            found = _options(words, ("-e", "--rsh", "--rsync-path"))
            return [f"rsync {o} runs a program" for o in found]
        case "ssh" | "scp" | "sftp":
            return _ssh(name, words)
        case _:
            return []


def _options(words: list[str], names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` appear (as ``--x``, ``--x=v``, or ``-Xvalue`` for short ones)."""
    found: list[str] = []
    for w in words:
        if w == "--":
            break
        for n in names:
            long_hit = n.startswith("--") and (w == n or w.startswith(n + "="))
            short_hit = not n.startswith("--") and (w == n or (len(n) == 2 and w.startswith(n)))
            if (long_hit or short_hit) and n not in found:
                found.append(n)
    return found


def _short(words: list[str], letters: str) -> list[str]:
    """``-L`` for each of ``letters`` found in a cluster of short options (``-xIf``)."""
    found: list[str] = []
    for w in words:
        if w == "--":
            break
        if w.startswith("-") and not w.startswith("--") and len(w) > 2 and w[1:].isalpha():
            found.extend(f"-{c}" for c in letters if c in w[1:] and f"-{c}" not in found)
    return found


def _git(args: list[str | None]) -> list[str]:
    out = [
        f"git -c {s or '?'} sets a key that can run programs or change connections"
        for s in git_settings(args)
        if s is None or not git_key_is_safe(s)
    ]
    sub, rest = git_subcommand(args)
    words = [a for a in rest if a is not None]
    if any(a is not None and a.startswith("--exec-path=") for a in args):
        out.append("git --exec-path runs git programs from another directory")
    options = _GIT_SUB_CODE.get(sub or "", ())
    positional = tuple(o for o in options if not o.startswith("-"))
    flags = tuple(o for o in options if o.startswith("-"))
    first = next((w for w in words if not w.startswith("-")), None)
    found = _options(words, flags) + [w for w in (first,) if w in positional]
    out.extend(f"git {sub} {o} runs a program" for o in found)
    return out


def _pager(name: str, words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        if w.startswith("+") and ("!" in w or "|" in w):
            out.append(f"{name} {w[:20]!r} runs a shell command")
    out.extend(
        f"{name} {o} loads key bindings"
        for o in _options(words, ("-k", "--lesskey-file", "--lesskey-src"))
    )
    return out


def _ssh(name: str, words: list[str]) -> list[str]:
    out: list[str] = []
    for i, w in enumerate(words):
        value = None
        if w == "-o" and i + 1 < len(words):
            value = words[i + 1]
        elif w.startswith("-o") and len(w) > 2:
            value = w[2:]
        if value is not None:
            key = re.split(r"[=\s]", value.strip(), maxsplit=1)[0].lower()
            if key in _SSH_CODE_OPTIONS:
                out.append(f"{name} -o {key} runs a program")
    out.extend(f"{name} {o} reads options from a file" for o in _options(words, ("-F",)))
    if name == "scp":
        out.extend(f"scp {o} runs a program" for o in _options(words, ("-S",)))
    return out
