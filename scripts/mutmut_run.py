"""``make mutate``'s mutmut: the mutmut 3.8 CLI with two of its steps replaced.

- mutmut maps each type error to its mutant by parsing every mutated file with libcst:
  minutes on keel's 400,000 lines of mutants. The errors and their mutants come from
  ``mutmut_typecheck.caught`` instead, which finds each function copy with the C parser.
- mutmut's coverage pass (``mutate_only_covered_lines``) also records which test runs each
  line, and each mutant's statement is located once its copies are written
  (``scripts/mutmut_lines.py``): a mutant's run keeps only the tests that run its statement.

Everything else is mutmut's own.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import coverage
import mutmut
import mutmut.__main__ as mutmut_cli
import mutmut.code_coverage as mutmut_coverage
import mutmut.workers.isolation as mutmut_isolation
from mutmut.code_coverage import CoverageInfo
from mutmut.mutation.file_mutation import FailedTypeCheckMutant, MutatedMethodLocation
from mutmut.type_checking import TypeCheckingError
from mutmut.utils.file_utils import change_cwd
from mutmut.utils.format_utils import get_mutant_name
from mutmut_lines import BASETEMP, MAP_FILE, Recorder, memo_names, write_map, write_mutant_lines
from mutmut_session import UNMUTATED_FAILURES, SessionRunner, failure_report
from mutmut_typecheck import caught, mutated_files, stop_pyright

PINNED = "3.8.1"


def caught_by_type_check() -> dict[str, FailedTypeCheckMutant]:
    """Mutmut's ``filter_mutants_with_type_checker``, without libcst."""
    found: dict[str, FailedTypeCheckMutant] = {}
    mutants = Path("mutants").absolute()
    for diagnostic, copy in caught(mutants):
        path = Path(diagnostic["file"])
        function = f"{copy.base}__mutmut_{copy.suffix}"
        name = get_mutant_name(path.relative_to(mutants), function)
        error = TypeCheckingError(
            file_path=path,
            line_number=diagnostic["range"]["start"]["line"] + 1,
            error_description=diagnostic["message"],
        )
        where = MutatedMethodLocation(path, function, copy.start, copy.end)
        found[name] = FailedTypeCheckMutant(method_location=where, name=name, error=error)
    return found


