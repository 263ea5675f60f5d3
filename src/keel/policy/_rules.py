"""What one simple command reads, writes, reaches and risks: facts for the engine to judge.

Each function looks at a normalised command name and its arguments (``None`` for a word only
known at run time) and returns plain facts; the engine turns facts into decisions.
"""

from __future__ import annotations

import re

from keel.core.root import STATE_DIR
from keel.policy._git import GIT_GLOBAL_FLAGS, GIT_GLOBAL_VALUES, git_subcommand
from keel.policy._sed import sed_script
from keel.policy._shell import SHELLS, STD_BIN, Cmd
from keel.policy._url import (
    BAD,
    UNREADABLE_PORT,
    HostAt,
    dev_tcp_host,
    is_url,
    port_number,
    url_host_ports,
    url_hosts,
)

FETCHERS = frozenset(
    [
        "curl",
        "wget",
        "http",
        "https",
        "aria2c",
        "lynx",
        "links",
        "w3m",
        "nc",
        "ncat",
        "netcat",
        "telnet",
        "socat",
        "ssh",
        "scp",
        "sftp",
        "rsync",
        "ftp",
        "tftp",
        "openssl",
    ]
)
INTERPRETERS = frozenset(
    [
        "python",
        "pypy",
        "pypy3",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "php",
        "lua",
        "luajit",
        "bun",
        "deno",
    ]
)
VENV_BIN = (".venv/bin/", "venv/bin/", "./.venv/bin/", "./venv/bin/", "env/bin/")
NO_PATH_ARGS = frozenset({"echo", "printf", "test", "[", "true", "false", ":", "expr", "seq"})
READERS = frozenset(
    [
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "wc",
        "sort",
        "uniq",
        "cut",
        "nl",
        "tac",
        "rev",
        "xxd",
        "od",
        "hexdump",
        "strings",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "cksum",
        "file",
        "stat",
        "ls",
        "tree",
        "du",
        "diff",
        "cmp",
        "comm",
        "source",
        ".",
        "cd",
        "pushd",
        "zcat",
        "bzcat",
        "xzcat",
        "base64",
        "iconv",
        "column",
        "fold",
        "fmt",
        "paste",
        "readlink",
        "realpath",
        "cp",
        "rsync",
        "scp",
        "tar",
        "unzip",
    ]
)
METADATA_READERS = frozenset(
    ["ls", "stat", "file", "du", "wc", "md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum",
     "readlink", "realpath", "cd", "pushd", "tree"]
)  # fmt: skip
"""Readers that show no file content (names, sizes, hashes): they may name a secret."""
PATTERN_FIRST = frozenset(
    ["grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep", "awk", "gawk", "mawk", "sed", "jq"]
)
# Patterns are compiled on first use (re caches them): most checks need none of them.
_PY_NAME = r"^python(\d+(\.\d+)?)?$"
_PIP_NAME = r"^pip(\d+(\.\d+)?)?$"
_URL = r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)"
_SCP = r"^(?:[^@/:]+@)?([A-Za-z0-9.\-\[\]]+):"

_CODE_RISK: dict[str, str] = {
    "python": (
        r"socket|\bpty\b|subprocess|os\s*\.\s*(system|popen|exec|spawn|fork|dup2|remove|unlink|"
        r"rmdir|kill|setuid)|shutil\s*\.\s*rmtree|__import__|\beval\s*\(|\bexec\s*\(|urllib|"
        r"requests|http\.client|ftplib|telnetlib|paramiko|ctypes|commands\.|importlib|pickle|"
        r"marshal|compile\s*\(|/dev/tcp"
    ),
    "perl": (
        r"socket|IO::Socket|\bexec\b|\bsystem\b|\bfork\b|`|\bqx\b|open\s*\(.*\||/dev/tcp|"
        r"unlink|rmtree|LWP|HTTP::"
    ),
    "ruby": (
        r"socket|Socket|\bexec\b|\bsystem\b|\bspawn\b|`|%x|IO\.popen|\bfork\b|Open3|"
        r"FileUtils\.rm|File\.delete|Net::HTTP|open-uri"
    ),
    "node": (
        r"child_process|require\(\s*['\"](net|dgram|tls|http|https|fs)['\"]|\bnet\.|"
        r"process\.binding|execSync|spawn|\bfs\.(rm|unlink|write)|fetch\s*\(|eval\s*\("
    ),
    "php": (
        r"fsockopen|socket_|\bexec\b|\bsystem\b|shell_exec|passthru|popen|proc_open|`|"
        r"\beval\b|unlink|file_put_contents|curl_"
    ),
    "lua": r"os\.execute|io\.popen|socket|os\.remove",
    "awk": r"system\s*\(|\|\s*getline|\|&|/inet/|\bprintf?\b[^;}]*\|",
}
_CODE_FLAGS = {
    "python": ("c",),
    "perl": ("e", "E"),
    "ruby": ("e",),
    "node": ("e", "p"),
    "php": ("r",),
    "lua": ("e",),
    "deno": (),
}
_LANG = {"pypy": "python", "pypy3": "python", "nodejs": "node", "luajit": "lua", "bun": "node"}
POWER = frozenset(["shutdown", "reboot", "halt", "poweroff"])
ADMIN = frozenset(
    [
        "mount",
        "umount",
        "useradd",
        "userdel",
        "usermod",
        "groupadd",
        "passwd",
        "chpasswd",
        "visudo",
        "iptables",
        "ip6tables",
        "nft",
        "modprobe",
        "insmod",
        "rmmod",
        "swapoff",
        "swapon",
        "chattr",
        "setenforce",
    ]
)
DISK = frozenset(["fdisk", "sfdisk", "parted", "wipefs", "mke2fs", "mkswap", "cryptsetup"])

Risk = tuple[str, str, str]
_OPEN_MODES = frozenset({"777", "0777", "a+rwx", "ugo+rwx", "o+w", "a+w", "666", "o+rwx"})


