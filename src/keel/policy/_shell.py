"""Shell command lines to simple commands, with a real bash parser.

A line made only of plainly safe characters is split on spaces (that is exactly what bash
does with it); anything else goes through tree-sitter-bash, imported on first use. The
walker resolves words it can (quotes, ``$'..'``, variables assigned literally earlier in
the line, ``$HOME``), marks the rest as dynamic (``None``), follows ``cd``, pipelines,
redirects, here-docs, functions and substitutions, and unwraps wrappers (``sudo``, ``env``,
``timeout``, ``xargs``, ``bash -c``, ``eval``, ``find -exec`` ...), so every simple command
that would run is judged on its own.

What it cannot resolve it reports as an issue, never as harmless: arithmetic that evaluates a
variable it does not know (``$((x))``, ``[[ $x -eq 1 ]]``, ``declare -i``, array subscripts:
bash evaluates ``a[$(id)]`` inside them), backticks in an unquoted here-doc, ``~-`` and ``~N``.
Brace expansion is done as bash does it (``cat {/etc/shadow,x}`` is two arguments), ``~+`` is
the working directory, and assignments of variables that inject programs are reported so the
engine can judge them.
"""

from __future__ import annotations

import codecs
import os
import re

from keel.policy import _env

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
ENV_RISKS = _env.LOADER
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "busybox", "rbash", "mksh"})
MAX_DEPTH = 6
_ESCAPE = r"\\(.)"
_OBFUSCATED = r"\\[A-Za-z0-9]"
_SECRET_VAR = r"(?i)token|secret|passw|api_?key|private_?key|credential|access_?key"
_INTEGER = r"^\s*[-+]?(?:0[xX][0-9a-fA-F]+|\d+)\s*$"
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
_ARITH_OPERATORS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_NUMERIC_VARS = frozenset(
    {
        "RANDOM",
        "LINENO",
        "SECONDS",
        "BASHPID",
        "PPID",
        "UID",
        "EUID",
        "OPTIND",
        "SRANDOM",
        "EPOCHSECONDS",
    }
)
MAX_BRACE_WORDS = 256
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
        inner.assigns = list(self.assigns)
        inner.fails_line = self.fails_line
        return inner


class Parsed:
    """Simple commands of a line plus what could not be understood (kind, detail)."""

    __slots__ = ("cdpath", "cmds", "issues")

    def __init__(self, cdpath: bool = False) -> None:
        self.cmds: list[Cmd] = []
        self.issues: list[tuple[str, str]] = []
        self.cdpath = cdpath
        """``CDPATH`` is set: a ``cd`` to a bare name goes somewhere only known at run time."""


def fast_split(line: str) -> list[str] | None:
    """Split a line of plainly safe characters on spaces, or ``None`` if it needs the parser."""
    if not _SAFE.issuperset(line):
        return None
    words = line.split()
    if not words or "=" in words[0] or words[0] in RESERVED:
        return None
    return words


def parse(line: str, *, cwd: str | None, home: str, depth: int = 0, cdpath: bool = False) -> Parsed:
    """Every simple command of ``line``, wrappers unwrapped.

    ``cdpath``: ``CDPATH`` is set, so ``cd NAME`` may go elsewhere than ``./NAME``.
    """
    out = Parsed(cdpath)
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
    walker.cdpath = cdpath
    tree = _parser().parse(line.encode("utf-8", "surrogateescape"))
    walker.walk(tree.root_node)
    out.cdpath = walker.cdpath
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


