"""Shell command lines to simple commands, with a real bash parser.

A line made only of plainly safe characters is split on spaces (that is exactly what bash
does with it); anything else goes through tree-sitter-bash, imported on first use. The
walker resolves words it can (quotes, ``$'..'``, variables assigned literally earlier in
the line, ``$HOME``), marks the rest as dynamic (``None``), follows ``cd``, pipelines,
redirects, here-docs, functions and substitutions, and unwraps wrappers (``sudo``, ``env``,
``timeout``, ``xargs``, ``bash -c``, ``eval``, ``find -exec`` ...), so every simple command
that would run is judged on its own.
"""

from __future__ import annotations

import codecs
import os
import re

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_./=:,+@%")
RESERVED = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "select",
        "while",
        "until",
        "do",
        "done",
        "in",
        "function",
        "time",
        "coproc",
        "!",
        "[[",
        "]]",
        "{",
        "}",
    ]
)
ENV_RISKS = frozenset(
    {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "PROMPT_COMMAND"}
)
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "busybox", "rbash", "mksh"})
MAX_DEPTH = 6
_ESCAPE = r"\\(.)"
_OBFUSCATED = r"\\[A-Za-z0-9]"
_SECRET_VAR = r"(?i)token|secret|passw|api_?key|private_?key|credential|access_?key"
_PARSER: list[Parser] = []


class Cmd:
    """One simple command as it would run: argv (``None`` for a word only known at run time)."""

    __slots__ = (
        "argv", "assigns", "cwd", "dynamic_tail", "fails_line", "heredoc", "is_wrapper",
        "piped_from", "redirects", "stdin_dynamic", "sub_names", "wrappers",
    )  # fmt: skip

    def __init__(self, argv: list[str | None], cwd: str | None) -> None:
        self.argv = argv
        self.cwd = cwd
        self.assigns: list[tuple[str, str | None]] = []
        self.redirects: list[tuple[str, str | None]] = []
        self.heredoc: str | None = None
        self.stdin_dynamic = False
        self.piped_from: tuple[str, ...] = ()
        self.sub_names: tuple[str, ...] = ()
        self.wrappers: tuple[str, ...] = ()
        self.dynamic_tail = False
        self.is_wrapper = False
        self.fails_line = False
        """Its failure is the line's failure: a non-zero exit makes the whole line exit
        non-zero (not masked by ``||``, a later pipeline stage or a later statement)."""

    @property
    def name(self) -> str | None:
        """The command name (``None`` when dynamic, ``""`` for a bare redirect)."""
        return self.argv[0] if self.argv else ""

    def derive(self, argv: list[str | None], wrapper: str) -> Cmd:
        """The command ``wrapper`` runs, keeping this one's context."""
        inner = Cmd(argv, self.cwd)
        inner.piped_from, inner.sub_names = self.piped_from, self.sub_names
        inner.heredoc, inner.stdin_dynamic = self.heredoc, self.stdin_dynamic
        inner.wrappers, inner.dynamic_tail = (*self.wrappers, wrapper), self.dynamic_tail
        inner.redirects = self.redirects
        inner.fails_line = self.fails_line
        return inner


class Parsed:
    """Simple commands of a line plus what could not be understood (kind, detail)."""

    __slots__ = ("cmds", "issues")

    def __init__(self) -> None:
        self.cmds: list[Cmd] = []
        self.issues: list[tuple[str, str]] = []


def fast_split(line: str) -> list[str] | None:
    """Split a line of plainly safe characters on spaces, or ``None`` if it needs the parser."""
    if not _SAFE.issuperset(line):
        return None
    words = line.split()
    if not words or "=" in words[0] or words[0] in RESERVED:
        return None
    return words


