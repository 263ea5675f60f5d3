"""``CommandFacts``: what one parse of a shell command line tells everyone who asks.

The policy's parser (``keel.policy._shell``) is keel's only reader of command lines. The
guard asks it whether a line is read-only (to skip a checkpoint); the monitor asks whether it
changes files, which files, whether it runs the tests and whether it ran a ``[gates]`` command
so that the gate's exit status is the line's. ``read_facts`` answers all of these from the one
parse the engine keeps of the line it judged last (``Engine._parse``), and answers
conservatively (not read-only, changes files, runs nothing) when it cannot.

Standard library only, and nothing but ``keel.core.frozen`` at run time: this is on the hook path.
"""

from __future__ import annotations

import functools
import os

from keel.core.frozen import Frozen
from keel.policy._rules import normalise
from keel.policy._shell import parse

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from keel.policy._core import Engine
    from keel.policy._shell import Cmd

    Argv = tuple[str | None, ...]

_TEST_PROGRAMS = frozenset(
    {"pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest"}
)
_PACKAGE_RUNNERS = frozenset({"npm", "yarn", "pnpm", "bun"})
_TEST_GOALS = {
    "go": ("test",), "cargo": ("test",), "mvn": ("test",), "gradle": ("test",),
    "gradlew": ("test",), "make": ("test", "check"),
}  # fmt: skip
_LAUNCHERS = frozenset({"npx", "bunx", "pnpx"})
_RUN_LAUNCHERS = frozenset({"uv", "poetry", "pipenv", "pdm", "rye"})
_PY_TEST_MODULES = frozenset({"pytest", "unittest"})


class CommandFacts(Frozen):
    """What a shell command line does, as far as the policy's parser can tell."""

    __slots__ = ("deciding", "mutates", "read_only", "test_run", "words", "written")
    read_only: bool
    """Exactly ``Policy.is_read_only``: every simple command certainly changes no file."""
    written: tuple[str, ...]
    """Absolute paths of the files it writes or deletes (literal targets only)."""
    test_run: bool
    """Some simple command runs a test suite (pytest, npm test, go test...)."""
    mutates: bool
    """It may change files: not read-only, and some command is neither read-only nor a test
    run, or it writes a file."""
    words: tuple[tuple[str, ...], ...]
    """The argv of each simple command, wrappers and what they run (dynamic words as "")."""
    deciding: tuple[Argv, ...]
    """The argv of each command (not a wrapper) whose failure is the line's failure."""

    def __init__(
        self,
        read_only: bool,
        written: tuple[str, ...],
        test_run: bool,
        mutates: bool,
        words: tuple[tuple[str, ...], ...],
        deciding: tuple[Argv, ...],
    ) -> None:
        """The facts of one line; build them with ``Policy.command_facts``."""
        self._init(
            read_only=read_only,
            written=written,
            test_run=test_run,
            mutates=mutates,
            words=words,
            deciding=deciding,
        )

    def runs(self, gate: str) -> bool:
        """True if the line ran ``gate`` so that the gate's exit status is the line's.

        ``cd src && pytest -q`` and ``pytest -q 2>&1`` run the gate ``pytest -q``; ``pytest -q
        || true``, ``pytest -q | tail``, ``pytest -q; echo`` and ``pytest -q tests/one.py`` do
        not. A gate of several commands runs when each of them does, in order.
        """
        wanted = gate_commands(gate)
        if not wanted:
            return False
        found = 0
        for argv in self.deciding:
            if argv == wanted[found]:
                found += 1
                if found == len(wanted):
                    return True
        return False


CONSERVATIVE = CommandFacts(False, (), False, True, (), ())
"""The answer when a line cannot be read: not read-only, may change files, runs nothing."""


def read_facts(engine: Engine, line: str, cwd: str | None) -> CommandFacts:
    """The facts of ``line`` run in ``cwd``, from the engine's one parse of it.

    Any error gives ``CONSERVATIVE``.
    """
    try:
        return _read(engine, line, cwd)
    except Exception:
        return CONSERVATIVE