def _glued(node: Node) -> bool:
    """An argument node that runs on into the next one with no blank: one word, split."""
    after = node.next_sibling
    return after is not None and after.is_named and after.start_byte == node.end_byte


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
        self.int_vars: set[str] = set()
        self.produced_all: list[Cmd] = []
        self.sub_names: list[str] = []
        self.cdpath = False

    def issue(self, kind: str, detail: str) -> None:
        self.out.issues.append((kind, detail[:200]))

    def cannot_parse(self, node: Node) -> None:
        self.issue("unparseable", f"cannot parse near {_text(node)[:60]!r}")

    def walk(self, node: Node) -> list[Cmd]:
        """Walk a statement; return the commands it runs at its own level."""
        if node.type == "ERROR" or node.is_missing:
            self.cannot_parse(node)
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
                self.declaration(node)
                return []
            case "unset_command":
                for child in node.named_children:
                    if child.type != "variable_name" and _text(child)[:1] != "-":
                        self.declared_word(child)
                return []
            case "function_definition":
                return self.function(node)
            case "for_statement":
                var = node.child_by_field_name("variable")
                if var is not None:
                    self.vars[_text(var)] = None
                return self.children(node)
            case "c_style_for_statement":
                for child in node.children:
                    if child.type == "variable_assignment":
                        self.assign(child)
                    elif child.type not in ("do_group", "compound_statement"):
                        self.arith(child, walk_subs=False)
                return self.children(node)
            case "compound_statement" if node.children and node.children[0].type == "((":
                self.arith(node)
                return []
            case "test_command":
                self.test_command(node)
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
                    if child.named_children:
                        cmd.argv.extend(self.words(child.named_children[0]))
                    else:
                        cmd.argv.append(None)
                case "file_redirect" | "heredoc_redirect" | "herestring_redirect":
                    self.redirect(child, [cmd])
                case "comment":
                    pass
                case _ if child.is_named:
                    if child.type == "ERROR":
                        self.cannot_parse(child)
                    elif _glued(child):
                        # ``cat {\.env,x}``: one shell word (a brace expansion bash performs)
                        # that tree-sitter split in two; what it expands to is not seen here.
                        self.issue("unparseable", f"cannot read the word at {_text(child)!r}")
                    cmd.argv.extend(self.words(child))
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
        cdpath = self.cdpath or any(var == "CDPATH" for var, _ in cmd.assigns)
        if cdpath and not target.startswith(("/", "./", "../", "~")) and target not in (".", ".."):
            self.cwd = None  # CDPATH may take it anywhere
            return
        self.cwd = resolve_dir(self.cwd, target, self.home)

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
                    if child.type == "ERROR":
                        # ``cat <<EOF > f | rm -rf src``: the rest of the line lands here.
                        self.cannot_parse(child)
                    elif not child.is_named:
                        op = op or _text(child)
                    else:
                        dests.append(self.word(child))
                cmds[-1].redirects.extend((op, d) for d in dests or [""])
                # ``cat > out secret``: words after the target are the command's arguments
                # (tree-sitter keeps them in the redirect); judged as both.
                cmds[-1].argv.extend(dests[1:])

    def heredoc(self, node: Node, cmd: Cmd) -> None:
        body_text: str | None = ""
        quoted = False
        for child in node.children:
            if child.type == "heredoc_start":
                quoted = any(q in _text(child) for q in "'\"\\")
            elif child.type == "heredoc_body":
                body_text = self.heredoc_body(child, quoted)
            elif child.type in ("file_redirect", "herestring_redirect"):
                self.redirect(child, [cmd])
            elif child.type in ("pipeline", "command", "list", "redirected_statement"):
                self.walk(child)
            elif child.type == "ERROR":
                self.cannot_parse(child)
            elif child.is_named and child.type not in ("heredoc_end", "comment"):
                cmd.argv.extend(self.words(child))  # ``cat <<EOF .env``: an argument of cat
        cmd.heredoc, cmd.stdin_dynamic = body_text, body_text is None

    def heredoc_body(self, body: Node, quoted: bool) -> str | None:
        """The body's text, or ``None`` when the shell expands something in it."""
        if quoted:
            return _text(body)
        dynamic = False
        for part in body.named_children:
            if part.type in ("command_substitution", "process_substitution"):
                self.substitution(part)
                dynamic = True
            elif part.type in ("simple_expansion", "expansion", "arithmetic_expansion"):
                self.word(part)
                dynamic = True
        if "`" in _text(body):
            self.issue("unparseable", "backticks in an unquoted here-doc run commands")
            dynamic = True
        return None if dynamic else _text(body)

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

    def assign(self, node: Node, *, integer: bool = False) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        resolved = self.word(value) if value is not None else ""
        if name is None:
            return
        var = _text(name)
        if name.type == "subscript":
            self.subscript(name)
            var = var.split("[", 1)[0]
        if (integer or var in self.int_vars) and not re.match(_INTEGER, resolved or ""):
            self.issue("arithmetic", f"{var} is an integer variable: its value is evaluated")
        self.vars[var] = resolved
        self.note_env(var, resolved)

    def note_env(self, var: str, value: str | None) -> None:
        """Report an assignment the engine must judge (it changes what programs run)."""
        if var == "CDPATH":
            self.cdpath = True
        if _env.kind(var, None) is not None:
            self.issue("env", var if value is None else f"{var}={value}")

    def declaration(self, node: Node) -> None:
        """``declare``/``export``/``local``...: ``-i`` and ``-n`` values are evaluated."""
        flags = "".join(
            _text(c)[1:] for c in node.named_children if c.type == "word" and _text(c)[:1] == "-"
        )
        integer = "i" in flags or "n" in flags
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assign(child, integer=integer)
                target = child.child_by_field_name("name")
                if integer and target is not None:
                    self.int_vars.add(_text(target).split("[", 1)[0])
            elif child.type == "variable_name":
                self.vars[_text(child)] = None
                if integer:
                    self.int_vars.add(_text(child))
            elif child.type != "word" or _text(child)[:1] != "-":
                self.declared_word(child)

    def declared_word(self, node: Node) -> None:
        """A quoted ``'a[$(id)]=1'`` given to ``declare``: its subscript is evaluated."""
        text = self.word(node)
        if text is None or not subscript_is_safe(text.split("=", 1)[0]):
            self.issue(
                "arithmetic", f"declares {(text or '?')[:40]!r}, whose subscript is evaluated"
            )

    def arith(self, node: Node, *, walk_subs: bool = True) -> None:
        """Arithmetic evaluates the value of every variable it names: unknown ones may run code.

        ``walk_subs``: walk the substitutions inside (false when the caller walks them).
        """
        stack = [node]
        while stack:
            n = stack.pop()
            if n.type in ("command_substitution", "process_substitution"):
                if walk_subs:
                    self.substitution(n)
                continue
            if n.type == "variable_name" or (n.type == "word" and re.match(_IDENTIFIER, _text(n))):
                self.arith_variable(_text(n))
            elif n.type in ("string", "raw_string", "ansi_c_string"):
                value = self.word(n)
                if value is None or not re.match(_INTEGER, value):
                    self.issue("arithmetic", f"arithmetic evaluates the text {_text(n)[:40]!r}")
            stack.extend(n.children)

    def arith_variable(self, var: str) -> None:
        if var in _NUMERIC_VARS:
            return
        value = self.vars.get(var)
        if value is None or not re.match(_INTEGER, value):
            self.issue(
                "arithmetic", f"arithmetic evaluates ${var}, whose value is not a known number"
            )

    def test_command(self, node: Node) -> None:
        """``[[ a -eq b ]]`` evaluates both sides; ``-v a[i]`` evaluates the subscript."""
        for n in _descendants(node):
            if n.type == "binary_expression" and any(
                c.type == "test_operator" and _text(c) in _ARITH_OPERATORS for c in n.children
            ):
                for side in n.named_children:
                    if side.type != "test_operator":
                        self.arith(side, walk_subs=False)
            elif n.type == "unary_expression" and any(_text(c) == "-v" for c in n.children):
                operand = n.named_children[-1] if n.named_children else None
                text = self.word(operand) if operand is not None else None
                if text is None or not subscript_is_safe(text):
                    self.issue("arithmetic", "[[ -v ]] evaluates the subscript of its operand")

    def function(self, node: Node) -> list[Cmd]:
        name_node = node.child_by_field_name("name")
        name = _text(name_node) if name_node is not None else ""
        body = node.child_by_field_name("body")
        produced = self.walk(body) if body is not None else []
        text = _text(body) if body is not None else ""
        if name and re.search(rf"(^|[^\w]){re.escape(name)}\s*[|&]", text):
            self.issue("fork_bomb", f"function {name!r} calls itself in the background or a pipe")
        return produced

    def words(self, node: Node) -> list[str | None]:
        """The words one argument becomes: several after brace expansion (``a{b,c}``)."""
        text = _text(node)
        if "{" not in text or node.type not in ("word", "concatenation", "brace_expression"):
            return [self.word(node)]
        if not _plain(node):
            return [self.word(node)] if not _brace_like(node) else [None]
        expanded = expand_braces(text)
        if expanded is None:
            self.issue("unparseable", f"brace expansion of {text[:40]!r} makes too many words")
            return [None]
        return [self.tilde(_unescape(w)) for w in expanded]

    def word(self, node: Node, *, tilde: bool = True) -> str | None:
        """The literal value of a word, or ``None`` if only known at run time.

        ``tilde``: the word starts an argument, so a leading ``~`` is a tilde prefix.
        """
        match node.type:
            case "word" | "number":
                text = _text(node).replace("\\\n", "")
                if "\\" in text and re.search(_OBFUSCATED, text):
                    self.issue("obfuscated", f"{text!r} escapes ordinary characters")
                text = _unescape(text)
                return self.tilde(text) if tilde else text
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
                return self.concatenation(node)
            case "simple_expansion" | "expansion":
                return self.expansion(node)
            case "command_substitution" | "process_substitution":
                self.substitution(node)
                return None
            case "arithmetic_expansion":
                self.arith(node)
                return None
            case "brace_expression":
                return _text(node)
            case _:
                self.children(node)
                return None

    def concatenation(self, node: Node) -> str | None:
        parts = [self.word(c, tilde=i == 0) for i, c in enumerate(node.children)]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)

    def tilde(self, text: str | None) -> str | None:
        """Bash's tilde prefixes: ``~+`` is the working directory; ``~-`` and ``~N`` unknown."""
        if text is None or not text.startswith("~"):
            return text
        head, sep, tail = text.partition("/")
        if head == "~+":
            return None if self.cwd is None else self.cwd + sep + tail
        if head == "~-" or re.match(r"^~[+-]?\d+$", head):
            return None
        return text

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
            if child.type == "subscript":
                self.subscript(child)
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

    def subscript(self, node: Node) -> None:
        """``${a[i]}``: an indexed array's subscript is arithmetic."""
        index = node.child_by_field_name("index")
        parts = [index] if index is not None else node.named_children[1:]
        for part in parts:
            if _text(part) not in ("@", "*"):
                self.arith(part)


