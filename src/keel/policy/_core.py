"""The policy engine: plain data in, ``(decision, rule, reason, suggestion)`` tuples out.

The public :class:`keel.policy.Policy` wraps this in :class:`keel.decision.Decision`; the fast
``keel policy check`` path uses it directly so a decision costs no dataclass machinery.
Every check starts from the preset's default (ask or deny) and collects verdicts from
constraints, risk rules, paths, network and command patterns; the strictest wins, and a tie
goes to the most specific rule, so that is the one reported.
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase

from keel.policy import _presets as presets
from keel.policy._paths import (
    DEVICES_READ,
    DEVICES_WRITE,
    GlobSet,
    absolute_forms,
    expand_home,
    inside,
    is_foreign_absolute,
    relative,
    variants,
)
from keel.policy._rules import (
    INTERPRETERS,
    NO_PATH_ARGS,
    hosts,
    interpreter_code,
    is_recursive_delete,
    looks_like_path,
    match_args,
    normalise,
    positional,
    reads,
    reads_stdin_script,
    risks,
    url_host,
    writes,
)
from keel.policy._shell import SHELLS, Cmd, Parsed, parse

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any

    Verdict = tuple[str, str, str, str | None]
    Pattern = tuple[str, ...]
    Tier = tuple[tuple[Pattern, ...], tuple[Pattern, ...], tuple[Pattern, ...]]
    Index = dict[str, tuple[Pattern, ...]]

RANK = {"allow": 0, "ask": 1, "deny": 2}
PATH_MAX = 4096  # longer paths cannot be opened on Linux; judging them is only a cost
WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
READ_OPS = frozenset({"<", "<&"})
_GLOB_CHARS = frozenset("*?[")
_SHELL_META = frozenset(";|&`$<>\n")
# Words that may name a secret; such arguments are judged as paths whatever the command.
_SECRETISH = (
    r"(?i)\.env|\.ssh|id_rsa|id_ed25519|id_ecdsa|id_dsa|\.aws|gcloud|\.kube|\.docker|\.netrc|"
    r"shadow|sudoers|credentials|\.pem|\.pgpass|\.pypirc|\.npmrc|\.gnupg|environ|\.git-credentials"
)
_TIERS: dict[str, Tier] = {}
_INDEXES: dict[str, tuple[Index, Index, Index]] = {}
# Read-only commands: the strict preset's allow list (inspection), minus the options with
# which some of them write a file or run another program.
_READ_ONLY_BUILTINS = frozenset({"cd", "pushd", "popd", ":"})
_READ_ONLY_WRAPPERS = frozenset({"env", "timeout", "nice", "time", "command", "stdbuf", "ionice"})
_NOT_READ_ONLY = frozenset({"awk", "gawk", "mawk", "nawk", "xxd", "man", "sed"})
_SED_PRINT = re.compile(r"^(?:(?:\d+|\$)(?:,(?:\d+|\$))?p;?)+$")  # the ``sed -n 1,80p`` idiom
_READ_ONLY_EXCLUDED: dict[str, tuple[str, ...]] = {
    "tree": ("-o", "--output"),
    "fd": ("-x", "-X", "--exec", "--exec-batch"),
    "fdfind": ("-x", "-X", "--exec", "--exec-batch"),
    "rg": ("--pre",),
    "sort": ("-o", "--output", "--compress-program"),
    "ag": ("--pager",),
    "ack": ("--pager",),
    "file": ("-C", "--compile"),
    "less": ("-o", "-O", "--log-file", "--LOG-FILE"),
}


_PRIORITY = {"constraint": 0, "input": 0, "risk": 1, "path": 2, "network": 2, "parse": 3}


def _priority(v: Verdict) -> int:
    if v[0] == "allow":
        return 0 if v[1].startswith(("preset.", "config.")) else 1
    return _PRIORITY.get(v[1].split(".", 1)[0], 4)


_SUGGESTIONS = {
    "input": "send smaller, plain UTF-8 text",
    "path": "work on files inside the workspace, named literally",
    "network": "use hosts on [policy] network_allow, or ask the user",
    "parse": "write the command out literally, one simple command at a time",
    "risk": "find a safer way, or ask the user",
    "constraint": "the constraint is in keel.toml; find another way",
    "internal_error": "report this as a keel bug; the action was blocked to be safe",
}


def with_suggestion(v: Verdict) -> Verdict:
    """``v``, with a generic suggestion for an ask or deny that has none."""
    if v[0] == "allow" or v[3]:
        return v
    hint = _SUGGESTIONS.get(v[1].split(".", 1)[0], "ask the user, or change keel.toml")
    return (v[0], v[1], v[2], hint)


def worst(verdicts: list[Verdict]) -> Verdict | None:
    """The strictest verdict (deny > ask > allow).

    Ties go to the most specific rule (constraint, risk, path or network, parse, command
    pattern; for allows the command pattern), then to the first.
    """
    best: Verdict | None = None
    for v in verdicts:
        if best is None or (RANK[v[0]], -_priority(v)) > (RANK[best[0]], -_priority(best)):
            best = v
    return best


def split_pattern(pattern: str) -> Pattern:
    """A command pattern's words (shell quoting respected)."""
    import shlex

    try:
        return tuple(shlex.split(pattern))
    except ValueError:
        return tuple(pattern.split())


