"""The pieces of ``make mutate`` that decide what counts: test narrowing and the type check."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from _support import skip_or_fail

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
        "tests/hook/test_x.py::test_a",
        "tests/policy/test_b.py::test_slow",
        "tests/policy/test_b.py::test_fast",
        "tests/guard/test_guard.py::test_g",
    ]
    took = {tests[0]: 2.5, tests[1]: 0.01, tests[2]: 0.3, tests[3]: 0.001, tests[4]: 0.2}
    assert narrow("keel.policy._shell.x_split__mutmut_3", tests, took) == [
        "tests/policy/test_b.py::test_fast",
        "tests/policy/test_b.py::test_slow",
        "tests/guard/test_guard.py::test_g",
        "tests/hook/test_x.py::test_a",
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
    own = f"--basetemp={plugin.BASETEMP / str(os.getpid())}"  # its own, removed at the end
    assert args == ["-x", "-q", own, "tests/plan/test_q.py", "tests/plan/test_p.py"]
    plugin._basetemp[0].mkdir(parents=True, exist_ok=True)
    (plugin._basetemp[0] / "made-by-a-test").write_text("x")
    plugin.pytest_unconfigure(None)
    assert not plugin._basetemp[0].exists()
    plugin._basetemp.clear()
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


# -- the test map by line (scripts/mutmut_lines.py) -------------------------------------

_SOURCE = """\
_MEMO: dict[str, int] = {}
LIMIT = 3


def pick(op: str, n: int = LIMIT) -> int:
    match op:
        case "and":
            total = n + 1
            return total
        case _:
            return n - 1


class Box:
    def size(self, n: int) -> int:
        if n > 2:
            return call(
                n,
                2,
            )
        return 0
