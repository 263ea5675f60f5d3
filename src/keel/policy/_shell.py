"""Shell command lines to simple commands, with a real bash parser.

A line made only of plainly safe characters is split on spaces (that is exactly what bash
does with it); anything else goes through tree-sitter-bash, imported on first use. The
walker resolves words it can (quotes, ``$'..'``, variables assigned literally earlier in
the line, ``$HOME``), marks the rest as dynamic (``None``), follows ``cd``, pipelines,
redirects, here-docs, functions and substitutions, and unwraps wrappers (``sudo``, ``env``,
``timeout``, ``xargs``, ``bash -c``, ``eval``, ``find -exec`` ...), so every simple command
that would run is judged on its own. What runs in a subshell (``( .. )``, a pipeline stage,
``&``, ``$( .. )``, ``<( .. )``) changes no directory or variable for what follows; a
``{ ..; }`` group does. A ``cd`` moves only what runs where it ran: it may fail (its
directory does not exist now: ``probe``) or not run at all (right of ``&&``/``||``, in an
``if``, a loop or a ``case`` branch); later commands run where every way there agrees, or in
a directory only known at run time. ``builtin``, ``command``, ``time`` and ``eval`` run
``cd`` in the shell itself; ``source FILE`` runs FILE's text there: keel walks it when it is a
small workspace file nothing earlier on the line can have written, else the directory after
it is only known at run time.

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
from keel.policy._paths import inside

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Callable

    from tree_sitter import Node, Parser

    _State = tuple[str | None, dict[str, str | None], set[str], bool]
    _Branch = tuple[_State, _State, bool, bool]

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
STD_BIN = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/usr/local/sbin/")
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
_DIR_BUILTINS = frozenset({"cd", "pushd", "popd"})
_CD_FLAGS = frozenset("LPe@")
_STACK_ROTATION = r"^[+-]\d+$"
_BRANCHING = frozenset({"command", "list", "negated_command", "redirected_statement"})
"""Statements whose success and failure may leave the shell in different states."""
_MAX_ROUNDS = 8
_ROUND_BUDGET = 256
_FALLS_THROUGH = frozenset({";&", ";;&"})
MAX_SOURCE_DEPTH = 4
"""``source`` inside a sourced file inside ...: deeper, the directory is unknown."""
MAX_SOURCE_BYTES = 64 * 1024
_INERT = frozenset(
    {"cd", "pushd", "popd", "true", "false", ":", "echo", "printf", "pwd", "test", "["}
)
"""Commands that write no file (without a redirect that does): a later ``source`` may trust
that the file it reads is the one keel reads now."""
_SOURCE_SPOILERS = frozenset({"alias", "trap", "enable", "return"})
"""In a sourced file these change what later text runs (an alias, a DEBUG trap, a loadable
builtin) or end the file early (``return``): keel does not follow them."""


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

    __slots__ = ("cdpath", "cmds", "end", "fresh", "issues", "probe", "root", "sources")

    def __init__(self, cdpath: bool = False, probe: bool = True) -> None:
        self.cmds: list[Cmd] = []
        self.issues: list[tuple[str, str]] = []
        self.cdpath = cdpath
        """``CDPATH`` is set: a ``cd`` to a bare name goes somewhere only known at run time."""
        self.probe = probe
        """A ``cd`` to a directory that does not exist (or cannot be entered) now fails."""
        self.end: _State = (None, {}, set(), cdpath)
        """The shell after the line: directory, variables it set, integer variables, CDPATH."""
        self.root: str | None = None
        """The workspace: a file ``source`` reads is walked only from inside it."""
        self.sources = 0
        """How many ``source`` commands this text is nested in."""
        self.fresh = True
        """Nothing ran before this text that can have written a file."""


def fast_split(line: str) -> list[str] | None:
    """Split a line of plainly safe characters on spaces, or ``None`` if it needs the parser."""
    if not _SAFE.issuperset(line):
        return None
    words = line.split()
    if not words or "=" in words[0] or words[0] in RESERVED:
        return None
    return words


def parse(
    line: str,
    *,
    cwd: str | None,
    home: str,
    depth: int = 0,
    cdpath: bool = False,
    probe: bool = True,
    root: str | None = None,
    sources: int = 0,
    fresh: bool = True,
) -> Parsed:
    """Every simple command of ``line``, wrappers unwrapped.

    ``cdpath``: ``CDPATH`` is set, so ``cd NAME`` may go elsewhere than ``./NAME``.
    ``probe``: look at the file system, where a ``cd`` to a directory that is not there fails
    (false: every directory is taken to exist).
    ``root``: the workspace; ``source FILE`` of a file inside it is walked for the directory
    and variables it leaves (without a root, or outside it, they are only known at run time).
    ``sources``: ``source`` commands the text is nested in; ``fresh``: nothing ran before it
    that can have written a file.
    """
    out = Parsed(cdpath, probe)
    out.root, out.sources, out.fresh = root, sources, fresh
    walker = _Walker(out, cwd, home, depth)
    walker.cdpath = cdpath
    # The fast path follows only `cd`: text nested in `eval`/`source` is walked whole, since
    # the state it leaves (`export CDPATH=..`, `declare -i`) is the rest of the line's.
    words = fast_split(line) if depth == 0 else None
    if words is not None:
        cmd = Cmd(list(words), cwd)
        cmd.fails_line = True  # the line is this one command
        walker.follow_cd(cmd)
        out.end = walker.state()
        _expand(cmd, out, home, depth)
        return out
    out.end = walker.state()
    if not line.strip():
        return out
    if depth > MAX_DEPTH:
        out.issues.append(("unparseable", "commands nested too deeply"))
        out.end = (None, {}, set(), True)
        return out
    tree = _parser().parse(line.encode("utf-8", "surrogateescape"))
    walker.walk(tree.root_node)
    out.cdpath = walker.cdpath
    out.end = walker.state()
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


def _dropped(command: Node) -> list[str]:
    """Words tree-sitter leaves out of a command before its redirect.

    The ``-`` of ``cat - 2>x`` or ``python3 - <<EOF`` is in no node.
    """
    node = command
    while node.next_sibling is None and node.parent is not None:
        node = node.parent  # the last command of a list or pipeline the redirect follows
    parent, after = node.parent, node.next_sibling
    if parent is None or after is None or parent.type != "redirected_statement":
        return []
    text = parent.text or b""
    gap = text[command.end_byte - parent.start_byte : after.start_byte - parent.start_byte]
    return gap.replace(b"\\\n", b" ").decode("utf-8", "surrogateescape").split()


def _operands(node: Node) -> tuple[Node, Node, Node] | None:
    """A list's left operand, ``&&``/``||`` and right operand."""
    parts = [c for c in node.children if c.type not in _NOT_STATEMENTS]
    if len(parts) != 3 or parts[1].type not in ("&&", "||"):
        return None
    return parts[0], parts[1], parts[2]


