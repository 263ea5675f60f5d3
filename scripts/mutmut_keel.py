"""A pytest plugin for ``make mutate``: mutmut's mutants reach keel's subprocesses too.

keel's tests run ``keel`` as subprocesses (the hook, ``keel policy check``, sandboxed
commands). ``make mutate`` puts ``mutants/src`` on their ``PYTHONPATH``, and mutmut names the
mutant under test in ``MUTANT_UNDER_TEST``, which they inherit, so a subprocess runs the same
mutant as the test that started it. While mutmut collects which tests reach which function
(``stats``), it must not: a subprocess cannot report back, and mutmut's recorder fails outside
the project directory. So in that phase the variable is taken out of the environment;
mutmut's own process still knows the phase (it keeps a process-local copy).

mutmut copies ``tests/`` into ``mutants/`` following symlinks, so a link in a test corpus
(``tests/workspace/patches/err_symlink_*``) would arrive as a plain copy of its target and
the test reading it would fail on every run. The links are put back before the tests run.

For each mutant, mutmut passes every test that reached the mutated function. Of those, only
the tests that ran the mutated statement are kept (``scripts/mutmut_lines.py``). The tests of
the mutated module's own area run first, fastest first (``-x`` stops at the first failure, so a
killed mutant costs little), and tests of other areas that only pass through the function (a
plan test reaches the policy through a sandboxed probe, at 2.5 s a test) are left out: a
surviving mutant costs the full list. The heap the forkserver built is frozen so pytest's
two ``gc.collect()`` calls at exit (~0.1 s a mutant) only walk what the mutant's run made.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import resource
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import mutmut_lines
import pytest
from mutmut_session import UNMUTATED_FAILURES

_PHASES = frozenset({"stats", "list_all_tests", "mutant_generation"})

# Module prefix -> the tests aimed at it, in the order they should run.
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("keel.policy.", ("tests/policy/", "tests/guard/test_guard", "tests/hook/")),
    (
        "keel.guard",
        (
            "tests/guard/test_guard",
            "tests/policy/test_symlinked_paths.py",
            "tests/policy/test_workspace_deletes.py",
            "tests/hook/",
        ),
    ),
    ("keel.hook.", ("tests/hook/", "tests/guard/test_guard")),
    ("keel.journal.", ("tests/journal/", "tests/guard/test_guard", "tests/hook/")),
    (
        "keel.workspace.",
        ("tests/workspace/", "tests/core/test_patchtext.py", "tests/guard/test_guard"),
    ),
    ("keel.plan.", ("tests/plan/",)),
    ("keel.sandbox.", ("tests/sandbox/", "tests/guard/test_guard_contain.py", "tests/plan/")),
)


_durations: dict[str, float] = {}


def durations() -> dict[str, float]:
    """Each test's duration from mutmut's stats run (empty before there is one).

    Read once per process that finds it: the forkserver reads it while warming up, so the
    mutants' runs (its forks) inherit it.
    """
    if not _durations:
        try:
            stats = json.loads(Path("mutmut-stats.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return _durations
        _durations.update(stats.get("duration_by_test", {}))
    return _durations


def narrow(mutant: str, tests: list[str], took: dict[str, float]) -> list[str]:
    """The tests of ``mutant``'s area among ``tests``: own directory first, fastest first.

    Unchanged when the module has no area or none of its tests is in it.
    """
    prefixes = next((p for module, p in AREAS if mutant.startswith(module)), None)
    if prefixes is None:
        return tests

    def rank(test: str) -> int:
        return next((i for i, p in enumerate(prefixes) if test.startswith(p)), len(prefixes))

    keep = [t for t in tests if rank(t) < len(prefixes)]
    return sorted(keep, key=lambda t: (rank(t), took.get(t, 0.0))) or tests


_wanted: list[str] = []

# Each mutant's run gets its own pytest base directory (under ``mutmut_lines.BASETEMP``),
# removed when it ends. By default pytest makes a numbered one under /tmp/pytest-of-USER per
# session and, at the end, scans every one there to keep the last three: thousands of mutant
# sessions leave thousands (a killed run leaves its lock), and the scan reached ~0.27 s of a
# ~0.7 s mutant run.
BASETEMP = mutmut_lines.BASETEMP
_basetemp: list[Path] = []

# A mutant's run may take this many times what its tests took in the coverage pass (which,
# traced, is already slower than a plain run), plus a start-up allowance; each of its tests
# this many times its own time and its file's slowest (module fixtures), plus less.
TIME_FACTOR = 4.0
TIME_ALLOWANCE = 5.0
TEST_ALLOWANCE = 2.0

_deadline: list[float] = []  # the run's end, on the monotonic clock
_limits: dict[str, float] = {}  # node id -> the longest that test may take


def _arm(seconds: float) -> None:
    if seconds <= 0:
        os.kill(os.getpid(), signal.SIGXCPU)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def bound(took: float | None) -> None:
    """End this mutant's run as a timeout once it takes far longer than its tests did.

    mutmut's own limit comes from every test of the function (tens of seconds for a policy
    function), though only the tests of the mutated statement run: a mutant that loops
    forever held a worker that long. Ending the run is what mutmut's limit does too
    (SIGXCPU, recorded as a timeout); the kernel's CPU limit backs up a loop in C code.
    """
    if took is None:
        return
    wall = TIME_FACTOR * took + TIME_ALLOWANCE
    signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGXCPU))
    _deadline[:] = [time.monotonic() + wall]
    _arm(wall)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu = int(time.process_time() + 2 * wall) + 1
    if hard != resource.RLIM_INFINITY:
        cpu = min(cpu, hard)
    if soft == resource.RLIM_INFINITY or cpu < soft:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))


def test_limits(tests: Iterable[str]) -> dict[str, float]:
    """How long each of ``tests`` may take in a mutant's run before it counts as hung.

    A mutant that loops does so in its first test that reaches it: bounding each test ends
    it there, where the run's bound waited out every test's allowance (a hung policy or
    plan mutant held a worker 20-70 s). A test gets its own time and its file's slowest
    (which holds what module fixtures took, built by whichever test runs first).
    """
    took = mutmut_lines.durations()
    slowest = mutmut_lines.slowest_in_file()
    return {
        test: TIME_FACTOR * (took[test] + slowest.get(test.partition("::")[0], 0.0))
        + TEST_ALLOWANCE
        for test in tests
        if test in took
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Bound each test of a mutant's run (``test_limits``), within the run's bound."""
    limit = _limits.get(item.nodeid)
    if limit is not None and _deadline:
        _arm(min(limit, _deadline[0] - time.monotonic()))
    try:
        return (yield)
    finally:
        if _deadline:
            _arm(_deadline[0] - time.monotonic())