"""


def _mutated(*copies: tuple[str, str]) -> tuple[str, dict[str, tuple[int, int]]]:
    """A file laid out as mutmut writes it: two blank lines before each copy."""
    lines: list[str] = ["# trampolines"]
    spans: dict[str, tuple[int, int]] = {}
    for name, text in copies:
        start = len(lines) + 1
        lines += ["", "", *text.splitlines()]
        spans[name] = (start, len(lines))
    return "\n".join(lines) + "\n", spans


_PICK = _SOURCE.split("\n\n\n")[1]
_SIZE = "\n".join(_SOURCE.split("\n\n\n")[2].splitlines()[1:])


def test_a_mutant_is_placed_on_the_source_statement_it_changes() -> None:
    lines = _load("mutmut_lines")
    orig = _PICK.replace("def pick(", "def x_pick__mutmut_orig(")
    one = orig.replace("n + 1", "n - 1").replace("__mutmut_orig", "__mutmut_1")
    default = orig.replace("= LIMIT", "= None").replace("__mutmut_orig", "__mutmut_2")
    no_case = orig.replace(
        '        case "and":\n            total = n + 1\n            return total\n', ""
    )
    no_case = no_case.replace("__mutmut_orig", "__mutmut_3")
    case = orig.replace('case "and"', 'case "XXandXX"').replace("__mutmut_orig", "__mutmut_4")
    mutated, spans = _mutated(
        ("x_pick__mutmut_orig", orig), ("x_pick__mutmut_1", one),
        ("x_pick__mutmut_2", default), ("x_pick__mutmut_3", no_case),
        ("x_pick__mutmut_4", case),
    )  # fmt: skip
    placed = lines.mutant_lines(_SOURCE, mutated, spans)
    assert placed == {
        "x_pick__mutmut_1": [8],  # `total = n + 1`
        "x_pick__mutmut_2": [5],  # the `def` header: its default runs at import
        "x_pick__mutmut_3": [7, 8, 9],  # the `case` pattern and its body
        "x_pick__mutmut_4": [7],
    }


def test_a_method_mutant_in_a_multi_line_statement_takes_the_whole_statement() -> None:
    lines = _load("mutmut_lines")
    orig = _SIZE.replace("def size(", "def xǁBoxǁsize__mutmut_orig(")
    arg = orig.replace("                2,\n", "").replace("__mutmut_orig", "__mutmut_1")
    test = orig.replace("n > 2", "n >= 2").replace("__mutmut_orig", "__mutmut_2")
    mutated, spans = _mutated(
        ("xǁBoxǁsize__mutmut_orig", orig), ("xǁBoxǁsize__mutmut_1", arg),
        ("xǁBoxǁsize__mutmut_2", test),
    )  # fmt: skip
    placed = lines.mutant_lines(_SOURCE, mutated, spans)
    assert placed == {
        "xǁBoxǁsize__mutmut_1": [17, 18, 19, 20],  # all of `return call(...)`
        "xǁBoxǁsize__mutmut_2": [16],  # the `if` header only, not its body
    }


def test_a_copy_that_does_not_match_the_source_is_not_placed() -> None:
    lines = _load("mutmut_lines")
    orig = _PICK.replace("def pick(", "def x_pick__mutmut_orig(").replace("n - 1", "n - 2")
    one = orig.replace("n + 1", "n - 1").replace("__mutmut_orig", "__mutmut_1")
    mutated, spans = _mutated(("x_pick__mutmut_orig", orig), ("x_pick__mutmut_1", one))
    assert lines.mutant_lines(_SOURCE, mutated, spans) == {"x_pick__mutmut_1": None}


def test_memos_are_the_module_containers_created_empty() -> None:
    lines = _load("mutmut_lines")
    source = "A: dict[str, int] = {}\nB = []\nC = set()\nD = [1]\nE = dict(a=1)\nF = {'k': 1}\n"
    assert lines.memo_names(source) == ["A", "B", "C"]
    assert lines.memo_names(_SOURCE) == ["_MEMO"]


def test_lines_are_credited_to_the_test_that_ran_them_or_its_whole_file_from_a_fixture() -> None:
    lines = _load("mutmut_lines")
    tests = ["tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t3"]
    found, imported = lines.tests_by_line(
        {
            10: ["Ctests/a.py::t2"],
            11: ["Stests/a.py::t1", "Ctests/b.py::t3"],  # a fixture of a.py's first test
            12: ["", "Ctests/b.py::t3"],
            13: ["Ctests/gone.py::t9"],
        },
        tests,
    )
    assert found == {10: [1], 11: [0, 1, 2], 12: [2], 13: []}
    assert imported == [12]


_LIB = """\
_MEMO: dict[int, int] = {}
BUILT = 7


def memo(n):
    if n not in _MEMO:
        _MEMO[n] = n * 2
    return _MEMO[n]


def branch(n):
    if n > 0:
        return "pos"
    return "neg"


def shared():
    return "module fixture"
"""

_TESTS = """\
import pytest
import lib


@pytest.fixture(scope="module")
def built():
    return lib.shared()


def test_pos(built):
    assert lib.branch(1) == "pos" and lib.memo(2) == 4


def test_neg(built):
    assert lib.branch(-1) == "neg" and lib.memo(2) == 4


def test_other():
    assert lib.BUILT == 7
"""

_DRIVER = """\
import json, sys
from pathlib import Path
import coverage, pytest
sys.path[:0] = [sys.argv[1], "."]
import mutmut_lines as ml
lib = str(Path("lib.py").absolute())
cov = coverage.Coverage(data_file=None, include=[lib])
recorder = ml.Recorder(cov, {"lib": ml.memo_names(Path("lib.py").read_text())})
with cov.collect():
    code = pytest.main(["-q", "-p", "no:cacheprovider", "test_lib.py"], plugins=[recorder])
sources = {"src/lib.py": Path("lib.py").read_text()}
ml.write_map(cov.get_data(), {lib: "src/lib.py"}, recorder, Path(ml.MAP_FILE), sources)
Path(ml.MUTANT_FILE).write_text(json.dumps({
    "lib.x_memo__mutmut_1": [7], "lib.x_branch__mutmut_1": [13],
    "lib.x_shared__mutmut_1": [18], "lib.x_branch__mutmut_2": [11],
}))
print(json.dumps({name: sorted(ml.tests_for(name) or ["KEEP"]) for name in (
    "lib.x_memo__mutmut_1", "lib.x_branch__mutmut_1", "lib.x_shared__mutmut_1",
    "lib.x_branch__mutmut_2", "lib.x_branch__mutmut_9")}))