def parse(line: str, *, cwd: str | None, home: str, depth: int = 0) -> Parsed:
    """Every simple command of ``line``, wrappers unwrapped."""
    out = Parsed()
    words = fast_split(line)
    if words is not None:
        cmd = Cmd(list(words), cwd)
        cmd.fails_line = True  # the line is this one command
        _expand(cmd, out, home, depth)
        return out
    if not line.strip():
        return out
    if depth > MAX_DEPTH:
        out.issues.append(("unparseable", "commands nested too deeply"))
        return out
    walker = _Walker(out, cwd, home, depth)
    tree = _parser().parse(line.encode("utf-8", "surrogateescape"))
    walker.walk(tree.root_node)
    for cmd in walker.produced_all:
        _expand(cmd, out, home, depth)
    return out


def _parser() -> Parser:
    if not _PARSER:
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        _PARSER.append(Parser(Language(tree_sitter_bash.language())))
    return _PARSER[0]


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


_NOT_STATEMENTS = frozenset({"comment", "heredoc_body"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_STATEMENTS = frozenset(
    {"command", "pipeline", "list", "redirected_statement", "subshell", "compound_statement"}
)


def _fails_line(node: Node) -> bool:
    """True if the command at ``node`` failing makes the whole line fail.

    It must be the last statement of its sequence (not in the background), on either side of
    ``&&`` or right of ``||``, the last stage of a pipeline without ``!``, or the body of a
    redirected statement, all the way up. Inside anything else (``if``, loops, functions,
    substitutions, ``!``) its status is not the line's.
    """
    child, parent = node, node.parent
    while parent is not None:
        if not _passes_status(parent, child):
            return False
        child, parent = parent, parent.parent
    return True


def _passes_status(parent: Node, child: Node) -> bool:
    match parent.type:
        case "program" | "subshell" | "compound_statement":
            sibling = child.next_sibling
            while sibling is not None:
                if sibling.type == "&" or (
                    sibling.is_named and sibling.type not in _NOT_STATEMENTS
                ):
                    return False
                sibling = sibling.next_sibling
            return True
        case "list":
            after = child.next_sibling
            return child.prev_sibling is not None or (after is not None and after.type == "&&")
        case "pipeline":
            return child.next_named_sibling is None and not any(
                c.type == "negated_command" for c in parent.named_children
            )
        case "redirected_statement":
            return child.type not in _REDIRECTS and not any(
                r.type == "heredoc_redirect" and _continues(r) for r in parent.named_children
            )
        case _:
            return False


def _continues(heredoc: Node) -> bool:
    """``cat <<EOF | sh``: the line goes on after the here-doc's start, inside its node."""
    return any(c.type in _STATEMENTS for c in heredoc.named_children)


class _Walker:
    """A one-pass walk of the syntax tree, in source order."""

    def __init__(self, out: Parsed, cwd: str | None, home: str, depth: int) -> None:
        self.out = out
        self.cwd = cwd
        self.home = home
        self.depth = depth
        self.vars: dict[str, str | None] = {}
        self.produced_all: list[Cmd] = []
        self.sub_names: list[str] = []

    def issue(self, kind: str, detail: str) -> None:
        self.out.issues.append((kind, detail[:200]))

    def walk(self, node: Node) -> list[Cmd]:
        """Walk a statement; return the commands it runs at its own level."""
        if node.type == "ERROR" or node.is_missing:
            self.issue("unparseable", f"cannot parse near {_text(node)[:60]!r}")
        match node.type:
            case "command":
                return self.command(node)
            case "redirected_statement":
                return self.redirected(node)
            case "pipeline":
                return self.pipeline(node)
            case "variable_assignment":
                self.assign(node)
                return []
            case "declaration_command":
                for child in node.named_children:
                    if child.type == "variable_assignment":
                        self.assign(child)
                    elif child.type == "variable_name":
                        self.vars[_text(child)] = None
                return []
            case "function_definition":
                return self.function(node)
            case "for_statement":
                var = node.child_by_field_name("variable")
                if var is not None:
                    self.vars[_text(var)] = None
                return self.children(node)
            case "comment" | "heredoc_body" | "heredoc_start" | "heredoc_end":
                return []
            case "command_substitution" | "process_substitution":
                self.substitution(node)
                return []
            case _:
                return self.children(node)

    def children(self, node: Node) -> list[Cmd]:
        out: list[Cmd] = []
        for child in node.children:
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.redirect(child, out)
            elif child.is_named or child.type == "ERROR":
                out.extend(self.walk(child))
        return out

    def substitution(self, node: Node) -> None:
        """Walk ``$(..)``/``<(..)``; the names of what runs inside go to the enclosing command."""
        saved_cwd = self.cwd
        produced = self.children(node)
        for c in produced:
            if c.name:
                self.sub_names.append(c.name)
            self.sub_names.extend(c.sub_names)
        self.cwd = saved_cwd

    def add(self, cmd: Cmd) -> Cmd:
        self.produced_all.append(cmd)
        return cmd

    def command(self, node: Node) -> list[Cmd]:
        saved = self.sub_names
        self.sub_names = []
        cmd = Cmd([], self.cwd)
        for child in node.children:
            match child.type:
                case "variable_assignment":
                    name = child.child_by_field_name("name")
                    value = child.child_by_field_name("value")
                    cmd.assigns.append(
                        (_text(name) if name else "?", self.word(value) if value else "")
                    )
                case "command_name":
                    cmd.argv.append(
                        self.word(child.named_children[0]) if child.named_children else None
                    )
                case "file_redirect" | "heredoc_redirect" | "herestring_redirect":
                    self.redirect(child, [cmd])
                case "comment":
                    pass
                case _ if child.is_named:
                    if child.type == "ERROR":
                        self.issue("unparseable", f"cannot parse near {_text(child)[:60]!r}")
                    cmd.argv.append(self.word(child))
        cmd.sub_names = tuple(self.sub_names)
        cmd.fails_line = _fails_line(node)
        self.sub_names = saved
        self.add(cmd)
        self.follow_cd(cmd)
        return [cmd]

    def follow_cd(self, cmd: Cmd) -> None:
        if cmd.name not in ("cd", "pushd") or self.cwd is None:
            return
        args = [a for a in cmd.argv[1:] if a is None or not a.startswith("-")]
        if not args:
            self.cwd = self.home if cmd.name == "cd" else None
            return
        target = args[0]
        if target is None or target == "-":
            self.cwd = None
            return
        if target.startswith("~") or target.startswith("$HOME"):
            target = self.home + target.split("/", 1)[0].replace("~", "").replace("$HOME", "")
        self.cwd = os.path.normpath(os.path.join(self.cwd, target))

    def redirected(self, node: Node) -> list[Cmd]:
        body = node.child_by_field_name("body")
        produced: list[Cmd] = []
        if body is not None:
            produced = self.walk(body)
        target = produced or [self.add(Cmd([], self.cwd))]
        for child in node.children:
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.redirect(child, target)
            elif child.type == "ERROR":
                self.walk(child)
        return produced

    def redirect(self, node: Node, cmds: list[Cmd]) -> None:
        if not cmds:
            cmds.append(self.add(Cmd([], self.cwd)))
        match node.type:
            case "heredoc_redirect":
                self.heredoc(node, cmds[0])
            case "herestring_redirect":
                words = [c for c in node.named_children]
                value = self.word(words[-1]) if words else None
                cmds[0].heredoc, cmds[0].stdin_dynamic = value, value is None
            case _:
                op = ""
                dests: list[str | None] = []
                for child in node.children:
                    if child.type == "file_descriptor":
                        continue
                    if not child.is_named:
                        op = op or _text(child)
                    elif child.type != "ERROR":
                        dests.append(self.word(child))
                cmds[-1].redirects.extend((op, d) for d in dests or [""])

    def heredoc(self, node: Node, cmd: Cmd) -> None:
        body_text: str | None = ""
        for child in node.children:
            if child.type == "heredoc_body":
                dynamic = False
                for part in child.named_children:
                    if part.type in ("command_substitution", "process_substitution"):
                        self.substitution(part)
                        dynamic = True
                    elif part.type in ("simple_expansion", "expansion", "arithmetic_expansion"):
                        dynamic = True
                body_text = None if dynamic else _text(child)
            elif child.type in ("file_redirect", "herestring_redirect"):
                self.redirect(child, [cmd])
            elif child.type in ("pipeline", "command", "list", "redirected_statement"):
                self.walk(child)
        cmd.heredoc, cmd.stdin_dynamic = body_text, body_text is None

    def pipeline(self, node: Node) -> list[Cmd]:
        produced: list[Cmd] = []
        names: list[str] = []
        for child in node.children:
            if not child.is_named:
                continue
            stage = self.walk(child)
            if stage and produced:
                stage[0].piped_from = tuple(names)
            for c in stage:
                names.extend((c.name, *c.sub_names) if c.name else c.sub_names)
            produced.extend(stage)
        return produced

    def assign(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        resolved = self.word(value) if value is not None else ""
        if name is not None:
            var = _text(name)
            self.vars[var] = resolved
            if var in ENV_RISKS:
                self.issue("env_injection", f"sets {var}, which injects code into later programs")
            elif var == "PATH":
                self.issue("path_override", "changes PATH for the commands that follow")

    def function(self, node: Node) -> list[Cmd]:
        name_node = node.child_by_field_name("name")
        name = _text(name_node) if name_node is not None else ""
        body = node.child_by_field_name("body")
        produced = self.walk(body) if body is not None else []
        text = _text(body) if body is not None else ""
        if name and re.search(rf"(^|[^\w]){re.escape(name)}\s*[|&]", text):
            self.issue("fork_bomb", f"function {name!r} calls itself in the background or a pipe")
        return produced

    def word(self, node: Node) -> str | None:
        """The literal value of a word, or ``None`` if only known at run time."""
        match node.type:
            case "word" | "number":
                text = _text(node).replace("\\\n", "")
                if "\\" in text and re.search(_OBFUSCATED, text):
                    self.issue("obfuscated", f"{text!r} escapes ordinary characters")
                return re.sub(_ESCAPE, r"\1", text, flags=re.DOTALL) if "\\" in text else text
            case "raw_string":
                return _text(node)[1:-1]
            case "ansi_c_string":
                try:
                    return codecs.decode(_text(node)[2:-1], "unicode_escape")
                except (UnicodeDecodeError, ValueError):
                    return None
            case "string" | "translated_string":
                return self.string(node)
            case "concatenation":
                parts = [self.word(c) for c in node.children]
                return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
            case "simple_expansion" | "expansion":
                return self.expansion(node)
            case "command_substitution" | "process_substitution":
                self.substitution(node)
                return None
            case "brace_expression":
                return _text(node)
            case _:
                self.children(node)
                return None

    def string(self, node: Node) -> str | None:
        out = ""
        known = True
        for child in node.children:
            match child.type:
                case '"' | '$"':
                    continue
                case "string_content":
                    out += re.sub(r'\\([\\"$`])', r"\1", _text(child).replace("\\\n", ""))
                case _ if child.is_named:
                    value = self.word(child)
                    known = known and value is not None
                    out += value or ""
                case _:
                    out += _text(child)
        return out if known else None

    def expansion(self, node: Node) -> str | None:
        named = node.named_children
        for child in named:
            var = _text(child) if child.type == "variable_name" else ""
            if var and var not in self.vars and re.search(_SECRET_VAR, var):
                self.issue("secret_env", f"expands ${var}, which looks like a credential")
        if len(named) != 1 or named[0].type != "variable_name":
            self.children(node)
            return None
        if node.type == "expansion" and len(node.children) != 3:
            return None
        name = _text(named[0])
        if name in self.vars:
            return self.vars[name]
        if name == "HOME":
            return self.home
        if name == "PWD":
            return self.cwd
        return None


# --- wrappers -------------------------------------------------------------------------------

_SUDO_ARG = frozenset(
    [
        "-u",
        "-g",
        "-h",
        "-p",
        "-C",
        "-D",
        "-r",
        "-t",
        "-U",
        "-T",
        "--user",
        "--group",
        "--host",
        "--prompt",
    ]
)
_TIMEOUT_ARG = frozenset(["-s", "-k", "--signal", "--kill-after"])
_XARGS_ARG = frozenset(
    [
        "-I",
        "-n",
        "-P",
        "-L",
        "-d",
        "-E",
        "-s",
        "-a",
        "-e",
        "-l",
        "--max-args",
        "--max-procs",
        "--delimiter",
    ]
)
_NICE_ARG = frozenset(["-n", "--adjustment", "-c", "--class", "-p"])
_SIMPLE_WRAPPERS = frozenset({"nohup", "setsid", "builtin", "exec", "unbuffer", "time"})


def _skip_options(argv: list[str | None], i: int, with_arg: frozenset[str]) -> int:
    while i < len(argv):
        a = argv[i]
        if a is None or not a.startswith("-") or a == "-":
            return i
        if a == "--":
            return i + 1
        i += 2 if a in with_arg else 1
    return i


def _expand(cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    """Append ``cmd`` and, for wrappers, the command(s) it runs, recursively."""
    out.cmds.append(cmd)
    name = cmd.name
    if not name:
        return
    base = name.rsplit("/", 1)[-1]
    argv = cmd.argv
    inner: list[str | None] | None = None
    match base:
        case "sudo" | "doas":
            i = _skip_options(argv, 1, _SUDO_ARG)
            inner = argv[i:] or None
        case "env":
            i = 1
            while i < len(argv):
                a = argv[i]
                if a in ("-u", "--unset", "-C", "--chdir"):
                    i += 2
                elif a in ("-S", "--split-string") and i + 1 < len(argv):
                    s = argv[i + 1]
                    inner = None if s is None else [*s.split(), *argv[i + 2 :]]
                    if s is None:
                        out.issues.append(("dynamic_command", "env -S with a dynamic string"))
                    break
                elif a is not None and (a.startswith("-") or "=" in a):
                    i += 1
                else:
                    inner = argv[i:]
                    break
        case "timeout":
            i = _skip_options(argv, 1, _TIMEOUT_ARG)
            inner = argv[i + 1 :] or None
        case "nice" | "ionice" | "chrt" | "taskset":
            i = _skip_options(argv, 1, _NICE_ARG)
            if base in ("chrt", "taskset") and i < len(argv):
                i += 1
            inner = argv[i:] or None
        case "stdbuf":
            inner = argv[_skip_options(argv, 1, frozenset()) :] or None
        case "command":
            if len(argv) > 1 and argv[1] in ("-v", "-V"):
                return
            cmd.is_wrapper = True
            inner = argv[_skip_options(argv, 1, frozenset()) :] or None
        case "xargs":
            i = _skip_options(argv, 1, _XARGS_ARG)
            inner = argv[i:] or ["echo"]
        case "eval":
            words = argv[1:]
            if any(w is None for w in words):
                out.issues.append(("dynamic_command", "eval of a dynamic string"))
                return
            _script(" ".join(w for w in words if w is not None), cmd, out, home, depth)
            return
        case "watch":
            i = _skip_options(argv, 1, frozenset({"-n", "--interval", "-d", "-q"}))
            words = argv[i:]
            if any(w is None for w in words):
                out.issues.append(
                    ("dynamic_command", "watch runs a command only known at run time")
                )
                return
            cmd.fails_line = False  # watch repeats the command; its status is not the line's
            _script(" ".join(w for w in words if w is not None), cmd, out, home, depth)
            return
        case "su":
            if "-c" in argv:
                k = argv.index("-c")
                _script(argv[k + 1] if k + 1 < len(argv) else None, cmd, out, home, depth)
            return
        case "find":
            _find_exec(cmd, out, home, depth)
            return
        case "fd" | "fdfind" | "rg":
            _option_exec(cmd, out, home, depth)
            return
        case _ if base in SHELLS:
            _shell_c(cmd, out, home, depth)
            return
        case _ if base in _SIMPLE_WRAPPERS:
            inner = argv[
                _skip_options(argv, 1, frozenset({"-p"}) if base == "time" else frozenset()) :
            ]
            inner = inner or None
        case _:
            return
    if inner:
        cmd.is_wrapper = True
        derived = cmd.derive(list(inner), base)
        if base == "xargs":
            derived.dynamic_tail = True
        _expand(derived, out, home, depth)


def _script(text: str | None, cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    cmd.is_wrapper = True
    if text is None:
        out.issues.append(("dynamic_command", "a shell runs a script only known at run time"))
        return
    sub = parse(text, cwd=cmd.cwd, home=home, depth=depth + 1)
    for inner in sub.cmds:
        inner.wrappers = (*cmd.wrappers, cmd.name or "", *inner.wrappers)
        inner.piped_from = inner.piped_from or cmd.piped_from
        inner.fails_line = inner.fails_line and cmd.fails_line
    out.cmds.extend(sub.cmds)
    out.issues.extend(sub.issues)


def _shell_c(cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    argv = cmd.argv
    for i, a in enumerate(argv[1:], start=1):
        if a is None:
            out.issues.append(("dynamic_command", "a shell option only known at run time"))
            return
        if a == "-c" or (a.startswith("-") and not a.startswith("--") and "c" in a[1:]):
            _script(argv[i + 1] if i + 1 < len(argv) else None, cmd, out, home, depth)
            return
        if not a.startswith("-") and not a.startswith("+"):
            return  # runs a script file: judged as the shell command itself
    if cmd.heredoc is not None:
        _script(cmd.heredoc, cmd, out, home, depth)


_EXEC_OPTIONS = {
    "fd": ("-x", "--exec", "-X", "--exec-batch"),
    "fdfind": ("-x", "--exec", "-X", "--exec-batch"),
    "rg": ("--pre",),
}


def _option_exec(cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    """``fd -x CMD ...`` and ``rg --pre CMD`` run a program per file: judge that program."""
    argv = cmd.argv
    base = (cmd.name or "").rsplit("/", 1)[-1]
    options = _EXEC_OPTIONS[base]
    for i, a in enumerate(argv[1:], start=1):
        if a is None:
            continue
        name, eq, value = a.partition("=")
        if name not in options:
            continue
        if base == "rg":
            program = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            inner: list[str | None] = [program, None]
        else:
            rest = [value] if eq else []
            rest += argv[i + 1 :]
            end = rest.index(";") if ";" in rest else len(rest)
            inner = [None if w is not None and "{" in w else w for w in rest[:end]]
        if not inner or inner[0] is None:
            out.issues.append(
                ("dynamic_command", f"{base} {name} runs a program only known at run time")
            )
            return
        cmd.is_wrapper = True
        derived = cmd.derive(inner, base)
        derived.fails_line = False  # runs per file; the status is fd's or rg's own
        _expand(derived, out, home, depth)
        return


def _find_exec(cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    argv = cmd.argv
    i = 0
    while i < len(argv):
        if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+", "\\;"):
                j += 1
            inner: list[str | None] = [
                None if a is not None and "{}" in a else a for a in argv[i + 1 : j]
            ]
            if inner:
                derived = cmd.derive(inner, "find")
                derived.fails_line = False  # find's status ignores what -exec returned
                _expand(derived, out, home, depth)
            i = j
        i += 1
