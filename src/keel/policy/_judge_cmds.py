"""Command rules: every simple command of a line, judged on its own; the strictest verdict wins.

Each command collects verdicts from constraints, risks, environment assignments, options that
run programs, the files it reads and writes, the hosts it reaches and the command patterns.

The check runs once, before the line, on the file system as it is then; so a write through
a path that an earlier command of the same line creates (``ln -s /etc x && echo y > x/passwd``:
ln, cp, mv, install, rsync, tar, unzip, git mv or clone) is not judged on that file system but
asked about. ``mkdir`` is not on that list: it makes a real directory, never a link.
Uncontained, a git checkout, merge, pull or patch in the line counts as creating every path
(a repository can hold symlinks); contained, ``keel exec`` enforces the writable set at run
time, so those do not count.
"""

from __future__ import annotations

import os
import re

from keel.policy import _env
from keel.policy._git import git_subcommand
from keel.policy._judge_paths import PathRules
from keel.policy._match import GLOB_CHARS, Argv, Loose, match_prefix, matches
from keel.policy._paths import DEVICES_WRITE, absolute_forms, expand_home, inside
from keel.policy._rules import (
    INTERPRETERS,
    METADATA_READERS,
    NO_PATH_ARGS,
    PATTERN_FIRST,
    READERS,
    git_writes,
    hosts,
    interpreter_code,
    is_recursive_delete,
    looks_like_path,
    match_args,
    normalise,
    pattern_args,
    positional,
    reads,
    reads_stdin_script,
    risks,
    sed_scripts,
    writes,
)
from keel.policy._ruling import NO_VERDICT, Ruling, allow, deny, worst
from keel.policy._sed import sed_script
from keel.policy._shell import SHELLS, Cmd, Parsed, parse, subscript_is_safe
from keel.policy._tools import hidden_programs
from keel.policy._url import is_url, url_host_ports

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from keel.policy._match import Pattern

    Index = dict[str, tuple[Pattern, ...]]
    LooseIndex = dict[str, tuple[Loose, ...]]
    Indexes = tuple[Index, LooseIndex, LooseIndex]
    Tier = tuple[tuple[Pattern, ...], tuple[Pattern, ...], tuple[Pattern, ...]]

WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
READ_OPS = frozenset({"<", "<&"})
_SHELL_META = frozenset(";|&`$<>\n")
# Words that may name a secret; such arguments are judged as paths whatever the command.
_SECRETISH = (
    r"(?i)\.env|\.ssh|id_rsa|id_ed25519|id_ecdsa|id_dsa|\.aws|gcloud|\.kube|\.docker|\.netrc|"
    r"shadow|sudoers|credentials|\.pem|\.pgpass|\.pypirc|\.npmrc|\.gnupg|environ|\.git-credentials"
)
_CODE_STRING = r"""(['"])((?:(?!\1)[^\n\\]){1,512})\1"""
_CONTENT_READERS = (READERS | PATTERN_FIRST) - METADATA_READERS
_TAKES_WRITES = frozenset(
    {
        "rm",
        "rmdir",
        "unlink",
        "shred",
        "touch",
        "mkdir",
        "truncate",
        "mv",
        "cp",
        "ln",
        "install",
        "tee",
        "chmod",
        "chown",
        "chgrp",
    }
)
_VAR_NAMES = {
    "test": ("-v",),
    "[": ("-v",),
    "printf": ("-v",),
    "read": (),
    "unset": (),
    "mapfile": (),
    "readarray": (),
    "wait": ("-p",),
}
_GIT_SHOWS = frozenset({"show", "cat-file", "diff", "log", "grep", "archive", "blame", "difftool"})
_CREATES = frozenset({"ln", "cp", "mv", "install", "rsync", "tar", "unzip", "cpio", "bsdtar"})
_GIT_CREATES = frozenset({"mv", "clone", "worktree", "submodule"})
_GIT_CHECKS_OUT = frozenset(
    {
        "checkout",
        "switch",
        "restore",
        "pull",
        "merge",
        "rebase",
        "stash",
        "reset",
        "am",
        "apply",
        "cherry-pick",
        "revert",
    }
)
_REBASE_VALUES = frozenset(
    {
        "--onto",
        "-s",
        "--strategy",
        "-X",
        "--strategy-option",
        "-x",
        "--exec",
        "--empty",
        "-C",
        "--whitespace",
    }
)
_REBASE_DONE = frozenset(
    {"--continue", "--abort", "--skip", "--quit", "--edit-todo", "--show-current-patch"}
)
_PATCH_VALUES = frozenset({"-p", "-d", "--directory", "-D", "-F", "-z", "-B", "-V", "-Y", "-o",
                           "--output", "-r", "-i", "--input"})  # fmt: skip