def normalise(name: str) -> str:
    """The name a command is matched by: ``/usr/bin/rm`` -> ``rm``, ``python3.11`` -> ``python``."""
    for prefix in (*STD_BIN, *VENV_BIN):
        if name.startswith(prefix) and "/" not in name[len(prefix) :]:
            name = name[len(prefix) :]
            break
    if name.startswith("python") and re.match(_PY_NAME, name):
        return "python"
    if name.startswith("pip") and re.match(_PIP_NAME, name):
        return "pip"
    return name


_PY_FLAGS = frozenset({"-u", "-B", "-O", "-OO", "-I", "-E", "-s", "-S", "-q", "-b", "-bb"})


def match_args(name: str, args: list[str | None]) -> list[str | None]:
    """The arguments patterns are matched against: harmless global options dropped."""
    out: list[str | None] = []
    i = 0
    while i < len(args):
        a = args[i]
        if name == "git" and a in GIT_GLOBAL_FLAGS:
            i += 1
        elif name == "git" and a == "-C" and not out:
            i += 2
        elif name == "python" and not out and a in _PY_FLAGS:
            i += 1
        elif name == "python" and not out and a in ("-W", "-X"):
            i += 2
        else:
            out.append(a)
            i += 1
    return out


def positional(
    args: list[str | None],
    with_arg: frozenset[str] = frozenset(),
    with_two: frozenset[str] = frozenset(),
) -> list[str | None]:
    """Arguments that are not options (everything after ``--`` counts).

    ``with_arg`` options take the next argument, ``with_two`` the next two (``jq --arg N V``).
    """
    out: list[str | None] = []
    skip = 0
    rest = False
    for a in args:
        if skip:
            skip -= 1
            continue
        if rest or a is None or not a.startswith("-") or a == "-":
            out.append(a)
        elif a == "--":
            rest = True
        elif a in with_two:
            skip = 2
        elif a in with_arg:
            skip = 1
    return out


def short_flags(args: list[str | None]) -> str:
    """All single-letter flags, concatenated (``-rf -v`` -> ``rfv``)."""
    return "".join(a[1:] for a in args if a and a.startswith("-") and not a.startswith("--"))


def interpreter_code(
    name: str, args: list[str | None], heredoc: str | None
) -> tuple[str, str | None] | None:
    """``(language, code)`` for a one-liner (``None`` code when dynamic), else ``None``."""
    lang = _LANG.get(name, name)
    if name in ("awk", "gawk", "mawk", "nawk"):
        prog = positional(args, frozenset({"-f", "-v", "-F"}))
        return ("awk", prog[0]) if prog else None
    flags = _CODE_FLAGS.get(lang)  # bun takes node's -e and -p
    if flags is None:
        return None
    for i, a in enumerate(args):
        if a is None:
            continue
        if a in ("--eval", "--print") or (
            a.startswith("-") and not a.startswith("--") and a[-1:] in flags
        ):
            return lang, args[i + 1] if i + 1 < len(args) else None
        if not a.startswith("-"):
            return None
    if lang == "python" and (not args or args[-1] == "-") and heredoc is not None:
        return lang, heredoc
    return None


def code_risk(lang: str, code: str) -> bool:
    """True if a one-liner opens shells, sockets or processes, or deletes."""
    pattern = _CODE_RISK.get(lang)
    return bool(pattern and re.search(pattern, code))


def reads_stdin_script(name: str, args: list[str | None]) -> bool:
    """A shell or interpreter that would run whatever arrives on stdin."""
    if name not in SHELLS and name not in INTERPRETERS:
        return False
    pos = positional(args)
    return not pos or pos == ["-"] or (name in SHELLS and "-s" in args)


def risks(cmd: Cmd, name: str, args: list[str | None]) -> list[Risk]:
    """Deny-level risks of one command: (rule, reason, suggestion)."""
    out: list[Risk] = []
    flags = short_flags(args)
    words = [a for a in args if a is not None]
    if name in SHELLS or name in ("eval", "source", ".") or name in INTERPRETERS:
        fetched = set(cmd.sub_names) & FETCHERS
        if fetched or (reads_stdin_script(name, args) and set(cmd.piped_from) & FETCHERS):
            out.append(
                (
                    "risk.pipe_to_shell",
                    f"{name} runs code fetched from the network",
                    "download to a file, review it, then run it",
                )
            )
    lowered = " ".join(words).lower() + " " + " ".join(t or "" for _, t in cmd.redirects)
    if ("/dev/tcp/" in lowered or "/dev/udp/" in lowered) and (
        name in SHELLS
        or name in ("exec", "")
        or "-i" in args
        or any(op in ("<>", "<&", ">&", "&>") for op, _ in cmd.redirects)
    ):
        out.append(("risk.reverse_shell", "a shell connected to a network socket", "do not"))
    if name in ("nc", "ncat", "netcat") and (
        set(flags) & {"e", "c"}
        or any(w.startswith(("--exec", "--sh-exec", "--lua-exec")) for w in words)
    ):
        out.append(("risk.reverse_shell", f"{name} runs a program for a network peer", "do not"))
    if name == "socat" and re.search(r"\b(exec|system):", lowered):
        out.append(("risk.reverse_shell", "socat connects a program to a socket", "do not"))
    if name in ("xterm",) and "-display" in words:
        out.append(("risk.reverse_shell", "xterm opened on a remote display", "do not"))
    out.extend(_code_risks(cmd, name, args))
    out.extend(_git_risks(name, args))
    out.extend(_system_risks(cmd, name, args, flags, words))
    return out


def _code_risks(cmd: Cmd, name: str, args: list[str | None]) -> list[Risk]:
    found = interpreter_code(name, args, cmd.heredoc)
    if found is None:
        return []
    lang, code = found
    if code is not None and code_risk(lang, code):
        return [
            (
                "risk.interpreter_oneliner",
                f"a {lang} one-liner that opens shells, sockets or processes, or deletes",
                "write the code to a file in the workspace and run its tests",
            )
        ]
    return []