sys.exit(code)
"""


def test_a_real_coverage_pass_maps_each_line_to_the_tests_that_need_it(tmp_path: Path) -> None:
    """Real coverage.py and pytest: a memo's miss path counts for every test using the memo,
    a module fixture's lines for every test of its file, an import-time line for none."""
    import json
    import subprocess

    (tmp_path / "lib.py").write_text(_LIB)
    (tmp_path / "test_lib.py").write_text(_TESTS)
    (tmp_path / "driver.py").write_text(_DRIVER)
    done = subprocess.run(
        [sys.executable, "driver.py", str(SCRIPTS)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    picked = json.loads(done.stdout.strip().splitlines()[-1])
    both = ["test_lib.py::test_neg", "test_lib.py::test_pos"]
    assert picked == {
        "lib.x_memo__mutmut_1": both,  # filled by test_pos, emptied before test_neg
        "lib.x_branch__mutmut_1": ["test_lib.py::test_pos"],
        "lib.x_shared__mutmut_1": sorted([*both, "test_lib.py::test_other"]),
        "lib.x_branch__mutmut_2": ["KEEP"],  # `def branch` ran at import: mutmut's tests
        "lib.x_branch__mutmut_9": ["KEEP"],  # not placed
    }


def test_a_mutant_run_keeps_only_the_tests_that_ran_its_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin = _load("mutmut_keel")
    lines = _load("mutmut_lines")
    monkeypatch.setattr(lines, "tests_for", lambda mutant: {"tests/plan/test_q.py::test_b"})
    monkeypatch.setattr(plugin, "_durations", {})
    monkeypatch.setenv("MUTANT_UNDER_TEST", "keel.plan._engine.x_run__mutmut_2")
    args = ["-x", "tests/plan/test_p.py::test_a", "tests/plan/test_q.py::test_b"]
    try:
        plugin.pytest_load_initial_conftests(None, None, args)
    finally:
        import gc

        gc.unfreeze()
        plugin._wanted.clear()
    assert [a for a in args if "--basetemp" not in a] == ["-x", "tests/plan/test_q.py"]
    monkeypatch.setattr(lines, "tests_for", lambda mutant: {"tests/other.py::test_z"})
    args = ["-x", "tests/plan/test_p.py::test_a"]
    try:
        plugin.pytest_load_initial_conftests(None, None, args)
    finally:
        import gc

        gc.unfreeze()
        plugin._wanted.clear()
    assert [a for a in args if "--basetemp" not in a] == ["-x", "tests/plan/test_p.py"]


def test_a_resumed_run_maps_the_mutated_files_lines_back_to_the_source() -> None:
    """mutmut leaves ``mutants/src`` mutated: the tests run the original copies there."""
    lines = _load("mutmut_lines")
    orig = _PICK.replace("def pick(", "def x_pick__mutmut_orig(")
    one = orig.replace("n + 1", "n - 1").replace("__mutmut_orig", "__mutmut_1")
    mutated, spans = _mutated(("x_pick__mutmut_orig", orig), ("x_pick__mutmut_1", one))
    to_source = lines.source_lines(mutated, _SOURCE)
    start = spans["x_pick__mutmut_orig"][0] + 2  # after the two blank lines
    assert mutated.splitlines()[start + 2] == "            total = n + 1"
    assert to_source[start + 3] == 8  # the same statement in the source
    assert to_source[start] == 5  # the `def` line
    assert all(line < spans["x_pick__mutmut_1"][0] for line in to_source)  # mutants: not run
    assert lines.source_lines(_SOURCE, _SOURCE)[8] == 8


def test_a_mutant_run_that_loops_ends_as_a_timeout_soon_after_its_tests_time() -> None:
    """By effect: a process looping forever is ended with SIGXCPU (mutmut: timeout)."""
    import signal
    import subprocess

    loop = (
        "import mutmut_keel as m; m.TIME_FACTOR = 2.0; m.TIME_ALLOWANCE = 0.2; m.bound(0.1)\n"
        "while True: pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", loop], env={"PYTHONPATH": str(SCRIPTS)}, timeout=60, check=False
    )
    assert done.returncode == -signal.SIGXCPU
    quiet = "import mutmut_keel as m; m.bound(None); import time; time.sleep(0.5)"
    done = subprocess.run(
        [sys.executable, "-c", quiet], env={"PYTHONPATH": str(SCRIPTS)}, timeout=60, check=False
    )
    assert done.returncode == 0  # no map, no bound: mutmut's own limit stays


def test_the_time_of_a_mutants_tests_comes_from_the_coverage_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    lines = _load("mutmut_lines")
    (tmp_path / lines.MAP_FILE).write_text(
        json.dumps({"tests": ["a::t", "b::u"], "took": [0.5, 1.25], "lines": {}, "imported": {}})
    )
    (tmp_path / lines.MUTANT_FILE).write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(lines, "_maps", [])
    assert lines.seconds(["a::t", "b::u", "c::gone"]) == 1.75
    assert lines.seconds(["c::gone"]) is None


def test_the_type_check_runs_beside_the_stats_and_is_waited_for_when_read() -> None:
    import threading

    run = _load("mutmut_run")
    release = threading.Event()

    def work() -> dict[str, object]:
        release.wait(30)
        return {"keel.x.x_f__mutmut_1": "caught"}

    pending = run.PendingTypeCheck(work)
    assert pending._thread.is_alive()  # mutmut goes on with its stats meanwhile
    release.set()
    assert pending.get("keel.x.x_f__mutmut_1") == "caught"
    assert pending.get("keel.x.x_f__mutmut_2") is None and len(pending) == 1

    def broken() -> dict[str, object]:
        raise RuntimeError("pyright failed")

    with pytest.raises(RuntimeError, match="pyright failed"):
        run.PendingTypeCheck(broken).get("anything")


def test_a_mutant_run_of_passing_tests_passes(tmp_path: Path) -> None:
    """The plugin's own arguments must never fail a test: a mutant run's failure is a kill.

    (A base directory whose parent did not exist once failed every test's setup, and the
    run counted every mutant as killed.)
    """
    import subprocess

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_a(tmp_path):\n    (tmp_path / 'f').write_text('x')\n\n"
        "def test_b(tmp_path_factory):\n    assert tmp_path_factory.mktemp('d').is_dir()\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(SCRIPTS),
        "MUTANT_UNDER_TEST": "keel.x.x_f__mutmut_1",
        "TMPDIR": str(tmp_path / "tmp"),
    }
    (tmp_path / "tmp").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "mutmut_keel", "-p", "no:cacheprovider",
         "--rootdir=.", "tests/test_x.py::test_a", "tests/test_x.py::test_b"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert list((tmp_path / "tmp" / "keel-mutate").iterdir()) == []  # removed at the end