def _key(node: Node) -> tuple[int, int, str]:
    return node.start_byte, node.end_byte, node.type


def _backgrounded(node: Node) -> bool:
    """``node &``: bash runs it in an asynchronous subshell."""
    after = node.next_sibling
    return node.is_named and after is not None and after.type == "&"


def _cd_words(args: list[str | None]) -> tuple[list[str], list[str | None]]:
    """``cd``'s options and operands: options end at ``--`` or the first operand; ``-`` is one."""
    for i, a in enumerate(args):
        if a == "--":
            return [w for w in args[:i] if w is not None], args[i + 1 :]
        if a is None or not a.startswith("-") or a == "-":
            return [w for w in args[:i] if w is not None], args[i:]
    return [w for w in args if w is not None], []


def _in_shell(argv: list[str | None], *, reserved: bool) -> list[str | None] | None:
    """The command the shell itself runs for ``argv``, through ``time``, ``builtin``, ``command``.

    ``reserved``: nothing comes before the name, so ``time`` is bash's keyword (after an
    assignment or a redirect it is ``/usr/bin/time``). ``None``: nothing runs in the shell
    (``command -v``, an option these do not take).
    """
    i = 0
    while reserved and i < len(argv) and argv[i] == "time":
        i += 1
        i += i < len(argv) and argv[i] == "-p"
        i += i < len(argv) and argv[i] == "--"
    while i < len(argv) and argv[i] in ("builtin", "command"):
        name, i = argv[i], i + 1
        while i < len(argv) and (argv[i] or "").startswith("-") and argv[i] != "-":
            flag = argv[i] or ""
            i += 1
            if flag == "--":
                break
            if name == "builtin" or set(flag[1:]) - {"p"}:
                return None  # ``command -v`` only looks; any other option is an error
    return argv[i:]


