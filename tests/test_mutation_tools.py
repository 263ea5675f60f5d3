"""The pieces of ``make mutate`` that decide what counts: test narrowing and the type check."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _load(name: str) -> ModuleType:
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))  # as when run as scripts/NAME.py
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_a_mutant_runs_its_own_areas_tests_first_fastest_first() -> None:
    narrow = _load("mutmut_keel").narrow
    tests = [
        "tests/plan/test_plan_engine.py::test_slow",
        "tests/adapters/test_x.py::test_a",
        "tests/policy/test_b.py::test_slow",
        "tests/policy/test_b.py::test_fast",
        "tests/test_guard.py::test_g",
    ]
    took = {tests[0]: 2.5, tests[1]: 0.01, tests[2]: 0.3, tests[3]: 0.001, tests[4]: 0.2}
    assert narrow("keel.policy._shell.x_split__mutmut_3", tests, took) == [
        "tests/policy/test_b.py::test_fast",
        "tests/policy/test_b.py::test_slow",
        "tests/test_guard.py::test_g",
        "tests/adapters/test_x.py::test_a",
    ]


def test_narrowing_never_leaves_a_mutant_without_tests() -> None:
    narrow = _load("mutmut_keel").narrow
    only_elsewhere = ["tests/plan/test_plan_engine.py::test_slow"]
    assert narrow("keel.policy._paths.x_f__mutmut_1", only_elsewhere, {}) == only_elsewhere
    assert narrow("keel.unlisted.x_f__mutmut_1", only_elsewhere, {}) == only_elsewhere


def test_the_mutant_tests_are_rewritten_in_place_and_options_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin = _load("mutmut_keel")
    args = ["-x", "-q", "tests/plan/test_p.py::test_a", "tests/plan/test_q.py::test_b"]
    monkeypatch.setattr(plugin, "_durations", {"tests/plan/test_p.py::test_a": 1.0})
    monkeypatch.setenv("MUTANT_UNDER_TEST", "keel.plan._engine.x_run__mutmut_2")
    try:
        plugin.pytest_load_initial_conftests(None, None, args)
    finally:
        import gc

        gc.unfreeze()
    # pytest gets the files; the tests are picked by id after collection, in this order
    assert args == ["-x", "-q", "tests/plan/test_q.py", "tests/plan/test_p.py"]
    assert plugin._wanted == ["tests/plan/test_q.py::test_b", "tests/plan/test_p.py::test_a"]

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    deselected: list[object] = []

    class Hook:
        def pytest_deselected(self, items: list[object]) -> None:
            deselected.extend(items)

    class Config:
        hook = Hook()

    items = [Item("tests/plan/test_p.py::test_a"), Item("tests/plan/test_p.py::test_other"),
             Item("tests/plan/test_q.py::test_b")]  # fmt: skip
    plugin.pytest_collection_modifyitems(Config(), items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/plan/test_q.py::test_b",
        "tests/plan/test_p.py::test_a",
    ]
    assert [i.nodeid for i in deselected] == ["tests/plan/test_p.py::test_other"]  # type: ignore[attr-defined]
    plugin._wanted.clear()
    monkeypatch.setenv("MUTANT_UNDER_TEST", "stats")
    before = list(args)
    plugin.pytest_load_initial_conftests(None, None, args)
    assert args == before


def _diagnostic(line: int, message: str) -> dict[str, object]:
    return {"message": message, "range": {"start": {"line": line - 1, "character": 0}}}


def test_the_type_check_keeps_only_errors_the_mutation_made() -> None:
    typecheck = _load("mutmut_typecheck")
    source = (
        "class C:\n"
        "    def xǁCǁf__mutmut_orig(self):\n"
        "        return self.a.b\n"
        "    def xǁCǁf__mutmut_1(self):\n"
        "        return self.a.b\n"
        "    def xǁCǁf__mutmut_2(self):\n"
        "        return None.b\n"
        "x = 1\n"
    )
    spans = typecheck.copies(source)
    assert [(c.suffix, c.start, c.end) for c in spans] == [("orig", 2, 3), ("1", 4, 5), ("2", 6, 7)]
    leaked = 'Cannot access attribute "b" for class "None"'
    errors = [
        _diagnostic(3, leaked),  # the original has it too: another mutant widened `a`
        _diagnostic(5, leaked),  # so mutant 1 is not caught by it
        _diagnostic(7, "Cannot access attribute b of None literal"),  # mutant 2's own
        _diagnostic(8, "outside every copy"),
    ]
    kept = typecheck.own_errors(errors, spans)
    assert kept == [errors[2]]


def test_the_report_lists_every_survivor_with_its_reason_or_says_it_has_none(
    tmp_path: Path,
) -> None:
    score = _load("mutation_score")
    codes = {
        "keel.a.x_f__mutmut_1": 1,
        "keel.a.x_f__mutmut_2": 37,
        "keel.a.x_f__mutmut_3": 0,
        "keel.b.x_g__mutmut_1": 0,
        "keel.b.x_g__mutmut_2": 34,
    }
    explained = tmp_path / "eq.tsv"
    explained.write_text("# name<TAB>line<TAB>reason\n\nkeel.a.x_f__mutmut_3\t\tsame codec\n")
    report = tmp_path / "MUTATION.md"
    report.write_text("# Mutation testing\n\nprose\n\n<!-- mutation report -->\nold\n"
                      "<!-- end mutation report -->\n\nmore prose\n")  # fmt: skip
    score.write_report(report, score.report_block(codes, score.load_explained(explained)))
    text = report.read_text()
    assert text.startswith("# Mutation testing\n\nprose\n\n<!-- mutation report -->\n")
    assert text.endswith("<!-- end mutation report -->\n\nmore prose\n")
    assert "old" not in text
    assert "mutation score: 2/4 killed (50.0%)" in text
    assert "caught by the type check (pyright): 1; killed by a test or a timeout: 1" in text
    assert "- `keel.a.x_f__mutmut_3` (survived): same codec" in text
    assert "- `keel.b.x_g__mutmut_1` (survived): **not explained**" in text
    assert "**not explained: 1**" in text
    assert "| keel.a | 2/3 killed (66.7%) |" in text


def test_an_explained_line_without_a_reason_is_refused(tmp_path: Path) -> None:
    score = _load("mutation_score")
    bad = tmp_path / "eq.tsv"
    bad.write_text("keel.a.x_f__mutmut_3\tno reason\n")
    with pytest.raises(SystemExit, match=r"eq.tsv:1: expected 'name<TAB>mutated line<TAB>reason'"):
        score.load_explained(bad)


def test_an_explanation_written_for_another_mutation_is_not_used(tmp_path: Path) -> None:
    score = _load("mutation_score")
    module = tmp_path / "mutants" / "src" / "keel" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "def x_f__mutmut_orig(a):\n    b = a.lower()\n    return b\n"
        "def x_f__mutmut_1(a):\n    b = a.upper()\n    return b\n"
        "def x_f__mutmut_2(a):\n    b = a.lower()\n    return None\n"
    )
    assert score.mutated_line(tmp_path, "keel.m.x_f__mutmut_1") == "b = a.upper()"
    assert score.mutated_line(tmp_path, "keel.m.x_f__mutmut_2") == "return None"
    explained = {
        "keel.m.x_f__mutmut_1": score.Explained("case does not matter here", "b = a.upper()"),
        "keel.m.x_f__mutmut_2": score.Explained("was about the case", "b = a.upper()"),
    }
    block = score.report_block(
        {"keel.m.x_f__mutmut_1": 0, "keel.m.x_f__mutmut_2": 0}, explained, tmp_path
    )
    assert "- `keel.m.x_f__mutmut_1` (survived): case does not matter here" in block
    assert "- `keel.m.x_f__mutmut_2` (survived): **not explained**" in block


def test_a_stopped_run_says_how_many_mutants_were_not_checked() -> None:
    score = _load("mutation_score")
    codes = {"keel.a.x_f__mutmut_1": 1, "keel.a.x_f__mutmut_2": None, "keel.a.x_f__mutmut_3": 0}
    block = score.report_block(codes, {})
    assert "mutation score: 1/3 killed (33.3%)" in block
    assert "**The run stopped with 1 mutants not checked**" in block
    assert "Over the 2 checked: 1/2 killed (50.0%)" in block
    assert "x_f__mutmut_2" not in block  # not checked is not listed as a survivor
    assert "- `keel.a.x_f__mutmut_3` (survived): **not explained**" in block