_SESSION_DRIVER = """
import json, os, sys
from mutmut.mutation.trampoline import set_mutant_under_test
from mutmut_session import SessionRunner

runner = SessionRunner()
sys.stdout = open(os.devnull, "w")  # as mutmut's forkserver warms up
runner.warm_up()
sys.stdout = sys.__stdout__
results = {"collected": sorted(runner._items)}
every = ["tests/test_x.py::test_writes", "tests/test_x.py::test_output",
         "tests/test_x.py::test_hangs_for_4", "tests/test_x.py::test_fails_for_2_and_3",
         "tests/test_y.py::test_slow_elsewhere"]
for n in (1, 2, 3, 4, 5, 6):
    mutant = f"keel.x.x_f__mutmut_{n}"
    pid = os.fork()
    if pid == 0:
        sys.stdout = sys.stderr = open(os.devnull, "w")
        set_mutant_under_test(mutant)
        try:
            code = runner.run_tests(mutant_name=mutant, tests=every)
        except BaseException:
            code = 255  # what mutmut's worker makes of it: a worker error, not a kill
        os._exit(code)
    results[mutant] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(results))
"""

_SESSION_TESTS = """
import os
import pytest

def mutant():
    return os.environ["MUTANT_UNDER_TEST"].rpartition("_")[2]

@pytest.fixture(scope="session")
def started():
    with open(os.environ["SESSIONS_LOG"], "a") as log:
        log.write(f"session {mutant()}\\n")

@pytest.fixture(autouse=True)
def ran(request, started):
    with open(os.environ["SESSIONS_LOG"], "a") as log:
        log.write(f"{mutant()} {request.node.name}\\n")

def test_writes(tmp_path):
    (tmp_path / "f").write_text("x")

def test_output(capsys):
    print("seen")
    assert capsys.readouterr().out == "seen\\n"

def test_hangs_for_4():
    while mutant() == "4":
        pass

def test_fails_for_2_and_3():
    assert mutant() not in ("2", "3")
"""