def _descendants(node: Node) -> list[Node]:
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if n.type not in ("command_substitution", "process_substitution"):
            stack.extend(n.children)
    return out


def _unescape(text: str) -> str:
    return re.sub(_ESCAPE, r"\1", text, flags=re.DOTALL) if "\\" in text else text


def _plain(node: Node) -> bool:
    """Only unquoted literal text (words, numbers, brace expressions), nothing expanded."""
    if node.type in ("word", "number", "{", "}", "..", ","):
        return True
    if node.type in ("concatenation", "brace_expression"):
        return all(_plain(c) for c in node.children)
    return False


def _brace_like(node: Node) -> bool:
    """An unquoted part of a mixed word that bash would brace-expand."""
    return any(
        c.type == "brace_expression" or (c.type == "word" and ("," in _text(c) or ".." in _text(c)))
        for c in node.children
    ) and any(_text(c) == "{" or c.type == "brace_expression" for c in node.children)


def subscript_is_safe(name: str) -> bool:
    """False if ``name`` (``a[i]``) has a subscript other than a plain number, ``@`` or ``*``."""
    if "[" not in name:
        return True
    index = name[name.index("[") + 1 : name.rindex("]")] if "]" in name else name
    return bool(re.match(_INTEGER, index)) or index.strip() in ("@", "*")