def _may_fail(redirects: list[tuple[str, str | None]]) -> bool:
    """A redirect that may fail, and then the command does not run (``cd src < missing``)."""
    return any(
        dest != "/dev/null" and not (op.endswith("&") and dest in ("0", "1", "2", "-"))
        for op, dest in redirects
    )


def _writes(redirects: list[tuple[str, str | None]]) -> bool:
    """A redirect that may write a file (not a read, ``/dev/null`` or a descriptor copy)."""
    return any(
        not (
            op == "<" or dest == "/dev/null" or (op.endswith("&") and dest in ("0", "1", "2", "-"))
        )
        for op, dest in redirects
    )


def _inert(cmd: Cmd) -> bool:
    """``cmd`` writes no file."""
    return cmd.name in _INERT and not _writes(cmd.redirects)


def _sources(cmd: Cmd) -> bool:
    """``cmd`` is ``source``/``.`` (or an ``eval`` that may be one) run by the shell itself."""
    argv = _in_shell(cmd.argv, reserved=False)
    return bool(argv) and argv is not None and argv[0] in ("source", ".", "eval")


def _meet(a: _State, b: _State) -> _State:
    """The state either of two ways leaves: what they agree on, the rest only known at run time."""
    cwd_a, vars_a, ints_a, cdpath_a = a
    cwd_b, vars_b, ints_b, cdpath_b = b
    names = set(vars_a) | set(vars_b)
    merged = {
        n: vars_a[n] if n in vars_a and n in vars_b and vars_a[n] == vars_b[n] else None
        for n in names
    }
    return cwd_a if cwd_a == cwd_b else None, merged, ints_a | ints_b, cdpath_a or cdpath_b


def _either(ways: list[tuple[_State, bool]]) -> tuple[_State, bool]:
    """The meet of the ways that can happen, and whether any can (else the first way's)."""
    possible = [state for state, can in ways if can]
    if not possible:
        return ways[0][0], False
    out = possible[0]
    for state in possible[1:]:
        out = _meet(out, state)
    return out, True


