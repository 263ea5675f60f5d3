"""``make mutate``'s test map by line: a mutant runs only the tests that run its statement.

mutmut maps tests to mutants by function: every mutant of ``judge_command`` runs the ~1,300
tests that call it, and a mutant that survives pays for all of them (most of a run's time).
A test that never executes the mutated statement cannot tell the mutant from the original
(the run is identical up to the first time it does), so ``make mutate`` records which test
runs each line, in the coverage pass mutmut makes anyway (``mutate_only_covered_lines``):

- each test is a coverage context (``C`` + node id while it runs, ``S`` + node id in its
  setup and teardown). A line run in a setup or teardown is credited to every test of that
  file: a module-scoped fixture is built in the first test's setup and used by the rest.
- caches are emptied before each test (``functools`` caches and the module-level containers
  the mutated modules create empty, such as ``_TIERS``): a memo filled by the first test
  would credit its lines to that test alone, while every later test uses what it holds.
- a mutant's lines are the statement it changes, taken from the original source with
  ``ast``: a simple statement whole, a compound one's header (``if`` test, ``for`` target and
  iterable, ``except`` clause, ``case`` pattern). When any of them also ran at import (a
  default value, a module constant) or no test ran them, or the mutant cannot be placed, the
  mutant keeps mutmut's tests for its function.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

CALL = "C"
SETUP = "S"
MAP_FILE = "tests-by-line.json"  # in mutants/
MUTANT_FILE = "lines-by-mutant.json"  # in mutants/
BASETEMP = Path(tempfile.gettempdir()) / "keel-mutate"  # the mutant runs' pytest directories
_MARK = "__mutmut_"

Lines = dict[str, list[int]]


def module_path(mutant: str) -> str:
    """``keel.policy._core.x_f__mutmut_3`` -> ``src/keel/policy/_core.py``."""
    module = mutant.rpartition(".x")[0]
    return "src/" + module.replace(".", "/") + ".py"


def copy_name(mutant: str) -> str:
    """``keel.policy._core.xǁCǁm__mutmut_3`` -> ``xǁCǁm__mutmut_3`` (its name in the file)."""
    return "x" + mutant.rpartition(".x")[2]


def memo_names(source: str) -> list[str]:
    """Module-level containers ``source`` creates empty (``_TIERS: dict[...] = {}``): memos."""
    found: list[str] = []
    for node in ast.parse(source).body:
        target, value = None, None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if not isinstance(target, ast.Name) or value is None:
            continue
        empty = (isinstance(value, ast.Dict | ast.List | ast.Set) and not _items(value)) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in {"dict", "list", "set"}
            and not value.args
            and not value.keywords
        )
        if empty:
            found.append(target.id)
    return found


def _items(node: ast.Dict | ast.List | ast.Set) -> list[Any]:
    return list(node.keys) if isinstance(node, ast.Dict) else list(node.elts)


class Recorder:
    """A pytest plugin for the coverage pass: one coverage context per test and phase."""

    def __init__(self, cov: Any, memos: dict[str, list[str]]) -> None:
        self.cov = cov
        self.memos = memos
        self.tests: list[str] = []
        self.took: dict[str, float] = {}

    def empty_caches(self) -> None:
        """Empty the mutated modules' memos and their and keel's ``functools`` caches."""
        for name, module in list(sys.modules.items()):
            ours = name in self.memos or name == "keel" or name.startswith("keel.")
            if module is None or not ours:
                continue
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()
            for memo in self.memos.get(name, ()):
                held = getattr(module, memo, None)
                if isinstance(held, dict | list | set):
                    held.clear()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        """Note each test run, in order."""
        self.tests.append(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Add up each test's time, setup and teardown included (under coverage: slower)."""
        self.took[report.nodeid] = self.took.get(report.nodeid, 0.0) + report.duration

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        """A test's setup: caches emptied, its lines credited to the test's whole file."""
        self.empty_caches()
        self.cov.switch_context(SETUP + item.nodeid)
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """The test itself: its lines credited to it."""
        self.cov.switch_context(CALL + item.nodeid)
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        """A test's teardown: like its setup (a module fixture ends in the last one's)."""
        self.cov.switch_context(SETUP + item.nodeid)
        yield