def resolve_dir(cwd: str | None, target: str | None, home: str) -> str | None:
    """Where ``cd TARGET`` (or ``env -C TARGET``) from ``cwd`` goes, lexically."""
    if cwd is None or target is None:
        return None
    if target.startswith("~") or target.startswith("$HOME"):
        target = (
            home
            + target.split("/", 1)[0].replace("~", "").replace("$HOME", "")
            + ("/" + target.split("/", 1)[1] if "/" in target else "")
        )
    return os.path.normpath(os.path.join(cwd, target))


def expand_braces(text: str, limit: int = MAX_BRACE_WORDS) -> list[str] | None:
    """Bash brace expansion of an unquoted word (``a{b,c}d``, ``{1..3}``); None past ``limit``."""
    out: list[str] = []
    pending = [text]
    while pending:
        word = pending.pop()
        found = _first_brace(word)
        if found is None:
            out.append(word)
        else:
            start, end, alternatives = found
            pending.extend(word[:start] + alt + word[end + 1 :] for alt in reversed(alternatives))
        if len(out) + len(pending) > limit:
            return None
    return out


def _first_brace(word: str) -> tuple[int, int, list[str]] | None:
    """The first ``{...}`` that expands: its span and its alternatives."""
    i = 0
    while i < len(word):
        c = word[i]
        if c == "\\":
            i += 2
            continue
        if c == "{" and (i == 0 or word[i - 1] != "$"):
            end, commas = _matching(word, i)
            if end is not None:
                inner = word[i + 1 : end]
                if commas:
                    return i, end, _split_commas(inner)
                sequence = _sequence(inner)
                if sequence is not None:
                    return i, end, sequence
        i += 1
    return None