def match_pattern(pattern: Pattern, argv: list[str | None], *, conservative: bool) -> bool:
    """``argv`` starts with ``pattern`` (each word an fnmatch glob).

    A last pattern word ``$`` means argv must end there. A dynamic word matches any
    pattern word when ``conservative`` (for deny and ask).
    """
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
        if want == word:
            continue
        if _GLOB_CHARS.isdisjoint(want) or not fnmatchcase(word, want):
            return False
    return True


def _preset_tier(name: str) -> Tier:
    if name not in _TIERS:
        data = presets.PRESETS[name]
        _TIERS[name] = (
            tuple(tuple(p.split()) for p in data["allow"]),
            tuple(tuple(p.split()) for p in data["ask"]),
            tuple(tuple(p.split()) for p in data["deny"]),
        )
    return _TIERS[name]


def _index(patterns: tuple[Pattern, ...]) -> Index:
    """Patterns by their first word (``*`` for a first word with glob characters)."""
    out: dict[str, list[Pattern]] = {}
    for p in patterns:
        if p:
            out.setdefault(p[0] if _GLOB_CHARS.isdisjoint(p[0]) else "*", []).append(p)
    return {key: tuple(value) for key, value in out.items()}


def _indexes(tier: Tier) -> tuple[Index, Index, Index]:
    return (_index(tier[0]), _index(tier[1]), _index(tier[2]))