def _read(engine: Engine, line: str, cwd: str | None) -> CommandFacts:
    if engine.bad_input(line, "command") is not None:
        return CONSERVATIVE
    read_only = engine.is_read_only(line, cwd)
    if not line.strip():
        return CommandFacts(read_only, (), False, False, (), ())
    written = tuple(engine.written_paths(line, cwd))
    if engine.contained:  # a contained command's /tmp is its own, gone when it ends
        written = tuple(p for p in written if not (p == "/tmp" or p.startswith("/tmp/")))
    parsed = engine._parse(line, cwd)  # the parse is_read_only made: the engine keeps it
    cmds = parsed.cmds
    words = tuple(tuple(w or "" for w in c.argv) for c in cmds if c.argv)
    if parsed.issues:
        return CommandFacts(False, written, False, True, words, ())
    tests = [_runs_tests(c.argv) for c in cmds]
    changes = any(
        not (c.is_wrapper or test or engine._reads_only(c))
        for c, test in zip(cmds, tests, strict=True)
    )
    return CommandFacts(
        read_only,
        written,
        any(tests),
        not read_only and (changes or bool(written)),
        words,
        tuple(tuple(c.argv) for c in _effective(cmds) if c.fails_line),
    )


@functools.lru_cache(maxsize=64)
def gate_commands(gate: str) -> tuple[Argv, ...]:
    """The argv of each command of a ``[gates]`` entry, read by the same parser; () if unread."""
    try:
        parsed = parse(gate, cwd=None, home=os.path.expanduser("~"))
    except Exception:
        return ()
    if parsed.issues:
        return ()
    return tuple(tuple(c.argv) for c in _effective(parsed.cmds))


def _effective(cmds: list[Cmd]) -> list[Cmd]:
    """The commands that do the work: not wrappers (``bash -c``, ``env``), not bare redirects."""
    return [c for c in cmds if not c.is_wrapper and c.name != ""]


def _runs_tests(argv: list[str | None]) -> bool:
    """True if this argv runs a test suite; judged on the words, never on the line's text."""
    if not argv or argv[0] is None:
        return False
    name = normalise(argv[0]).rsplit("/", 1)[-1]
    args = argv[1:]
    first = _first_word(args)
    if name in _TEST_PROGRAMS:
        return True
    if name == "python":
        return _python_module(args) in _PY_TEST_MODULES
    if name == "coverage" and first == "run":
        return _python_module(args[args.index("run") + 1 :]) in _PY_TEST_MODULES
    if name in _PACKAGE_RUNNERS:
        script = args[1] if first == "run" and len(args) > 1 else first
        return _is_test_script(script) or first in _TEST_PROGRAMS
    if name in _TEST_GOALS:
        goals = _TEST_GOALS[name]
        return first in goals if name in ("go", "cargo") else any(a in goals for a in args)
    if name in _LAUNCHERS:
        return _runs_tests(args[_skip_flags(args) :])
    if name in _RUN_LAUNCHERS and first == "run":
        rest = args[args.index("run") + 1 :]
        return _runs_tests(rest[_skip_flags(rest) :])
    return False


def _first_word(args: list[str | None]) -> str | None:
    """The first argument that is not an option (``cargo +nightly test`` -> ``test``)."""
    i = _skip_flags(args)
    return args[i] if i < len(args) else None


def _skip_flags(args: list[str | None]) -> int:
    for i, a in enumerate(args):
        if a is None or not a.startswith(("-", "+")):
            return i
    return len(args)


def _python_module(args: list[str | None]) -> str | None:
    """``M`` of ``python [flags] -m M``, else None."""
    for i, a in enumerate(args):
        if a == "-m":
            return args[i + 1] if i + 1 < len(args) else None
        if a is None or not a.startswith("-") or a == "-c":
            return None
    return None


def _is_test_script(script: str | None) -> bool:
    return script is not None and (script == "test" or script.startswith("test:"))