def tests_by_line(
    contexts_by_line: dict[int, list[str]], tests: list[str]
) -> tuple[dict[int, list[int]], list[int]]:
    """One file's lines -> the indexes (in ``tests``) of the tests that ran them.

    Also returns the lines run outside any test (at import or collection).
    """
    index = {test: i for i, test in enumerate(tests)}
    of_file: dict[str, list[int]] = defaultdict(list)
    for i, test in enumerate(tests):
        of_file[test.partition("::")[0]].append(i)
    found: dict[int, list[int]] = {}
    imported: list[int] = []
    for line, contexts in contexts_by_line.items():
        ran: set[int] = set()
        for context in contexts:
            kind, test = context[:1], context[1:]
            if kind == CALL and test in index:
                ran.add(index[test])
            elif kind == SETUP and test in index:
                ran.update(of_file[test.partition("::")[0]])
            elif not context:
                imported.append(line)
        found[line] = sorted(ran)
    return found, sorted(imported)


def write_map(
    data: Any,
    files: dict[str, str],
    recorder: Recorder,
    path: Path,
    sources: dict[str, str],
) -> None:
    """Write the map of ``data`` (coverage with contexts) in the lines of the source files.

    ``files``: measured (absolute) -> relative path; ``sources``: relative path -> source.
    """
    tests = recorder.tests
    lines: dict[str, dict[str, list[int]]] = {}
    imported: dict[str, list[int]] = {}
    data.set_query_contexts(None)
    for absolute, relative in files.items():
        found, outside = tests_by_line(data.contexts_by_lineno(absolute), tests)
        to_source = source_lines(Path(absolute).read_text(encoding="utf-8"), sources[relative])
        lines[relative] = {
            str(to_source[line]): ran for line, ran in found.items() if line in to_source
        }
        imported[relative] = sorted(to_source[line] for line in outside if line in to_source)
    took = [round(recorder.took.get(test, 0.0), 4) for test in tests]
    payload = {"tests": tests, "took": took, "lines": lines, "imported": imported}
    path.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")


def source_lines(measured: str, source: str) -> dict[int, int]:
    """Measured line -> source line: the same file, or one mutmut already mutated.

    A run that resumes measures ``mutants/src`` as the last run left it: every function
    became a trampoline and copies (mutmut does not copy a source file again unless it
    changed). The original copy (``x_f__mutmut_orig``) is what the tests run; its lines are
    the source function's, shifted.
    """
    if measured == source:
        return {i: i for i in range(1, source.count("\n") + 2)}
    tree = ast.parse(source)
    mapped: dict[int, int] = {}
    for node in ast.walk(ast.parse(measured)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        base, mark, suffix = node.name.rpartition(_MARK)
        original = _function_node(tree, base) if mark and suffix == "orig" else None
        if original is None:
            continue
        shift = original.lineno - node.lineno
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            mapped[line] = line + shift
    return mapped


# -- a mutant's statement ---------------------------------------------------------------


def _own_span(node: ast.AST) -> tuple[int, int] | None:
    """The lines a statement runs itself: all of a simple one, a compound one's header."""
    start = getattr(node, "lineno", None)
    if start is None:
        return None
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.AST):
        return start, max(start, body[0].lineno - 1)  # type: ignore[attr-defined]
    return start, getattr(node, "end_lineno", start) or start


def statement_spans(tree: ast.AST) -> list[tuple[int, int]]:
    """Every statement's (and ``except``/``case`` clause's) own span, innermost last."""
    spans: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt | ast.ExceptHandler | ast.match_case):
            if isinstance(node, ast.match_case):
                start = node.pattern.lineno
                span = (start, max(start, node.body[0].lineno - 1))
            else:
                span = _own_span(node)
            if span is not None:
                spans.append(span)
    return spans