class Engine:
    """A compiled policy for one workspace root."""

    def __init__(self, snapshot: dict[str, Any], root: str, preset: str | None = None) -> None:
        """Compile ``snapshot`` for ``root``; ``preset`` overrides the snapshot's preset.

        Raises:
            KeyError: ``preset`` (or the snapshot's) is not a known preset.
        """
        name = preset or snapshot["preset"]
        data = presets.PRESETS[name]
        self.snapshot = snapshot
        self.preset = name
        self.root = os.path.abspath(root)
        self.root_real = os.path.realpath(root)
        self.home = os.path.expanduser("~")
        self._last_parse: tuple[tuple[str, str | None], Parsed] | None = None
        split = split_pattern
        self.config_tier: Tier = (
            tuple(split(p) for p in snapshot["allow"]),
            tuple(split(p) for p in snapshot["ask"]),
            tuple(split(p) for p in snapshot["deny"]),
        )
        self.preset_tier = _preset_tier(name)
        if name not in _INDEXES:
            _INDEXES[name] = _indexes(self.preset_tier)
        self._tiers = (
            ("config", "keel.toml [policy]", _indexes(self.config_tier)),
            (f"preset.{name}", f"the {name} preset", _INDEXES[name]),
        )
        self.unknown: str = snapshot["unknown"] or data["unknown"]
        self.unparseable: str = snapshot["unparseable"] or data["unparseable"]
        self.network: tuple[str, ...] = (*data["network"], *snapshot["network_allow"])
        protected = snapshot["protected"]
        self.protected = GlobSet(
            presets.PROTECTED if protected is None else tuple(protected), ignore_case=True
        )
        home = self.home
        self.read_outside = GlobSet(
            tuple(expand_home(g, home) for g in (*data["read_outside"], *snapshot["read_outside"]))
        )
        self.secrets = GlobSet(
            tuple(expand_home(g, home) for g in presets.SECRETS), ignore_case=True
        )
        self.secret_ok = GlobSet(presets.SECRET_EXCEPTIONS, ignore_case=True)
        self.include = GlobSet(tuple(snapshot["scope_include"]))
        self.exclude = GlobSet(tuple(snapshot["scope_exclude"]))
        self.constraints = tuple(
            (cid, text, GlobSet(tuple(protect), ignore_case=True), tuple(split(f) for f in forbid))
            for cid, text, protect, forbid in snapshot["constraints"]
        )
        self.max_input: int = snapshot["max_input_bytes"]
        self.command_writes: bool = data["command_writes"]
        self.file_writes: bool = data["file_writes"]

    # -- verdict helpers ---------------------------------------------------------------------

    def level(self, which: str, rule: str, reason: str, suggestion: str | None) -> Verdict:
        """A verdict at the preset's ``unknown`` or ``unparseable`` level (ask or deny)."""
        level = self.unknown if which == "unknown" else self.unparseable
        return (level, rule, reason, suggestion)

    def bad_input(self, text: object, what: str) -> Verdict | None:
        """A deny for input that cannot be judged (not text, NUL, not UTF-8, too large)."""
        if not isinstance(text, str):
            return ("deny", "input.type", f"the {what} is not text", None)
        if "\x00" in text:
            return ("deny", "input.nul", f"the {what} contains a NUL byte", "remove the NUL byte")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            return ("deny", "input.encoding", f"the {what} is not valid UTF-8", "send UTF-8 text")
        if size > self.max_input:
            return (
                "deny",
                "input.too_large",
                f"the {what} is {size} bytes, over [limits] max_input_bytes ({self.max_input})",
                "split it into smaller steps",
            )
        return None

    def _cwd(self, cwd: str | None) -> str:
        if not cwd:
            return self.root
        full = os.path.normpath(os.path.join(self.root, cwd))
        return full if inside(full, self.root) else self.root

    # -- paths ---------------------------------------------------------------------------------

    def check_path(
        self, raw: str, op: str, cwd: str | None = None, *, resolved_cwd: bool = False
    ) -> Verdict:
        """Judge reading (``read``) or changing (``write``/``edit``) the file ``raw``."""
        bad = self.bad_input(raw, "path")
        if bad is not None:
            return bad
        if not raw.strip():
            return ("deny", "path.empty", "the path is empty", "name a file in the workspace")
        if len(raw) > PATH_MAX:
            return ("deny", "path.too_long", f"the path is over {PATH_MAX} characters", None)
        base = cwd if resolved_cwd else self._cwd(cwd)
        forms = variants(raw)
        if any("\x00" in f for f in forms):
            return ("deny", "path.nul", f"{raw!r} decodes to a NUL byte", None)
        if any(c < " " or c == "\x7f" for f in forms for c in f):
            return (
                "deny",
                "path.control_char",
                f"{raw!r} contains or decodes to a control character",
                "name files without control characters",
            )
        verdicts = [self._judge_form(f, raw, op, base) for f in forms]
        return worst(verdicts) or ("deny", "internal_error", "no verdict", None)

    def _secret(self, path: str) -> bool:
        key = path.lstrip("/")
        return self.secrets.match(key) is not None and self.secret_ok.match(key) is None

    def _judge_form(self, form: str, raw: str, op: str, cwd: str | None) -> Verdict:
        path = expand_home(form, self.home)
        if is_foreign_absolute(path):
            return (
                "deny",
                "path.outside_workspace",
                f"{raw!r} is a Windows drive or network path",
                "use a path inside the workspace",
            )
        if cwd is None and not path.startswith("/"):
            return self.level(
                "unparseable",
                "path.dynamic",
                f"{raw!r} is relative to a directory only known at run time",
                "use a path relative to the workspace root",
            )
        lexical, real = absolute_forms(path, cwd or self.root)
        if lexical.startswith(("/dev/tcp/", "/dev/udp/")):
            parts = lexical.split("/")
            return self.check_host(parts[3] if len(parts) > 3 and parts[3] else None, raw)
        devices = DEVICES_READ if op == "read" else DEVICES_WRITE
        if lexical in devices or path in devices:
            return ("allow", "path.device", f"{lexical} is a standard device", None)
        secret = self._secret(lexical) or self._secret(real)
        if secret and op == "read":
            return (
                "deny",
                "risk.secret_read",
                f"{raw!r} is a secret ({real})",
                "do not read credentials; ask the user for what you need",
            )
        if not (inside(lexical, self.root) and inside(real, self.root_real)):
            return self._outside(
                raw, real if lexical == real else f"{lexical} -> {real}", op, lexical, real
            )
        if op == "read":
            return ("allow", "path.read", f"{raw!r} is inside the workspace", None)
        return self._judge_write(
            raw, {relative(lexical, self.root), relative(real, self.root_real)}
        )

    def _outside(self, raw: str, shown: str, op: str, lexical: str, real: str) -> Verdict:
        if op == "read":
            if self.read_outside.match(lexical.lstrip("/")) and self.read_outside.match(
                real.lstrip("/")
            ):
                return (
                    "allow",
                    "path.read_outside",
                    f"{shown} matches [policy] read_outside",
                    None,
                )
            return (
                "deny",
                "path.outside_workspace",
                f"{raw!r} resolves outside the workspace ({shown})",
                "read files inside the workspace, or add a glob to [policy] read_outside",
            )
        return (
            "deny",
            "path.outside_workspace",
            f"{raw!r} resolves outside the workspace ({shown})",
            "write only inside the workspace",
        )

    def _judge_write(self, raw: str, rels: set[str]) -> Verdict:
        for rel in sorted(rels):
            for cid, text, protect, _ in self.constraints:
                if protect.match(rel):
                    return (
                        "deny",
                        f"constraint.{cid}",
                        f"{rel!r} is protected by constraint {cid}: {text}",
                        "leave this file alone; the constraint is in keel.toml",
                    )
            glob = self.protected.match(rel)
            if glob is not None:
                return (
                    "deny",
                    "path.protected",
                    f"{rel!r} is protected ({glob!r})",
                    "protected files are changed by people, not agents",
                )
            if self.include.match(rel) is None or self.exclude.match(rel) is not None:
                return (
                    "deny",
                    "path.out_of_scope",
                    f"{rel!r} is outside the task's [scope]",
                    "change only files in scope, or widen [scope] in keel.toml",
                )
        if not self.file_writes:
            return (
                "deny",
                f"preset.{self.preset}.no_writes",
                f"the {self.preset} preset allows no writes",
                None,
            )
        return ("allow", "path.in_scope", f"{raw!r} is inside the workspace and in scope", None)

    def in_scope(self, raw: str) -> bool:
        """True if ``raw`` is inside the workspace and matched by ``[scope]``."""
        if self.bad_input(raw, "path") is not None or not raw.strip():
            return False
        for form in variants(raw):
            path = expand_home(form, self.home)
            if is_foreign_absolute(path):
                return False
            lexical, real = absolute_forms(path, self.root)
            if not (inside(lexical, self.root) and inside(real, self.root_real)):
                return False
            for rel in (relative(lexical, self.root), relative(real, self.root_real)):
                if self.include.match(rel) is None or self.exclude.match(rel) is not None:
                    return False
        return True

    # -- network -------------------------------------------------------------------------------

    def check_url(self, url: str) -> Verdict:
        """Judge fetching ``url``."""
        bad = self.bad_input(url, "URL")
        if bad is not None:
            return bad
        text = url.strip()
        scheme = text.split("://", 1)[0].lower() if "://" in text else ""
        if scheme not in ("http", "https", "ws", "wss", "ftp", "ftps", "git", "ssh", "sftp"):
            return (
                "deny",
                "network.bad_url",
                f"{url!r} is not a URL keel understands",
                "use an http(s) URL",
            )
        host = url_host(text)
        if host is None:
            return ("deny", "network.bad_url", f"{url!r} names no host", "use an http(s) URL")
        return self.check_host(host, url)

    def check_host(self, host: str | None, what: str, port: int | None = None) -> Verdict:
        """Judge connecting to ``host`` (``None``: only known at run time).

        An allowlist entry ``host:port`` allows that port only; it never matches when ``port``
        is not known. An entry without a port allows every port.
        """
        if host is None:
            return self.level(
                "unparseable",
                "network.unknown_host",
                f"the host of {what!r} is only known at run time",
                None,
            )
        if host == "listen":
            return (
                "deny",
                "network.not_allowed",
                f"{what!r} listens for network connections",
                None,
            )
        forms = {f.lower().rstrip(".") for f in variants(host)}
        patterns = [p for p in map(_host_pattern, self.network) if p[1] in (None, port)]
        if all(any(fnmatchcase(f, pat) for pat, _ in patterns) for f in forms):
            return ("allow", "network.allowed", f"{host} is on the network allowlist", None)
        hint = (
            "add the host to [policy] network_allow in keel.toml"
            if self.network
            else f"the {self.preset} preset allows no network"
        )
        return ("deny", "network.not_allowed", f"{host} is not on the network allowlist", hint)

    # -- commands ------------------------------------------------------------------------------

    def _parse(self, line: str, cwd: str | None) -> Parsed:
        """``parse`` with a one-line memory.

        The guard judges a line, then asks whether it is read-only (to skip a checkpoint):
        one tree-sitter parse serves both. Parsing reads no files, so the key is the text.
        """
        key = (line, cwd)
        last = self._last_parse
        if last is not None and last[0] == key:
            return last[1]
        parsed = parse(line, cwd=self._cwd(cwd), home=self.home)
        self._last_parse = (key, parsed)
        return parsed

    def check_line(self, line: str, cwd: str | None = None) -> Verdict:
        """Judge a shell command line: the strictest verdict over every command in it."""
        bad = self.bad_input(line, "command")
        if bad is not None:
            return bad
        if not line.strip():
            return ("allow", "command.empty", "an empty command does nothing", None)
        parsed = self._parse(line, cwd)
        verdicts: list[Verdict] = []
        for kind, detail in parsed.issues:
            verdicts.append(self._issue(kind, detail))
        for cmd in parsed.cmds:
            verdicts.extend(self.judge(cmd))
        return worst(verdicts) or ("allow", "command.empty", "the line runs no command", None)

    def _issue(self, kind: str, detail: str) -> Verdict:
        if kind in ("fork_bomb", "env_injection"):
            return ("deny", f"risk.{kind}", detail, "do not")
        if kind == "secret_env":
            return ("deny", "risk.secret_read", detail, "do not read credentials")
        if kind == "path_override":
            return self.level("unknown", "risk.path_override", detail, None)
        rule = "parse.unparseable" if kind == "unparseable" else f"parse.{kind}"
        return self.level("unparseable", rule, detail, "write the command out literally")

    def judge(self, cmd: Cmd) -> list[Verdict]:
        """Every verdict for one simple command, most specific first."""
        raw_name = cmd.name
        if raw_name is None:
            out = [
                self.level(
                    "unparseable",
                    "parse.dynamic_command",
                    "the command name is only known at run time",
                    "write the command name literally",
                )
            ]
            return out + self._redirects(cmd)
        name = normalise(raw_name) if raw_name else ""
        args = cmd.argv[1:]
        argv: list[str | None] = [name, *args]
        out: list[Verdict] = []
        for cid, text, _, forbid in self.constraints:
            if any(match_pattern(p, argv, conservative=True) for p in forbid):
                out.append(
                    (
                        "deny",
                        f"constraint.{cid}",
                        f"forbidden by constraint {cid}: {text}",
                        "the constraint is in keel.toml; find another way",
                    )
                )
        out.extend(("deny", rule, reason, hint) for rule, reason, hint in risks(cmd, name, args))
        out.extend(self._special(cmd, name, args))
        if cmd.is_wrapper:
            return out + self._redirects(cmd)
        out.extend(self._paths(cmd, name, args))
        out.extend(self.check_host(h, f"{raw_name} {h or '?'}") for h in hosts(name, args))
        if name and not cmd.is_wrapper:
            out.append(
                self.tier(
                    [name, *match_args(name, args)],
                    bare=name == raw_name or not raw_name.startswith("/"),
                )
            )
        return out

    def _special(self, cmd: Cmd, name: str, args: list[str | None]) -> list[Verdict]:
        out: list[Verdict] = []
        if is_recursive_delete(name, args) and self._broad_delete(cmd, args):
            out.append(
                (
                    "deny",
                    "risk.rm_recursive",
                    "a recursive delete of the workspace, home or system",
                    "delete the specific files or build directories you mean",
                )
            )
        if set(cmd.wrappers) & {"sudo", "doas", "su"} or name in ("sudo", "doas", "su"):
            out.append(
                self.level(
                    "unknown",
                    "risk.privilege",
                    "runs with elevated privileges",
                    "run it without sudo",
                )
            )
        if any(var == "PATH" for var, _ in cmd.assigns):
            out.append(
                self.level("unknown", "risk.path_override", "changes PATH for the command", None)
            )
        runs_stdin = (name in SHELLS or name in INTERPRETERS) and reads_stdin_script(name, args)
        if runs_stdin and (cmd.piped_from or cmd.stdin_dynamic):
            out.append(
                self.level(
                    "unparseable",
                    "parse.dynamic_script",
                    f"{name} runs a script only known at run time",
                    "write the script to a file and run that",
                )
            )
        found = interpreter_code(name, args, cmd.heredoc)
        if found is not None and found[1] is None:
            out.append(
                self.level(
                    "unparseable",
                    "parse.dynamic_script",
                    f"{name} runs code only known at run time",
                    None,
                )
            )
        return out

    def _broad_delete(self, cmd: Cmd, args: list[str | None]) -> bool:
        if cmd.dynamic_tail or "--no-preserve-root" in args:
            return True
        for target in positional(args):
            if target is None or cmd.cwd is None:
                return True
            t = expand_home(target, self.home)
            if t.rstrip("/*") in ("", ".", "..", "~") or t in ("*", ".*", "./*"):
                return True
            lexical, real = absolute_forms(t.rstrip("*") or ".", cmd.cwd)
            for p, root in ((lexical, self.root), (real, self.root_real)):
                if inside(root, p) or not inside(p, root):
                    return True
        return False

    def _paths(self, cmd: Cmd, name: str, args: list[str | None]) -> list[Verdict]:
        out: list[Verdict] = []
        targets: list[str | None] = list(reads(name, args))
        if name not in NO_PATH_ARGS:
            for a in args:
                if a is None:
                    continue
                value = a.split("=", 1)[1] if a.startswith("-") and "=" in a else a
                if value and (looks_like_path(value) or re.search(_SECRETISH, value)):
                    targets.append(value)
        found = interpreter_code(name, args, cmd.heredoc)
        if found is not None and found[1]:
            targets.extend(re.findall(r"""['"]((?:/|~)[^'"\s]*)['"]""", found[1]))
        for target in dict.fromkeys(targets):
            if target is not None and not _SHELL_META.isdisjoint(target):
                out.append(
                    self.level(
                        "unparseable",
                        "parse.suspicious_argument",
                        f"{name} is given {target!r}, which holds shell syntax",
                        "check the command was not built from untrusted text",
                    )
                )
            if target is None:
                out.append(
                    self.level(
                        "unknown",
                        "path.dynamic",
                        f"{name} reads a file only known at run time",
                        None,
                    )
                )
            else:
                for each in self._globbed(target, cmd.cwd):
                    out.append(self.check_path(each, "read", cmd.cwd, resolved_cwd=True))
        out.extend(self._redirects(cmd))
        for target in writes(name, args):
            out.append(self._write(target, cmd, name))
        return out

    def _globbed(self, target: str, cwd: str | None) -> list[str]:
        """``target`` and, if it is a glob, the files bash would expand it to (at most 256)."""
        if _GLOB_CHARS.isdisjoint(target) or cwd is None:
            return [target]
        import glob
        import itertools

        pattern = expand_home(target, self.home)
        head, tail = os.path.split(pattern)
        try:
            found = list(itertools.islice(glob.iglob(pattern, root_dir=cwd), 256))
            if head and not _GLOB_CHARS.isdisjoint(head):
                # a file that does not exist yet, in directories the glob names
                dirs = itertools.islice(glob.iglob(head, root_dir=cwd), 256)
                found.extend(os.path.join(d, tail) for d in dirs)
        except (OSError, ValueError):
            return [target]
        return [target, *found]

    def _redirects(self, cmd: Cmd) -> list[Verdict]:
        out: list[Verdict] = []
        for op, target in cmd.redirects:
            if target is not None and op in (">&", "<&") and (target.isdigit() or target == "-"):
                continue
            if op in READ_OPS:
                if target is None:
                    out.append(
                        self.level(
                            "unknown", "path.dynamic", "reads a file only known at run time", None
                        )
                    )
                else:
                    out.append(self.check_path(target, "read", cmd.cwd, resolved_cwd=True))
            elif op in WRITE_OPS:
                out.append(self._write(target, cmd, cmd.name or "a redirect"))
        return out

    def _write(self, target: str | None, cmd: Cmd, name: str) -> Verdict:
        if target is None:
            return self.level(
                "unparseable",
                "path.dynamic",
                f"{name} writes a file only known at run time",
                "name the file literally",
            )
        verdict = worst(
            [
                self.check_path(t, "write", cmd.cwd, resolved_cwd=True)
                for t in self._globbed(target, cmd.cwd)
            ]
        ) or ("deny", "internal_error", "no verdict", None)
        if verdict[0] == "allow" and verdict[1] != "path.device" and not self.command_writes:
            return (
                "deny",
                f"preset.{self.preset}.no_writes",
                f"the {self.preset} preset allows only read-only commands"
                f" ({name} writes {target!r})",
                "use the edit tool, or ask the user",
            )
        return verdict

    def tier(self, argv: list[str | None], *, bare: bool = True) -> Verdict:
        """The command-pattern verdict: config tier, then preset tier, then the default.

        A command named by an absolute path (``bare`` false) can be denied or asked about
        by its name, but only allowed by a pattern naming that path.
        """
        first = argv[0] or ""
        for rule, where, (allow, ask, deny) in self._tiers:
            for level, index in (("deny", deny), ("ask", ask)):
                for p in index.get(first, ()) + index.get("*", ()):
                    if match_pattern(p, argv, conservative=True):
                        return (
                            level,
                            f"{rule}.{level}",
                            f"matches {' '.join(p)!r} in {where}",
                            None if level == "ask" else "do not run this",
                        )
            for p in allow.get(first, ()) + allow.get("*", ()):
                if (bare or p[0].startswith("/")) and match_pattern(p, argv, conservative=False):
                    return ("allow", f"{rule}.allow", f"matches {' '.join(p)!r} in {where}", None)
        return self.level(
            "unknown",
            f"default.{self.unknown}",
            f"{argv[0]!r} is not allowed by {self._tiers[1][1]} or keel.toml",
            "add a pattern to [policy] allow in keel.toml, or ask the user",
        )

    def is_read_only(self, line: str, cwd: str | None = None) -> bool:
        """True only if every simple command of ``line`` certainly changes no file.

        A command is read-only when the strict preset's allow list (inspection commands)
        matches it by name, no ask pattern of the inspection set matches, it writes through
        no argument or redirect (``/dev/null`` and descriptor copies aside), carries no
        variable assignment, and uses none of the options with which an inspection command
        writes or runs another program. Anything unparsed, dynamic or unknown is not.
        """
        if self.bad_input(line, "command") is not None:
            return False
        if not line.strip():
            return True
        parsed = self._parse(line, cwd)
        if parsed.issues:
            return False
        return all(self._reads_only(cmd) for cmd in parsed.cmds)

    def _reads_only(self, cmd: Cmd) -> bool:
        raw = cmd.name
        if raw is None or cmd.assigns or cmd.dynamic_tail:
            return False
        for op, target in cmd.redirects:
            if op in WRITE_OPS and not (
                target is not None
                and (
                    target in DEVICES_WRITE or (op == ">&" and (target.isdigit() or target == "-"))
                )
            ):
                return False
        if raw == "":
            return True
        args = cmd.argv[1:]
        if None in cmd.argv[:1] or raw.startswith("/") or "/" in raw:
            return False
        if cmd.is_wrapper:
            return raw in _READ_ONLY_WRAPPERS
        if raw in _READ_ONLY_BUILTINS:
            return True
        if raw == "sed":
            return _sed_prints(args)
        if raw in _NOT_READ_ONLY:
            return False
        excluded = _READ_ONLY_EXCLUDED.get(raw, ())
        for a in args:
            if a is not None and a.startswith(excluded):
                return False
        if raw == "uniq" and len(positional(args, frozenset({"-f", "-s", "-w"}))) > 1:
            return False
        if writes(raw, args) or risks(cmd, raw, args) or interpreter_code(raw, args, cmd.heredoc):
            return False
        argv: list[str | None] = [raw, *args]
        allow, ask, _ = _preset_tier("strict")
        inspect_ask = tuple(tuple(p.split()) for p in presets.INSPECT_ASK)
        if any(match_pattern(p, argv, conservative=True) for p in inspect_ask):
            return False
        return any(match_pattern(p, argv, conservative=False) for p in allow) and not any(
            match_pattern(p, argv, conservative=True) for p in ask
        )

    def written_paths(self, line: str, cwd: str | None = None) -> list[str]:
        """Absolute paths a command line writes (literal targets only)."""
        if self.bad_input(line, "command") is not None or not line.strip():
            return []
        out: list[str] = []
        for cmd in self._parse(line, cwd).cmds:
            name = normalise(cmd.name) if cmd.name else ""
            targets = [t for op, t in cmd.redirects if op in WRITE_OPS and not (t or "0").isdigit()]
            for t in [*targets, *writes(name, cmd.argv[1:])]:
                if t is not None and cmd.cwd is not None:
                    full = absolute_forms(expand_home(t, self.home), cmd.cwd)[0]
                    if full not in DEVICES_WRITE and full not in out:
                        out.append(full)
        return out

    def explain(self) -> dict[str, Any]:
        """The effective policy as plain data."""
        return {
            "preset": self.preset,
            "root": self.root,
            "source": self.snapshot.get("source"),
            "default": {"unknown": self.unknown, "unparseable": self.unparseable},
            "commands": {
                "config": {
                    k: [" ".join(p) for p in t]
                    for k, t in zip(("allow", "ask", "deny"), self.config_tier, strict=True)
                },
                "preset": {
                    k: [" ".join(p) for p in t]
                    for k, t in zip(("allow", "ask", "deny"), self.preset_tier, strict=True)
                },
                "command_writes": self.command_writes,
            },
            "paths": {
                "protected": list(self.protected.globs),
                "read_outside": list(self.read_outside.globs),
                "secrets": list(self.secrets.globs),
                "scope": {"include": list(self.include.globs), "exclude": list(self.exclude.globs)},
                "file_writes": self.file_writes,
            },
            "network_allow": list(self.network),
            "constraints": [
                {
                    "id": cid,
                    "rule": f"constraint.{cid}",
                    "text": text,
                    "protect": list(protect.globs),
                    "forbid": [" ".join(f) for f in forbid],
                }
                for cid, text, protect, forbid in self.constraints
            ],
            "max_input_bytes": self.max_input,
        }


def _sed_prints(args: list[str | None]) -> bool:
    """True for ``sed -n 'N,Mp' FILE...``: printing lines, the only sed taken as read-only."""
    if "-n" not in args:
        return False
    scripts = [a for a in args if a is None or not a.startswith("-")]
    return (
        bool(scripts)
        and scripts[0] is not None
        and bool(_SED_PRINT.match(scripts[0]))
        and all(a is not None and (a == "-n" or not a.startswith("-")) for a in args)
    )


def _host_pattern(entry: str) -> tuple[str, int | None]:
    """``host:port`` as ``(host glob, port)``; a plain host (or a bare IPv6 address) has no port."""
    entry = entry.lower()
    head, sep, tail = entry.rpartition(":")
    if not sep or not tail.isdigit() or (":" in head and not head.endswith("]")):
        return entry, None
    return head.removeprefix("[").removesuffix("]"), int(tail)