_GIT_VALUES: dict[str, frozenset[str]] = {
    "clone": frozenset(
        {"-j", "--jobs", "--template", "--reference", "--reference-if-able", "-o", "--origin",
         "-b", "--branch", "-u", "--upload-pack", "--depth", "--shallow-since",
         "--shallow-exclude", "--separate-git-dir", "-c", "--config", "--server-option",
         "--filter", "--bundle-uri"}
    ),
    "fetch": frozenset(
        {"--upload-pack", "-j", "--jobs", "--depth", "--shallow-since", "--shallow-exclude",
         "--deepen", "--submodule-prefix", "--recurse-submodules-default", "--refmap", "-o",
         "--server-option", "--negotiation-tip", "--filter"}
    ),
    "pull": frozenset(
        {"--cleanup", "-s", "--strategy", "-X", "--strategy-option", "--upload-pack",
         "--depth", "--shallow-since", "--shallow-exclude", "--deepen", "--refmap", "-o",
         "--server-option", "--negotiation-tip"}
    ),
    "push": frozenset(
        {"--repo", "--recurse-submodules", "--receive-pack", "--exec", "-o", "--push-option"}
    ),
    "ls-remote": frozenset({"--upload-pack", "--exec", "--sort", "-o", "--server-option"}),
    "archive": frozenset(
        {"--format", "--prefix", "--add-file", "--add-virtual-file", "-o", "--output",
         "--remote", "--exec"}
    ),
    "remote add": frozenset({"-t", "--track", "-m", "--master"}),
    "worktree add": frozenset({"-b", "-B", "--reason"}),
    "submodule add": frozenset({"-b", "--branch", "--reference", "--name", "--depth"}),
}  # fmt: skip
"""The options of git subcommands that take the next word as their value (``git SUB -h``,
git 2.39); an option with an optional value (``pull -j``, ``remote add --mirror``) takes it
only after ``=``. ``remote``, ``worktree`` and ``submodule`` are keyed with their action."""
_GIT_ACTIONS = frozenset({"remote", "worktree", "submodule"})
_GIT_EXACT_FLAGS = frozenset({"--recurse-submodules"})
"""Long options without a value that begin another option's name (``fetch
--recurse-submodules-default``): git takes an exact name as itself, not as an abbreviation."""


def git_operands(sub: str | None, rest: list[str | None]) -> list[str | None]:
    """The operands of ``git SUB REST`` as git's option parser finds them.

    For ``remote``, ``worktree`` and ``submodule`` the first operand is the action (``add``)
    and the rest are the action's (``worktree add -b B PATH C`` gives ``[add, PATH, C]``).
    """
    values, words = _git_words(sub, rest)
    return positional(words, values)


def git_option_values(sub: str | None, rest: list[str | None], *names: str) -> list[str | None]:
    """The values ``git SUB REST`` gives the long options ``names``, in any spelling."""
    _, words = _git_words(sub, rest)
    out: list[str | None] = []
    for i, a in enumerate(words):
        if a in names:
            out.append(words[i + 1] if i + 1 < len(words) else None)
        elif a is not None and a.partition("=")[0] in names and "=" in a:
            out.append(a.partition("=")[2])
    return out


def _git_slot(pos: list[str | None], i: int) -> list[str | None]:
    """Operand ``i`` of a git command.

    When a word known only at run time comes at or before it (it may be an option that takes
    the next word, or no word, or several), every operand after that word, and ``None``.
    """
    if None not in pos[: i + 1]:
        return pos[i : i + 1]
    return [*pos[pos.index(None) + 1 :], None]


def _git_words(sub: str | None, rest: list[str | None]) -> tuple[frozenset[str], list[str | None]]:
    """The value options of ``git SUB`` and ``rest`` with git's shorthands spelt out.

    git's parser takes a unique abbreviation of a long option (``--orig`` is ``--origin``)
    and a bundle of short ones (``-qo up`` is ``-q -o up``, ``-oup`` is ``-o up``); after
    ``--`` (or ``--end-of-options``) every word is an operand. The action of ``remote``,
    ``worktree`` and ``submodule`` is kept as the first word.
    """
    key, head = sub or "", []
    if sub in _GIT_ACTIONS:
        at = next((i for i, a in enumerate(rest) if a is None or not a.startswith("-")), None)
        if at is None:
            return frozenset(), []
        key, head, rest = f"{sub} {rest[at]}", [rest[at]], rest[at + 1 :]
    values = _GIT_VALUES.get(key, frozenset())
    words: list[str | None] = head
    for i, a in enumerate(rest):
        if a in ("--", "--end-of-options"):
            return values, [*words, "--", *rest[i + 1 :]]
        words.append(a if a is None else _git_spelt_out(a, values))
    return values, words


def _git_spelt_out(word: str, values: frozenset[str]) -> str:
    """One option word in full.

    An abbreviated value option by its name; a bundle of short options ending in one that
    takes a value by that option (which then takes the next word).
    """
    if word in values or not word.startswith("-") or word == "-":
        return word
    if word.startswith("--"):
        name, eq, value = word.partition("=")
        if name in values or name in _GIT_EXACT_FLAGS or len(name) < 3:
            return word
        full = sorted(v for v in values if v.startswith(name))
        return f"{full[0]}{eq}{value}" if full else word  # several: git refuses the line
    for i, letter in enumerate(word[1:], 2):
        if f"-{letter}" in values:
            return f"-{letter}" if i == len(word) else word  # else the value is glued on
    return word