def _matching(word: str, start: int) -> tuple[int | None, bool]:
    depth, commas, i = 0, False, start
    while i < len(word):
        c = word[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i, commas
        elif c == "," and depth == 1:
            commas = True
        i += 1
    return None, False


def _split_commas(inner: str) -> list[str]:
    parts, depth, current, i = [], 0, "", 0
    while i < len(inner):
        c = inner[i]
        if c == "\\":
            current += inner[i : i + 2]
            i += 2
            continue
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            depth += {"{": 1, "}": -1}.get(c, 0)
            current += c
        i += 1
    return [*parts, current]


def _sequence(inner: str) -> list[str] | None:
    m = re.match(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$", inner) or re.match(
        r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?$", inner
    )
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    step = abs(int(m.group(3) or 1)) or 1
    if first.lstrip("-").isdigit():
        a, b = int(first), int(last)
        if abs(b - a) // step > MAX_BRACE_WORDS:
            return [first, last] * MAX_BRACE_WORDS  # too many: the caller gives up
        width = (
            len(first)
            if first.lstrip("-").startswith("0") or last.lstrip("-").startswith("0")
            else 0
        )
        values = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
        return [str(v).zfill(width) for v in values]
    a, b = ord(first), ord(last)
    values = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
    return [chr(v) for v in values]


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
_TIME_VALUES = frozenset({"-f", "--format", "-o", "--output"})  # ``-p`` is a flag


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
            _env_wrapper(cmd, out, home, depth)
            return
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
            _xargs(cmd, out, home, depth)
            return
        case "eval":
            words = argv[1:]
            if any(w is None for w in words):
                out.issues.append(("dynamic_command", "eval of a dynamic string"))
                return
            _script(" ".join(w for w in words if w is not None), cmd, out, home, depth)
            return
        case "watch":
            i = _skip_options(argv, 1, frozenset({"-n", "--interval", "-q", "--equexit"}))
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
        case "busybox" if len(argv) > 1 and argv[1] and not argv[1].startswith("-"):
            inner = argv[1:]  # ``busybox sh -c 'rm -rf /'``: busybox runs the applet
        case _ if base in SHELLS:
            _shell_c(cmd, out, home, depth)
            return
        case _ if base in _SIMPLE_WRAPPERS:
            inner = argv[_skip_options(argv, 1, _TIME_VALUES if base == "time" else frozenset()) :]
            inner = inner or None
        case _:
            return
    if inner:
        cmd.is_wrapper = True
        _expand(cmd.derive(list(inner), base), out, home, depth)


def _env_wrapper(cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    """``env [-C DIR] [-u VAR] [VAR=VALUE]... CMD``: CMD runs with those, in DIR."""
    argv = cmd.argv
    assigns: list[tuple[str, str | None]] = []
    cwd = cmd.cwd
    inner: list[str | None] | None = None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-u", "--unset"):
            i += 2
        elif a in ("-C", "--chdir") or (a is not None and a.startswith(("--chdir=", "-C"))):
            value = argv[i + 1] if a in ("-C", "--chdir") and i + 1 < len(argv) else None
            if a not in ("-C", "--chdir"):
                value = a.split("=", 1)[1] if a.startswith("--chdir=") else a[2:]
            cwd = resolve_dir(cwd, value, home)
            i += 2 if a in ("-C", "--chdir") else 1
        elif a in ("-S", "--split-string") and i + 1 < len(argv):
            s = argv[i + 1]
            inner = None if s is None else [*s.split(), *argv[i + 2 :]]
            if s is None:
                out.issues.append(("dynamic_command", "env -S with a dynamic string"))
            break
        elif a is not None and a.startswith("-"):
            i += 1
        elif a is not None and "=" in a:
            var, _, value = a.partition("=")
            assigns.append((var, value))
            i += 1
        else:
            inner = argv[i:]
            break
    if inner:
        cmd.is_wrapper = True
        derived = cmd.derive(list(inner), "env")
        derived.assigns = [*cmd.assigns, *assigns]
        derived.cwd = cwd
        _expand(derived, out, home, depth)


def _xargs(cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    """``xargs CMD``: CMD gets arguments from stdin (or ``-a FILE``), so its tail is dynamic.

    With ``-I R`` (``-i``, ``--replace``) every word holding R is only known at run time;
    ``-a FILE`` reads FILE, judged as a read.
    """
    argv = cmd.argv
    replace: str | None = None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a is None or not a.startswith("-") or a == "-":
            break
        if a == "--":
            i += 1
            break
        value = argv[i + 1] if i + 1 < len(argv) else None
        if a in ("-I", "-a", "--arg-file"):
            replace = value if a == "-I" else replace
            if a != "-I":
                cmd.redirects.append(("<", value))
            i += 2
            continue
        if a.startswith("-I") or a.startswith("-i") or a.startswith("--replace"):
            replace = a.split("=", 1)[1] if "=" in a else (a[2:] or "{}")
        elif a.startswith(("--arg-file=", "-a")):
            cmd.redirects.append(("<", a.split("=", 1)[1] if "=" in a else a[2:]))
        i += 2 if a in _XARGS_ARG else 1
    inner = argv[i:] or ["echo"]
    if replace is not None:
        inner = [None if w is None or replace in w else w for w in inner]
    cmd.is_wrapper = True
    derived = cmd.derive(list(inner), "xargs")
    derived.dynamic_tail = True
    _expand(derived, out, home, depth)


def _script(text: str | None, cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
    cmd.is_wrapper = True
    if text is None:
        out.issues.append(("dynamic_command", "a shell runs a script only known at run time"))
        return
    sub = parse(text, cwd=cmd.cwd, home=home, depth=depth + 1, cdpath=out.cdpath)
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