# Which test killed a mutant, per function (``function<TAB>node id`` lines, in mutants/): the
# mutants of a function run one after another, and a test that killed one of them is likely
# to kill the next. Trying those first changes no verdict (any failing test kills).
KILLS = "kills.tsv"
# The same, kept from the last run (``mutation_score.py --killers`` writes the repository's
# copy; mutmut copies tests/ into mutants/): a fresh run starts each function with the tests
# that killed its mutants last time, where it would otherwise find them by trying.
SEED = "tests/mutation-killers.tsv"
_mutant: list[str] = []
_seed: dict[str, list[str]] = {}


def function_of(mutant: str) -> str:
    """``keel.x.x_f__mutmut_3`` -> ``keel.x.x_f``."""
    return mutant.rpartition("__mutmut_")[0]


def load_seed(path: str | Path = SEED) -> dict[str, list[str]]:
    """``function -> tests`` from the last run's killers (read once; empty without the file)."""
    if not _seed:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError:
            return _seed
        for line in lines:
            function, tab, test = line.partition("\t")
            if tab and not line.startswith("#"):
                _seed.setdefault(function, []).append(test)
    return _seed


def killers(mutant: str) -> list[str]:
    """The tests that killed other mutants of ``mutant``'s function.

    This run's first, most kills first, then the last run's (``SEED``).
    """
    function = function_of(mutant)
    try:
        lines = Path(KILLS).read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    prefix = function + "\t"
    found = Counter(line[len(prefix) :] for line in lines if line.startswith(prefix))
    mine = [test for test, _ in found.most_common()]
    return mine + [t for t in load_seed().get(function, []) if t not in found]