def _git_risks(name: str, args: list[str | None]) -> list[Risk]:
    if name == "git-filter-repo":
        return [("risk.history_rewrite", "rewrites git history", "ask a person to do this")]
    if name != "git":
        return []
    sub, rest = git_subcommand(args)
    words = [a for a in rest if a is not None]
    flags = short_flags(rest)
    if sub == "reset" and "--hard" in words:
        return [
            (
                "risk.git_reset_hard",
                "git reset --hard throws away uncommitted work",
                "use git stash, or keel's checkpoints and rollback",
            )
        ]
    if sub == "clean" and ("f" in flags or "--force" in words) and (set(flags) & {"d", "x", "X"}):
        return [
            (
                "risk.git_clean",
                f"git clean -fdx deletes untracked and ignored files ({STATE_DIR}/ among them)",
                "delete the specific files you mean, or run git clean -n first",
            )
        ]
    if sub == "stash" and ("--all" in words or ("a" in flags and words[:1] != ["list"])):
        return [
            (
                "risk.git_stash_all",
                f"git stash --all stashes and removes ignored files: {STATE_DIR}/ with the journal",
                "use git stash (tracked changes only)",
            )
        ]
    if sub == "push":
        return _push_risks(rest, words, flags)
    if sub in ("filter-branch", "filter-repo") or (sub == "reflog" and "expire" in words):
        return [("risk.history_rewrite", f"git {sub} rewrites history", "ask a person to do this")]
    return []


def _push_risks(rest: list[str | None], words: list[str], flags: str) -> list[Risk]:
    """Force pushes (any spelling, any order) and deleting remote branches."""
    refspecs = git_operands("push", rest)[1:]
    if (
        "f" in flags
        or any(w.startswith(("--force", "--mirror")) for w in words)
        or any(r is not None and r.startswith("+") for r in refspecs)
    ):
        return [
            (
                "risk.git_force_push",
                "a force push rewrites shared history",
                "push without --force, or ask a person",
            )
        ]
    if (
        "d" in flags
        or "--delete" in words
        or "--prune" in words
        or any(r is not None and r.startswith(":") for r in refspecs)
    ):
        return [
            (
                "risk.git_push_delete",
                "deletes branches or tags on the remote",
                "ask a person to delete remote branches",
            )
        ]
    return []


def _system_risks(
    cmd: Cmd, name: str, args: list[str | None], flags: str, words: list[str]
) -> list[Risk]:
    out: list[Risk] = []
    if (
        name in POWER
        or (name == "init" and words[:1] in (["0"], ["6"]))
        or (name == "systemctl" and set(words) & {"poweroff", "reboot", "halt", "kexec"})
    ):
        out.append(("risk.system_power", f"{name} stops or restarts the machine", "do not"))
    if name in ADMIN or (name == "sysctl" and "w" in flags) or (name == "crontab" and "r" in flags):
        out.append(("risk.system_admin", f"{name} changes the system", "ask a person to do this"))
    if (
        name.startswith("mkfs")
        or name in DISK
        or (name == "dd" and any(w.startswith("of=/dev/") and w != "of=/dev/null" for w in words))
        or (name == "shred" and any(w.startswith("/dev/") for w in words))
    ):
        out.append(("risk.disk", f"{name} writes to a disk or partition", "do not"))
    if name == "kill" and "-1" in words:
        out.append(("risk.kill_all", "kill -1 signals every process", "kill a specific pid"))
    recursive = "R" in flags or "--recursive" in words
    opens = name != "chmod" or bool(set(words) & _OPEN_MODES)
    if recursive and opens and name in ("chmod", "chown", "chgrp"):
        out.append(
            (
                "risk.chmod_777",
                f"recursive {name} opening permissions",
                "change the mode of the specific files you mean",
            )
        )
    return out


def is_recursive_delete(name: str, args: list[str | None]) -> bool:
    """``rm -r``/``-R``/``--recursive``."""
    if name != "rm":
        return False
    flags = short_flags(args)
    return "r" in flags or "R" in flags or "--recursive" in args


def reads(name: str, args: list[str | None]) -> list[str | None]:
    """Arguments read as files; other path-looking arguments are judged by the engine."""
    if name in PATTERN_FIRST:
        values = _VALUE_OPTIONS.get(name, _DEFAULT_VALUES) | {"-e", "-f", "--regexp", "--file"}
        pairs = _VALUE_PAIRS.get(name, frozenset())
        pos = positional(args, values, pairs)
        explicit = any(a in ("-e", "-f", "--regexp", "--file") for a in args)
        files = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-f", "--file")]
        files += [args[i + 2] for i, a in enumerate(args[:-2]) if a in _PAIR_FILES & pairs]
        return files + (pos if explicit else pos[1:])
    if name in READERS:
        return positional(args, _READER_VALUES.get(name, frozenset()))
    return []


def looks_like_path(arg: str) -> bool:
    """An argument that names a file outside the obvious (absolute, home, parent, encoded)."""
    if arg.startswith(("/", "~", "\\")) or arg == "..":
        return True
    low = arg.lower()
    return (
        "../" in arg
        or "/.." in arg
        or "..\\" in arg
        or "%2e" in low
        or "%2f" in low
        or "%5c" in low
        or low.startswith(("file:", "$home"))
    )