PATCH_CAP = 1 << 20
SCRIPT_CAP = 256 << 10
"""How much of a script file the command runs is read for the names of secrets."""
"""Largest patch file whose target paths are read (a bigger one is judged as dynamic)."""


class CommandRules(PathRules):
    """``check_line`` and what it needs."""

    preset: str
    command_writes: bool
    cdpath: bool
    _tiers: tuple[tuple[str, str, Indexes], ...]
    _tool_tiers: tuple[tuple[str, str, Indexes], ...]
    _last_parse: tuple[tuple[str, str | None], Parsed] | None

    def _parse(self, line: str, cwd: str | None) -> Parsed:
        """``parse`` with a one-line memory.

        The guard judges a line, then asks whether it is read-only (to skip a checkpoint):
        one tree-sitter parse serves both, moments apart: the key is the text (parsing reads
        only the files ``source`` runs).
        """
        key = (line, cwd)
        last = self._last_parse
        if last is not None and last[0] == key:
            return last[1]
        parsed = parse(line, cwd=self._cwd(cwd), home=self.home, cdpath=self.cdpath, root=self.root)
        self._last_parse = (key, parsed)
        return parsed

    def check_line(self, line: str, cwd: str | None = None) -> Ruling:
        """Judge a shell command line: the strictest verdict over every command in it."""
        bad = self.bad_input(line, "command")
        if bad is not None:
            return bad
        if not line.strip():
            return allow("command.empty", "an empty command does nothing")
        parsed = self._parse(line, cwd)
        verdicts: list[Ruling] = []
        for kind, detail in parsed.issues:
            verdicts.extend(self._issue(kind, detail))
        git_config = any(
            kind == "env" and _env.changes_git_config(detail.split("=", 1)[0])
            for kind, detail in parsed.issues
        )
        created: list[str] = []
        for cmd in parsed.cmds:
            verdicts.extend(self.judge(cmd, created, git_config=git_config))
            created.extend(self._creates(cmd))
        return worst(verdicts) or allow("command.empty", "the line runs no command")

    def _issue(self, kind: str, detail: str) -> list[Ruling]:
        if kind == "fork_bomb":
            return [deny(f"risk.{kind}", detail, "do not")]
        if kind == "secret_env":
            return [deny("risk.secret_read", detail, "do not read credentials")]
        if kind == "env":
            var, eq, value = detail.partition("=")
            return self._judge_var(var, value if eq else None, None)
        rule = "parse.unparseable" if kind == "unparseable" else f"parse.{kind}"
        return [self.level("unparseable", rule, detail, "write the command out literally")]

    def judge(
        self, cmd: Cmd, created: list[str] | None = None, *, git_config: bool = False
    ) -> list[Ruling]:
        """Every verdict for one simple command, most specific first.

        ``created``: paths earlier commands of the line create; ``git_config``: the line sets
        a variable that adds git configuration.
        """
        created = created if created is not None else []
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
            return out + self._redirects(cmd, created)
        name = normalise(raw_name) if raw_name else ""
        args = cmd.argv[1:]
        out = self._constraints([name, *args])
        out.extend(deny(rule, reason, hint) for rule, reason, hint in risks(cmd, name, args))
        out.extend(self._special(cmd, name, args))
        out.extend(self._environment(cmd, name, args, git_config))
        out.extend(self._hidden(name, args))
        if cmd.is_wrapper:
            return out + self._redirects(cmd, created)
        out.extend(self._paths(cmd, name, args, created))
        out.extend(
            self.check_host(h, f"{raw_name} {h or '?'}", getattr(h, "port", None))
            for h in hosts(name, args)
        )
        if name:
            bare = name == raw_name or not raw_name.startswith("/")
            out.append(self.tier([name, *match_args(name, args)], bare=bare))
        return out

    def _constraints(self, argv: list[str | None]) -> list[Ruling]:
        if not self.constraints:
            return []
        args = Argv(argv[1:])
        return [
            deny(
                f"constraint.{cid}",
                f"forbidden by constraint {cid}: {text}",
                "the constraint is in keel.toml; find another way",
            )
            for cid, text, _, forbid in self.constraints
            if any(matches(p, argv[0], args) for p in forbid)
        ]

    # -- risks the rules module cannot see alone ------------------------------------------------

    def _special(self, cmd: Cmd, name: str, args: list[str | None]) -> list[Ruling]:
        out: list[Ruling] = []
        if is_recursive_delete(name, args) and self._broad_delete(cmd, args):
            out.append(
                deny(
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
        if _runs_dynamic_code(cmd, name, args):
            out.append(
                self.level(
                    "unparseable",
                    "parse.dynamic_script",
                    f"{name} runs code only known at run time",
                    "write the script to a file and run that",
                )
            )
        if name in _VAR_NAMES and not _subscripts_safe(name, args):
            out.append(
                self.level(
                    "unparseable",
                    "parse.arithmetic",
                    f"{name} evaluates an array subscript given as text",
                    "use a plain variable name",
                )
            )
        return out + (self._shared_history(args) if name == "git" else [])

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

    def _shared_history(self, args: list[str | None]) -> list[Ruling]:
        """``git rebase`` of a shared branch (the default branch, or one on a remote): ask."""
        sub, rest = git_subcommand(args)
        if sub != "rebase" or set(rest) & _REBASE_DONE:
            return []
        pos = positional(rest, _REBASE_VALUES)
        branch = pos[0] if "--root" in rest and pos else (pos[1] if len(pos) > 1 else None)
        from keel.policy._gitrefs import current_branch, is_shared

        branch = branch if branch is not None else current_branch(self.root)
        if branch is not None and branch != "" and not is_shared(self.root, branch):
            return []
        if branch == "":
            return []  # a detached HEAD: no branch is rewritten
        shown = branch or "the current branch"
        return [
            self.level(
                "unknown",
                "risk.shared_history",
                f"git rebase rewrites the history of {shown}, which is shared "
                "(the default branch, or pushed to a remote)",
                "rebase a local feature branch, or ask a person",
            )
        ]

    # -- environment and hidden programs -------------------------------------------------------

    def _environment(
        self, cmd: Cmd, name: str, args: list[str | None], git_config: bool
    ) -> list[Ruling]:
        out: list[Ruling] = []
        for var, value in cmd.assigns:
            out.extend(self._judge_var(var, value, name))
        pushes = name == "git" and git_subcommand(args)[0] == "push"
        if pushes and (git_config or any(_env.changes_git_config(v) for v, _ in cmd.assigns)):
            out.append(
                self.level("unknown", "risk.git_push_config",
                           "git push runs with git configuration set on the command line; a "
                           "refspec it adds can force-push", "push without the variables")
            )  # fmt: skip
        return out

    def _judge_var(self, var: str, value: str | None, command: str | None) -> list[Ruling]:
        """Setting ``var`` for ``command`` (``None``: for every later command)."""
        kind = _env.kind(var, command)
        who = command or "the commands that follow"
        if kind is None:
            return []
        if kind == "cwd":
            return [
                self.level(
                    "unparseable",
                    "parse.cdpath",
                    f"{var} makes cd go to a directory only known at run time",
                    "cd to a path starting with ./ instead",
                )
            ]
        if kind == "network":
            return [] if self.contained else self._network_var(var, value, who)
        if self.runs_code:
            return []  # the code runs in keel's sandbox, like any project code
        rule = "risk.path_override" if var == "PATH" else "risk.env_injection"
        if kind == "loader" and not self.contained:
            return [deny(rule, f"{var} injects code into every program", "do not")]
        return [
            self.level(
                "unknown",
                rule,
                f"{var} makes {who} run code the command line does not show",
                "run the command without the variable",
            )
        ]

    def _network_var(self, var: str, value: str | None, who: str) -> list[Ruling]:
        out = [
            self.level(
                "unknown",
                "network.env_override",
                f"{var} changes where {who} download from",
                "use the default registries, or ask the user",
            )
        ]
        for part in re.split(r"[\s,|]+", value or ""):
            out.extend(
                self.check_host(h, f"{var}={part}", h.port) for h in url_host_ports(part) or ()
            )
        return out

    def _hidden(self, name: str, args: list[str | None]) -> list[Ruling]:
        reasons = hidden_programs(name, args)
        out = [
            self.level(
                "unknown", "risk.runs_program", r, "run that program directly, or ask the user"
            )
            for r in reasons
        ]
        if name == "sed":
            for script in sed_scripts(args):
                facts = sed_script(script) if script is not None else None
                if facts is not None and facts.executes:
                    out.append(
                        self.level(
                            "unknown",
                            "risk.runs_program",
                            "the sed script's e command runs a shell command",
                            "use sed without e",
                        )
                    )
                elif facts is None or not facts.understood:
                    out.append(
                        self.level(
                            "unparseable",
                            "parse.sed_script",
                            f"keel cannot read the sed script {script!r}",
                            "write the sed script more simply",
                        )
                    )
        return out

    # -- files ---------------------------------------------------------------------------------

    def _paths(
        self, cmd: Cmd, name: str, args: list[str | None], created: list[str]
    ) -> list[Ruling]:
        out: list[Ruling] = []
        op = "stat" if name in METADATA_READERS else "read"
        targets = list(reads(name, args)) + self._named_files(cmd, name, args)
        if cmd.dynamic_tail and name in _CONTENT_READERS:
            targets.append(None)
        for target in dict.fromkeys(targets):
            out.extend(self._read(target, cmd, name, op))
        out.extend(self._script_secrets(cmd, name, args))
        out.extend(self._redirects(cmd, created))
        written = list(writes(name, args)) + self._patched(cmd, name, args)
        if cmd.dynamic_tail and name in _TAKES_WRITES:
            written.append(None)
        out.extend(self._write(t, cmd, name, created) for t in dict.fromkeys(written))
        return out

    def _named_files(self, cmd: Cmd, name: str, args: list[str | None]) -> list[str | None]:
        """Arguments that may name a file outside or a secret, whatever the command."""
        if name in NO_PATH_ARGS:
            return []
        out: list[str | None] = []
        skip = pattern_args(name, args)
        shows = name == "git" and git_subcommand(args)[0] in _GIT_SHOWS
        for i, a in enumerate(args):
            if a is None or i in skip:
                continue
            value = a.split("=", 1)[1] if a.startswith("-") and "=" in a else a
            if value.lower().startswith("file:") or (
                value and (looks_like_path(value) or re.search(_SECRETISH, value))
            ):
                out.append(value)
            if shows and ":" in value and not is_url(value):
                out.append(value.split(":", 1)[1] or None)  # REV:PATH names a file
        found = interpreter_code(name, args, cmd.heredoc)
        if found is not None and found[1]:
            for _, text in re.findall(_CODE_STRING, found[1]):
                if looks_like_path(text) or re.search(_SECRETISH, text):
                    out.append(text)
        if name == "sed":
            for script in sed_scripts(args):
                out.extend(sed_script(script).reads if script is not None else ())
        return out

    def _script_secrets(self, cmd: Cmd, name: str, args: list[str | None]) -> list[Ruling]:
        """Asks about a script file the command runs that names a secret (``.env``...).

        A heuristic that only adds questions: the script may print what it reads into the
        model's context, and contained or not it sees the workspace's own secrets; a script
        that builds the name at run time is not caught.
        """
        if interpreter_code(name, args, cmd.heredoc) is not None:
            return []
        for script in _script_operands(cmd, name, args):
            literal = self._secret_named_in(script, cmd)
            if literal is not None:
                return [
                    self.level(
                        "unknown",
                        "risk.secret_in_script",
                        f"{script} names the secret {literal!r}, which it may print",
                        "keep secrets out of what the model reads; ask the user",
                    )
                ]
        return []

    def _secret_named_in(self, script: str, cmd: Cmd) -> str | None:
        """The first secret a readable script file names in a string literal, if any."""
        if self._check(script, "read", cmd)[0] != "allow":
            return None
        path = expand_home(script, self.home)
        if not path.startswith("/"):
            if cmd.cwd is None:
                return None
            path = os.path.join(cmd.cwd, path)
        try:
            with open(path, "rb") as fh:
                text = fh.read(SCRIPT_CAP).decode("utf-8", "replace")
        except OSError:
            return None
        for _, literal in re.findall(_CODE_STRING, text):
            if re.search(_SECRETISH, literal) and self._names_secret(literal, cmd):
                return literal
        return None

    def _names_secret(self, literal: str, cmd: Cmd) -> bool:
        """A secret-like name in a script is a secret, or relative to a directory not known."""
        verdict = self._check(literal, "read", cmd)
        return verdict[0] == "deny" or (cmd.cwd is None and verdict[1] == "path.dynamic")

    def _read(self, target: str | None, cmd: Cmd, name: str, op: str) -> list[Ruling]:
        out: list[Ruling] = []
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
                    "name the file literally",
                )
            )
            return out
        for each in self._globbed(target, cmd.cwd):
            out.append(self._check(each, op, cmd))
        return out

    def _check(self, path: str, op: str, cmd: Cmd) -> Ruling:
        """``check_path`` for a path a shell command uses (in the sandbox when contained)."""
        return self.check_path(path, op, cmd.cwd, resolved_cwd=True, sandboxed=self.contained)

    def _globbed(self, target: str, cwd: str | None) -> list[str]:
        """``target`` and, if it is a glob, the files bash would expand it to (at most 256).

        A relative glob needs the directory; an absolute or ``~`` one does not.
        """
        if GLOB_CHARS.isdisjoint(target):
            return [target]
        pattern = expand_home(target, self.home)
        if cwd is None and not pattern.startswith("/"):
            return [target]
        import glob
        import itertools

        head, tail = os.path.split(pattern)
        try:
            found = list(itertools.islice(glob.iglob(pattern, root_dir=cwd), 256))
            if head and not GLOB_CHARS.isdisjoint(head):
                # a file that does not exist yet, in directories the glob names
                dirs = itertools.islice(glob.iglob(head, root_dir=cwd), 256)
                found.extend(os.path.join(d, tail) for d in dirs)
        except (OSError, ValueError):
            return [target]
        return [target, *found]

    def _redirects(self, cmd: Cmd, created: list[str]) -> list[Ruling]:
        out: list[Ruling] = []
        for op, target in cmd.redirects:
            if target is not None and op in (">&", "<&") and (target.isdigit() or target == "-"):
                continue
            if op in READ_OPS:
                out.extend(self._read(target, cmd, cmd.name or "a redirect", "read"))
            elif op in WRITE_OPS:
                out.append(self._write(target, cmd, cmd.name or "a redirect", created))
        return out

    def _write(self, target: str | None, cmd: Cmd, name: str, created: list[str]) -> Ruling:
        if target is None:
            return self._dynamic_write(name)
        verdicts = [self._check(t, "write", cmd) for t in self._globbed(target, cmd.cwd)]
        through = self._through_created(target, cmd, created)
        verdict = worst([*verdicts, *through]) or NO_VERDICT
        if verdict[0] == "allow" and verdict[1] != "path.device" and not self.command_writes:
            return deny(
                f"preset.{self.preset}.no_writes",
                f"the {self.preset} preset allows only read-only commands"
                f" ({name} writes {target!r})",
                "use the edit tool, or ask the user",
            )
        return verdict

    def _dynamic_write(self, name: str) -> Ruling:
        if self.contained and self.command_writes:
            return allow(
                "path.dynamic",
                f"{name} writes a file only known at run time; keel's "
                "sandbox keeps it inside the workspace, control files read-only",
            )
        return self.level(
            "unparseable",
            "path.dynamic",
            f"{name} writes a file only known at run time",
            "name the file literally",
        )

    def _through_created(self, target: str, cmd: Cmd, created: list[str]) -> list[Ruling]:
        if not created or cmd.cwd is None:
            return []
        lexical = absolute_forms(expand_home(target, self.home), cmd.cwd)[0]
        for path in created:
            if path == "*" or lexical == path or lexical.startswith(path.rstrip("/") + "/"):
                return [
                    self.level(
                        "unknown",
                        "path.created_in_line",
                        f"{target!r} goes through {path if path != '*' else 'a path'} "
                        "that an earlier command of this line creates (it may be a "
                        "symlink)",
                        "run the commands one at a time",
                    )
                ]
        return []

    def _creates(self, cmd: Cmd) -> list[str]:
        """Absolute paths ``cmd`` creates or replaces (``*`` when it cannot be said)."""
        name = normalise(cmd.name) if cmd.name else ""
        args = cmd.argv[1:]
        if name in _CREATES:
            targets = writes(name, args)
        elif name == "git" and git_subcommand(args)[0] in _GIT_CREATES:
            targets = git_writes(args)
        elif (name == "git" and git_subcommand(args)[0] in _GIT_CHECKS_OUT) or name == "patch":
            if self.contained:
                return []  # the sandbox keeps whatever it checks out inside the workspace
            targets = ["."]
        else:
            return []
        if cmd.cwd is None:
            return ["*"]
        return [
            "*" if t is None else absolute_forms(expand_home(t, self.home), cmd.cwd)[0]
            for t in targets
        ]

    def _patched(self, cmd: Cmd, name: str, args: list[str | None]) -> list[str | None]:
        """The files ``patch`` or ``git apply`` changes, read from the patch itself."""
        if name == "patch":
            source = _patch_source(cmd, args)
            named = positional(args, _PATCH_VALUES)[:1]  # patch FILE: the file it changes
        elif name == "git" and git_subcommand(args)[0] in ("apply", "am"):
            rest = git_subcommand(args)[1]
            if "--check" in rest or "--stat" in rest or "--numstat" in rest:
                return []
            files = positional(rest, frozenset({"-p", "-C", "--directory", "--exclude"}))
            source = files[0] if files else ("-" if cmd.heredoc is not None else None)
            named = []
        else:
            return []
        text = self._patch_text(source, cmd)
        if text is None:
            return [*named, None]
        from keel.core.patchtext import patch_paths

        out: list[str | None] = list(named)
        for path in patch_paths(text):
            parts = path.split("/")
            out.extend("/".join(parts[i:]) for i in range(len(parts)))
        return out or [None]

    def _patch_text(self, source: str | None, cmd: Cmd) -> str | None:
        if source == "-":
            return cmd.heredoc
        if source is None or cmd.cwd is None:
            return None
        if self._check(source, "read", cmd)[0] != "allow":
            return None
        try:
            with open(os.path.join(cmd.cwd, expand_home(source, self.home)), "rb") as fh:
                data = fh.read(PATCH_CAP + 1)
        except OSError:
            return None
        return None if len(data) > PATCH_CAP else data.decode("utf-8", "replace")

    # -- command patterns ----------------------------------------------------------------------

    def tier(self, argv: list[str | None], *, bare: bool = True, tool: bool = False) -> Ruling:
        """The command-pattern verdict: config tier, then preset tier, then the default.

        Deny and ask patterns match regardless of option order; allow patterns are prefixes.
        A command named by an absolute path (``bare`` false) can be denied or asked about by
        its name, but only allowed by a pattern naming that path. ``tool``: ``argv`` is a
        client tool's name (an MCP tool, a web search), which never runs in the sandbox.
        """
        first = argv[0] or ""
        args = Argv(argv[1:])
        for rule, where, (allow_index, ask_index, deny_index) in (
            self._tool_tiers if tool else self._tiers
        ):
            for level, index in (("deny", deny_index), ("ask", ask_index)):
                for p in index.get(first, ()) + index.get("*", ()):
                    if matches(p, argv[0], args):
                        return Ruling(
                            level,
                            f"{rule}.{level}",
                            f"matches {' '.join(p.pattern)!r} in {where}",
                            None if level == "ask" else "do not run this",
                        )
            for q in allow_index.get(first, ()) + allow_index.get("*", ()):
                if (bare or q[0].startswith("/")) and match_prefix(q, argv, conservative=False):
                    return allow(f"{rule}.allow", f"matches {' '.join(q)!r} in {where}")
        return self.level(
            "unknown",
            f"default.{self.unknown}",
            f"{argv[0]!r} is not allowed by {self._tiers[1][1]} or keel.toml",
            "add a pattern to [policy] allow in keel.toml, or ask the user",
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


def _runs_dynamic_code(cmd: Cmd, name: str, args: list[str | None]) -> bool:
    """A shell or interpreter runs a script only known at run time (piped in, or ``-c "$x"``)."""
    runs_stdin = (name in SHELLS or name in INTERPRETERS) and reads_stdin_script(name, args)
    if runs_stdin and (cmd.piped_from or cmd.stdin_dynamic):
        return True
    found = interpreter_code(name, args, cmd.heredoc)
    return found is not None and found[1] is None


def _script_operands(cmd: Cmd, name: str, args: list[str | None]) -> list[str]:
    """The script files a command runs: ``python x.py``, ``bash x.sh``, ``./x``, ``/ws/x``.

    A program named by a relative path is one the agent may have written (``./python`` runs
    itself); an interpreter so named (``.venv/bin/python x.py``) runs its script too.
    """
    raw = cmd.name or ""
    base = normalise(name.rpartition("/")[2])  # ``env/bin/python3.11`` is python too
    interpreter = base in INTERPRETERS or base in SHELLS
    by_path = "/" in raw and not (interpreter and raw.startswith("/"))
    found = [raw] if by_path else []  # ``/usr/bin/python x.py`` runs only x.py
    if not interpreter:
        return found
    for a in args:
        if a is None or a in ("-m", "-c", "-e", "-"):
            break
        if not a.startswith("-"):
            return [*found, a]
    return found


def _subscripts_safe(name: str, args: list[str | None]) -> bool:
    """False if a name given to ``test -v``, ``read``, ``unset``... has a non-number subscript.

    Bash evaluates such a subscript as arithmetic, which runs ``$(...)`` inside it.
    """
    options = _VAR_NAMES[name]
    for i, a in enumerate(args):
        named = (i > 0 and args[i - 1] in options) if options else not (a or "").startswith("-")
        if named and (a is None or not subscript_is_safe(a)):
            return False
    return True


def _patch_source(cmd: Cmd, args: list[str | None]) -> str | None:
    """Where ``patch`` reads the patch: ``-i FILE``, its second operand, or stdin."""
    for i, a in enumerate(args):
        if a in ("-i", "--input"):
            return args[i + 1] if i + 1 < len(args) else None
        if a is not None and a.startswith(("--input=", "-i")) and a != "-i":
            return a.split("=", 1)[1] if a.startswith("--input=") else a[2:]
    files = positional(args, _PATCH_VALUES)
    if len(files) > 1:
        return files[1]
    redirected = [t for op, t in cmd.redirects if op == "<"]
    if redirected:
        return redirected[-1]
    return "-" if cmd.heredoc is not None else None