# A test that fails in one of mutmut's runs without a mutant (the coverage pass, the stats run)
# is noted in ``UNMUTATED_FAILURES`` (``mutmut_session``), which ``make mutate`` prints.
_phase: list[str] = []  # the bookkeeping phase this pytest run serves, if any


def failure_reason(report: pytest.TestReport) -> str:
    """A failed report's reason on one line: the exception's message (``--tb=no`` keeps it)."""
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr or "")
    reason = " ".join(line.strip() for line in text.splitlines() if line.strip()) or "failed"
    return reason if len(reason) <= 300 else reason[:297] + "..."


def note_unmutated_failure(report: pytest.TestReport) -> None:
    """Add a test that failed in a run without a mutant to ``UNMUTATED_FAILURES``."""
    line = f"{_phase[0]}\t{report.nodeid}\t{report.when}\t{failure_reason(report)}\n"
    fd = os.open(UNMUTATED_FAILURES, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note the test that killed this run's mutant (``KILLS``), or one that failed without one."""
    if report.failed and _phase and not _mutant:
        note_unmutated_failure(report)
    if not report.failed or len(_mutant) != 1:
        return
    line = f"{function_of(_mutant[0])}\t{report.nodeid}\n".encode()
    _mutant.append(report.nodeid)  # one line per run
    fd = os.open(KILLS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def basetemp_of(pid: int) -> Path:
    """The pytest base directory of the mutant run in process ``pid``."""
    return BASETEMP / str(pid)


def prepare(mutant: str, tests: list[str]) -> list[str]:
    """Set this process up for ``mutant``'s run; give the tests it runs, in order.

    Keeps the tests that ran the mutated statement, narrows them to its area, bounds the
    run's time, names its base directory (removed at unconfigure) and freezes the heap the
    forkserver built.
    """
    gc.freeze()
    ran = mutmut_lines.tests_for(mutant)
    if ran is not None:
        tests = [t for t in tests if t in ran] or tests
    tests = narrow(mutant, tests, durations())
    given = set(tests)
    first = [t for t in killers(mutant) if t in given]
    tests = first + [t for t in tests if t not in set(first)]
    _mutant[:] = [mutant]
    bound(mutmut_lines.seconds(tests))
    _limits.clear()
    _limits.update(test_limits(tests))
    BASETEMP.mkdir(parents=True, exist_ok=True)  # pytest makes only the last part
    _basetemp[:] = [basetemp_of(os.getpid())]
    return tests


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: object, parser: object, args: list[str]) -> None:
    """In a mutant's ``pytest.main`` run: narrow and order its tests (``prepare``).

    Used when the forkserver's session cannot serve a run (``mutmut_session``). pytest is
    given the tests' files and the tests are picked by node id after collection: in mutmut's
    forked workers some ids given as arguments are not found (ids with escaped backslashes),
    pytest exits 4, and mutmut records the worker's exception as a *timeout*, i.e. killed
    without a test having run.
    """
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if "__mutmut_" not in mutant:
        return
    options = [a for a in args if "::" not in a]
    tests = prepare(mutant, [a for a in args if "::" in a])
    _wanted[:] = tests
    files = list(dict.fromkeys(t.partition("::")[0] for t in tests))
    args[:] = [*options, f"--basetemp={_basetemp[0]}", *files]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the mutant's tests, in the order ``narrow`` gave them."""
    if not _wanted:
        return
    order = {test: i for i, test in enumerate(_wanted)}
    keep = sorted((item for item in items if item.nodeid in order), key=lambda i: order[i.nodeid])
    dropped = [item for item in items if item.nodeid not in order]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_unconfigure(config: object) -> None:
    """Remove the mutant run's base directory (what its tests made)."""
    for path in _basetemp:
        shutil.rmtree(path, ignore_errors=True)


def restore_links(original: Path, copy: Path) -> int:
    """Make every symlink under ``original`` a symlink (same target) under ``copy`` too."""
    restored = 0
    for link in sorted(p for p in original.rglob("*") if p.is_symlink()):
        twin = copy / link.relative_to(original)
        if twin.is_symlink() or not twin.parent.is_dir():
            continue
        if twin.is_dir():
            shutil.rmtree(twin)
        elif twin.exists():
            twin.unlink()
        twin.symlink_to(os.readlink(link))
        restored += 1
    return restored


def mirror_mutmut() -> Path | None:
    """Put mutmut in the probe sandbox's copy of keel, when the sandbox is given a copy.

    keel's probe sandbox runs keel's Python as the sandbox uid. A checkout that uid cannot
    reach (a clone under a 0700 directory: a home directory, ``mktemp -d``) is given to it as
    a copy of keel's package and PyYAML (``keel.sandbox.probe._python.mirror_import_roots``),
    and the mutated modules import mutmut (their trampolines): every sandboxed probe failed
    with "No module named 'mutmut'", and with it mutmut's stats run, while the same clone in
    a 0755 directory passed. Gives the copy that gets mutmut (its dist-info too: mutmut reads
    its version on import), or None when the sandbox reads the checkout itself.
    """
    import mutmut

    from keel.core.schema import SandboxConfig
    from keel.sandbox.probe._common import identity
    from keel.sandbox.probe._python import MIRROR_BASE, python_layout

    ident = identity(SandboxConfig())
    layout = python_layout(ident.uid, ident.gid)
    if isinstance(layout, str) or not layout.pythonpath[0].startswith(MIRROR_BASE + "/"):
        return None
    mirror = Path(layout.pythonpath[0])
    package = Path(mutmut.__file__).resolve().parent
    if (mirror / package.name).is_dir():
        return mirror
    staging = Path(tempfile.mkdtemp(dir=mirror, prefix=".staging-mutmut-"))
    try:
        # the package last: a process that finds it finds the dist-info too
        for source in [*package.parent.glob("mutmut-*.dist-info"), package]:
            shutil.copytree(source, staging / source.name, ignore=_NO_BYTECODE)
            for path in [staging / source.name, *(staging / source.name).rglob("*")]:
                os.chmod(path, 0o755 if path.is_dir() else 0o644)
            with contextlib.suppress(OSError):  # another process put it there first
                os.rename(staging / source.name, mirror / source.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return mirror


_NO_BYTECODE = shutil.ignore_patterns("__pycache__", "*.pyc")


def pytest_configure(config: object) -> None:
    """Hide mutmut's bookkeeping phases from the subprocesses; repair the copied links.

    Loads the durations and the line map here, so the forkserver's forks inherit them, and
    Hypothesis: its pytest plugin imports it for the terminal summary at the end of every
    session (~0.2 s of a mutant's run, profiled), though the mutants' tests do not use it.
    In ``mutants/``, the probe sandbox's copy of keel gets mutmut (``mirror_mutmut``).
    """
    durations()
    load_seed()
    mutmut_lines.tests_for("")
    importlib.import_module("hypothesis")
    phase = os.environ.get("MUTANT_UNDER_TEST", "")
    _phase[:] = [phase] if phase in _PHASES else []
    here = Path.cwd()
    if phase in _PHASES:
        del os.environ["MUTANT_UNDER_TEST"]
        if here.name == "mutants" and (here.parent / "tests").is_dir():
            restore_links(here.parent / "tests", here / "tests")
    if here.name == "mutants":
        mirror_mutmut()