def writes(name: str, args: list[str | None]) -> list[str | None]:
    """Files a command writes, from its arguments (redirects are handled by the engine)."""
    pos = positional
    match name:
        case "tee":
            return pos(args)
        case "rm" | "rmdir" | "unlink" | "shred" | "touch" | "mkdir" | "truncate":
            return pos(args, _WRITER_VALUES.get(name, frozenset()))
        case "mv":
            return pos(args, frozenset({"-t", "-S", "--suffix"})) + _target_dir(args)
        case "cp" | "install" | "ln" | "rsync" | "scp":
            targets = _target_dir(args)
            if targets:
                return targets
            p = pos(args, _COPY_VALUES.get(name, frozenset()))
            if name == "ln" and len(p) == 1:
                return ["."]
            last = p[-1:] if len(p) > 1 else []
            return [t for t in last if t is None or not re.match(_SCP, t)]
        case "chmod" | "chown" | "chgrp":
            p = pos(args)
            return p if any((a or "").startswith("--reference") for a in args) else p[1:]
        case "sed":
            return _sed_writes(args)
        case "perl" if any(
            a and a.startswith("-") and "i" in a and not a.startswith("--") for a in args
        ):
            return pos(args)[1:]
        case "dd":
            return [a[3:] for a in args if a and a.startswith("of=")]
        case "tree":
            return [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-o"] + [
                a[9:] for a in args if a and a.startswith("--output=")
            ]
        case "uniq":
            p = pos(args, frozenset({"-f", "-s", "-w", "--skip-fields", "--skip-chars"}))
            return p[1:2]
        case "sort":
            return [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-o"] + [
                a[9:] for a in args if a and a.startswith("--output=")
            ]
        case "curl":
            return [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-o", "--output")]
        case "wget":
            return [
                args[i + 1]
                for i, a in enumerate(args[:-1])
                if a in ("-O", "-P", "--output-document")
            ]
        case "tar":
            first = args[0] if args else None
            if (
                "--extract" in args
                or "x" in short_flags(args)
                or (first is not None and not first.startswith("-") and "x" in first)
            ):
                d = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-C", "--directory")]
                return d or ["."]
            return []
        case "unzip":
            d = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-d"]
            return d or ["."]
        case "find":
            out = [args[i + 1] for i, a in enumerate(args[:-1]) if a in _FIND_FILES]
            return out + ([None] if "-delete" in args else [])
        case "git-apply":
            return [None]
        case "git":
            out = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--output", "-o")]
            out += [a.split("=", 1)[1] for a in args if a and a.startswith("--output=")]
            return out + git_writes(args)
        case "awk" | "gawk" | "mawk" | "nawk":
            prog = positional(args, frozenset({"-f", "-v", "-F"}))
            return [None] if prog and (prog[0] is None or re.search(_AWK_WRITE, prog[0])) else []
        case _:
            return []


_COPY_VALUES: dict[str, frozenset[str]] = {
    "cp": frozenset({"-t", "-S", "--suffix"}),
    "ln": frozenset({"-t", "-S", "--suffix"}),
    "install": frozenset({"-t", "-S", "-m", "-o", "-g", "--suffix", "--mode", "--owner"}),
    "rsync": frozenset({"-e", "--rsh", "-f", "--filter", "--exclude", "--include", "-B", "-T",
                        "--temp-dir", "--rsync-path", "--chmod", "--log-file", "--port"}),
    "scp": frozenset({"-P", "-i", "-o", "-F", "-S", "-c", "-l", "-J"}),
}  # fmt: skip
"""Options of the copying commands that take a value (so the value is not a file)."""


def _target_dir(args: list[str | None]) -> list[str | None]:
    out = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t", "--target-directory")]
    return out + [a.split("=", 1)[1] for a in args if a and a.startswith("--target-directory=")]


_AWK_WRITE = r"print[f]?[^;}]*>|\bfflush\b|\bclose\s*\("
_FIND_FILES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})


def sed_scripts(args: list[str | None]) -> list[str | None]:
    """The scripts of a sed command: ``-e``/``--expression`` values, else the first operand."""
    out: list[str | None] = []
    for i, a in enumerate(args):
        if a in ("-e", "--expression"):
            out.append(args[i + 1] if i + 1 < len(args) else None)
        elif a is not None and a.startswith("--expression="):
            out.append(a.split("=", 1)[1])
        elif a is not None and a.startswith("-e") and len(a) > 2 and not a.startswith("--"):
            out.append(a[2:])
    if out or any(a in ("-f", "--file") for a in args):
        return out
    return positional(args, frozenset({"-l"}))[:1]


def _sed_writes(args: list[str | None]) -> list[str | None]:
    in_place = any(
        a
        and (
            a.startswith("--in-place")
            or (a.startswith("-") and not a.startswith("--") and "i" in a)
        )
        for a in args
    )
    out: list[str | None] = []
    for script in sed_scripts(args):
        if script is None:
            out.append(None)
            continue
        facts = sed_script(script)
        out.extend(facts.writes if facts.understood else (None,))
    if not in_place:
        return out
    explicit = any(a in ("-e", "-f", "--expression", "--file") for a in args)
    pos = positional(args, frozenset({"-e", "-f", "--expression", "--file", "-l"}))
    return out + (pos if explicit else pos[1:])


def git_writes(args: list[str | None]) -> list[str | None]:
    """Files a git command writes or removes in the work tree or in a git directory.

    ``git config`` (setting a key) writes ``.git/config`` (or ``--file``, ``--global``...);
    ``checkout``/``restore`` overwrite their pathspecs; ``rm`` and ``mv`` remove or move theirs;
    ``clone``, ``worktree add`` and ``submodule add`` create their directory. Paths are
    relative to ``-C`` directories, as git takes them.
    """
    sub, rest = git_subcommand(args)
    base = _git_base(args)
    match sub:
        case "config":
            targets = _git_config_writes(rest, args)
        case "checkout" | "restore":
            targets = positional(
                rest,
                frozenset(
                    {"-s", "--source", "-b", "-B", "--orphan", "--conflict", "--pathspec-from-file"}
                ),
            )
        case "rm" | "mv" | "clean":
            targets = positional(rest)
        case "clone":  # clone [OPTIONS] REPO [DIR], and its --separate-git-dir
            targets = _git_slot(git_operands(sub, rest), 1)
            targets += git_option_values(sub, rest, "--separate-git-dir")
        case "worktree":  # worktree add [OPTIONS] PATH [COMMIT]
            pos = git_operands(sub, rest)
            targets = _git_slot(pos, 1) if pos[:1] in (["add"], [None]) else []
        case "submodule":  # submodule add [OPTIONS] URL [PATH]
            pos = git_operands(sub, rest)
            targets = pos[-1:] if pos[:1] == ["add"] and len(pos) > 1 else []
            targets = _git_slot(pos, 1) if pos[:1] == [None] else targets
        case _:
            targets = []
    return [None if t is None or base is None else _join(base, t) for t in targets]