def _clause(node: Node) -> tuple[list[Node], list[Node]]:
    """An ``if``/``elif`` clause's condition and body (an ``else`` clause: no condition)."""
    cond: list[Node] = []
    body: list[Node] = []
    part = body if node.type == "else_clause" else cond
    for child in node.children:
        if child.type == "then":
            part = body
        elif child.is_named and child.type not in ("elif_clause", "else_clause", "comment"):
            part.append(child)
    return cond, body


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
        self.rounds = 0
        self.swap: dict[tuple[int, int, str], Node] = {}
        """Nodes walked as another (the right operand of a list tree-sitter grouped wrongly)."""
        self.branch: _Branch | None = None
        """How the statement just walked leaves the shell if it succeeds and if it fails, and
        whether each can happen; ``None``: as it is now, either way."""

    def state(self) -> _State:
        """What a subshell may change: directory, variables, integer variables, ``CDPATH``."""
        return self.cwd, dict(self.vars), set(self.int_vars), self.cdpath

    def restore(self, saved: _State) -> None:
        """Back to ``saved``: what ran since was in a subshell."""
        self.cwd, vars_, int_vars, self.cdpath = saved
        self.vars, self.int_vars = dict(vars_), set(int_vars)

    def join(self, saved: _State) -> None:
        """What ran since may or may not have changed the state: keep only what both agree on."""
        self.restore(_meet(self.state(), saved))

    def outcome(self) -> _Branch:
        """The last statement's success and failure states (both as now, if it did not say)."""
        if self.branch is not None:
            return self.branch
        now = self.state()
        return now, now, True, True

    def settle(self, success: _State, failure: _State, can_succeed: bool, can_fail: bool) -> None:
        """Record a statement's two ways; what follows it runs where both can leave the shell."""
        self.branch = success, failure, can_succeed, can_fail
        either, possible = _either([(success, can_succeed), (failure, can_fail)])
        if possible:
            self.restore(either)

    def forget(self) -> None:
        """Code keel does not see ran in the shell: directory and variables only known then."""
        self.cwd = None
        self.vars = dict.fromkeys(self.vars)

    def subshell(self, node: Node, *, inside: bool = False) -> list[Cmd]:
        """Walk ``node`` (``inside``: its children) in a subshell: what it changes stays there."""
        saved = self.state()
        produced = self.children(node) if inside else self.walk(node)
        self.restore(saved)
        self.branch = None
        return produced

    def issue(self, kind: str, detail: str) -> None:
        self.out.issues.append((kind, detail[:200]))

    def cannot_parse(self, node: Node) -> None:
        self.issue("unparseable", f"cannot parse near {_text(node)[:60]!r}")

    def walk(self, node: Node) -> list[Cmd]:
        """Walk a statement; return the commands it runs at its own level."""
        node = self.swap.get(_key(node), node)
        produced = self.statement(node)
        if node.type not in _BRANCHING:
            self.branch = None
        return produced

    def statement(self, node: Node) -> list[Cmd]:
        """``walk`` without forgetting the statement's success and failure states."""
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
            case "subshell":
                return self.subshell(node, inside=True)
            case "list":
                return self.and_or(node)
            case "negated_command":
                produced = self.children(node)
                success, failure, can_succeed, can_fail = self.outcome()
                self.branch = failure, success, can_fail, can_succeed
                return produced
            case "if_statement":
                return self.if_statement(node)
            case "case_statement":
                return self.case_statement(node)
            case "for_statement" | "c_style_for_statement" | "while_statement":
                return self.loop(node)
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
        return self.sequence(node.children)

    def sequence(self, nodes: list[Node]) -> list[Cmd]:
        """Walk statements one after the other."""
        out: list[Cmd] = []
        for child in nodes:
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.redirect(child, out)
            elif _backgrounded(child):
                out.extend(self.subshell(child))  # ``cd a & b``: an asynchronous subshell
            elif child.is_named or child.type == "ERROR":
                out.extend(self.walk(child))
        return out

    def substitution(self, node: Node) -> None:
        """Walk ``$(..)``/``<(..)``; the names of what runs inside go to the enclosing command."""
        for c in self.subshell(node, inside=True):
            if c.name:
                self.sub_names.append(c.name)
            self.sub_names.extend(c.sub_names)

    def and_or(self, node: Node, last: Callable[[Node], list[Cmd]] | None = None) -> list[Cmd]:
        """``L && R`` / ``L || R``: R runs from where L left the shell on success / failure.

        ``last`` walks R (what tree-sitter put around the list belongs to R).
        """
        parts = _operands(node)
        if parts is None:
            saved = self.state()
            produced = self.children(node)
            self.join(saved)
            self.branch = None
            return produced
        left, op, right = parts
        produced = self.walk(left)
        s1, f1, ok1, bad1 = self.outcome()
        runs = ok1 if op.type == "&&" else bad1
        self.restore(s1 if op.type == "&&" else f1)  # R is judged there even if it cannot run
        produced += self.walk(right) if last is None else last(right)
        s2, f2, ok2, bad2 = self.outcome()
        if op.type == "&&":
            success, can_succeed = s2, runs and ok2
            failure, can_fail = _either([(f1, bad1), (f2, runs and bad2)])
        else:
            success, can_succeed = _either([(s1, ok1), (s2, runs and ok2)])
            failure, can_fail = f2, runs and bad2
        self.settle(success, failure, can_succeed, can_fail)
        return produced

    def if_statement(self, node: Node) -> list[Cmd]:
        """Each body runs from where its condition succeeded; the ``if`` ends where one did."""
        produced: list[Cmd] = []
        ends: list[tuple[_State, bool]] = []
        reached = True  # this clause's condition runs
        for clause in [node, *(c for c in node.children if c.type == "elif_clause")]:
            cond, body = _clause(clause)
            produced += self.sequence(cond)
            success, failure, can_succeed, can_fail = self.outcome()
            self.restore(success)
            produced += self.body(body, ends, reached and can_succeed)
            self.restore(failure)
            reached = reached and can_fail
        otherwise = [c for c in node.children if c.type == "else_clause"]
        if otherwise:
            produced += self.body(_clause(otherwise[0])[1], ends, reached)
        else:
            ends.append((self.state(), reached))  # every condition failed
        self.restore(_either(ends)[0])
        return produced

    def body(self, nodes: list[Node], ends: list[tuple[_State, bool]], runs: bool) -> list[Cmd]:
        """Walk a branch's body; add where it ends, if it runs and does not ``exit``."""
        self.branch = None
        produced = self.sequence(nodes)
        _, _, ok, bad = self.outcome()
        ends.append((self.state(), runs and (ok or bad)))
        return produced

    def case_statement(self, node: Node) -> list[Cmd]:
        """Each branch runs from the start (or, after ``;&``, from where the one before ended)."""
        produced: list[Cmd] = []
        items = [c for c in node.children if c.type == "case_item"]
        produced += self.sequence([c for c in node.children if c.type != "case_item"])
        start = self.state()
        ends: list[tuple[_State, bool]] = [(start, True)]  # no pattern matches
        for item in items:
            produced += self.children(item)
            ends.append((self.state(), True))
            if any(c.type in _FALLS_THROUGH for c in item.children):
                self.restore(_meet(start, self.state()))
            else:
                self.restore(start)
        self.restore(_either(ends)[0])
        return produced

    def loop(self, node: Node) -> list[Cmd]:
        """A loop's body runs any number of times: walk it from where every round may start.

        The first round starts where the loop does; while a round ends elsewhere, the rounds
        start where both agree and the body is walked again (its commands and issues from the
        round before dropped). The loop ends where a round may start or its condition fail.
        """
        marks = len(self.produced_all), len(self.out.issues)
        head = self.state()
        produced: list[Cmd] = []
        stop, settled = head, False
        for _ in range(_MAX_ROUNDS):
            if self.rounds >= _ROUND_BUDGET:  # nested loops: bound the work
                break
            self.rounds += 1
            self.restore(head)
            produced, stop = self.round(node)
            after = _meet(head, self.state())
            if after == head:
                settled = True
                break
            head = after
            del self.produced_all[marks[0] :]
            del self.out.issues[marks[1] :]
        if not settled:  # the rounds keep changing: take everything as only known at run time
            self.restore(head)
            self.forget()
            self.cdpath = True
            head = self.state()
            produced, stop = self.round(node)
        self.restore(_meet(head, stop))
        self.branch = None
        return produced

    def round(self, node: Node) -> tuple[list[Cmd], _State]:
        """One round of a loop: its commands, and where the loop ends if it stops here."""
        if node.type == "while_statement":
            body = node.child_by_field_name("body")
            cond = [c for c in node.children if c.is_named and c != body and c.type != "comment"]
            produced = self.sequence(cond)
            success, failure, _, _ = self.outcome()
            go, stop = (
                (success, failure) if node.children[0].type == "while" else (failure, success)
            )
            self.restore(go)
            return produced + (self.walk(body) if body is not None else []), stop
        if node.type == "for_statement":
            var = node.child_by_field_name("variable")
            if var is not None:
                self.vars[_text(var)] = None
        else:
            for child in node.children:
                if child.type == "variable_assignment":
                    self.assign(child)
                elif child.type not in ("do_group", "compound_statement"):
                    self.arith(child, walk_subs=False)
        produced = self.children(node)
        return produced, self.state()

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
        for word in _dropped(node):
            if word != "-":
                self.cannot_parse(node)
            cmd.argv.append(word)
        cmd.sub_names = tuple(self.sub_names)
        cmd.fails_line = _fails_line(node)
        self.sub_names = saved
        self.add(cmd)
        self.branch = None
        self.follow_cd(cmd)
        return [cmd]

    def follow_cd(self, cmd: Cmd) -> None:
        """The directory after ``cd``, ``pushd`` or ``popd``, and ``$OLDPWD`` as bash sets it.

        ``cd -`` goes to ``$OLDPWD``, known only when this line set it. ``popd`` and ``pushd``
        without a directory or with ``+N``/``-N`` go to a stack keel does not keep: unknown;
        ``-n`` changes only the stack. Two operands are an error in bash 5 (older ones take
        the first), and so is an option ``cd`` does not have: unknown.

        So do ``builtin cd``, ``command cd``, ``time cd`` and ``eval 'cd ..'`` (its text is
        parsed here), and ``source FILE`` when keel can read FILE (``sourced``); a dynamic
        ``eval`` or a dynamic command name run what keel does not see. A ``cd`` may fail:
        when its directory is not there now (``probe``) or a redirect before it may fail, what
        follows runs where both ways agree.
        """
        reserved = not cmd.assigns and not cmd.redirects and cmd.heredoc is None
        argv = _in_shell(cmd.argv, reserved=reserved)
        if not argv:
            return
        name = argv[0]
        if name is None:
            self.forget()
            return
        if name in ("source", "."):
            self.source(cmd, argv[1:])
            return
        if name == "exit":
            now = self.state()
            self.settle(now, now, False, False)  # nothing after it runs in this shell
            return
        if name == "eval":
            self.eval_text(argv[1:], cmd)
            return
        if name not in _DIR_BUILTINS or self.cwd is None:
            return
        options, operands = _cd_words(argv[1:])
        if name != "cd" and any("n" in o for o in options):
            return
        bad_option = name == "cd" and any(set(o[1:]) - _CD_FLAGS for o in options)
        if name == "popd" or len(operands) > 1 or bad_option:
            self.cwd = None
            return
        if name == "pushd" and (
            not operands or any(re.match(_STACK_ROTATION, w or "") for w in [*options, *operands])
        ):
            self.cwd = None
            return
        before = self.state()
        self.vars["OLDPWD"], self.cwd = self.cwd, self.cd_target(cmd, operands)
        fails = not self.enterable(self.cwd) or _may_fail(cmd.redirects)
        self.settle(self.state(), before, True, fails)

    def enterable(self, path: str | None) -> bool:
        """``cd PATH`` succeeds: a directory this process may enter (any, without ``probe``)."""
        if path is None:
            return False
        return not self.out.probe or (os.path.isdir(path) and os.access(path, os.X_OK))

    def source(self, cmd: Cmd, args: list[str | None]) -> None:
        """``source FILE``: the shell as FILE's text leaves it, or only known at run time."""
        text = self.sourced(cmd, args[0] if args else None)
        if text is None:
            self.forget()
            return
        sub = self.nested(text, sources=self.out.sources + 1)
        cwd, vars_, _, _ = sub.end
        spoilt = any(c.name in _SOURCE_SPOILERS for c in sub.cmds)
        if cwd is None or spoilt or "HOME" in vars_ or any(k != "env" for k, _ in sub.issues):
            self.forget()
            return
        self.adopt(sub.end)

    def nested(self, text: str, *, sources: int, fresh: bool = True) -> Parsed:
        """``text`` run in this shell (``source``, ``eval``), parsed from where it stands."""
        return parse(
            text,
            cwd=self.cwd,
            home=self.home,
            depth=self.depth + 1,
            cdpath=self.cdpath,
            probe=self.out.probe,
            root=self.out.root,
            sources=sources,
            fresh=fresh,
        )

    def adopt(self, end: _State) -> None:
        """Take over the directory and variables nested text left."""
        cwd, vars_, int_vars, cdpath = end
        self.cwd = cwd
        self.vars.update(vars_)
        self.int_vars |= int_vars
        self.cdpath = self.cdpath or cdpath

    def sourced(self, cmd: Cmd, name: str | None) -> str | None:
        """The text ``source NAME`` runs, if keel can know it now (``None``: it cannot).

        NAME must name (with a ``/``: a bare name is looked up in ``$PATH`` first) a regular
        file inside the workspace, of at most ``MAX_SOURCE_BYTES`` of UTF-8, that nothing
        earlier on the line can have written (``unwritten``), at most ``MAX_SOURCE_DEPTH``
        ``source`` commands deep.
        """
        root = self.out.root
        if root is None or self.cwd is None or name is None or "/" not in name:
            return None
        if name.startswith("-") or self.out.sources >= MAX_SOURCE_DEPTH:
            return None
        if not self.unwritten(cmd):
            return None
        lexical = os.path.normpath(os.path.join(self.cwd, name))
        real = os.path.realpath(lexical)
        if not (inside(lexical, root) and inside(real, os.path.realpath(root))):
            return None
        try:
            if not os.path.isfile(real) or os.path.getsize(real) > MAX_SOURCE_BYTES:
                return None
            with open(real, "rb") as f:
                return f.read(MAX_SOURCE_BYTES + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def unwritten(self, cmd: Cmd) -> bool:
        """Nothing before ``cmd`` on the line can have written a file, nor ``cmd``'s redirects.

        Only ``_INERT`` commands without a writing redirect ran before, and nothing keel could
        not read (an issue other than an environment variable). Nor a loop: each round may
        write, and a file read per round of nested loops would multiply the work.
        """
        if not self.out.fresh or self.rounds or _writes(cmd.redirects):
            return False
        if any(kind != "env" for kind, _ in self.out.issues):
            return False
        for earlier in self.produced_all:
            if earlier is cmd:
                break
            if earlier.name not in _INERT or _writes(earlier.redirects):
                return False
        return True

    def eval_text(self, words: list[str | None], cmd: Cmd) -> None:
        """``eval WORDS`` runs their text in this shell: the state it leaves is the line's."""
        if any(w is None for w in words):
            self.forget()
            return
        text = " ".join(w for w in words if w is not None)
        self.adopt(self.nested(text, sources=self.out.sources, fresh=self.unwritten(cmd)).end)

    def cd_target(self, cmd: Cmd, operands: list[str | None]) -> str | None:
        """Where ``cd OPERAND`` goes from the current directory (``None``: unknown)."""
        if not operands:
            return self.home
        target = operands[0]
        if target == "-":
            prefixed = [value for var, value in cmd.assigns if var == "OLDPWD"]
            target = prefixed[-1] if prefixed else self.vars.get("OLDPWD")
            return None if target is None else resolve_dir(self.cwd, target, self.home)
        cdpath = self.cdpath or any(var == "CDPATH" for var, _ in cmd.assigns)
        relative = target is not None and not target.startswith(("/", "./", "../", "~"))
        if cdpath and relative and target not in (".", ".."):
            return None  # CDPATH may take it anywhere
        return resolve_dir(self.cwd, target, self.home)

    def redirected(self, node: Node) -> list[Cmd]:
        """A statement with redirects; if one may fail, the statement may not run."""
        regrouped = self.regroup(node, lambda: self.redirected(node))
        if regrouped is not None:
            return regrouped
        before = self.state()
        body = node.child_by_field_name("body")
        produced: list[Cmd] = []
        if body is not None:
            produced = self.walk(body)
        success, failure, can_succeed, can_fail = self.outcome()
        target = produced or [self.add(Cmd([], self.cwd))]
        known = len(target[-1].redirects)
        for child in node.children:
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.redirect(child, target)
            elif child.type == "ERROR":
                self.walk(child)
        if any(c.type == "heredoc_redirect" and _continues(c) for c in node.children):
            self.branch = None  # ``cat <<EOF && cd a``: the line went on inside the here-doc
        elif _may_fail(target[-1].redirects[known:]):
            failure, _ = _either([(failure, can_fail), (before, True)])
            self.settle(success, failure, can_succeed, True)
        else:
            self.branch = success, failure, can_succeed, can_fail
        if _sources(target[-1]) and _writes(target[-1].redirects[known:]):
            self.forget()  # ``source f > f``: the redirect empties f before it is read
            self.branch = None
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

    def misread(self, node: Node) -> Node | None:
        """The list tree-sitter put at the head of a redirect or a pipeline meant for its end.

        tree-sitter reads ``a && b 2>&1 | c`` as ``(a && b 2>&1) | c`` and ``a && b > f`` as
        ``(a && b) > f``; bash reads ``a && (b 2>&1 | c)`` and ``a && (b > f)``.
        """
        while True:
            node = self.swap.get(_key(node), node)
            if node.type == "pipeline" and node.named_children:
                node = node.named_children[0]
            elif node.type == "redirected_statement":
                body = node.child_by_field_name("body")
                if body is None:
                    return None
                body = self.swap.get(_key(body), body)
                if body.type == "list" and _operands(body):
                    return body
                node = body
            else:
                return None

    def regroup(self, node: Node, again: Callable[[], list[Cmd]]) -> list[Cmd] | None:
        """Walk a misread ``node`` as bash runs it (``None``: ``node`` is not misread).

        The list's left operand runs first, in this shell; its right operand, not the list,
        heads the pipeline or takes the redirect (``again`` walks ``node`` that way).
        """
        listed = self.misread(node)
        if listed is None:
            return None

        def last(right: Node) -> list[Cmd]:
            self.swap[_key(listed)] = right
            try:
                return again()
            finally:
                del self.swap[_key(listed)]

        return self.and_or(listed, last=last)

    def pipeline(self, node: Node) -> list[Cmd]:
        regrouped = self.regroup(node, lambda: self.pipeline(node))
        if regrouped is not None:
            return regrouped
        produced: list[Cmd] = []
        names: list[str] = []
        stages = [c for c in node.children if c.is_named]
        for k, child in enumerate(stages):
            saved = self.state()
            stage = self.walk(child)
            if k + 1 < len(stages):
                self.restore(saved)  # each stage runs in a subshell
            else:
                self.join(saved)  # the last one too, unless ``shopt -s lastpipe``
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
        saved = self.state()
        produced = self.walk(body) if body is not None else []
        self.join(saved)  # the body runs where (and if) the function is called
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
    """Append ``cmd`` and, for wrappers, the command(s) it runs, recursively.

    A wrapper named by a path outside the system's bin directories (``./nice``, which the
    agent may have written) is judged as its own command too: only its inner command was.
    """
    try:
        _expand_wrapper(cmd, out, home, depth)
    finally:
        name = cmd.name or ""
        if cmd.is_wrapper and "/" in name and not _system_bin(name):
            cmd.is_wrapper = False


def _system_bin(name: str) -> bool:
    """``name`` is a program in one of the system's bin directories (``/usr/bin/nice``)."""
    return any(name.startswith(p) and "/" not in name[len(p) :] for p in STD_BIN)


def _expand_wrapper(cmd: Cmd, out: Parsed, home: str, depth: int) -> None:
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
        if a.startswith("--replace"):
            replace = a.split("=", 1)[1] if "=" in a else "{}"
        elif a.startswith(("-I", "-i")):
            replace = a[2:] or "{}"  # ``-IR``: all of the rest, ``=`` included
        elif a.startswith("--arg-file="):
            cmd.redirects.append(("<", a.split("=", 1)[1]))
        elif a.startswith("-a"):
            cmd.redirects.append(("<", a[2:]))  # ``-aFILE``: all of the rest, ``=`` included
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
    earlier = [c for c in out.cmds if c is not cmd]
    sub = parse(
        text,
        cwd=cmd.cwd,
        home=home,
        depth=depth + 1,
        cdpath=out.cdpath,
        probe=out.probe,
        root=out.root,
        sources=out.sources,
        fresh=out.fresh and all(_inert(c) for c in earlier),
    )
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