def test_mutant_runs_are_served_from_one_collected_session(tmp_path: Path) -> None:
    """The forkserver collects once; each mutant's fork runs its tests in that session.

    A passing mutant's run passes (fixtures, ``tmp_path``, captured output work in the
    fork) and a failing test kills its mutant; session fixtures are set up per mutant run
    (never in the forkserver, where no test runs); a test that killed a mutant runs first
    for the next mutant of the same function; a test that hangs is ended by its own bound
    (the run's bound is ~4,000 s here: one test took 1,000 s in the coverage pass); each
    run's base directory is removed and its time noted.
    """
    import signal
    import subprocess

    mutants = tmp_path / "mutants"
    (mutants / "tests").mkdir(parents=True)
    (mutants / "tests" / "test_x.py").write_text(_SESSION_TESTS)
    (mutants / "tests" / "test_y.py").write_text("def test_slow_elsewhere():\n    pass\n")
    (mutants / "tests" / "conftest.py").write_text(
        "import os\n\ndef pytest_unconfigure(config):\n"
        "    if os.environ.get('MUTANT_UNDER_TEST') == 'keel.x.x_f__mutmut_6':\n"
        "        raise RuntimeError('an error at exit, as a Popen left running makes')\n"
    )
    took = {"test_x.py::test_writes": 0.01, "test_x.py::test_output": 0.01,
            "test_x.py::test_hangs_for_4": 0.01, "test_x.py::test_fails_for_2_and_3": 0.01,
            "test_y.py::test_slow_elsewhere": 1000.0}  # fmt: skip
    (mutants / "tests-by-line.json").write_text(
        json.dumps({"tests": [f"tests/{t}" for t in took], "took": list(took.values()),
                    "lines": {}, "imported": {}})
    )  # fmt: skip
    (mutants / "lines-by-mutant.json").write_text("{}")
    (mutants / "src" / "keel").mkdir(parents=True)
    (mutants / "src" / "keel" / "x.py").write_text(
        "def x_f__mutmut_orig():\n    return 1\n\ndef x_f__mutmut_5():\n    return 2\n"
    )
    # the last run's killers: test_output killed this function's mutants then
    (mutants / "tests" / "mutation-killers.tsv").write_text(
        "keel.x.x_f\ttests/test_x.py::test_output\nkeel.x.x_g\ttests/test_x.py::test_writes\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "mutation-equivalent.tsv").write_text(
        "keel.x.x_f__mutmut_5\treturn 2\tan explained mutant: survives, no test runs\n"
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mutmut]\nsource_paths = ["src"]\n'
        'pytest_add_cli_args_test_selection = ["tests"]\n'
        'pytest_add_cli_args = ["--tb=no", "-p", "no:cacheprovider", "-p", "mutmut_keel"]\n'
    )
    (tmp_path / "tmp").mkdir()
    log = tmp_path / "sessions.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(SCRIPTS),
        "TMPDIR": str(tmp_path / "tmp"),
        "SESSIONS_LOG": str(log),
        "MUTANT_UNDER_TEST": "list_all_tests",
    }
    done = subprocess.run(
        [sys.executable, "-c", _SESSION_DRIVER],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["collected"] == [
        "tests/test_x.py::test_fails_for_2_and_3",
        "tests/test_x.py::test_hangs_for_4",
        "tests/test_x.py::test_output",
        "tests/test_x.py::test_writes",
        "tests/test_y.py::test_slow_elsewhere",
    ]
    # 6: its tests pass, and its run fails at unconfigure: killed, as a plain pytest run fails
    assert [results[f"keel.x.x_f__mutmut_{n}"] for n in (1, 2, 3, 4, 5, 6)] == [
        0, 1, 1, -signal.SIGXCPU, 0, 3
    ]  # fmt: skip
    ran = log.read_text().splitlines()
    assert ran == [
        # the last run's killer first (the seed), then the others fastest first
        "session 1", "1 test_output", "1 test_writes", "1 test_hangs_for_4",
        "1 test_fails_for_2_and_3",  # (test_y has no log)
        "session 2", "2 test_output", "2 test_writes", "2 test_hangs_for_4",
        "2 test_fails_for_2_and_3",
        "session 3", "3 test_fails_for_2_and_3",  # the test that killed mutant 2 first
        "session 4", "4 test_fails_for_2_and_3", "4 test_output", "4 test_writes",
        "4 test_hangs_for_4",
        "session 6", "6 test_fails_for_2_and_3", "6 test_output", "6 test_writes",
        "6 test_hangs_for_4",
    ]  # fmt: skip
    left = list((tmp_path / "tmp" / "keel-mutate").iterdir())
    assert len(left) == 1  # only the run ended by a signal keeps its directory
    times = [line.split("\t") for line in (mutants / "mutant-times.tsv").read_text().splitlines()]
    assert [(name, status, count) for name, _, status, count in times] == [
        ("keel.x.x_f__mutmut_1", "0", "5"),
        ("keel.x.x_f__mutmut_2", "1", "5"),
        ("keel.x.x_f__mutmut_3", "1", "5"),
        ("keel.x.x_f__mutmut_5", "explained", "0"),
        ("keel.x.x_f__mutmut_6", "3", "5"),
    ]  # mutant 4 was ended by its bound: mutmut records the timeout
    phases = (mutants / "phases.log").read_text()
    assert "one session: 5 tests collected" in phases
    score = _load("mutation_score")
    seed = tmp_path / "tests" / "mutation-killers.tsv"
    seed.write_text("keel.x.x_f\tgone\nkeel.x.x_h\told\n")
    score.write_killers(tmp_path, seed)  # the run's .meta files are not written here
    assert seed.read_text() == "keel.x.x_f\ttests/test_x.py::test_fails_for_2_and_3\n"
    assert "explained: 1 mutants survive without a run" in phases


def test_the_killer_seed_keeps_each_functions_top_killers_and_drops_dead_functions() -> None:
    score = _load("mutation_score")
    kills = ["f\ta", "f\tb", "f\tb", "f\tc", "g\tz", "junk"]
    seed = ["f\told", "h\tkept", "dead\tx", "# note"]
    assert score.merge_killers(kills, seed, live={"f", "g", "h"}, top=2) == [
        "f\tb", "f\ta", "g\tz", "h\tkept"
    ]  # fmt: skip


_MUTATED = """
def x_f__mutmut_orig(a):
    return a + 1

def x_f__mutmut_1(a):
    return a - 1

def x_f__mutmut_2(a):
    return a * 1

def x_f__mutmut_3(a):
    return a / 1
"""


def test_explained_mutants_survive_without_a_run_only_while_their_line_is_the_one_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _load("mutmut_session")
    (tmp_path / "mutants" / "src" / "keel").mkdir(parents=True)
    (tmp_path / "mutants" / "src" / "keel" / "x.py").write_text(_MUTATED)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "mutation-equivalent.tsv").write_text(
        "# name, mutated line, reason\n"
        "keel.x.x_f__mutmut_1\treturn a - 1\tsame for every a (explained, line holds)\n"
        "keel.x.x_f__mutmut_2\treturn a + 2\twritten for another mutation of f\n"
        "keel.x.x_f__mutmut_3\t\tno line recorded: not trusted to skip a run\n"
    )
    monkeypatch.delenv("MUTATE_RECHECK", raising=False)
    assert session.explained_mutants(tmp_path) == {"keel.x.x_f__mutmut_1"}
    monkeypatch.setenv("MUTATE_RECHECK", "1")
    assert session.explained_mutants(tmp_path) == set()