def _git_base(args: list[str | None]) -> str | None:
    """The directory git runs in, relative to the command's: its ``-C`` options joined."""
    base = ""
    i = 0
    while i < len(args):
        a = args[i]
        if a in GIT_GLOBAL_VALUES:
            value = args[i + 1] if i + 1 < len(args) else None
            if a == "-C" and value is None:
                return None
            if a == "-C" and value is not None:
                base = _join(base, value)
            i += 2
            continue
        if a is None or not a.startswith("-"):
            break
        i += 1
    return base


def _join(base: str, path: str) -> str:
    return path if not base or path.startswith(("/", "~")) else f"{base.rstrip('/')}/{path}"


_GIT_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color",
     "--get-colorbool", "get", "list", "--help", "-h"}
)  # fmt: skip
_GIT_CONFIG_WRITES = frozenset(
    {"--add", "--replace-all", "--unset", "--unset-all", "--rename-section",
     "--remove-section", "-e", "--edit", "set", "unset", "edit", "rename-section",
     "remove-section"}
)  # fmt: skip


def _git_config_writes(rest: list[str | None], args: list[str | None]) -> list[str | None]:
    words = [a for a in rest if a is not None]
    pos = positional(
        rest, frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment", "--value"})
    )
    writes = bool(set(words) & _GIT_CONFIG_WRITES) or (
        not set(words) & _GIT_CONFIG_READS and len(pos) >= 2
    )
    if not writes and None not in rest:
        return []
    for i, a in enumerate(rest):
        if a in ("-f", "--file"):
            return [rest[i + 1] if i + 1 < len(rest) else None]
        if a is not None and a.startswith("--file="):
            return [a.split("=", 1)[1]]
    if "--global" in words:
        return ["~/.gitconfig"]
    if "--system" in words:
        return ["/etc/gitconfig"]
    gitdir = [a.split("=", 1)[1] for a in args if a and a.startswith("--git-dir=")]
    config = "config.worktree" if "--worktree" in words else "config"
    return [f"{gitdir[-1]}/{config}" if gitdir else f".git/{config}"]


def pattern_args(name: str, args: list[str | None]) -> set[int]:
    """Indices of ``args`` that are patterns, programs or messages, never file names.

    The search string of ``grep``/``rg``/``git grep`` (``grep -rn ".env" src`` searches for
    the text ``.env``), the program of ``awk``/``sed``/``jq``, ``find -name`` globs and commit
    messages.
    """
    if name in PATTERN_FIRST:
        return _pattern_first(args, 0, name)
    if name == "find":
        names = ("-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-wholename", "-lname")
        return {i + 1 for i, a in enumerate(args[:-1]) if a in names}
    if name != "git":
        return set()
    sub, rest = git_subcommand(args)
    offset = len(args) - len(rest)
    if sub == "grep":
        return _pattern_first(rest, offset, "git")
    valued = (
        "-m",
        "--message",
        "--grep",
        "--author",
        "--committer",
        "-S",
        "-G",
        "--format",
        "--pretty",
    )
    return {offset + i + 1 for i, a in enumerate(rest[:-1]) if a in valued} | {
        offset + i for i, a in enumerate(rest) if a and a.startswith(tuple(f"{v}=" for v in valued))
    }


_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "grep": frozenset({"-m", "-A", "-B", "-C", "-d", "-D", "--max-count", "--context", "--label"}),
    "rg": frozenset({"-m", "-A", "-B", "-C", "-g", "-t", "-T", "-j", "-M", "-E", "-r", "-d",
                     "--type", "--type-not", "--glob", "--iglob", "--max-count", "--context",
                     "--threads", "--max-columns", "--encoding", "--replace", "--sort",
                     "--sortr", "--ignore-file", "--max-depth", "--pre", "--pre-glob"}),
    "awk": frozenset({"-v", "-F", "-f"}),
    "sed": frozenset({"-l"}),
    "jq": frozenset({"--indent", "-L"}),
    "git": frozenset({"-m", "-A", "-B", "-C", "--max-depth", "--threads", "--max-count"}),
}  # fmt: skip
_VALUE_OPTIONS["egrep"] = _VALUE_OPTIONS["fgrep"] = _VALUE_OPTIONS["zgrep"] = _VALUE_OPTIONS["grep"]
for _awk in ("gawk", "mawk", "nawk"):
    _VALUE_OPTIONS[_awk] = _VALUE_OPTIONS["awk"]
_DEFAULT_VALUES = frozenset({"-m", "-A", "-B", "-C", "-e", "-f"})
# Options that take two values (``jq --rawfile NAME FILE``); the FILE of some is read.
_VALUE_PAIRS: dict[str, frozenset[str]] = {
    "jq": frozenset({"--arg", "--argjson", "--slurpfile", "--rawfile"}),
}
_PAIR_FILES = frozenset({"--slurpfile", "--rawfile"})
# Options of the file-writing commands whose next argument is a value, not a file written;
# per command: ``rm -r a b`` deletes a (``-r`` is a flag), ``touch -r ref b`` does not write ref.
_WRITER_VALUES: dict[str, frozenset[str]] = {
    "shred": frozenset({"-n", "-s", "--iterations", "--size", "--random-source"}),
    "touch": frozenset({"-d", "-t", "-r", "--date", "--reference"}),
    "mkdir": frozenset({"-m", "--mode"}),
    "truncate": frozenset({"-s", "-r", "--size", "--reference"}),
}
# Options of the READERS whose next argument is a value, not a file; per command, since one
# command's value option is another's flag (``head -c 5 f``, but ``cat -n f``, ``wc -c f``).
# An option missing here only costs a check of its value as a path; one too many would skip
# a file read (issue 14: ``cat -n notes.txt`` read the secret notes.txt links to).
_READER_VALUES: dict[str, frozenset[str]] = {
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c", "-s"}),
    "less": frozenset({"-b", "-h", "-j", "-p", "-P", "-x", "-y", "-z", "-D"}),
    "more": frozenset({"-n"}),
    "sort": frozenset({"-o", "-t", "-S", "-T", "-k"}),
    "uniq": frozenset({"-f", "-s", "-w"}),
    "cut": frozenset({"-b", "-c", "-d", "-f"}),
    "nl": frozenset({"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"}),
    "tac": frozenset({"-s"}),
    "xxd": frozenset({"-c", "-g", "-l", "-s", "-o", "-n"}),
    "od": frozenset({"-A", "-j", "-N", "-S", "-t", "-w"}),
    "hexdump": frozenset({"-e", "-n", "-s"}),
    "strings": frozenset({"-n", "-t", "-e"}),
    "scp": frozenset({"-P", "-o", "-c", "-l"}),
    "unzip": frozenset({"-P"}),
}  # fmt: skip