def statement_of(line: int, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The narrowest own span holding ``line``."""
    holding = [s for s in spans if s[0] <= line <= s[1]]
    return min(holding, key=lambda s: s[1] - s[0]) if holding else None


def changed_lines(original: list[str], mutant: list[str]) -> list[int]:
    """0-based offsets in ``original`` of the lines ``mutant`` changes or removes.

    An insertion counts the original lines on both sides of it.
    """
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(a=original, b=mutant, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            changed.update(range(i1, i2))
        elif tag == "insert":
            changed.update(i for i in (i1 - 1, i1) if 0 <= i < len(original))
    return sorted(changed)


def _function_node(tree: ast.Module, base: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The source function a copy's base name (``x_f``, ``xǁCǁm``) stands for."""
    if base.startswith("xǁ"):
        _, cls, name = base.split("ǁ", 2)
        scopes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        body = scopes[0].body if scopes else []
    else:
        name, body = base[2:], tree.body
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    return None


def _from_def(lines: list[str], name: str, span: tuple[int, int]) -> list[str]:
    """A copy's lines from its ``def`` line (mutmut's spans start at the blank lines before)."""
    start, end = span
    for i in range(start - 1, end):
        if f"def {name}(" in lines[i]:
            return lines[i:end]
    return []


def mutant_lines(
    source: str, mutated: str, spans: dict[str, tuple[int, int]]
) -> dict[str, list[int] | None]:
    """Each mutant copy in ``mutated`` -> the source lines of the statement it changes.

    ``None`` when it cannot be placed (the copies differ in length, the original copy does
    not match the source function, the change is outside any statement).
    """
    tree = ast.parse(source)
    src_lines = source.splitlines()
    lines = mutated.splitlines()
    statements = statement_spans(tree)
    found: dict[str, list[int] | None] = {}
    for name, span in spans.items():
        base, _, suffix = name.rpartition(_MARK)
        if suffix == "orig" or base + _MARK + "orig" not in spans:
            continue
        original = _from_def(lines, base + _MARK + "orig", spans[base + _MARK + "orig"])
        node = _function_node(tree, base)
        found[name] = None
        if node is None or src_lines[node.lineno : node.lineno + len(original) - 1] != original[1:]:
            continue
        placed: set[int] = set()
        mine = _from_def(lines, name, span)
        mine[:1] = [line.replace(name, base + _MARK + "orig") for line in mine[:1]]
        for offset in changed_lines(original, mine):
            span = statement_of(node.lineno + offset, statements)
            if span is None:
                placed = set()
                break
            placed.update(range(span[0], span[1] + 1))
        found[name] = sorted(placed) or None
    return found


def write_mutant_lines(root: Path, relative_files: Iterable[str]) -> None:
    """Write ``mutants/lines-by-mutant.json`` for the mutated files (cwd-free: ``root``)."""
    found: dict[str, list[int] | None] = {}
    for relative in relative_files:
        spans_path = root / "mutants" / (relative + ".spans")
        if not spans_path.is_file():
            continue
        spans = {k: (v[0], v[1]) for k, v in json.loads(spans_path.read_text())["spans"].items()}
        source = (root / relative).read_text(encoding="utf-8")
        mutated = (root / "mutants" / relative).read_text(encoding="utf-8")
        module = relative.removeprefix("src/").removesuffix(".py").replace("/", ".")
        for name, placed in mutant_lines(source, mutated, spans).items():
            found[f"{module}.{name}"] = placed
    (root / "mutants" / MUTANT_FILE).write_text(json.dumps(found), encoding="utf-8")


# -- in a mutant's run (cwd mutants/) --------------------------------------------------


_maps: list[tuple[dict[str, Any], dict[str, list[int] | None]]] = []


def _loaded() -> tuple[dict[str, Any], dict[str, list[int] | None]] | None:
    """Both maps, read once from the cwd (``mutants/``); ``None`` (and read again) until then."""
    if not _maps:
        try:
            by_line = json.loads(Path(MAP_FILE).read_text(encoding="utf-8"))
            by_mutant = json.loads(Path(MUTANT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        _maps.append((by_line, by_mutant))
    return _maps[0]


def tests_for(mutant: str) -> set[str] | None:
    """The tests that ran ``mutant``'s statement, or ``None``: keep mutmut's (see above)."""
    loaded = _loaded()
    if loaded is None:
        return None
    by_line, by_mutant = loaded
    placed = by_mutant.get(mutant)
    relative = module_path(mutant)
    lines = by_line["lines"].get(relative)
    if not placed or lines is None:
        return None
    if set(placed) & set(by_line["imported"].get(relative, ())):
        return None
    ran: set[int] = set()
    for line in placed:
        ran.update(lines.get(str(line), ()))
    return {by_line["tests"][i] for i in ran} or None


def durations() -> dict[str, float]:
    """Each test's time in the coverage pass (setup, call, teardown); empty if unknown."""
    loaded = _loaded()
    if loaded is None:
        return {}
    by_line = loaded[0]
    if "by_test" not in by_line:
        took = by_line.get("took", [])
        by_line["by_test"] = dict(zip(by_line["tests"], took, strict=False))
    return by_line["by_test"]


def seconds(tests: Iterable[str]) -> float | None:
    """How long ``tests`` took in the coverage pass (setup, call, teardown), if known."""
    took = durations()
    found = [took[t] for t in tests if t in took]
    return sum(found) if found else None


def slowest_in_file() -> dict[str, float]:
    """The longest test time of each test file: what its module fixtures may add to a test.

    A module-scoped fixture is built in the setup of whichever test of the file runs first;
    in the coverage pass that test's time holds it.
    """
    loaded = _loaded()
    if loaded is None:
        return {}
    by_line = loaded[0]
    if "slowest" not in by_line:
        slowest: dict[str, float] = {}
        for test, took in durations().items():
            path = test.partition("::")[0]
            slowest[path] = max(slowest.get(path, 0.0), took)
        by_line["slowest"] = slowest
    return by_line["slowest"]