def test_pyright_is_given_a_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare ``--threads`` is one thread under 4 cores: the count is always given."""
    typecheck = _load("mutmut_typecheck")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert typecheck.pyright_threads() == ["--threads", "2"]
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert typecheck.pyright_threads() == ["--threads", "1"]


def test_pyright_runs_niced_beside_the_stats_run(tmp_path: Path) -> None:
    """The stats run (one core) goes first; pyright takes what it leaves."""
    typecheck = _load("mutmut_typecheck")
    command = typecheck.pyright_command(tmp_path)
    assert command[1:3] == ["-n", "10"] and command[0].endswith("nice")
    assert command[3:5] == [str(tmp_path / "bin" / "pyright"), "--outputjson"]


# -- a run that stops: what failed, and nothing left running ------------------------------

_FAILING_SELECTION = """
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("not here")

def test_fails():
    assert "allow" == "ask", "policy check said allow"

@pytest.fixture
def broken():
    raise OSError("no such file: /nowhere")

def test_setup_fails(broken):
    pass
"""


def test_a_failing_stats_run_names_each_failing_test_and_why(tmp_path: Path) -> None:
    """mutmut forks its stats run while it holds the output, and said only "failed to collect
    stats. runner returned 1": the plugin notes each failing test and its reason, and that is
    what ``make mutate`` prints. A run that is not one of mutmut's phases notes nothing."""
    import subprocess

    mutants = tmp_path / "mutants"
    mutants.mkdir()
    (mutants / "test_selection.py").write_text(_FAILING_SELECTION)
    command = [sys.executable, "-m", "pytest", "-q", "--tb=no", "-p", "no:cacheprovider",
               "-p", "mutmut_keel", "test_selection.py"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS)}
    for phase in ("", "fail"):  # a plain run; mutmut's forced-fail run (fails by design)
        done = subprocess.run(command, cwd=mutants, env={**env, "MUTANT_UNDER_TEST": phase},
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
    session = _load("mutmut_session")
    assert session.failure_report(mutants) == ""
    done = subprocess.run(command, cwd=mutants, env={**env, "MUTANT_UNDER_TEST": "stats"},
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    report = session.failure_report(mutants)
    assert report.splitlines() == [
        "make mutate: 2 test(s) failed with no mutant under test (mutmut's stats run); every "
        "selected test must pass or skip before mutants can be judged:",
        "  FAILED test_selection.py::test_fails (call): AssertionError: policy check said allow "
        "assert 'allow' == 'ask' - ask + allow",  # pytest's explanation, on the same line
        "  FAILED test_selection.py::test_setup_fails (setup): OSError: no such file: /nowhere",
    ]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie has ended


def test_a_stopped_run_leaves_no_pyright_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """By effect: mutmut stops a failed step with ``exit(1)`` while pyright checks the mutants
    in a thread beside it, and pyright (the ``pyright`` wrapper and the node it starts) ran on
    for minutes. The run's ``finish`` ends both, and still prints what failed."""
    import threading
    import time

    typecheck = _load("mutmut_typecheck")
    run = _load("mutmut_run")
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    pids = tmp_path / "pids"
    fake = venv / "bin" / "pyright"  # like the real one: a wrapper that starts node
    fake.write_text(
        f"#!/bin/sh\nsleep 600 &\necho $$ $! > {pids}.new\nmv {pids}.new {pids}\nwait\n"
    )
    fake.chmod(0o755)
    mutants = tmp_path / "mutants"
    mutants.mkdir()
    (mutants / "unmutated-failures.tsv").write_text("stats\ttests/t.py::test_x\tcall\tboom\n")
    ended: list[BaseException] = []

    def check() -> None:
        try:
            typecheck.run_pyright([], venv, mutants)
        except BaseException as error:  # its output was cut short
            ended.append(error)

    thread = threading.Thread(target=check, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    wrapper, node = map(int, pids.read_text().split())
    assert _alive(wrapper) and _alive(node)
    monkeypatch.chdir(tmp_path)
    run.finish()
    thread.join(timeout=120)
    assert not thread.is_alive() and ended
    assert not _alive(wrapper) and not _alive(node)
    assert "FAILED tests/t.py::test_x (call): boom" in capsys.readouterr().err


_IN_THE_SANDBOX = """
import sys
from pathlib import Path

import keel
from keel.core.errors import SandboxError
from keel.core.schema import SandboxConfig
from keel.sandbox import get_sandbox
from keel.sandbox.probe._common import identity
from keel.sandbox.probe._python import python_layout

assert keel.__file__.startswith(sys.argv[1]), keel.__file__  # the copy under a 0700 directory
if sys.argv[2] == "mirror":
    import mutmut_keel

    print("mirror", mutmut_keel.mirror_mutmut())
try:
    box = get_sandbox()
except SandboxError as error:
    print("no sandbox:", error.message)
    sys.exit(77)
done = box.run_python("keel._mutated", workspace=Path(sys.argv[3]), timeout=120)
print("exit", done.exit_code, done.stdout.decode().strip(), done.stderr.decode()[-300:])
ident = identity(SandboxConfig())
print("copy", python_layout(ident.uid, ident.gid).pythonpath[0])  # what the sandbox imported
"""


def test_mutated_keel_in_a_0700_clone_runs_in_the_probe_sandbox(
    tmp_path: Path, workdir: Path
) -> None:
    """By effect: a clone the sandbox uid cannot reach gives the probe sandbox a copy of keel,
    and a mutated module imports mutmut (its trampoline), so every sandboxed probe failed
    ("No module named 'mutmut'") and mutmut's stats run with it (the same clone in a 0755
    directory passed). The plugin gives that copy mutmut: the mutated module runs."""
    import shutil
    import subprocess

    from keel.sandbox.probe._python import MIRROR_BASE, can_reach

    if os.geteuid() != 0:
        pytest.skip("without root the sandbox runs as the caller, who reaches the clone")
    src = tmp_path / "clone" / "src"  # pytest's base directory is 0700, like `mktemp -d`
    shutil.copytree(SCRIPTS.parent / "src" / "keel", src / "keel",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    (src / "keel" / "_mutated.py").write_text(
        "from mutmut.mutation.trampoline import wrap_in_trampoline as _mutmut_mutated, MutantDict\n"
        "print('the mutated module ran')\n"
    )
    assert not can_reach(src / "keel", 65534, 65534)
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{SCRIPTS}"}
    mirrors: set[str] = set()
    try:
        outputs = {}
        for how in ("plain", "mirror"):
            done = subprocess.run(
                [sys.executable, "-c", _IN_THE_SANDBOX, str(src), how, str(workdir)],
                env=env, capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            if done.returncode == 77:
                skip_or_fail(done.stdout.strip())
            assert done.returncode == 0, done.stdout + done.stderr
            outputs[how] = done.stdout
            mirrors.update(line.split()[1] for line in done.stdout.splitlines()
                           if line.startswith("copy "))  # fmt: skip
        assert "No module named 'mutmut'" in outputs["plain"]  # the cause
        assert "exit 0 the mutated module ran" in outputs["mirror"], outputs["mirror"]
        (copy,) = mirrors  # the sandbox was given a copy of keel, and the plugin gave it mutmut
        assert copy.startswith(MIRROR_BASE + "/") and f"mirror {copy}\n" in outputs["mirror"]
    finally:
        for mirror in mirrors:
            shutil.rmtree(mirror, ignore_errors=True)