def _pattern_first(args: list[str | None], offset: int, name: str = "grep") -> set[int]:
    """The ``-e`` values, else the first operand, of a grep-like command."""
    explicit = {offset + i + 1 for i, a in enumerate(args[:-1]) if a in ("-e", "--regexp")}
    if explicit or any(a in ("-f", "--file") for a in args):
        return explicit
    values = _VALUE_OPTIONS.get(name, _DEFAULT_VALUES)
    pairs = _VALUE_PAIRS.get(name, frozenset())
    skip = 0
    for i, a in enumerate(args):
        if skip:
            skip -= 1
        elif a is not None and a.startswith("-") and a != "-":
            skip = 2 if a in pairs else int(a in values)
        else:
            return {offset + i}
    return set()


def hosts(name: str, args: list[str | None]) -> list[str | None]:
    """Hosts a command connects to (``None`` when only known at run time, ``BAD`` unreadable).

    A host is a ``HostAt`` when keel knows its port: the URL's, the tool's (``ssh -p``, ``nc
    HOST PORT``) or the tool's default (``_TOOL_PORTS``; ``git@host:path`` is ssh, 22).
    """
    out: list[str | None] = []
    if name not in NO_PATH_ARGS:
        for a in args:
            if a is None:
                continue
            out.extend(url_host_ports(a) or ())
            if "/dev/tcp/" in a or "/dev/udp/" in a:
                out.append(dev_tcp_host(a))
    match name:
        case "curl" | "wget" | "http" | "https" | "aria2c" | "lynx" | "links" | "w3m":
            out.extend(_fetcher_hosts(name, args))
        case "ssh" | "sftp" | "telnet" | "nc" | "ncat" | "netcat" | "ftp" | "tftp" | "mosh":
            p = positional(
                args, _SSH_ARGS if name == "ssh" else frozenset({"-p", "-w", "-s", "-i", "-q"})
            )
            if p:
                host = None if p[0] is None else p[0].split("@")[-1].split(":")[0].lower()
                out.append(None if host is None else HostAt(host, _tool_port(name, args, p)))
            elif name in ("nc", "ncat", "netcat"):
                out.append("listen")
        case "scp" | "rsync":
            for a in positional(args, frozenset({"-P", "-i", "-e", "-o", "-F"})):
                m = re.match(_SCP, a or "")
                if a is None:
                    out.append(None)
                elif m and "://" not in a:  # host::module is the rsync daemon
                    daemon = a[m.end() : m.end() + 1] == ":"
                    port = 873 if daemon else _tool_port(name, args)
                    out.append(HostAt(m.group(1).lower(), port))
        case "git":
            out.extend(_git_hosts(args))
        case "pip" | "uv" | "python" | "npm" | "yarn" | "pnpm" | "npx" | "bun":
            out.extend(_package_hosts(name, args))
        case _:
            pass
    return out


_TOOL_PORTS = {"ssh": 22, "sftp": 22, "scp": 22, "rsync": 22, "mosh": 22, "telnet": 23, "ftp": 21,
               "tftp": 69}  # fmt: skip
"""The port a tool connects to when its command line names none."""


def _tool_port(name: str, args: list[str | None], operands: list[str | None] | None = None) -> int:
    """The port ``name`` connects to: the one its line names, else its default (``_TOOL_PORTS``).

    ``UNREADABLE_PORT`` for a port keel cannot read (``-p $P``, ``nc host $P``, a service name,
    ``rsync -e CMD``), so that the policy allows it under no entry.
    """
    if name in ("nc", "ncat", "netcat", "telnet", "ftp", "tftp"):
        named = (operands or [])[1:2]  # nc HOST PORT
    elif name == "rsync":
        shells = _option_values(args, "-e") + _option_values(args, "--rsh")
        named = [] if all(v == "ssh" for v in shells) else [None]
    elif name in ("ssh", "scp", "sftp"):  # mosh's -p is its UDP port
        named = _option_values(args, "-p" if name == "ssh" else "-P")
        if name == "ssh":  # -o Port=N; an option known only at run time may be one
            options = _option_values(args, "-o")
            named += [re.split(r"[\s=]+", o, maxsplit=1)[-1] if o else None for o in options
                      if o is None or o.lower().startswith("port")]  # fmt: skip
    else:
        named = []
    return port_number(named[-1]) if named else _TOOL_PORTS.get(name, UNREADABLE_PORT)


def _option_values(args: list[str | None], option: str) -> list[str | None]:
    """The values of ``option`` (``-p 22``, ``-p22``, ``--rsh=ssh``), in order."""
    out: list[str | None] = []
    for i, a in enumerate(args):
        if a == option:
            out.append(args[i + 1] if i + 1 < len(args) else "")
        elif a and a.startswith(option) and not option.startswith("--"):
            out.append(a[len(option) :])
        elif a and a.startswith(option + "="):
            out.append(a[len(option) + 1 :])
    return out


def _fetcher_hosts(name: str, args: list[str | None]) -> list[str | None]:
    out: list[str | None] = []
    value_opts = _CURL_ARGS if name == "curl" else _WGET_ARGS
    for a in positional(args, value_opts):
        if a is None:
            out.append(None)
        elif not is_url(a):
            # [user[:password]@]host[:port][/path]: the host follows the last `@` (a password
            # may hold `:`; curl connects to what follows it, never to what precedes it)
            authority = a.split("/", 1)[0].rpartition("@")[2]
            host, _, port = authority.partition(":")
            out.append(HostAt(host.lower() or BAD, port_number(port) if port else None))
    for i, a in enumerate(args[:-1]):
        if a in _CURL_HOSTS and name == "curl":
            value = args[i + 1]
            out.extend((url_host_ports(value) or (value,)) if value is not None else (None,))
    return out