class PendingTypeCheck(dict[str, FailedTypeCheckMutant]):
    """The type check's catches, worked out by a thread while mutmut runs its stats.

    pyright takes minutes on the mutants and mutmut's stats run is one pytest process: on
    two cores they fit side by side. Reading the result waits for the thread; a failure in
    it is raised there.
    """

    def __init__(self, work: Callable[[], dict[str, FailedTypeCheckMutant]]) -> None:
        super().__init__()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = threading.Thread(
            target=self._fill, args=(work,), daemon=True
        )
        self._thread.start()

    def _fill(self, work: Callable[[], dict[str, FailedTypeCheckMutant]]) -> None:
        try:
            dict.update(self, work())
        except BaseException as error:  # raised again where the result is read
            self._error = error

    def wait(self) -> None:
        """Block until pyright's result is in."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            if self._error is not None:
                raise self._error

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        """``dict.get``, once the result is in."""
        self.wait()
        return dict.get(self, key, default)

    def __getitem__(self, key: str) -> FailedTypeCheckMutant:
        self.wait()
        return dict.__getitem__(self, key)

    def __contains__(self, key: object) -> bool:
        self.wait()
        return dict.__contains__(self, key)

    def __len__(self) -> int:
        self.wait()
        return dict.__len__(self)

    def __iter__(self) -> Iterator[str]:
        self.wait()
        return dict.__iter__(self)

    def items(self) -> Any:
        """``dict.items``, once the result is in."""
        self.wait()
        return dict.items(self)


def type_check_beside_stats() -> PendingTypeCheck:
    """Start the type check; mutmut reads its result when it first needs it."""
    return PendingTypeCheck(timed("type check (beside stats)", caught_by_type_check))


def runner_without_clean_run(max_children: int) -> Any:
    """Give mutmut's runner, without its clean run (a third pass of every test, ~1 min).

    The coverage pass and the stats run each run every selected test unmutated, through
    the same trampolines in the same kind of child, and stop the run if one fails.
    """
    runner = _get_mutant_runner(max_children)
    runner.run_clean_tests = lambda tests: 0
    return runner


_get_mutant_runner = mutmut_cli.get_mutant_runner


def _module(relative: str) -> str:
    return relative.removeprefix("src/").removesuffix(".py").replace("/", ".")


def gather_coverage_by_test(runner: Any, source_files: Iterable[Path]) -> CoverageInfo:
    """Mutmut's coverage pass, with one coverage context per test (``mutmut_lines``).

    Measures only the files mutmut mutates (``only_mutate``): the others get no mutants.
    Writes ``mutants/tests-by-line.json`` beside returning what mutmut needs.
    """
    root = Path.cwd()
    only = mutated_files(root / "pyproject.toml")
    absolute = {str((root / "mutants" / f).absolute()): f for f in only}
    memos = {_module(f): memo_names((root / f).read_text(encoding="utf-8")) for f in only}
    cov = coverage.Coverage(data_file=None, include=list(absolute))
    recorder = Recorder(cov, memos)
    with change_cwd(Path("mutants")), cov.collect():
        runner.prepare_main_test_run()
        code = runner.execute_pytest(runner._pytest_args_regular_run([]), plugins=[recorder])
    if code != 0:
        raise RuntimeError(f"the tests fail without a mutant (pytest exit {code})")
    data = cov.get_data()
    sources = {f: (root / f).read_text(encoding="utf-8") for f in only}
    write_map(data, absolute, recorder, root / "mutants" / MAP_FILE, sources)
    info = CoverageInfo()
    for filename in source_files:
        name = str((root / "mutants" / filename).absolute())
        info.covered_lines[name] = set(data.lines(name) or [])
        info.excluded_lines[name] = mutmut_coverage._excluded_lines(cov, name)
    return info


def create_mutants_and_place_them(max_children: int) -> Any:
    """Mutmut's mutant generation, then each mutant's statement (``mutmut_lines``)."""
    stats = _create_mutants(max_children)
    write_mutant_lines(Path.cwd(), mutated_files(Path("pyproject.toml")))
    return stats


_create_mutants = mutmut_cli.create_mutants


PHASES = Path("mutants/phases.log")
_STARTED = time.monotonic()


def timed(phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, noting how long each call took in ``mutants/phases.log``.

    mutmut shows a spinner, not times; the log says where a run's minutes went.
    """

    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            with PHASES.absolute().open("a", encoding="utf-8") as log:
                now = time.monotonic()
                log.write(f"{phase}: {now - start:.0f} s (ended at {now - _STARTED:.0f} s)\n")

    return run


def main() -> int:
    """Run mutmut's CLI (``run --max-children N`` ...) with the faster type-check mapping."""
    if mutmut.__version__ != PINNED:
        print(f"scripts/mutmut_run.py is written for mutmut {PINNED}", file=sys.stderr)
        return 2
    PHASES.unlink(missing_ok=True)
    shutil.rmtree(BASETEMP, ignore_errors=True)  # what mutant runs ended by a signal left
    cli = mutmut_cli
    cli.filter_mutants_with_type_checker = type_check_beside_stats
    cli.get_mutant_runner = runner_without_clean_run
    cli.create_mutants = timed("generation", create_mutants_and_place_them)
    cli.store_lines_covered_by_tests = timed("coverage", cli.store_lines_covered_by_tests)
    cli.collect_or_load_stats = timed("stats", cli.collect_or_load_stats)
    cli.run_forced_fail_test = timed("forced-fail run", cli.run_forced_fail_test)
    mutmut_coverage._gather_coverage_in_this_process = gather_coverage_by_test
    mutmut_isolation.PytestRunner = SessionRunner
    (Path("mutants") / UNMUTATED_FAILURES).unlink(missing_ok=True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on_signal)
    try:
        return mutmut_cli.cli(prog_name="mutmut") or 0
    except Exception:  # a failed step: its traceback, then what failed (``finish``)
        traceback.print_exc()
        return 1
    finally:
        finish()


def finish() -> None:
    """End what the run started and say which tests failed, whatever ended it.

    mutmut stops a failed step with ``exit(1)`` while pyright may still be checking the
    mutants beside it (``PendingTypeCheck``): it is ended here. The coverage pass and the
    stats run are forked while mutmut holds their output, so pytest's report of a failing
    test never reached the log; the plugin noted each one (``mutmut_keel``) and they are
    printed last, where ``make mutate`` shows the log's tail.
    """
    stop_pyright()
    sys.stdout.flush()  # mutmut's own last words first
    sys.stderr.write(failure_report(Path("mutants")))
    sys.stderr.flush()


_MAIN_PID = os.getpid()


def _exit_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP end mutmut's process through ``finish``; a fork mutmut made just ends."""
    if os.getpid() != _MAIN_PID:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    raise SystemExit(main())