_CURL_HOSTS = frozenset(
    {"--url", "-x", "--proxy", "-e", "--referer", "--connect-to", "--resolve", "--preproxy",
     "--proxy1.0", "--socks4", "--socks4a", "--socks5", "--socks5-hostname", "--doh-url"}
)  # fmt: skip
"""curl options whose value names a host curl connects to (or connects through)."""
_GIT_REMOTE_SUBS = frozenset({"clone", "fetch", "pull", "push", "ls-remote", "archive"})


def _git_hosts(args: list[str | None]) -> list[str | None]:
    """The host of the repository a git command names (never of a refspec such as a:b)."""
    sub, rest = git_subcommand(args)
    pos = git_operands(sub, rest)
    repo: list[str | None] = []
    if sub in _GIT_REMOTE_SUBS:
        repo = _git_slot(pos, 0) + git_option_values(sub, rest, "--repo", "--remote")
    elif sub == "remote" and pos[:1] in (["add"], ["set-url"]):
        repo = _git_slot(pos, 2)  # add NAME URL; set-url NAME NEWURL [OLDURL] (a pattern)
    elif sub == "submodule" and pos[:1] == ["add"]:
        repo = _git_slot(pos, 1)
    elif sub in ("remote", "submodule") and pos[:1] == [None]:
        repo = _git_slot(pos, 1)  # an action known only at run time: any operand may be a URL
    out: list[str | None] = []
    for a in repo:
        if a is None:
            out.append(None)
            continue
        m = re.match(_SCP, a)
        if m and not is_url(a) and "/" not in a.split(":", 1)[0]:
            out.append(HostAt(m.group(1).lower(), 22))  # host:path is ssh
    return out


_INDEX_OPTIONS = (
    "-i",
    "--index-url",
    "--extra-index-url",
    "--registry",
    "--index",
    "--default-index",
    "--trusted-host",
    "--find-links",
    "-f",
)
_EXPLICIT_INDEX = ("-i", "--index-url", "--registry", "--default-index")


def _package_hosts(name: str, args: list[str | None]) -> list[str | None]:
    """Registries an install reaches: every index option's value, whatever it looks like."""
    words = [a for a in args if a is not None]
    if name == "python":
        if words[:2] != ["-m", "pip"]:
            return []
        words = words[2:]
    if name == "uv" and words[:1] == ["pip"]:
        words = words[1:]
    out: list[str | None] = []
    explicit = False
    for i, w in enumerate(words):
        option, eq, value = w.partition("=")
        if option not in _INDEX_OPTIONS or not option.startswith("-"):
            continue
        if not eq:
            value = words[i + 1] if i + 1 < len(words) else ""
        explicit = explicit or option in _EXPLICIT_INDEX
        out.extend(_index_hosts(option, value))
    for w in words:
        if "://" in w and not is_url(w):  # name @ https://host/x.whl, -egit+https://...
            m = re.search(r"[A-Za-z][A-Za-z0-9+.\-]*://\S*", w)
            out.extend((url_host_ports(m.group(0)) or (BAD,)) if m else (BAD,))
    if words[:1] and words[0] in ("install", "download", "i", "add", "ci", "sync") and not explicit:
        npm_like = name in ("npm", "yarn", "pnpm", "bun")
        out.extend(("registry.npmjs.org",) if npm_like else ("pypi.org",))
    return out


def _index_hosts(option: str, value: str) -> list[str | None]:
    if option == "--trusted-host":
        return [value.split(":", 1)[0].lower() or BAD]
    hosts = url_host_ports(value)
    if hosts is not None:
        return list(hosts)
    if option in ("-f", "--find-links"):
        return []  # a local directory of wheels: judged as a path
    return [BAD]


def url_host(text: str) -> str | None:
    """The WHATWG host of ``text`` if it is a URL (``BAD`` when unreadable), else ``None``."""
    found = url_hosts(text.strip())
    return found[0] if found else None


_CURL_ARGS = frozenset(
    [
        "-o",
        "--output",
        "-d",
        "--data",
        "--data-binary",
        "--data-raw",
        "--data-urlencode",
        "-H",
        "--header",
        "-X",
        "--request",
        "-u",
        "--user",
        "-A",
        "--user-agent",
        "-e",
        "--referer",
        "-w",
        "--write-out",
        "-T",
        "--upload-file",
        "-F",
        "--form",
        "-b",
        "--cookie",
        "-c",
        "--cookie-jar",
        "--connect-to",
        "--resolve",
        "-x",
        "--proxy",
        "-m",
        "--max-time",
        "--url",
        "-K",
        "--config",
        "-r",
        "--range",
        "-E",
        "--cert",
        "--key",
        "--cacert",
        "-y",
        "-Y",
        "--retry",
        "--connect-timeout",
    ]
)
_WGET_ARGS = frozenset(
    [
        "-O",
        "--output-document",
        "-o",
        "--output-file",
        "-P",
        "--directory-prefix",
        "-U",
        "--user-agent",
        "--header",
        "-e",
        "-t",
        "--tries",
        "-T",
        "--timeout",
        "--post-data",
        "--post-file",
        "-i",
        "--input-file",
        "-a",
        "-w",
        "--wait",
        "-Q",
        "--user",
        "--password",
    ]
)
_SSH_ARGS = frozenset(
    [
        "-p",
        "-i",
        "-l",
        "-o",
        "-F",
        "-J",
        "-L",
        "-R",
        "-D",
        "-b",
        "-c",
        "-E",
        "-e",
        "-I",
        "-m",
        "-O",
        "-Q",
        "-S",
        "-W",
        "-w",
        "-B",
    ]
)
